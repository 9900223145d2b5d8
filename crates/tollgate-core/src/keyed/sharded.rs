//! The `std` keyed table: fixed capacity chosen at run time, split over
//! independently locked shards.
//!
//! Layout of a shard (all allocated once, at construction): an array of
//! buckets, each a `heapless::Vec` of up to 4 `(key, state)` entries stored
//! inline (72 bytes for `u64` keys and GCRA states: one or two adjacent
//! cache lines), plus one bit per bucket saying "a key whose home is at or
//! before this bucket was placed after it because it was full". A key
//! lives in its home bucket (chosen by hash) or, if that was full, in the
//! next bucket with room; a lookup scans the home bucket and moves on only
//! while the overflow bit is set. The shard has 10 % more slots than keys,
//! so it runs at most 91 % full.
//!
//! That is 18 bytes per slot for `u64` keys, 19.8 per key of capacity, under
//! 24 per tracked key at
//! 85 % occupancy. A check of a tracked key takes one shard's *read* lock
//! (two atomic operations, and readers never wait for each other), hashes
//! once, probes, and applies the algorithm to the atomic state; only
//! inserting a new key or sweeping takes the shard's write lock. There is
//! no global lock and no allocation.

mod admin;
mod check;
mod eviction;
mod lock;
mod shard;

use core::hash::{BuildHasher, Hash};
use std::vec::Vec;

use self::shard::Shard;
use super::builder::{DEFAULT_MAX_KEYS, RuntimeSized};
use super::{KeyQuota, OverflowPolicy, RandomSeed, TableBuilder};
use crate::error::ConfigError;
use crate::limiter::Algorithm;
use crate::sync::RwLock;

/// Largest number of keys in one shard: bounds the cost of one sweep.
const MAX_PER_SHARD: usize = 4095;
/// Largest shard count.
const MAX_SHARDS: usize = 1 << 16;

/// The most keys a [`ShardedKeyedTable`] or a
/// [`LockFreeGcraTable`](super::LockFreeGcraTable) can track (about 268
/// million): [`TableBuilder::max_keys`](super::TableBuilder::max_keys)
/// above it, or zero, is a [`ConfigError`] when the table is built. With
/// the default shard count every capacity from 1 to `MAX_KEYS` builds; an
/// explicit [`shards`](super::TableBuilder::shards) count holds at most
/// 4,095 keys per shard. A caller that validates a configuration before
/// building anything (an upper layer that checks every policy before it
/// touches a bucket) checks against it.
pub const MAX_KEYS: usize = MAX_SHARDS * MAX_PER_SHARD;
/// Below this many keys per shard, do not split further for parallelism
/// (small shards fill unevenly).
const MIN_PER_SHARD_FOR_SPLIT: usize = 512;

/// Keeps each shard's lock word on its own cache lines (128 bytes: two
/// lines, for CPUs that prefetch pairs), so threads working on different
/// shards do not contend through false sharing.
#[repr(align(128))]
struct CachePadded<T>(T);

type ShardLock<K, A> = CachePadded<RwLock<Shard<K, A>>>;

/// A keyed limiter for servers (feature `std`): capacity chosen at run
/// time and allocated once, never grown, split over independently locked
/// shards, keys hashed with a per-table random seed.
///
/// Eviction, overflow, per-key quotas and reconfiguration work as
/// described in the [module docs](super). Build it with
/// [`ShardedKeyedTable::builder`].
///
/// Keys are spread over the shards by hash; each shard holds
/// `max_keys() / shards()` keys, so a shard can fill slightly before the
/// table as a whole (the default shard size is at least 512 keys when the
/// capacity allows, which keeps that imbalance to a few percent). An insert
/// into a full shard sweeps that shard once (at most 4,095 entries).
///
/// ```
/// use tollgate::keyed::{KeyedTable, KeyedPath, OverflowPolicy, ShardedKeyedTable};
/// use tollgate::{Gcra, Limiter, Quota, Timestamp};
///
/// let per_client = Gcra::token_bucket(Quota::per_second(10)?.with_burst(2)?);
/// let table = ShardedKeyedTable::<u32, _>::builder(per_client)
///     .max_keys(2)
///     .shards(1)
///     .overflow(OverflowPolicy::Deny)
///     .build()?;
///
/// let now = Timestamp::ZERO;
/// assert!(table.try_acquire(&1, now).is_ok());
/// assert!(table.try_acquire(&2, now).is_ok());
/// // Full of keys that are still throttled: key 3 is refused, never are
/// // keys 1 and 2 forgotten (that would reset their limits).
/// assert_eq!(table.try_acquire(&3, now).unwrap_err().path(), KeyedPath::OverflowDenied);
/// // 100 ms later both have refilled; evicting them changes nothing, so
/// // key 3 takes a slot.
/// assert!(table.try_acquire(&3, Timestamp::from_millis(100)).is_ok());
/// assert!(table.contains(&3));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ShardedKeyedTable<K, A: Algorithm, S = RandomSeed, Q = ()> {
    shards: Vec<ShardLock<K, A>>,
    shard_shift: u32,
    per_shard: usize,
    hasher: S,
    shared: A::State,
    policy: OverflowPolicy,
    quota: Q,
}

