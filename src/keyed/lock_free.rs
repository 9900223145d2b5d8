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

use super::{
    overflow, untracked_peek, AtomicSweepHint, KeyQuota, KeyedDecision, KeyedPath, KeyedTableError,
    OverflowPolicy, RandomSeed, SameQuota, SweepHint,
};
use crate::decision::{CapacityExceeded, Snapshot};
use crate::gcra::{Gcra, GcraState};
use crate::limiter::Algorithm;
use crate::sync::{AtomicU128, AtomicU64, Ordering};
use crate::sync::{Mutex, MutexGuard};
use core::hash::{BuildHasher, Hash};
use core::marker::PhantomData;
use std::vec::Vec;

/// A key that fits in 64 bits, so that it can share one atomic word with
/// its bucket: integers, IPv4 addresses, ids. Implement it for your own
/// id types (the two functions must be inverse of each other).
pub trait WordKey: Copy + Eq + Hash {
    /// The key as a word.
    fn to_word(self) -> u64;
    /// The key back from [`to_word`](Self::to_word)'s word.
    fn from_word(word: u64) -> Self;
}

macro_rules! word_key_int {
    ($($t:ty => $u:ty),*) => {$(
        impl WordKey for $t {
            #[inline]
            fn to_word(self) -> u64 {
                self as $u as u64
            }
            #[inline]
            fn from_word(word: u64) -> Self {
                word as $u as $t
            }
        }
    )*};
}
word_key_int!(u8 => u8, u16 => u16, u32 => u32, u64 => u64, usize => usize,
    i8 => u8, i16 => u16, i32 => u32, i64 => u64, isize => usize);

impl WordKey for core::net::Ipv4Addr {
    #[inline]
    fn to_word(self) -> u64 {
        u64::from(u32::from(self))
    }
    #[inline]
    fn from_word(word: u64) -> Self {
        Self::from(word as u32)
    }
}

/// Stored low word: 0 is an empty slot, `FROZEN` a slot being moved,
/// anything else `TAT + 1`.
const EMPTY: u64 = 0;
const FROZEN: u64 = u64::MAX;
const MAX_TAT: u64 = u64::MAX - 2;
/// Bounds the cost of one sweep.
const MAX_PER_SHARD: usize = 4095;
const MAX_SHARDS: usize = 1 << 16;

#[inline]
fn pack(key: u64, tat: u64) -> u128 {
    (u128::from(key) << 64) | u128::from(tat.min(MAX_TAT) + 1)
}

#[derive(Clone, Copy)]
enum Slot {
    Empty,
    Frozen,
    Live(u64, u64),
}

#[inline]
fn unpack(word: u128) -> Slot {
    let key = (word >> 64) as u64;
    match word as u64 {
        EMPTY => Slot::Empty,
        FROZEN => Slot::Frozen,
        stored => Slot::Live(key, stored - 1),
    }
}

enum Find {
    Found(usize, u128),
    Absent(usize),
    /// Met a frozen slot: a writer is moving entries.
    Busy,
}

#[repr(align(128))]
struct Shard {
    slots: Vec<AtomicU128>,
    writer: Mutex<()>,
    /// Tracked keys; changed only under `writer`.
    len: AtomicU64,
    capacity: usize,
    hint: AtomicSweepHint,
    /// Odd while a sweep is evicting or moving entries (a sequence lock for
    /// lock-free "absent" answers: a probe can stop at a hole that a move
    /// is about to fill).
    sweeps: AtomicU64,
}

impl Shard {
    fn new(capacity: usize) -> Self {
        // 25 % spare slots: probe runs stay short (at most 80 % full)
        let slots = (capacity + capacity.div_ceil(4)).max(2);
        Self {
            slots: (0..slots).map(|_| AtomicU128::new(0)).collect(),
            writer: Mutex::new(()),
            len: AtomicU64::new(0),
            capacity,
            hint: AtomicSweepHint::new(),
            sweeps: AtomicU64::new(0),
        }
    }

    #[inline]
    fn home(&self, hash: u64) -> usize {
        ((u64::from(hash as u32) * self.slots.len() as u64) >> 32) as usize
    }

    #[inline]
    fn next(&self, i: usize) -> usize {
        if i + 1 == self.slots.len() {
            0
        } else {
            i + 1
        }
    }

