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

use core::hash::{BuildHasher, Hash};
use core::time::Duration;
use std::vec::Vec;

use super::builder::{DEFAULT_MAX_KEYS, RuntimeSized};
use super::{
    AtomicSweepHint, KeyQuota, KeyedTable, OverflowPolicy, RandomSeed, TableBuilder, exceeded,
    overflow, untracked_peek, with_algorithm,
};
use crate::error::ConfigError;
use crate::limiter::{Algorithm, Grant, Inheritance, Limiter};
use crate::refusal::Refusal;
use crate::snapshot::Snapshot;
use crate::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use crate::time::Timestamp;

/// Largest number of keys in one shard: bounds the cost of one sweep.
const MAX_PER_SHARD: usize = 4095;
/// Entries per bucket.
const BUCKET: usize = 4;

type Bucket<K, S> = heapless::Vec<(K, S), BUCKET, u8>;
/// Largest shard count.
const MAX_SHARDS: usize = 1 << 16;

/// The most keys a [`ShardedKeyedTable`] or a
/// [`LockFreeGcraTable`](super::LockFreeGcraTable) can track (about 268
/// million): [`TableBuilder::max_keys`](super::TableBuilder::max_keys)
/// above it, or zero, is a [`ConfigError`] when the table is built. With
/// the default shard count every capacity from 1 to `MAX_KEYS` builds; an
/// explicit [`shards`](super::TableBuilder::shards) count holds at most
/// 4,095 keys per shard. A caller that validates a configuration before
/// building anything (the HTTP layer checks every policy before it touches
/// a bucket) checks against it.
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

struct Shard<K, A: Algorithm> {
    buckets: Vec<Bucket<K, A::State>>,
    /// One bit per bucket: some key homed at or before it lives after it.
    overflowed: Vec<u64>,
    len: usize,
    capacity: usize,
    hint: AtomicSweepHint,
    /// The default algorithm, read under the shard's lock, so that a
    /// [`reconfigure`](KeyedTable::reconfigure) (which holds every
    /// shard's write lock) is atomic with every check.
    default: A,
}

/// Checks a tracked state and lowers the hint to its idle time.
#[inline(always)]
fn check_own<A: Algorithm>(
    alg: &A,
    state: &A::State,
    n: u32,
    now: Timestamp,
    hint: &AtomicSweepHint,
) -> Result<Timestamp, Refusal<'static>> {
    let verdict = alg.check_n(state, n, now);
    hint.lower(now.as_nanos(), super::reset_after(&verdict, now));
    verdict
}

impl<K: Eq, A: Algorithm> Shard<K, A> {
    fn new(capacity: usize, default: A) -> Self {
        let slots = capacity + capacity.div_ceil(10);
        let buckets = slots.div_ceil(BUCKET).max(1);
        Self {
            buckets: (0..buckets).map(|_| Bucket::new()).collect(),
            overflowed: std::vec![0; buckets.div_ceil(64)],
            len: 0,
            capacity,
            hint: AtomicSweepHint::new(),
            default,
        }
    }

    #[inline]
    fn home(&self, hash: u64) -> usize {
        // multiply-shift range reduction of the low 32 bits
        ((u64::from(hash as u32) * self.buckets.len() as u64) >> 32) as usize
    }

    #[inline]
    fn next(&self, bucket: usize) -> usize {
        if bucket + 1 == self.buckets.len() {
            0
        } else {
            bucket + 1
        }
    }

    #[inline]
    fn is_overflowed(&self, bucket: usize) -> bool {
        self.overflowed
            .get(bucket / 64)
            .is_some_and(|word| word >> (bucket % 64) & 1 == 1)
    }

    #[inline]
    fn set_overflowed(&mut self, bucket: usize) {
        if let Some(word) = self.overflowed.get_mut(bucket / 64) {
            *word |= 1 << (bucket % 64);
        }
    }

    /// `key`'s entry, if tracked.
    #[inline]
    fn get(&self, key: &K, hash: u64) -> Option<&A::State> {
        let mut bucket = self.home(hash);
        for _ in 0..self.buckets.len() {
            let entries = &self.buckets[bucket];
            if let Some((_, state)) = entries.iter().find(|(k, _)| k == key) {
                return Some(state);
            }
            if !self.is_overflowed(bucket) {
                return None;
            }
            bucket = self.next(bucket);
        }
        None
    }

