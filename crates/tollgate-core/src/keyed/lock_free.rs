//! The lock-free keyed GCRA table: word-sized keys and the GCRA TAT packed
//! into one 128-bit atomic slot.
//!
//! A check of a tracked key takes no lock at all: it hashes the key, probes
//! the shard's slots (linear probing, 128-bit atomic loads), applies
//! [`Gcra::step`] to the slot's TAT and installs the result with one 128-bit
//! compare-and-swap on `(key, TAT)`. Because the key is part of the word
//! being swapped, a slot that was evicted or moved meanwhile makes the swap
//! fail: a request can never be charged to another key's bucket.
//!
//! Writers (inserting a new key, sweeping) take the shard's mutex; they
//! never block readers. A sweep empties idle slots with a compare-and-swap
//! (which fails if a reader just used the key), then moves the remaining
//! entries of each probe run back towards their home slot so that runs
//! have no holes. A moving entry is first *frozen* (a reserved TAT value):
//! a reader that meets a frozen key falls back to the mutex. A reader whose
//! probe ends at an empty slot trusts that "absent" only if no sweep ran
//! meanwhile (a per-shard sequence counter, odd during a sweep); otherwise
//! it also falls back to the mutex, so a key in the middle of a move is
//! never mistaken for a new one.
//!
//! A reconfiguration ([`KeyedTable::reconfigure`], or one key's
//! [`KeyedTable::update_key_quota`]) takes the shard's mutex, makes the
//! shard's `reconfig` counter odd, freezes the affected slots, stores the
//! shard's new default configuration (a [`GcraCell`]), stores each frozen
//! slot's carried-over TAT and makes the counter even again. A lock-free
//! check reads the counter (falling back to the mutex while it is odd),
//! then the slot, then the configuration; a refusal, which writes nothing,
//! is returned only if the counter has not moved, and an admission is
//! installed by a compare-and-swap that fails if the slot was frozen. So a
//! check that saw any word of a new configuration never acts on a TAT kept
//! under the old one.
//!
//! [`GcraCell`]: crate::live::GcraCell

use core::hash::BuildHasher;
use core::marker::PhantomData;
use core::time::Duration;
use std::vec::Vec;

use super::builder::{DEFAULT_MAX_KEYS, RuntimeSized};
use super::{KeyQuota, KeyedTable, OverflowPolicy, RandomSeed, TableBuilder};
use crate::error::ConfigError;
use crate::gcra::Gcra;
use crate::limiter::{Algorithm, Grant, Inheritance, Limiter};
use crate::live::LiveBucket;
use crate::refusal::Refusal;
use crate::snapshot::Snapshot;
use crate::sync::{Mutex, Ordering};
use crate::time::Timestamp;

mod check;
mod reconfig;
mod shard;
mod sweep;
mod word_key;

use shard::{Find, Shard, Slot, pack, unpack};
pub use word_key::WordKey;

/// A keyed GCRA limiter for servers (feature `std`) whose checks take no
/// lock: each slot is one 128-bit atomic holding a word-sized key
/// ([`WordKey`]: integers, `Ipv4Addr`, your ids) and its bucket's TAT.
///
/// The same behaviour as [`ShardedKeyedTable`](super::ShardedKeyedTable)
/// (lossless eviction, overflow policies, per-key quotas, introspection,
/// reconfiguration), for [`Gcra`] buckets only. A check of a tracked key is
/// one hash, a probe and one 128-bit compare-and-swap (none when refused);
/// inserting a new key, sweeping or reconfiguring takes the shard's mutex,
/// which readers never wait for unless they meet an entry being moved or
/// converted. Capacity is fixed at construction; 16 bytes per slot with
/// 25 % spare slots, 20 bytes per key of capacity.
///
/// On targets without a native 128-bit compare-and-swap, `portable-atomic`
/// emulates it with locks: use [`ShardedKeyedTable`](super::ShardedKeyedTable)
/// there.
///
/// ```
/// use tollgate::keyed::{KeyedTable, LockFreeGcraTable};
/// use tollgate::{Gcra, Limiter, Quota, Timestamp};
///
/// let table = LockFreeGcraTable::<u32>::builder(Gcra::token_bucket(Quota::per_second(5)?))
///     .max_keys(10_000)
///     .build()?;
/// let now = Timestamp::ZERO;
/// assert!(table.try_acquire(&7, now).is_ok());
/// assert!(table.try_acquire(&7, now).is_ok());
/// assert!(table.contains(&7)); // its own slot
/// assert_eq!(table.len(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct LockFreeGcraTable<K, S = RandomSeed, Q = ()> {
    /// Serialises whole reconfigurations (shards, then the shared bucket).
    reconfiguring: Mutex<()>,
    shards: Vec<Shard>,
    shard_shift: u32,
    per_shard: usize,
    hasher: S,
    /// The overflow bucket (with the default configuration).
    shared: LiveBucket,
    policy: OverflowPolicy,
    quota: Q,
    key: PhantomData<fn(K) -> K>,
}