    #[inline]
    fn load(&self, i: usize) -> u128 {
        self.slots[i].load(Ordering::Acquire)
    }

    #[inline]
    fn find(&self, key: u64, hash: u64) -> Find {
        let mut i = self.home(hash);
        for _ in 0..self.slots.len() {
            let word = self.load(i);
            match unpack(word) {
                Slot::Empty => return Find::Absent(i),
                Slot::Frozen => return Find::Busy,
                Slot::Live(k, _) if k == key => return Find::Found(i, word),
                Slot::Live(..) => i = self.next(i),
            }
        }
        Find::Busy
    }

    /// [`find`](Self::find) without the mutex: an "absent" seen while a
    /// sweep ran may be a key in the middle of a move, so it is reported as
    /// busy (the caller then takes the mutex).
    #[inline]
    fn find_unlocked(&self, key: u64, hash: u64) -> Find {
        let seq = self.sweeps.load(Ordering::Acquire);
        match self.find(key, hash) {
            // slot loads are Acquire: the second load is not moved before them
            Find::Absent(_) if seq % 2 == 1 || self.sweeps.load(Ordering::Acquire) != seq => {
                Find::Busy
            }
            found => found,
        }
    }

    #[inline]
    fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed) as usize
    }

    fn lock(&self) -> MutexGuard<'_, ()> {
        // the guarded data is `()`: a panic elsewhere cannot leave it broken
        self.writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A keyed GCRA limiter for servers (feature `std`) whose checks take no
/// lock: each slot is one 128-bit atomic holding a word-sized key
/// ([`WordKey`]: integers, `Ipv4Addr`, your ids) and its bucket's TAT.
///
/// The same behaviour as [`ShardedKeyedTable`](super::ShardedKeyedTable)
/// (lossless eviction, overflow policies, per-key quotas, introspection),
/// for [`Gcra`] buckets only. A check of a tracked key is one hash, a probe
/// and one 128-bit compare-and-swap (none when refused); inserting a new key
/// or sweeping takes the shard's mutex, which readers never wait for unless
/// they meet an entry being moved. Capacity is fixed at construction; 16
/// bytes per slot with 25 % spare slots, 20 bytes per key of capacity.
///
/// On targets without a native 128-bit compare-and-swap, `portable-atomic`
/// emulates it with locks: use [`ShardedKeyedTable`](super::ShardedKeyedTable)
/// there.
///
/// ```
/// use tollgate::keyed::{KeyedPath, LockFreeGcraTable};
/// use tollgate::{Gcra, Quota};
///
/// let table = LockFreeGcraTable::<u32>::new(10_000, Gcra::token_bucket(Quota::per_second(5)?))?;
/// let now = 0;
/// assert!(table.check(7, now).is_allowed());
/// assert_eq!(table.check(7, now).path(), KeyedPath::Own);
/// assert_eq!(table.len(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct LockFreeGcraTable<K, S = RandomSeed, Q = SameQuota> {
    shards: Vec<Shard>,
    shard_shift: u32,
    per_shard: usize,
    hasher: S,
    default: Gcra,
    shared: GcraState,
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

impl<K: WordKey> LockFreeGcraTable<K> {
    /// A table of `capacity` keys running `default`, with the shared
    /// overflow bucket, a random seed, and shards of at most 4,095 keys
    /// (four per CPU when the capacity allows shards of 512 or more).
    ///
    /// # Errors
    /// [`KeyedTableError`] for a zero or too large capacity.
    pub fn new(capacity: usize, default: Gcra) -> Result<Self, KeyedTableError> {
        Self::with_options(
            capacity,
            default,
            OverflowPolicy::SharedBucket,
            RandomSeed::new(),
            SameQuota,
            None,
        )
    }
}