    /// Inserts a key known to be absent: its (bucket, index), or `None` if
    /// the shard holds `capacity` keys already.
    #[inline]
    fn insert(&mut self, key: K, state: A::State, hash: u64) -> Option<(usize, usize)> {
        if self.len >= self.capacity {
            return None;
        }
        let mut bucket = self.home(hash);
        // len < capacity < slots: some bucket has room
        for _ in 0..self.buckets.len() {
            if !self.buckets[bucket].is_full() {
                self.len += 1;
                let entries = &mut self.buckets[bucket];
                let i = entries.len();
                // not full: cannot fail; stored inline, never allocates
                let _ = entries.push((key, state));
                return Some((bucket, i));
            }
            self.set_overflowed(bucket);
            bucket = self.next(bucket);
        }
        None
    }

    /// Recomputes `len` and the overflow bits from the entries (after a
    /// sweep removed some).
    fn reindex(&mut self, hash: impl Fn(&K) -> u64) {
        self.overflowed.fill(0);
        self.len = 0;
        for bucket in 0..self.buckets.len() {
            self.len += self.buckets[bucket].len();
            for i in 0..self.buckets[bucket].len() {
                let mut b = match self.buckets[bucket].get(i) {
                    Some((key, _)) => self.home(hash(key)),
                    None => continue,
                };
                while b != bucket {
                    self.set_overflowed(b);
                    b = self.next(b);
                }
            }
        }
    }

    fn entries(&self) -> impl Iterator<Item = &(K, A::State)> {
        self.buckets.iter().flat_map(|b| b.iter())
    }
}

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

impl<K, A, S, Q> ShardedKeyedTable<K, A, S, Q>
where
    K: Hash + Eq + Clone,
    A: Algorithm + Clone,
    S: BuildHasher,
    Q: KeyQuota<K, A>,
{
    #[inline]
    fn shard(&self, hash: u64) -> &RwLock<Shard<K, A>> {
        // shard_shift is 64 for one shard: checked_shr gives None → shard 0
        let i = hash.checked_shr(self.shard_shift).unwrap_or(0) as usize;
        &self.shards[i & (self.shards.len() - 1)].0
    }

    /// Read-locks a shard. If a caller's callback (per-key quota, visitor)
    /// panicked while holding the write lock, a sweep may have stopped
    /// between removing entries and recomputing the overflow bits: repair
    /// them first.
    #[inline]
    fn read<'a>(&'a self, lock: &'a RwLock<Shard<K, A>>) -> RwLockReadGuard<'a, Shard<K, A>> {
        match lock.read() {
            Ok(guard) => guard,
            Err(poisoned) => {
                drop(poisoned);
                drop(self.write(lock));
                lock.read()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
            }
        }
    }

    /// Write-locks a shard, repairing it after a panic (see [`Self::read`]).
    fn write<'a>(&'a self, lock: &'a RwLock<Shard<K, A>>) -> RwLockWriteGuard<'a, Shard<K, A>> {
        lock.write().unwrap_or_else(|poisoned| {
            let mut shard = poisoned.into_inner();
            shard.reindex(|k| self.hasher.hash_one(k));
            crate::sync::clear_poison(lock);
            shard
        })
    }

    /// `key`'s algorithm: its per-key quota, or the shard's default.
    #[inline]
    fn algorithm_of(&self, shard: &Shard<K, A>, key: &K) -> A {
        self.quota
            .algorithm_for(key)
            .unwrap_or_else(|| shard.default.clone())
    }

    /// Evicts every idle key of a full shard (if the hint says one may be
    /// idle); true if a slot is free afterwards.
    fn sweep(&self, shard: &mut Shard<K, A>, now: Timestamp) -> bool {
        if !shard.hint.worth_sweeping(now.as_nanos()) {
            return false;
        }
        self.sweep_always(shard, now);
        shard.len < shard.capacity
    }

    fn sweep_always(&self, shard: &mut Shard<K, A>, now: Timestamp) -> usize {
        let now_ns = now.as_nanos();
        let before = shard.len;
        let hint = &shard.hint;
        hint.start(now_ns);
        let (default, quota) = (&shard.default, &self.quota);
        let mut after = 0;
        for bucket in &mut shard.buckets {
            bucket.retain(|(key, state)| {
                with_algorithm(quota, default, key, |alg| {
                    if alg.is_idle(state, now) {
                        false
                    } else {
                        hint.lower(now_ns, alg.snapshot(state, now).reset_after_nanos());
                        true
                    }
                })
            });
            after += bucket.len();
        }
        let evicted = before.saturating_sub(after);
        if evicted > 0 {
            shard.reindex(|k| self.hasher.hash_one(k));
        }
        evicted
    }

    /// Every shard write-locked, in order (a reconfiguration).
    fn write_all(&self) -> Vec<RwLockWriteGuard<'_, Shard<K, A>>> {
        self.shards.iter().map(|s| self.write(&s.0)).collect()
    }
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