impl<K, S, Q> core::fmt::Debug for LockFreeGcraTable<K, S, Q> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("LockFreeGcraTable")
            .field("shards", &self.shards.len())
            .field("per_shard", &self.per_shard)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl<K> RuntimeSized for LockFreeGcraTable<K> {}

impl<K: WordKey> LockFreeGcraTable<K> {
    /// Starts configuring a table of `default` buckets (see
    /// [`TableBuilder`]).
    pub fn builder(default: Gcra) -> TableBuilder<Self, Gcra, RandomSeed> {
        TableBuilder::new(default, DEFAULT_MAX_KEYS, RandomSeed::new())
    }
}

impl<K: WordKey, S: BuildHasher, Q: KeyQuota<K, Gcra>>
    TableBuilder<LockFreeGcraTable<K>, Gcra, S, Q>
{
    /// Allocates the table.
    ///
    /// # Errors
    /// [`ConfigError::ZeroKeys`], [`ConfigError::InvalidShards`], or
    /// [`ConfigError::TooManyKeys`] for more than `shards × 4,095` keys.
    pub fn build(self) -> Result<LockFreeGcraTable<K, S, Q>, ConfigError> {
        let (shards, per_shard) = super::sharded::shard_layout(self.max_keys, self.shards)?;
        Ok(LockFreeGcraTable {
            reconfiguring: Mutex::new(()),
            shards: (0..shards)
                .map(|_| Shard::new(per_shard, self.default))
                .collect(),
            shard_shift: 64 - shards.trailing_zeros(),
            per_shard,
            hasher: self.hasher,
            shared: LiveBucket::new(self.default),
            policy: self.overflow,
            quota: self.per_key,
            key: PhantomData,
        })
    }
}

impl<K: WordKey, S: BuildHasher, Q: KeyQuota<K, Gcra>> LockFreeGcraTable<K, S, Q> {
    #[inline]
    fn shard(&self, hash: u64) -> &Shard {
        let i = hash.checked_shr(self.shard_shift).unwrap_or(0) as usize;
        &self.shards[i & (self.shards.len() - 1)]
    }

    /// `key`'s bucket: its per-key quota or the shard's default.
    #[inline]
    fn algorithm(&self, shard: &Shard, key: K) -> Gcra {
        match self.quota.algorithm_for(&key) {
            Some(alg) => alg,
            None => shard.config.load(),
        }
    }
    /// The stored TAT of `key`, if tracked, and the configuration it runs.
    fn tat(&self, key: K) -> (Option<u64>, Gcra) {
        let hash = self.hasher.hash_one(key);
        let word = key.to_word();
        let shard = self.shard(hash);
        let read = |found: Find| match found {
            Find::Found(_, w) => match unpack(w) {
                Slot::Live(_, tat) => Some(tat),
                _ => None,
            },
            _ => None,
        };
        let seq = shard.reconfig.load(Ordering::Acquire);
        if seq.is_multiple_of(2) {
            let found = shard.find_unlocked(word, hash);
            if !matches!(found, Find::Busy) {
                let tat = read(found);
                let alg = self.algorithm(shard, key);
                if shard.reconfig.load(Ordering::Acquire) == seq {
                    return (tat, alg);
                }
            }
        }
        let _writer = shard.lock();
        (read(shard.find(word, hash)), self.algorithm(shard, key))
    }
}

impl<K, S, Q> LockFreeGcraTable<K, S, Q> {
    /// The number of shards.
    #[must_use]
    pub fn shards(&self) -> usize {
        self.shards.len()
    }

    /// The hasher.
    #[must_use]
    pub fn hasher(&self) -> &S {
        &self.hasher
    }
}

impl<K: WordKey, S: BuildHasher, Q: KeyQuota<K, Gcra>> Limiter<K> for LockFreeGcraTable<K, S, Q> {
    type Permit = Grant;

    super::grant_methods!();