impl<K: WordKey, S: BuildHasher, Q: KeyQuota<K, Gcra>> LockFreeGcraTable<K, S, Q> {
    /// A table with every option: `shards` is a power of two (`None`: the
    /// default), `quota` gives each key its bucket.
    ///
    /// # Errors
    /// [`KeyedTableError`] for a zero capacity, an invalid shard count, or a
    /// capacity above `shards × 4,095`.
    pub fn with_options(
        capacity: usize,
        default: Gcra,
        policy: OverflowPolicy,
        hasher: S,
        quota: Q,
        shards: Option<usize>,
    ) -> Result<Self, KeyedTableError> {
        if capacity == 0 {
            return Err(KeyedTableError::ZeroCapacity);
        }
        let shards = match shards {
            Some(s) if s == 0 || !s.is_power_of_two() || s > MAX_SHARDS => {
                return Err(KeyedTableError::InvalidShards {
                    requested: s,
                    max: MAX_SHARDS,
                })
            }
            Some(s) => s,
            None => super::sharded::default_shards(capacity),
        };
        let max = shards.saturating_mul(MAX_PER_SHARD);
        if capacity > max {
            return Err(KeyedTableError::CapacityTooLarge {
                requested: capacity,
                max,
            });
        }
        let per_shard = capacity.div_ceil(shards);
        Ok(Self {
            shards: (0..shards).map(|_| Shard::new(per_shard)).collect(),
            shard_shift: 64 - shards.trailing_zeros(),
            per_shard,
            hasher,
            default,
            shared: GcraState::new(),
            policy,
            quota,
            key: PhantomData,
        })
    }

    #[inline]
    fn shard(&self, hash: u64) -> &Shard {
        let i = hash.checked_shr(self.shard_shift).unwrap_or(0) as usize;
        &self.shards[i & (self.shards.len() - 1)]
    }

    #[inline]
    fn algorithm(&self, key: K) -> Gcra {
        self.quota.algorithm_for(&key).unwrap_or(self.default)
    }

    /// Tries to take one permit for `key` at `now` (nanoseconds).
    #[inline]
    pub fn check(&self, key: K, now: u64) -> KeyedDecision {
        match self.check_n(key, 1, now) {
            Ok(decision) => decision,
            Err(_) => super::refusal(now),
        }
    }

    /// Applies `step` to the slot at `i` holding `word` until the swap
    /// succeeds; `None` if the slot stopped holding `key` (moved, evicted).
    #[inline]
    fn apply(
        &self,
        shard: &Shard,
        alg: &Gcra,
        key: u64,
        mut i_word: (usize, u128),
        n: u32,
        now: u64,
    ) -> Option<Result<KeyedDecision, CapacityExceeded>> {
        loop {
            let (i, word) = i_word;
            let Slot::Live(k, tat) = unpack(word) else {
                return None;
            };
            if k != key {
                return None;
            }
            let (decision, store) = match alg.step(tat, n, now) {
                Ok(result) => result,
                Err(e) => return Some(Err(e)),
            };
            if let Some(new_tat) = store {
                if let Err(current) = shard.slots[i].compare_exchange_weak(
                    word,
                    pack(key, new_tat),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    i_word = (i, current);
                    continue;
                }
            }
            shard
                .hint
                .lower(now, decision.snapshot().reset_after_nanos());
            return Some(Ok(KeyedDecision::new(decision, KeyedPath::Own)));
        }
    }