impl<K, A, S, Q> ShardedKeyedTable<K, A, S, Q>
where
    K: Hash + Eq + Clone,
    A: Algorithm + Clone,
    S: BuildHasher,
    Q: KeyQuota<K, A>,
{
    #[inline]
    fn check_until_full(
        &self,
        key: &K,
        n: u32,
        now: Timestamp,
    ) -> Result<Timestamp, Refusal<'static>> {
        let hash = self.hasher.hash_one(key);
        let lock = self.shard(hash);
        {
            let shard = self.read(lock);
            let alg = self.algorithm_of(&shard, key);
            if n > alg.capacity() {
                return Err(exceeded(&alg, n));
            }
            if let Some(state) = shard.get(key, hash) {
                return check_own(&alg, state, n, now, &shard.hint);
            }
            if n == 0 {
                return untracked_peek(&alg, now);
            }
            // Full of busy keys: answer without the write lock, so a
            // flood of new keys never blocks the tracked keys' checks.
            if shard.len >= shard.capacity && !shard.hint.worth_sweeping(now.as_nanos()) {
                let wait = shard.hint.wait_from(now.as_nanos());
                return overflow(
                    self.policy,
                    &alg,
                    &shard.default,
                    &self.shared,
                    n,
                    now,
                    wait,
                );
            }
        }
        // a new key: insert under the write lock
        let mut guard = self.write(lock);
        let shard = &mut *guard;
        let alg = self.algorithm_of(shard, key);
        if let Some(state) = shard.get(key, hash) {
            // inserted by another thread meanwhile
            return check_own(&alg, state, n, now, &shard.hint);
        }
        if shard.len >= shard.capacity && !self.sweep(shard, now) {
            let wait = shard.hint.wait_from(now.as_nanos());
            return overflow(
                self.policy,
                &alg,
                &shard.default,
                &self.shared,
                n,
                now,
                wait,
            );
        }
        let at = Timestamp::from_nanos(shard.hint.insert_time(now.as_nanos()));
        match shard.insert(key.clone(), alg.new_state(), hash) {
            Some((bucket, i)) => match shard.buckets[bucket].get(i) {
                Some((_, state)) => check_own(&alg, state, n, at, &shard.hint),
                None => super::refusal(), // unreachable: just inserted
            },
            None => {
                let wait = shard.hint.wait_from(now.as_nanos());
                overflow(
                    self.policy,
                    &alg,
                    &shard.default,
                    &self.shared,
                    n,
                    now,
                    wait,
                )
            }
        }
    }
}

impl<K, A, S, Q> Limiter<K> for ShardedKeyedTable<K, A, S, Q>
where
    K: Hash + Eq + Clone,
    A: Algorithm + Clone,
    S: BuildHasher,
    Q: KeyQuota<K, A>,
{
    type Permit = Grant;

    super::grant_methods!();

    fn refund(&self, key: &K, n: u32, now: Timestamp) {
        let hash = self.hasher.hash_one(key);
        let shard = self.read(self.shard(hash));
        match shard.get(key, hash) {
            Some(state) => {
                self.algorithm_of(&shard, key).refund(state, n, now);
                shard.hint.reset();
            }
            None if self.policy == OverflowPolicy::SharedBucket => {
                shard.default.refund(&self.shared, n, now);
            }
            None => {}
        }
    }

    fn snapshot(&self, key: &K, now: Timestamp) -> Snapshot {
        let hash = self.hasher.hash_one(key);
        let shard = self.read(self.shard(hash));
        let alg = self.algorithm_of(&shard, key);
        match shard.get(key, hash) {
            Some(state) => alg.snapshot(state, now),
            None => alg.snapshot(&alg.new_state(), now),
        }
    }

    fn time_until_ready(
        &self,
        key: &K,
        n: u32,
        now: Timestamp,
    ) -> Result<Duration, Refusal<'static>> {
        let hash = self.hasher.hash_one(key);
        let shard = self.read(self.shard(hash));
        let alg = self.algorithm_of(&shard, key);
        match shard.get(key, hash) {
            Some(state) => alg.time_until_ready(state, n, now),
            None => alg.time_until_ready(&alg.new_state(), n, now),
        }
    }

    fn time_until_ready_after(
        &self,
        key: &K,
        ahead: u64,
        n: u32,
        now: Timestamp,
    ) -> Option<Duration> {
        let hash = self.hasher.hash_one(key);
        let shard = self.read(self.shard(hash));
        let alg = self.algorithm_of(&shard, key);
        match shard.get(key, hash) {
            Some(state) => alg.time_until_ready_after(state, ahead, n, now),
            None => alg.time_until_ready_after(&alg.new_state(), ahead, n, now),
        }
    }

    fn capacity(&self, key: &K) -> u32 {
        let hash = self.hasher.hash_one(key);
        let shard = self.read(self.shard(hash));
        self.algorithm_of(&shard, key).capacity()
    }
}