    fn refund(&self, key: &K, n: u32, now: Timestamp) {
        let key = *key;
        let now = now.as_nanos();
        let hash = self.hasher.hash_one(key);
        let word = key.to_word();
        let shard = self.shard(hash);
        let _writer = shard.lock(); // rare: keep it simple and exact
        if let Find::Found(i, mut w) = shard.find(word, hash) {
            let alg = self.algorithm(shard, key);
            while let Slot::Live(_, tat) = unpack(w) {
                let Some(new_tat) = alg.refunded(tat, n, now) else {
                    break;
                };
                match shard.slots[i].compare_exchange_weak(
                    w,
                    pack(word, new_tat),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => break,
                    Err(current) => w = current,
                }
            }
            shard.hint.reset();
        } else if self.policy == OverflowPolicy::SharedBucket {
            self.shared.refund(n, Timestamp::from_nanos(now));
        }
    }

    fn snapshot(&self, key: &K, now: Timestamp) -> Snapshot {
        let (tat, alg) = self.tat(*key);
        alg.snapshot_of(tat.unwrap_or(0), now.as_nanos())
    }

    fn time_until_ready(
        &self,
        key: &K,
        n: u32,
        now: Timestamp,
    ) -> Result<Duration, Refusal<'static>> {
        let (tat, alg) = self.tat(*key);
        alg.wait_of(tat.unwrap_or(0), n, now.as_nanos())
            .map(Duration::from_nanos)
    }

    fn time_until_ready_after(
        &self,
        key: &K,
        ahead: u64,
        n: u32,
        now: Timestamp,
    ) -> Option<Duration> {
        let (tat, alg) = self.tat(*key);
        alg.wait_after_of(tat.unwrap_or(0), ahead, n, now.as_nanos())
            .map(Duration::from_nanos)
    }

    fn capacity(&self, key: &K) -> u32 {
        self.tat(*key).1.capacity()
    }
}

impl<K: WordKey, S: BuildHasher, Q: KeyQuota<K, Gcra>> KeyedTable<K>
    for LockFreeGcraTable<K, S, Q>
{
    type Algorithm = Gcra;

    fn contains(&self, key: &K) -> bool {
        self.tat(*key).0.is_some()
    }

    fn len(&self) -> usize {
        self.shards.iter().map(Shard::len).sum()
    }

    /// The requested capacity rounded up to a multiple of the shard count.
    fn max_keys(&self) -> usize {
        self.per_shard * self.shards.len()
    }

    fn overflow_policy(&self) -> OverflowPolicy {
        self.policy
    }

    fn default_algorithm(&self) -> Gcra {
        self.shared.algorithm()
    }

    fn shared_snapshot(&self, now: Timestamp) -> Snapshot {
        self.shared.snapshot(now)
    }

    /// Takes each shard's mutex in turn, so no entry is seen twice or
    /// missed while moving.
    fn for_each_snapshot(&self, now: Timestamp, visit: &mut dyn FnMut(&K, Snapshot)) {
        for shard in &self.shards {
            let _writer = shard.lock();
            for slot in &shard.slots {
                if let Slot::Live(key, tat) = unpack(slot.load(Ordering::Acquire)) {
                    let key = K::from_word(key);
                    visit(
                        &key,
                        self.algorithm(shard, key).snapshot_of(tat, now.as_nanos()),
                    );
                }
            }
        }
    }

    fn evict_refilled(&self, now: Timestamp) -> usize {
        self.shards
            .iter()
            .map(|shard| {
                let _writer = shard.lock();
                self.sweep(shard, now.as_nanos())
            })
            .sum()
    }

    fn reconfigure(&self, next: Gcra, how: Inheritance, now: Timestamp) {
        let now_ns = now.as_nanos();
        let _whole = self
            .reconfiguring
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for shard in &self.shards {
            let _writer = shard.lock();
            let old = shard.config.load();
            self.convert(
                shard,
                |key| self.quota.algorithm_for(&key).is_none(),
                || shard.config.store(next),
                |_, tat| next.inherit_tat(&old, tat, now_ns, how),
            );
            shard.hint.reset();
        }
        self.shared.set_algorithm(next, how, now);
    }

    fn update_key_quota(
        &self,
        key: &K,
        how: Inheritance,
        now: Timestamp,
        update: &mut dyn FnMut(),
    ) {
        let key = *key;
        let hash = self.hasher.hash_one(key);
        let shard = self.shard(hash);
        let _writer = shard.lock();
        let old = self.algorithm(shard, key);
        self.convert(
            shard,
            |k| k == key,
            update,
            |k, tat| {
                self.algorithm(shard, k)
                    .inherit_tat(&old, tat, now.as_nanos(), how)
            },
        );
        shard.hint.reset();
    }
}
