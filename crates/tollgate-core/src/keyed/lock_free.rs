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

use core::hash::{BuildHasher, Hash};
use core::marker::PhantomData;
use core::time::Duration;
use std::vec::Vec;

use super::builder::{DEFAULT_MAX_KEYS, RuntimeSized};
use super::{
    AtomicSweepHint, KeyQuota, KeyedPath, KeyedTable, OverflowPolicy, RandomSeed, SweepHint,
    TableBuilder, exceeded, reset_after, untracked_peek,
};
use crate::error::ConfigError;
use crate::gcra::Gcra;
use crate::limiter::{Algorithm, Grant, Inheritance, Limiter};
use crate::live::{GcraCell, LiveBucket};
use crate::refusal::Refusal;
use crate::snapshot::Snapshot;
use crate::sync::{AtomicU64, AtomicU128, Ordering};
use crate::sync::{Mutex, MutexGuard};
use crate::time::Timestamp;

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
    /// Odd while a reconfiguration converts this shard (see the module
    /// docs).
    reconfig: AtomicU64,
    /// The default configuration of this shard's keys.
    config: GcraCell,
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
    fn new(capacity: usize, default: Gcra) -> Self {
        // 25 % spare slots: probe runs stay short (at most 80 % full)
        let slots = (capacity + capacity.div_ceil(4)).max(2);
        Self {
            reconfig: AtomicU64::new(0),
            config: GcraCell::new(default),
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
        if i + 1 == self.slots.len() { 0 } else { i + 1 }
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

/// What a lock-free attempt concluded.
enum Attempt {
    Done(Result<Timestamp, Refusal<'static>>),
    /// Take the shard's mutex and decide there.
    Locked,
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

    /// The answer for a key that found the shard full of busy keys.
    fn overflow(
        &self,
        alg: &Gcra,
        n: u32,
        now: Timestamp,
        wait: u64,
    ) -> Result<Timestamp, Refusal<'static>> {
        match self.policy {
            OverflowPolicy::SharedBucket => match self.shared.check_until_full(n, now) {
                Ok(full_at) => Ok(full_at),
                Err(refusal) if !refusal.is_never() => {
                    Err(refusal.on_path(KeyedPath::SharedOverflow))
                }
                // the key's own quota allows `n`, the default does not
                Err(_) => Err(Refusal::from_nanos(wait, self.shared.snapshot(now))
                    .on_path(KeyedPath::SharedOverflow)),
            },
            OverflowPolicy::Deny => Err(Refusal::from_nanos(
                wait,
                Snapshot::from_nanos(alg.capacity(), 0, wait),
            )
            .on_path(KeyedPath::OverflowDenied)),
            OverflowPolicy::Allow => alg
                .step(0, n, now.as_nanos())
                .0
                .map_err(|r| r.on_path(KeyedPath::OverflowAllowed)),
        }
    }

    /// Applies GCRA to `key`'s slot at `i` (loaded as `word`) until it is
    /// decided. `locked`: the caller holds the shard's mutex, so no
    /// reconfiguration can overlap. `None` if the slot stopped holding
    /// `key` (moved, evicted, frozen).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn apply(
        &self,
        shard: &Shard,
        seq: u64,
        key: K,
        mut i_word: (usize, u128),
        n: u32,
        now: u64,
        locked: bool,
    ) -> Option<Attempt> {
        let word_key = key.to_word();
        loop {
            let (i, word) = i_word;
            let Slot::Live(k, tat) = unpack(word) else {
                return None;
            };
            if k != word_key {
                return None;
            }
            // the configuration after the slot (see the module docs), and
            // only if no reconfiguration began since `seq`: a half-written
            // configuration is never stepped with
            let alg = self.algorithm(shard, key);
            let unmoved = || locked || shard.reconfig.load(Ordering::Acquire) == seq;
            if !unmoved() {
                return Some(Attempt::Locked);
            }
            let (decision, store) = alg.step(tat, n, now);
            match store {
                // one more look just before the swap: a conversion that
                // wrote the slot since would make it fail anyway; one that
                // only began is left to run after us
                Some(_) if !unmoved() => return Some(Attempt::Locked),
                Some(new_tat) => {
                    if let Err(current) = shard.slots[i].compare_exchange_weak(
                        word,
                        pack(word_key, new_tat),
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    ) {
                        i_word = (i, current);
                        continue;
                    }
                }
                None => {}
            }
            shard
                .hint
                .lower(now, reset_after(&decision, Timestamp::from_nanos(now)));
            return Some(Attempt::Done(decision));
        }
    }

    /// The lock-free path: `Locked` when it cannot decide alone.
    #[inline]
    fn check_unlocked(&self, shard: &Shard, key: K, hash: u64, n: u32, now: Timestamp) -> Attempt {
        let seq = shard.reconfig.load(Ordering::Acquire);
        if seq % 2 == 1 {
            return Attempt::Locked;
        }
        let now_ns = now.as_nanos();
        match shard.find_unlocked(key.to_word(), hash) {
            Find::Found(i, w) => self
                .apply(shard, seq, key, (i, w), n, now_ns, false)
                .unwrap_or(Attempt::Locked),
            Find::Absent(_) => {
                let alg = self.algorithm(shard, key);
                if shard.reconfig.load(Ordering::Acquire) != seq {
                    return Attempt::Locked;
                }
                if n > alg.capacity() || n == 0 {
                    if shard.reconfig.load(Ordering::Acquire) != seq {
                        return Attempt::Locked;
                    }
                    if n == 0 {
                        return Attempt::Done(untracked_peek(&alg, now));
                    }
                    return Attempt::Done(Err(exceeded(&alg, n)));
                }
                if shard.len() >= shard.capacity && !shard.hint.worth_sweeping(now_ns) {
                    let wait = shard.hint.wait_from(now_ns);
                    return Attempt::Done(self.overflow(&alg, n, now, wait));
                }
                Attempt::Locked
            }
            Find::Busy => Attempt::Locked,
        }
    }

    /// Under the shard's mutex: a new key, or a writer was moving or
    /// converting entries.
    fn check_locked(
        &self,
        shard: &Shard,
        key: K,
        hash: u64,
        n: u32,
        now: Timestamp,
    ) -> Result<Timestamp, Refusal<'static>> {
        let now_ns = now.as_nanos();
        let word = key.to_word();
        let _writer = shard.lock();
        let alg = self.algorithm(shard, key);
        if n > alg.capacity() {
            return Err(exceeded(&alg, n));
        }
        let seq = shard.reconfig.load(Ordering::Acquire);
        // Under the mutex nothing moves or leaves, so one pass decides; the
        // bound only guards against looping on a broken invariant.
        for _ in 0..4 {
            match shard.find(word, hash) {
                Find::Found(i, w) => {
                    if let Some(Attempt::Done(result)) =
                        self.apply(shard, seq, key, (i, w), n, now_ns, true)
                    {
                        return result;
                    }
                    // only writers move or evict, and we are the writer
                }
                Find::Absent(_) if n == 0 => return untracked_peek(&alg, now),
                Find::Absent(mut free) => {
                    if shard.len() >= shard.capacity {
                        if !shard.hint.worth_sweeping(now_ns) || self.sweep(shard, now_ns) == 0 {
                            let wait = shard.hint.wait_from(now_ns);
                            return self.overflow(&alg, n, now, wait);
                        }
                        // the sweep moved entries: find the free slot again
                        match shard.find(word, hash) {
                            Find::Absent(i) => free = i,
                            _ => continue,
                        }
                    }
                    let at = shard.hint.insert_time(now_ns);
                    let (decision, store) = alg.step(0, n, at);
                    if let Some(tat) = store {
                        shard.slots[free].store(pack(word, tat), Ordering::Release);
                        shard.len.fetch_add(1, Ordering::Relaxed);
                    }
                    shard
                        .hint
                        .lower(at, reset_after(&decision, Timestamp::from_nanos(at)));
                    return decision;
                }
                // frozen slots exist only inside a writer, and we are it
                Find::Busy => break,
            }
        }
        self.overflow(&alg, n, now, 1)
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
        let mut hint = shard.hint.resume();
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
        // The per-key quota (the caller's code) runs for every live key and
        // may panic after some keys were evicted: the guard closes the
        // holes, fixes `len` and makes `sweeps` even again however the loop
        // ends, so no key behind a hole is lost.
        let mut end = SweepEnd {
            table: self,
            shard,
            start,
            evicted: 0,
            hint,
            finished: false,
        };
        for i in 0..shard.slots.len() {
            let mut word = shard.load(i);
            while let Slot::Live(key, tat) = unpack(word) {
                // GCRA: idle (indistinguishable from fresh) iff TAT ≤ now,
                // in the units of the key's configuration
                let alg = self.algorithm(shard, K::from_word(key));
                if !alg.is_idle_at(tat, now) {
                    end.hint
                        .lower(now, alg.snapshot_of(tat, now).reset_after_nanos());
                    break;
                }
                // fails if a reader used the key since the load
                match shard.slots[i].compare_exchange(word, 0, Ordering::AcqRel, Ordering::Acquire)
                {
                    Ok(_) => {
                        end.evicted += 1;
                        break;
                    }
                    Err(current) => word = current,
                }
            }
        }
        end.finished = true;
        end.evicted
        // `end` drops here: holes closed, hint published, `sweeps` even
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
            let word = freeze(shard, i);
            shard.slots[j].store(word, Ordering::Release);
            shard.slots[i].store(0, Ordering::Release);
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

    /// Converts the slots whose key `select` picks (caller holds the
    /// shard's mutex): with the shard's `reconfig` counter odd, freezes
    /// them, runs `change` (the configuration or per-key quota changes),
    /// then stores each slot's carried-over TAT, `carry(key, tat)`.
    fn convert(
        &self,
        shard: &Shard,
        select: impl Fn(K) -> bool,
        change: impl FnOnce(),
        carry: impl Fn(K, u64) -> u64,
    ) {
        shard.reconfig.fetch_add(1, Ordering::AcqRel); // odd
        // `select`, `change` and `carry` may run the caller's code (per-key
        // quotas, the update): if one panics, the guard unfreezes the slots
        // not yet converted (with the TAT they had) and makes the counter
        // even again, so no key stays frozen out of the lock-free path.
        let mut end = ConvertEnd {
            shard,
            frozen: Vec::new(),
            stored: 0,
        };
        for i in 0..shard.slots.len() {
            if let Slot::Live(key, _) = unpack(shard.load(i))
                && select(K::from_word(key))
            {
                // the TAT as it is when frozen (readers may move it
                // until then)
                let word = freeze(shard, i);
                if let Slot::Live(key, tat) = unpack(word) {
                    end.frozen.push((i, key, tat));
                }
            }
        }
        change();
        while let Some(&(i, key, tat)) = end.frozen.get(end.stored) {
            let carried = carry(K::from_word(key), tat);
            shard.slots[i].store(pack(key, carried), Ordering::Release);
            end.stored += 1;
        }
        // `end` drops here: the counter is even again
    }
}

/// The end of a sweep, run when it returns or unwinds (a panicking per-key
/// quota): frees the evicted keys' count, closes the holes they left, and
/// makes the shard's `sweeps` counter even again. After a panic the hint
/// learnt so far is incomplete, so it is published reset ("worth sweeping
/// now"), keeping only the sweep's time.
struct SweepEnd<'a, K: WordKey, S: BuildHasher, Q: KeyQuota<K, Gcra>> {
    table: &'a LockFreeGcraTable<K, S, Q>,
    shard: &'a Shard,
    /// A slot free before any eviction (see `close_holes`).
    start: usize,
    evicted: usize,
    hint: SweepHint,
    /// The scan completed: the hint covers every key.
    finished: bool,
}