impl<K, A, S, Q> KeyedTable<K> for ShardedKeyedTable<K, A, S, Q>
where
    K: Hash + Eq + Clone,
    A: Algorithm + Clone,
    S: BuildHasher,
    Q: KeyQuota<K, A>,
{
    type Algorithm = A;

    fn contains(&self, key: &K) -> bool {
        let hash = self.hasher.hash_one(key);
        self.read(self.shard(hash)).get(key, hash).is_some()
    }

    fn len(&self) -> usize {
        self.shards.iter().map(|s| self.read(&s.0).len).sum()
    }

    /// The requested capacity rounded up to a multiple of the shard count.
    fn max_keys(&self) -> usize {
        self.per_shard * self.shards.len()
    }

    fn overflow_policy(&self) -> OverflowPolicy {
        self.policy
    }

    fn default_algorithm(&self) -> A {
        self.read(&self.shards[0].0).default.clone()
    }

    fn shared_snapshot(&self, now: Timestamp) -> Snapshot {
        self.read(&self.shards[0].0)
            .default
            .snapshot(&self.shared, now)
    }

    fn for_each_snapshot(&self, now: Timestamp, visit: &mut dyn FnMut(&K, Snapshot)) {
        for shard in &self.shards {
            let shard = self.read(&shard.0);
            for (key, state) in shard.entries() {
                let snapshot = self.algorithm_of(&shard, key).snapshot(state, now);
                visit(key, snapshot);
            }
        }
    }

    fn evict_refilled(&self, now: Timestamp) -> usize {
        self.shards
            .iter()
            .map(|s| self.sweep_always(&mut self.write(&s.0), now))
            .sum()
    }

    fn reconfigure(&self, next: A, how: Inheritance, now: Timestamp) {
        let mut shards = self.write_all();
        // The per-key quota (the caller's code, which may panic) is asked
        // about every key before any state changes: a panic then leaves
        // the whole table on the old configuration, not some keys carried
        // into the new units under the old default.
        let on_default: Vec<Vec<bool>> = shards
            .iter()
            .map(|shard| {
                shard
                    .entries()
                    .map(|(key, _)| self.quota.algorithm_for(key).is_none())
                    .collect()
            })
            .collect();
        for (shard, on_default) in shards.iter_mut().zip(on_default) {
            let shard = &mut **shard;
            for ((_, state), on_default) in shard.entries().zip(on_default) {
                if on_default {
                    shard.default.carry_over(&next, state, how, now);
                }
            }
            shard.hint.reset();
        }
        if let Some(first) = shards.first() {
            first.default.carry_over(&next, &self.shared, how, now);
        }
        for shard in &mut shards {
            shard.default = next.clone();
        }
    }

    fn update_key_quota(
        &self,
        key: &K,
        how: Inheritance,
        now: Timestamp,
        update: &mut dyn FnMut(),
    ) {
        let hash = self.hasher.hash_one(key);
        let shard = self.write(self.shard(hash));
        let old = self.algorithm_of(&shard, key);
        update();
        let new = self.algorithm_of(&shard, key);
        if let Some(state) = shard.get(key, hash) {
            old.carry_over(&new, state, how, now);
        }
        shard.hint.reset();
    }
}