    /// Tries to take `n` permits for `key` at `now`; `n = 0` is a peek that
    /// changes nothing (and never inserts the key).
    ///
    /// # Errors
    /// [`CapacityExceeded`] if `n` is more than the key's bucket can ever
    /// grant.
    #[inline]
    pub fn check_n(&self, key: K, n: u32, now: u64) -> Result<KeyedDecision, CapacityExceeded> {
        let alg = self.algorithm(key);
        if n > alg.capacity() {
            return Err(CapacityExceeded {
                requested: n,
                capacity: alg.capacity(),
            });
        }
        let hash = self.hasher.hash_one(key);
        let word = key.to_word();
        let shard = self.shard(hash);
        // lock-free: the key is tracked and nobody is moving it
        match shard.find_unlocked(word, hash) {
            Find::Found(i, w) => {
                if let Some(result) = self.apply(shard, &alg, word, (i, w), n, now) {
                    return result;
                }
            }
            Find::Absent(_) => {
                if n == 0 {
                    return Ok(untracked_peek(&alg, now));
                }
                if shard.len() >= shard.capacity && !shard.hint.worth_sweeping(now) {
                    let wait = shard.hint.wait_from(now);
                    return overflow(self.policy, &alg, &self.default, &self.shared, n, now, wait);
                }
            }
            Find::Busy => {}
        }
        // a new key, or a writer was moving entries: under the mutex
        let _writer = shard.lock();
        // Under the mutex nothing moves or leaves, so one pass decides; the
        // bound only guards against looping on a broken invariant.
        for _ in 0..4 {
            match shard.find(word, hash) {
                Find::Found(i, w) => {
                    if let Some(result) = self.apply(shard, &alg, word, (i, w), n, now) {
                        return result;
                    }
                    // only writers move or evict, and we are the writer
                }
                Find::Absent(_) if n == 0 => return Ok(untracked_peek(&alg, now)),
                Find::Absent(mut free) => {
                    if shard.len() >= shard.capacity {
                        if !shard.hint.worth_sweeping(now) || self.sweep(shard, now) == 0 {
                            let wait = shard.hint.wait_from(now);
                            return overflow(
                                self.policy,
                                &alg,
                                &self.default,
                                &self.shared,
                                n,
                                now,
                                wait,
                            );
                        }
                        // the sweep moved entries: find the free slot again
                        match shard.find(word, hash) {
                            Find::Absent(i) => free = i,
                            _ => continue,
                        }
                    }
                    let at = shard.hint.insert_time(now);
                    let (decision, store) = alg.step(0, n, at)?;
                    if let Some(tat) = store {
                        shard.slots[free].store(pack(word, tat), Ordering::Release);
                        shard.len.fetch_add(1, Ordering::Relaxed);
                    }
                    shard
                        .hint
                        .lower(at, decision.snapshot().reset_after_nanos());
                    return Ok(KeyedDecision::new(decision, KeyedPath::Own));
                }
                // frozen slots exist only inside a writer, and we are it
                Find::Busy => break,
            }
        }
        overflow(self.policy, &alg, &self.default, &self.shared, n, now, 1)
    }

    /// Evicts the shard's idle keys and closes the holes (caller holds the
    /// shard's mutex). Returns how many were evicted.
    fn sweep(&self, shard: &Shard, now: u64) -> usize {
        // The new hint is built here and published when the sweep ends:
        // lock-free readers consult the shard's hint at any time, and one
        // that met a half-built hint ("nothing idle before u64::MAX")
        // refused with a retry_after of centuries. Checks racing the sweep
        // only lower the hint to a TAT the sweep sees too, so publishing
        // over them loses nothing.
        let mut hint = SweepHint::new();
        hint.start(now);
        // A slot empty before any eviction: no probe run crosses it (the
        // spare slots guarantee one exists).
        let Some(start) =
            (0..shard.slots.len()).find(|&i| matches!(unpack(shard.load(i)), Slot::Empty))
        else {
            shard.hint.publish(&hint);
            return 0;
        };
        // odd: lock-free "absent" answers are not trusted until it is even
        shard.sweeps.fetch_add(1, Ordering::AcqRel);
        let mut evicted = 0;
        for i in 0..shard.slots.len() {
            let mut word = shard.load(i);
            while let Slot::Live(key, tat) = unpack(word) {
                let alg = self.algorithm(K::from_word(key));
                // GCRA: idle (indistinguishable from fresh) iff TAT ≤ now
                if tat > now {
                    hint.lower(now, alg.snapshot_of(tat, now).reset_after_nanos());
                    break;
                }
                // fails if a reader used the key since the load
                match shard.slots[i].compare_exchange(word, 0, Ordering::AcqRel, Ordering::Acquire)
                {
                    Ok(_) => {
                        evicted += 1;
                        break;
                    }
                    Err(current) => word = current,
                }
            }
        }
        if evicted > 0 {
            shard.len.fetch_sub(evicted as u64, Ordering::Relaxed);
            self.close_holes(shard, start);
        }
        shard.hint.publish(&hint);
        shard.sweeps.fetch_add(1, Ordering::Release);
        evicted
    }

