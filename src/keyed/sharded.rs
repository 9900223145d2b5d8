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

use super::{
    overflow, untracked_peek, with_algorithm, AtomicSweepHint, KeyQuota, KeyedDecision,
    KeyedTableError, OverflowPolicy, RandomSeed, SameQuota,
};
use crate::decision::{CapacityExceeded, Snapshot};
use crate::limiter::Algorithm;
use crate::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use core::hash::{BuildHasher, Hash};
use std::vec::Vec;

/// Largest number of keys in one shard: bounds the cost of one sweep.
const MAX_PER_SHARD: usize = 4095;
/// Entries per bucket.
const BUCKET: usize = 4;

type Bucket<K, S> = heapless::Vec<(K, S), BUCKET, u8>;
/// Largest shard count.
const MAX_SHARDS: usize = 1 << 16;
/// Below this many keys per shard, do not split further for parallelism
/// (small shards fill unevenly).
const MIN_PER_SHARD_FOR_SPLIT: usize = 512;

/// Keeps each shard's lock word on its own cache lines (128 bytes: two
/// lines, for CPUs that prefetch pairs), so threads working on different
/// shards do not contend through false sharing.
#[repr(align(128))]
struct CachePadded<T>(T);

type ShardLock<K, S> = CachePadded<RwLock<Shard<K, S>>>;

struct Shard<K, S> {
    buckets: Vec<Bucket<K, S>>,
    /// One bit per bucket: some key homed at or before it lives after it.
    overflowed: Vec<u64>,
    len: usize,
    capacity: usize,
    hint: AtomicSweepHint,
}

/// Checks a tracked state and lowers the hint to its idle time.
#[inline(always)]
fn check_own<A: Algorithm>(
    alg: &A,
    state: &A::State,
    n: u32,
    now: u64,
    hint: &AtomicSweepHint,
) -> Result<KeyedDecision, CapacityExceeded> {
    let decision = alg.check_n(state, n, now)?;
    hint.lower(now, decision.snapshot().reset_after_nanos());
    Ok(KeyedDecision::new(decision, super::KeyedPath::Own))
}