impl<K, A: Algorithm, S, Q> core::fmt::Debug for ShardedKeyedTable<K, A, S, Q> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ShardedKeyedTable")
            .field("shards", &self.shards.len())
            .field("per_shard", &self.per_shard)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl<K, A: Algorithm> RuntimeSized for ShardedKeyedTable<K, A> {}

impl<K, A: Algorithm> ShardedKeyedTable<K, A> {
    /// Starts configuring a table whose keys run `default` unless a per-key
    /// quota says otherwise (see [`TableBuilder`]).
    pub fn builder(default: A) -> TableBuilder<Self, A, RandomSeed> {
        TableBuilder::new(default, DEFAULT_MAX_KEYS, RandomSeed::new())
    }
}

impl<K, A, S, Q> TableBuilder<ShardedKeyedTable<K, A>, A, S, Q>
where
    K: Hash + Eq + Clone,
    A: Algorithm + Clone,
    S: BuildHasher,
    Q: KeyQuota<K, A>,
{
    /// Allocates the table.
    ///
    /// # Errors
    /// [`ConfigError::ZeroKeys`], [`ConfigError::InvalidShards`], or
    /// [`ConfigError::TooManyKeys`] for more than `shards × 4,095` keys.
    pub fn build(self) -> Result<ShardedKeyedTable<K, A, S, Q>, ConfigError> {
        let (shards, per_shard) = shard_layout(self.max_keys, self.shards)?;
        let shard_list = (0..shards)
            .map(|_| CachePadded(RwLock::new(Shard::new(per_shard, self.default.clone()))))
            .collect();
        let shared = self.default.new_state();
        Ok(ShardedKeyedTable {
            shards: shard_list,
            shard_shift: 64 - shards.trailing_zeros(),
            per_shard,
            hasher: self.hasher,
            shared,
            policy: self.overflow,
            quota: self.per_key,
        })
    }
}

/// Validates a capacity and shard count: `(shards, keys per shard)`.
pub(super) fn shard_layout(
    max_keys: usize,
    shards: Option<usize>,
) -> Result<(usize, usize), ConfigError> {
    if max_keys == 0 {
        return Err(ConfigError::ZeroKeys);
    }
    let shards = match shards {
        Some(s) if s == 0 || !s.is_power_of_two() || s > MAX_SHARDS => {
            return Err(ConfigError::InvalidShards {
                requested: s,
                max: MAX_SHARDS,
            });
        }
        Some(s) => s,
        None => default_shards(max_keys),
    };
    let max = shards.saturating_mul(MAX_PER_SHARD);
    if max_keys > max {
        return Err(ConfigError::TooManyKeys {
            requested: max_keys,
            max,
        });
    }
    Ok((shards, max_keys.div_ceil(shards)))
}

/// Four shards per CPU, but shards of at least 512 keys when possible and
/// at most 4,095 always.
pub(crate) fn default_shards(capacity: usize) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let for_parallelism = cpus.saturating_mul(4).next_power_of_two();
    let mut shards = 1;
    while shards < for_parallelism && capacity / (shards * 2) >= MIN_PER_SHARD_FOR_SPLIT {
        shards *= 2;
    }
    while capacity.div_ceil(shards) > MAX_PER_SHARD && shards < MAX_SHARDS {
        shards *= 2;
    }
    shards
}

impl<K, A: Algorithm, S, Q> ShardedKeyedTable<K, A, S, Q> {
    /// The number of shards.
    #[must_use]
    pub fn shards(&self) -> usize {
        self.shards.len()
    }

    /// The hasher (to check seeding, or to hash keys the same way).
    #[must_use]
    pub fn hasher(&self) -> &S {
        &self.hasher
    }
}