    /// Moves every entry to the first free slot of its probe run, scanning
    /// once from `start`, a slot that was free before the sweep: no run
    /// crosses it, so an entry processed earlier never gets a hole behind
    /// it from a later move.
    fn close_holes(&self, shard: &Shard, start: usize) {
        let len = shard.slots.len();
        let mut i = start;
        for _ in 0..len {
            i = shard.next(i);
            let Slot::Live(key, _) = unpack(shard.load(i)) else {
                continue;
            };
            let home = shard.home(self.hasher.hash_one(K::from_word(key)));
            // the first empty slot from home, if it comes before i
            let mut j = home;
            while j != i && !matches!(unpack(shard.load(j)), Slot::Empty) {
                j = shard.next(j);
            }
            if j == i {
                continue;
            }
            // freeze i (readers fall back to the mutex), copy, free i
            let mut word = shard.load(i);
            loop {
                let frozen = (word & !u128::from(u64::MAX)) | u128::from(FROZEN);
                match shard.slots[i].compare_exchange_weak(
                    word,
                    frozen,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => break,
                    Err(current) => word = current,
                }
            }
            shard.slots[j].store(word, Ordering::Release);
            shard.slots[i].store(0, Ordering::Release);
        }
    }

    /// Gives back `n` permits of an earlier admission for `key`. If the key
    /// is not tracked, its admission came from the overflow path: with
    /// [`OverflowPolicy::SharedBucket`] the shared bucket gets them back.
    pub fn refund(&self, key: K, n: u32, now: u64) {
        let alg = self.algorithm(key);
        let hash = self.hasher.hash_one(key);
        let word = key.to_word();
        let shard = self.shard(hash);
        let _writer = shard.lock(); // rare: keep it simple and exact
        if let Find::Found(i, mut w) = shard.find(word, hash) {
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
            self.default.refund(&self.shared, n, now);
        }
    }

    /// The stored TAT of `key`, if tracked.
    fn tat(&self, key: K) -> Option<u64> {
        let hash = self.hasher.hash_one(key);
        let word = key.to_word();
        let shard = self.shard(hash);
        let found = match shard.find_unlocked(word, hash) {
            Find::Busy => {
                let _writer = shard.lock();
                shard.find(word, hash)
            }
            found => found,
        };
        match found {
            Find::Found(_, w) => match unpack(w) {
                Slot::Live(_, tat) => Some(tat),
                _ => None,
            },
            _ => None,
        }
    }

    /// `key`'s bucket at `now` (a fresh bucket's if the key is not tracked).
    pub fn snapshot(&self, key: K, now: u64) -> Snapshot {
        self.algorithm(key)
            .snapshot_of(self.tat(key).unwrap_or(0), now)
    }

    /// Nanoseconds until `n` permits for `key` would be admitted by its own
    /// bucket (0 for an untracked key).
    ///
    /// # Errors
    /// [`CapacityExceeded`] if `n` can never be granted to `key`.
    pub fn time_until_ready(&self, key: K, n: u32, now: u64) -> Result<u64, CapacityExceeded> {
        self.algorithm(key)
            .wait_of(self.tat(key).unwrap_or(0), n, now)
    }

    /// True if `key` currently has a slot.
    pub fn contains(&self, key: K) -> bool {
        self.tat(key).is_some()
    }

    /// The number of tracked keys.
    pub fn len(&self) -> usize {
        self.shards.iter().map(Shard::len).sum()
    }

    /// True if no key is tracked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Calls `visit` with every tracked key and its snapshot at `now`
    /// (allocates nothing; takes each shard's mutex in turn, so no entry is
    /// seen twice or missed while moving).
    pub fn for_each_snapshot(&self, now: u64, mut visit: impl FnMut(K, Snapshot)) {
        for shard in &self.shards {
            let _writer = shard.lock();
            for slot in &shard.slots {
                if let Slot::Live(key, tat) = unpack(slot.load(Ordering::Acquire)) {
                    let key = K::from_word(key);
                    visit(key, self.algorithm(key).snapshot_of(tat, now));
                }
            }
        }
    }

    /// The shared overflow bucket at `now` ([`OverflowPolicy::SharedBucket`]).
    pub fn shared_snapshot(&self, now: u64) -> Snapshot {
        self.default.snapshot(&self.shared, now)
    }

    /// Evicts every key whose bucket has refilled at `now` (lossless) and
    /// returns how many were evicted.
    pub fn evict_refilled(&self, now: u64) -> usize {
        self.shards
            .iter()
            .map(|shard| {
                let _writer = shard.lock();
                self.sweep(shard, now)
            })
            .sum()
    }
}

impl<K, S, Q> LockFreeGcraTable<K, S, Q> {
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

    /// The hasher.
    #[must_use]
    pub fn hasher(&self) -> &S {
        &self.hasher
    }
}