impl<K: Eq, S> Shard<K, S> {
    fn new(capacity: usize) -> Self {
        let slots = capacity + capacity.div_ceil(10);
        let buckets = slots.div_ceil(BUCKET).max(1);
        Self {
            buckets: (0..buckets).map(|_| Bucket::new()).collect(),
            overflowed: std::vec![0; buckets.div_ceil(64)],
            len: 0,
            capacity,
            hint: AtomicSweepHint::new(),
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
    fn get(&self, key: &K, hash: u64) -> Option<&S> {
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
    fn insert(&mut self, key: K, state: S, hash: u64) -> Option<(usize, usize)> {
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

    fn entries(&self) -> impl Iterator<Item = &(K, S)> {
        self.buckets.iter().flat_map(|b| b.iter())
    }
}

/// A keyed limiter for servers (feature `std`): capacity chosen at run
/// time and allocated once, never grown, split over independently locked
/// shards, keys hashed with a per-table random seed.
///
/// Eviction, overflow and per-key quotas work as described in the
/// [module docs](super). Build it with [`ShardedKeyedTable::new`] or
/// [`ShardedKeyedTable::builder`].
///
/// Keys are spread over the shards by hash; each shard holds
/// `capacity() / shards()` keys, so a shard can fill slightly before the
/// table as a whole (the default shard size is at least 512 keys when the
/// capacity allows, which keeps that imbalance to a few percent). An insert
/// into a full shard sweeps that shard once (at most 4,095 entries).
///
/// ```
/// use tollgate::keyed::{KeyedPath, OverflowPolicy, ShardedKeyedTable};
/// use tollgate::{Gcra, Quota};
///
/// let per_client = Gcra::token_bucket(Quota::per_second(5)?.allow_burst(2)?);
/// let table = ShardedKeyedTable::builder(per_client)
///     .capacity(10_000)
///     .overflow(OverflowPolicy::Deny)
///     .build::<std::net::IpAddr>()?;
///
/// let client: std::net::IpAddr = "192.0.2.7".parse()?;
/// let now = 0; // nanoseconds from your clock
/// assert!(table.check(&client, now).is_allowed());
/// assert!(table.check(&client, now).is_allowed());
/// let third = table.check(&client, now);
/// assert!(third.is_denied());
/// assert_eq!(third.path(), KeyedPath::Own);
/// assert_eq!(table.len(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ShardedKeyedTable<K, A: Algorithm, S = RandomSeed, Q = SameQuota> {
    shards: Vec<ShardLock<K, A::State>>,
    shard_shift: u32,
    per_shard: usize,
    hasher: S,
    default: A,
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

/// Configures a [`ShardedKeyedTable`]; from [`ShardedKeyedTable::builder`].
#[derive(Debug, Clone)]
#[must_use]
pub struct ShardedTableBuilder<A, S = RandomSeed, Q = SameQuota> {
    default: A,
    capacity: usize,
    shards: Option<usize>,
    policy: OverflowPolicy,
    hasher: S,
    quota: Q,
}

impl<A> ShardedTableBuilder<A> {
    /// A builder for a table whose keys run `default` (also
    /// [`ShardedKeyedTable::builder`]).
    pub fn new(default: A) -> Self {
        Self {
            default,
            capacity: 10_000,
            shards: None,
            policy: OverflowPolicy::SharedBucket,
            hasher: RandomSeed::new(),
            quota: SameQuota,
        }
    }
}

impl<A, S, Q> ShardedTableBuilder<A, S, Q> {
    /// How many keys to track at most (default 10,000). The table may round
    /// it up to a multiple of the shard count; see
    /// [`ShardedKeyedTable::capacity`].
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        self
    }

    /// The number of shards (a power of two). The default is four per CPU,
    /// fewer for small tables, more if needed to keep shards at most 4,095
    /// keys.
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = Some(shards);
        self
    }

    /// The overflow policy (default [`OverflowPolicy::SharedBucket`]).
    pub fn overflow(mut self, policy: OverflowPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The hasher (default [`RandomSeed::new`], a fresh random seed per
    /// table). Use a seeded hasher for keys an attacker can choose.
    pub fn hasher<S2: BuildHasher>(self, hasher: S2) -> ShardedTableBuilder<A, S2, Q> {
        ShardedTableBuilder {
            default: self.default,
            capacity: self.capacity,
            shards: self.shards,
            policy: self.policy,
            hasher,
            quota: self.quota,
        }
    }

    /// A per-key quota: each key's algorithm (see [`KeyQuota`]). The default
    /// algorithm still runs the shared overflow bucket.
    pub fn per_key<Q2>(self, quota: Q2) -> ShardedTableBuilder<A, S, Q2> {
        ShardedTableBuilder {
            default: self.default,
            capacity: self.capacity,
            shards: self.shards,
            policy: self.policy,
            hasher: self.hasher,
            quota,
        }
    }

    /// Allocates the table.
    ///
    /// # Errors
    /// [`KeyedTableError`] for a zero capacity, an invalid shard count, or a
    /// capacity above `shards × 4,095`.
    pub fn build<K>(self) -> Result<ShardedKeyedTable<K, A, S, Q>, KeyedTableError>
    where
        K: Hash + Eq + Clone,
        A: Algorithm,
        S: BuildHasher,
        Q: KeyQuota<K, A>,
    {
        if self.capacity == 0 {
            return Err(KeyedTableError::ZeroCapacity);
        }
        let shards = match self.shards {
            Some(s) if s == 0 || !s.is_power_of_two() || s > MAX_SHARDS => {
                return Err(KeyedTableError::InvalidShards {
                    requested: s,
                    max: MAX_SHARDS,
                })
            }
            Some(s) => s,
            None => default_shards(self.capacity),
        };
        let max = shards.saturating_mul(MAX_PER_SHARD);
        if self.capacity > max {
            return Err(KeyedTableError::CapacityTooLarge {
                requested: self.capacity,
                max,
            });
        }
        let per_shard = self.capacity.div_ceil(shards);
        let shard_list = (0..shards)
            .map(|_| CachePadded(RwLock::new(Shard::new(per_shard))))
            .collect();
        let shared = self.default.new_state();
        Ok(ShardedKeyedTable {
            shards: shard_list,
            shard_shift: 64 - shards.trailing_zeros(),
            per_shard,
            hasher: self.hasher,
            default: self.default,
            shared,
            policy: self.policy,
            quota: self.quota,
        })
    }
}

impl<S: BuildHasher, Q> ShardedTableBuilder<crate::gcra::Gcra, S, Q> {
    /// Allocates a [`LockFreeGcraTable`](super::LockFreeGcraTable) with
    /// this configuration instead: GCRA buckets, word-sized keys, no lock
    /// on the check path.
    ///
    /// ```
    /// use tollgate::keyed::{OverflowPolicy, ShardedKeyedTable};
    /// use tollgate::{Gcra, Quota};
    ///
    /// let table = ShardedKeyedTable::builder(Gcra::token_bucket(Quota::per_second(100)?))
    ///     .capacity(50_000)
    ///     .overflow(OverflowPolicy::Deny)
    ///     .build_lock_free::<std::net::Ipv4Addr>()?;
    /// assert!(table.check("203.0.113.9".parse()?, 0).is_allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`KeyedTableError`] for a zero capacity, an invalid shard count, or a
    /// capacity above `shards × 4,095`.
    pub fn build_lock_free<K>(self) -> Result<super::LockFreeGcraTable<K, S, Q>, KeyedTableError>
    where
        K: super::WordKey,
        Q: KeyQuota<K, crate::gcra::Gcra>,
    {
        super::LockFreeGcraTable::with_options(
            self.capacity,
            self.default,
            self.policy,
            self.hasher,
            self.quota,
            self.shards,
        )
    }
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

impl<K: Hash + Eq + Clone, A: Algorithm> ShardedKeyedTable<K, A> {
    /// A table of `capacity` keys all running `default`, with the shared
    /// overflow bucket, default shards and a random seed.
    ///
    /// # Errors
    /// [`KeyedTableError`] for a zero or too large capacity.
    pub fn new(capacity: usize, default: A) -> Result<Self, KeyedTableError> {
        ShardedTableBuilder::new(default).capacity(capacity).build()
    }
}

impl<A: Algorithm> ShardedKeyedTable<(), A> {
    /// Starts configuring a table whose keys run `default` unless a per-key
    /// quota says otherwise.
    pub fn builder(default: A) -> ShardedTableBuilder<A> {
        ShardedTableBuilder::new(default)
    }
}

impl<K, A, S, Q> ShardedKeyedTable<K, A, S, Q>
where
    K: Hash + Eq + Clone,
    A: Algorithm,
    S: BuildHasher,
    Q: KeyQuota<K, A>,
{
    #[inline]
    fn shard(&self, hash: u64) -> &RwLock<Shard<K, A::State>> {
        // shard_shift is 64 for one shard: checked_shr gives None → shard 0
        let i = hash.checked_shr(self.shard_shift).unwrap_or(0) as usize;
        &self.shards[i & (self.shards.len() - 1)].0
    }

    /// Read-locks a shard. If a caller's callback (per-key quota, visitor)
    /// panicked while holding the write lock, a sweep may have stopped
    /// between removing entries and recomputing the overflow bits: repair
    /// them first.
    #[inline]
    fn read<'a>(
        &'a self,
        lock: &'a RwLock<Shard<K, A::State>>,
    ) -> RwLockReadGuard<'a, Shard<K, A::State>> {
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
    fn write<'a>(
        &'a self,
        lock: &'a RwLock<Shard<K, A::State>>,
    ) -> RwLockWriteGuard<'a, Shard<K, A::State>> {
        lock.write().unwrap_or_else(|poisoned| {
            let mut shard = poisoned.into_inner();
            shard.reindex(|k| self.hasher.hash_one(k));
            crate::sync::clear_poison(lock);
            shard
        })
    }

    /// Tries to take one permit for `key` at `now` (nanoseconds).
    #[inline]
    pub fn check(&self, key: &K, now: u64) -> KeyedDecision {
        match self.check_n(key, 1, now) {
            Ok(decision) => decision,
            Err(_) => super::refusal(now),
        }
    }

    /// Tries to take `n` permits for `key` at `now`; `n = 0` is a peek that
    /// changes nothing (and never inserts the key).
    ///
    /// # Errors
    /// [`CapacityExceeded`] if `n` is more than the key's algorithm can ever
    /// grant.
    #[inline]
    pub fn check_n(&self, key: &K, n: u32, now: u64) -> Result<KeyedDecision, CapacityExceeded> {
        with_algorithm(&self.quota, &self.default, key, |alg| {
            if n > alg.capacity() {
                return Err(CapacityExceeded {
                    requested: n,
                    capacity: alg.capacity(),
                });
            }
            let hash = self.hasher.hash_one(key);
            let lock = self.shard(hash);
            {
                let shard = self.read(lock);
                if let Some(state) = shard.get(key, hash) {
                    return check_own(alg, state, n, now, &shard.hint);
                }
                if n == 0 {
                    return Ok(untracked_peek(alg, now));
                }
                // Full of busy keys: answer without the write lock, so a
                // flood of new keys never blocks the tracked keys' checks.
                if shard.len >= shard.capacity && !shard.hint.worth_sweeping(now) {
                    let wait = shard.hint.wait_from(now);
                    return overflow(self.policy, alg, &self.default, &self.shared, n, now, wait);
                }
            }
            // a new key: insert under the write lock
            let mut guard = self.write(lock);
            let shard = &mut *guard;
            if let Some(state) = shard.get(key, hash) {
                // inserted by another thread meanwhile
                return check_own(alg, state, n, now, &shard.hint);
            }
            if shard.len >= shard.capacity && !self.sweep(shard, now) {
                let wait = shard.hint.wait_from(now);
                return overflow(self.policy, alg, &self.default, &self.shared, n, now, wait);
            }
            let at = shard.hint.insert_time(now);
            match shard.insert(key.clone(), alg.new_state(), hash) {
                Some((bucket, i)) => match shard.buckets[bucket].get(i) {
                    Some((_, state)) => check_own(alg, state, n, at, &shard.hint),
                    None => Ok(super::refusal(now)), // unreachable: just inserted
                },
                None => {
                    let wait = shard.hint.wait_from(now);
                    overflow(self.policy, alg, &self.default, &self.shared, n, now, wait)
                }
            }
        })
    }

    /// Evicts every idle key of a full shard (if the hint says one may be
    /// idle); true if a slot is free afterwards.
    fn sweep(&self, shard: &mut Shard<K, A::State>, now: u64) -> bool {
        if !shard.hint.worth_sweeping(now) {
            return false;
        }
        self.sweep_always(shard, now);
        shard.len < shard.capacity
    }

    fn sweep_always(&self, shard: &mut Shard<K, A::State>, now: u64) -> usize {
        let before = shard.len;
        let hint = &shard.hint;
        hint.start(now);
        let (default, quota) = (&self.default, &self.quota);
        let mut after = 0;
        for bucket in &mut shard.buckets {
            bucket.retain(|(key, state)| {
                with_algorithm(quota, default, key, |alg| {
                    if alg.is_idle(state, now) {
                        false
                    } else {
                        hint.lower(now, alg.snapshot(state, now).reset_after_nanos());
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

    /// Gives back `n` permits of an earlier admission for `key`. If the key
    /// is not tracked, its admission came from the overflow path: with
    /// [`OverflowPolicy::SharedBucket`] the shared state gets them back.
    pub fn refund(&self, key: &K, n: u32, now: u64) {
        with_algorithm(&self.quota, &self.default, key, |alg| {
            let hash = self.hasher.hash_one(key);
            let shard = self.read(self.shard(hash));
            match shard.get(key, hash) {
                Some(state) => {
                    alg.refund(state, n, now);
                    shard.hint.reset();
                }
                None => {
                    drop(shard);
                    if self.policy == OverflowPolicy::SharedBucket {
                        self.default.refund(&self.shared, n, now);
                    }
                }
            }
        });
    }

    /// `key`'s state at `now` (a fresh state's if the key is not tracked).
    pub fn snapshot(&self, key: &K, now: u64) -> Snapshot {
        with_algorithm(&self.quota, &self.default, key, |alg| {
            let hash = self.hasher.hash_one(key);
            let shard = self.read(self.shard(hash));
            match shard.get(key, hash) {
                Some(state) => alg.snapshot(state, now),
                None => alg.snapshot(&alg.new_state(), now),
            }
        })
    }

    /// Nanoseconds until `n` permits for `key` would be admitted by its own
    /// state (0 for an untracked key).
    ///
    /// # Errors
    /// [`CapacityExceeded`] if `n` can never be granted to `key`.
    pub fn time_until_ready(&self, key: &K, n: u32, now: u64) -> Result<u64, CapacityExceeded> {
        with_algorithm(&self.quota, &self.default, key, |alg| {
            let hash = self.hasher.hash_one(key);
            let shard = self.read(self.shard(hash));
            match shard.get(key, hash) {
                Some(state) => alg.time_until_ready(state, n, now),
                None => alg.time_until_ready(&alg.new_state(), n, now),
            }
        })
    }

    /// True if `key` currently has a slot.
    pub fn contains(&self, key: &K) -> bool {
        let hash = self.hasher.hash_one(key);
        self.read(self.shard(hash)).get(key, hash).is_some()
    }

    /// The number of tracked keys (shard by shard, so only a snapshot under
    /// concurrent use).
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| self.read(&s.0).len).sum()
    }

    /// True if no key is tracked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Calls `visit` with every tracked key and its snapshot at `now`,
    /// holding one shard's lock at a time (`visit` must not call into this
    /// table). Allocates nothing.
    pub fn for_each_snapshot(&self, now: u64, mut visit: impl FnMut(&K, Snapshot)) {
        for shard in &self.shards {
            let shard = self.read(&shard.0);
            for (key, state) in shard.entries() {
                let snapshot = with_algorithm(&self.quota, &self.default, key, |alg| {
                    alg.snapshot(state, now)
                });
                visit(key, snapshot);
            }
        }
    }

    /// The overflow policy's shared state at `now`
    /// ([`OverflowPolicy::SharedBucket`]).
    pub fn shared_snapshot(&self, now: u64) -> Snapshot {
        self.default.snapshot(&self.shared, now)
    }

    /// Evicts every key whose state is idle at `now` (lossless: no future
    /// decision changes), one shard at a time, and returns how many were
    /// evicted.
    pub fn evict_refilled(&self, now: u64) -> usize {
        self.shards
            .iter()
            .map(|s| self.sweep_always(&mut self.write(&s.0), now))
            .sum()
    }
}

impl<K, A: Algorithm, S, Q> ShardedKeyedTable<K, A, S, Q> {
    /// The most keys the table tracks: the requested capacity rounded up to
    /// a multiple of [`shards`](Self::shards).
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.per_shard * self.shards.len()
    }

    /// The number of shards.
    #[must_use]
    pub fn shards(&self) -> usize {
        self.shards.len()
    }

    /// The overflow policy.
    #[must_use]
    pub fn overflow_policy(&self) -> OverflowPolicy {
        self.policy
    }

    /// The hasher (to check seeding, or to hash keys the same way).
    #[must_use]
    pub fn hasher(&self) -> &S {
        &self.hasher
    }

    /// The default algorithm.
    #[must_use]
    pub fn default_algorithm(&self) -> &A {
        &self.default
    }
}