impl<K: WordKey, S: BuildHasher, Q: KeyQuota<K, Gcra>> Drop for SweepEnd<'_, K, S, Q> {
    fn drop(&mut self) {
        let shard = self.shard;
        if self.evicted > 0 {
            shard.len.fetch_sub(self.evicted as u64, Ordering::Relaxed);
            // runs no per-key quota: only the table's hasher, which
            // already hashed every key here when it was inserted
            self.table.close_holes(shard, self.start);
        }
        if !self.finished {
            self.hint.reset();
        }
        shard.hint.publish(&self.hint);
        shard.sweeps.fetch_add(1, Ordering::Release);
    }
}

/// The end of a conversion, run when it returns or unwinds: slots frozen
/// but not yet stored get the word they had back (after a panic; the
/// shard's hint is reset too, the configuration may have changed), then
/// the shard's `reconfig` counter is made even.
struct ConvertEnd<'a> {
    shard: &'a Shard,
    /// The frozen slots: index, key word, TAT when frozen.
    frozen: Vec<(usize, u64, u64)>,
    /// How many of `frozen` hold their converted TAT.
    stored: usize,
}

impl Drop for ConvertEnd<'_> {
    fn drop(&mut self) {
        let rest = self.frozen.get(self.stored..).unwrap_or_default();
        for &(i, key, tat) in rest {
            self.shard.slots[i].store(pack(key, tat), Ordering::Release);
        }
        if std::thread::panicking() {
            self.shard.hint.reset();
        }
        self.shard.reconfig.fetch_add(1, Ordering::Release); // even
    }
}

/// Freezes slot `i` (readers then fall back to the mutex) and returns the
/// word it held.
fn freeze(shard: &Shard, i: usize) -> u128 {
    let mut word = shard.load(i);
    loop {
        let frozen = (word & !u128::from(u64::MAX)) | u128::from(FROZEN);
        match shard.slots[i].compare_exchange_weak(
            word,
            frozen,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => return word,
            Err(current) => word = current,
        }
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

impl<K: WordKey, S: BuildHasher, Q: KeyQuota<K, Gcra>> LockFreeGcraTable<K, S, Q> {
    #[inline]
    fn check_until_full(
        &self,
        key: &K,
        n: u32,
        now: Timestamp,
    ) -> Result<Timestamp, Refusal<'static>> {
        let key = *key;
        let hash = self.hasher.hash_one(key);
        let shard = self.shard(hash);
        match self.check_unlocked(shard, key, hash, n, now) {
            Attempt::Done(result) => result,
            Attempt::Locked => self.check_locked(shard, key, hash, n, now),
        }
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
