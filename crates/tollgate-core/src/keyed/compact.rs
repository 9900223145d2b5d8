//! The compact keyed table: 8 bytes per slot, for very many keys (see
//! [`CompactKeyedTable`]).

use core::hash::{BuildHasher, Hash};
use core::marker::PhantomData;
use core::time::Duration;
use std::boxed::Box;
use std::vec::Vec;

use super::builder::{DEFAULT_MAX_KEYS, RuntimeSized};
use super::{KeyedTable, OverflowPolicy, RandomSeed, TableBuilder, overflow, untracked_peek};
use crate::error::ConfigError;
use crate::limiter::{Algorithm, Grant, Inheritance, Limiter};
use crate::refusal::Refusal;
use crate::snapshot::Snapshot;
use crate::sync::{AtomicU64, Mutex, MutexGuard, Ordering};
use crate::tick::{TickGcra, TickState};
use crate::time::Timestamp;

/// Slots per group: 16 slots of 8 bytes, two cache lines.
pub const GROUP_SLOTS: usize = 16;

/// Mutexes serialising inserts, chosen by home group.
pub const INSERT_STRIPES: usize = 64;

/// An empty slot.
const EMPTY: u64 = 0;
/// The tag bit of an entry that spilled into the group after its home.
const SPILLED: u32 = 1;

#[inline(always)]
const fn tag_of(word: u64) -> u32 {
    (word >> 32) as u32
}

#[inline(always)]
const fn tat_of(word: u64) -> u32 {
    word as u32
}

#[inline(always)]
const fn pack(tag: u32, tat: u32) -> u64 {
    (tag as u64) << 32 | tat as u64
}

/// Two cache lines of slots.
#[repr(align(128))]
struct Group([AtomicU64; GROUP_SLOTS]);

impl Group {
    fn new() -> Self {
        Self(core::array::from_fn(|_| AtomicU64::new(EMPTY)))
    }
}

/// The default configuration, readable without a lock while a
/// reconfiguration may rewrite it (a sequence lock on the table's `epoch`).
struct ConfigCell([AtomicU64; 5]);

impl ConfigCell {
    fn new(gcra: TickGcra) -> Self {
        let w = gcra.to_words();
        Self(core::array::from_fn(|i| AtomicU64::new(w[i])))
    }

    #[inline(always)]
    fn load(&self) -> TickGcra {
        TickGcra::from_words(core::array::from_fn(|i| self.0[i].load(Ordering::Acquire)))
    }

    fn store(&self, gcra: TickGcra) {
        for (cell, word) in self.0.iter().zip(gcra.to_words()) {
            cell.store(word, Ordering::Release);
        }
    }
}

/// Where a key's entry is.
#[derive(Clone, Copy)]
struct Home {
    group: usize,
    /// The fingerprint, shifted left one bit (the spilled bit clear).
    tag: u32,
}

/// A fixed-capacity keyed GCRA table of 8-byte slots (feature `std`): a
/// key fingerprint and a 32-bit [`TickGcra`] TAT per slot, for very many
/// keys.
///
/// Each slot is one `AtomicU64`: a 31-bit **fingerprint** of the key's
/// hash, one bit saying whether the entry sits in its home group or spilled
/// into the next one, and the bucket's TAT as a 32-bit tick count of a
/// [`TickGcra`] (see [`crate::tick`](crate::tick) for how a 32-bit TAT stays exact
/// across the wrap). The key itself is not stored: 1,000,000 keys take
/// 12 MB (8 bytes per slot, 1.5 slots per key of capacity).
///
/// Slots come in groups of [`GROUP_SLOTS`] (two cache lines). A key's hash
/// picks its home group and its fingerprint; its entry lives in the home
/// group, or, if that is full, in the next group marked "spilled". A check
/// of a tracked key scans those two groups for its (fingerprint, spilled)
/// tag, steps the GCRA on the slot's TAT and installs the result with one
/// compare-and-swap on the whole word; a refusal writes nothing. A new key
/// is inserted under one of [`INSERT_STRIPES`] mutexes chosen by its home
/// group, after a second scan, so one key never gets two entries.
///
/// # Fingerprint collisions
///
/// Two keys with the same home group and the same 31-bit fingerprint are
/// one entry to the table: they **share one bucket**. Neither ever gets more
/// than its quota (together they get one quota), and a key never moves
/// from one bucket to another: an entry is found only by its exact tag, and
/// at most one entry per tag and home group exists. A new key shares with an
/// existing one with probability `m / 2³¹`, where `m` is the number of
/// tracked keys whose home group is its own: on average `16·α` at load
/// factor `α` (tracked keys / slots). So, per new key:
///
/// | load factor `α` (tracked keys per slot) | keys sharing its home group, on average | chance it shares a bucket |
/// |---|---|---|
/// | 0.25 | 4 | 1.9 × 10⁻⁹ |
/// | 0.50 | 8 | 3.7 × 10⁻⁹ |
/// | 0.667 (the table at `max_keys`) | 10.7 | 5.0 × 10⁻⁹ |
///
/// and over a whole table of `N` tracked keys the expected number of
/// sharing pairs is about `N · 16·α / 2³²` (0.0025 for a million keys at
/// `max_keys`). Spilled entries add nothing: they are tagged, and match
/// only keys of their own home group. The hash is seeded per table
/// ([`RandomSeed`]), so an attacker cannot aim collisions without the seed.
///
/// # Eviction, overflow, time
///
/// A slot whose bucket has been full for at least the heal threshold
/// (default one second, [`TickGcra::with_heal_threshold`]) may be taken by
/// a new key of its group pair: lossless, since no caller whose `now` is
/// stale by less than the threshold can see that bucket as busy. A key
/// whose two groups hold no empty or such slot (or a table at `max_keys`
/// with no such slot) is answered by the [`OverflowPolicy`]: below
/// `max_keys` that happens to few keys (filling a table of 1,000,000 keys
/// to `max_keys`, 867 keys, 0.09 %, found both groups full; the test
/// `keyed_compact_table` pins at most 0.2 %); its `Deny`
/// `retry_after` is an upper bound on the time until a slot of its groups
/// frees up. A bucket left untouched for longer than the tick horizon
/// ([`TickGcra::horizon_ticks`]) may read as busy for a while (it only
/// ever refuses, never admits more); keep the tick rate low enough that
/// the horizon exceeds how long keys sit idle, or call
/// [`KeyedTable::evict_refilled`] periodically.
///
/// # What it does not do
///
/// - Keys are not stored, so [`KeyedTable::for_each_snapshot`] cannot
///   name them: it visits nothing. [`KeyedTable::len`] counts entries
///   (keys sharing a bucket count once).
/// - Every key runs the table's default algorithm: there are no per-key
///   quotas ([`KeyedTable::update_key_quota`] calls `update` and changes
///   nothing else), and the builder's `shards` setting is ignored.
/// - Its algorithm is a [`TickGcra`]: pick a tick rate for which
///   `burst × interval + heal threshold` stays under 2³¹ ticks (1 MHz
///   serves intervals up to about half an hour with the default threshold).
///
/// Checks never wait for inserts or for each other; a
/// [`reconfigure`](KeyedTable::reconfigure) takes every insert mutex and
/// converts each slot, and checks that meet it wait for it to end.
///
/// 12 bytes per key of capacity (1.5 slots of 8 bytes), allocated once.
/// A check of a tracked key takes no lock: one hash, a scan of at most two
/// groups of 16 slots, one 64-bit compare-and-swap when admitted.
///
/// ```
/// use tollgate::keyed::{CompactKeyedTable, KeyedTable};
/// use tollgate::tick::TickGcra;
/// use tollgate::{Limiter, Quota, Timestamp};
///
/// // 10 per second per client, bursts of 10, in ticks of 1 µs
/// let per_client = TickGcra::token_bucket(Quota::per_second(10)?, 1_000_000)?;
/// let table = CompactKeyedTable::<u64>::builder(per_client)
///     .max_keys(1_000_000)
///     .build()?;
/// let now = Timestamp::from_secs(1);
/// assert!(table.try_acquire(&42, now).is_ok());
/// assert_eq!(table.len(), 1);
/// assert!(table.memory_bytes() <= 12 * 1_000_000 + 4096);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct CompactKeyedTable<K: ?Sized, S = RandomSeed> {
    groups: Box<[Group]>,
    /// Odd while a reconfiguration rewrites the configuration and slots.
    epoch: AtomicU64,
    config: ConfigCell,
    /// Entries in use (changed by claims of empty slots and evictions).
    len: AtomicU64,
    max_keys: usize,
    inserts: Box<[Mutex<()>]>,
    /// Serialises whole-table operations (reconfigure, evict_refilled).
    writer: Mutex<()>,
    shared: TickState,
    policy: OverflowPolicy,
    hasher: S,
    key: PhantomData<fn(&K)>,
}

impl<K: ?Sized, S> core::fmt::Debug for CompactKeyedTable<K, S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CompactKeyedTable")
            .field("groups", &self.groups.len())
            .field("max_keys", &self.max_keys)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl<K: ?Sized> RuntimeSized for CompactKeyedTable<K> {}

impl<K: Hash + ?Sized> CompactKeyedTable<K> {
    /// Starts configuring a table of `default` buckets (see
    /// [`TableBuilder`]; `per_key` and `shards` do not apply).
    pub fn builder(default: TickGcra) -> TableBuilder<Self, TickGcra, RandomSeed> {
        TableBuilder::new(default, DEFAULT_MAX_KEYS, RandomSeed::new())
    }
}

impl<K: Hash + ?Sized, S: BuildHasher> TableBuilder<CompactKeyedTable<K>, TickGcra, S, ()> {
    /// Allocates the table: `⌈1.5 · max_keys / 16⌉` groups of 16 slots.
    ///
    /// # Errors
    /// [`ConfigError::ZeroKeys`] for `max_keys = 0`;
    /// [`ConfigError::TooManyKeys`] beyond 2³¹ keys.
    pub fn build(self) -> Result<CompactKeyedTable<K, S>, ConfigError> {
        if self.max_keys == 0 {
            return Err(ConfigError::ZeroKeys);
        }
        const LIMIT: usize = 1 << 31;
        if self.max_keys > LIMIT {
            return Err(ConfigError::TooManyKeys {
                requested: self.max_keys,
                max: LIMIT,
            });
        }
        let slots = self.max_keys + self.max_keys.div_ceil(2);
        // at least two groups, so that a spill goes to another group
        let groups = slots.div_ceil(GROUP_SLOTS).max(2);
        Ok(CompactKeyedTable {
            groups: (0..groups).map(|_| Group::new()).collect::<Vec<_>>().into(),
            epoch: AtomicU64::new(0),
            config: ConfigCell::new(self.default),
            len: AtomicU64::new(0),
            max_keys: self.max_keys,
            inserts: (0..INSERT_STRIPES)
                .map(|_| Mutex::new(()))
                .collect::<Vec<_>>()
                .into(),
            writer: Mutex::new(()),
            shared: TickState::new(),
            policy: self.overflow,
            hasher: self.hasher,
            key: PhantomData,
        })
    }
}

/// What a scan of a key's two groups found.
enum Scan {
    /// The key's entry: group, slot, word.
    Found(usize, usize, u64),
    Absent,
}

/// Takes a guard, ignoring poison (the guarded data is `()`).
fn lock(m: &Mutex<()>) -> MutexGuard<'_, ()> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl<K: ?Sized, S> CompactKeyedTable<K, S> {
    /// Heap bytes the table holds (its slots and mutexes), fixed at
    /// construction.
    #[must_use]
    pub fn memory_bytes(&self) -> usize {
        core::mem::size_of_val(&*self.groups) + core::mem::size_of_val(&*self.inserts)
    }

    /// The number of slots (16 per group).
    #[must_use]
    pub fn slots(&self) -> usize {
        self.groups.len() * GROUP_SLOTS
    }

    /// The hasher.
    #[must_use]
    pub fn hasher(&self) -> &S {
        &self.hasher
    }

    #[inline(always)]
    fn next_group(&self, group: usize) -> usize {
        if group + 1 == self.groups.len() {
            0
        } else {
            group + 1
        }
    }

    /// Scans the key's home group (unspilled tag) and the next one
    /// (spilled tag).
    #[inline(always)]
    fn scan(&self, home: Home) -> Scan {
        for (group, tag) in [
            (home.group, home.tag),
            (self.next_group(home.group), home.tag | SPILLED),
        ] {
            for (i, slot) in self.groups[group].0.iter().enumerate() {
                let word = slot.load(Ordering::Acquire);
                if tag_of(word) == tag {
                    return Scan::Found(group, i, word);
                }
            }
        }
        Scan::Absent
    }

    /// Waits out a reconfiguration in progress (it holds `writer`).
    #[cold]
    fn wait_for_reconfiguration(&self) {
        drop(lock(&self.writer));
    }

    /// The stable (even) epoch and the configuration under it.
    #[inline(always)]
    fn begin(&self) -> (u64, TickGcra) {
        loop {
            let epoch = self.epoch.load(Ordering::Acquire);
            if epoch.is_multiple_of(2) {
                return (epoch, self.config.load());
            }
            self.wait_for_reconfiguration();
        }
    }

    #[inline(always)]
    fn unchanged(&self, epoch: u64) -> bool {
        self.epoch.load(Ordering::Acquire) == epoch
    }
}

impl<K: Hash + ?Sized, S: BuildHasher> CompactKeyedTable<K, S> {
    #[inline(always)]
    fn home(&self, key: &K) -> Home {
        let hash = self.hasher.hash_one(key);
        let group = ((u64::from(hash as u32) * self.groups.len() as u64) >> 32) as usize;
        // 31 bits, never 0 (0 marks an empty slot)
        let fingerprint = ((hash >> 33) as u32).max(1);
        Home {
            group,
            tag: fingerprint << 1,
        }
    }

    /// Steps the entry at `(group, i)`, loaded as `word`, until decided.
    /// `None` if the slot stopped holding the entry or the epoch moved.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn apply(
        &self,
        alg: &TickGcra,
        epoch: u64,
        group: usize,
        i: usize,
        mut word: u64,
        n: u32,
        ns: u64,
        tick: u32,
    ) -> Option<Result<Timestamp, Refusal<'static>>> {
        let tag = tag_of(word);
        loop {
            let (step, store) = alg.step(tat_of(word), n, tick);
            // a refusal is returned, and an admission installed, only if
            // no reconfiguration began since the configuration was read
            if !self.unchanged(epoch) {
                return None;
            }
            if let Some(tat) = store
                && let Err(current) = self.groups[group].0[i].compare_exchange_weak(
                    word,
                    pack(tag, tat),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
            {
                if tag_of(current) != tag {
                    return None;
                }
                word = current;
                continue;
            }
            return Some(alg.decision_of(step, ns));
        }
    }

    /// A key not found by the lock-free scan: insert it under its stripe
    /// (or find it there), else the overflow policy.
    #[inline(never)]
    fn check_new(&self, home: Home, n: u32, now: Timestamp) -> Result<Timestamp, Refusal<'static>> {
        let _stripe = lock(&self.inserts[home.group % INSERT_STRIPES]);
        // A reconfiguration holds every stripe: the epoch is stable here.
        let (epoch, alg) = self.begin();
        let ns = now.as_nanos();
        let tick = alg.tick_of(now);
        loop {
            if let Scan::Found(group, i, word) = self.scan(home) {
                if let Some(decision) = self.apply(&alg, epoch, group, i, word, n, ns, tick) {
                    return decision;
                }
                continue;
            }
            if n == 0 {
                return untracked_peek(&alg, now);
            }
            // Claim: an empty slot while under max_keys, else a slot idle
            // for the heal threshold; home group first.
            let room = (self.len.load(Ordering::Relaxed) as usize) < self.max_keys;
            let mut claim = None;
            let mut soonest = u32::MAX;
            'groups: for (group, tag) in [
                (home.group, home.tag),
                (self.next_group(home.group), home.tag | SPILLED),
            ] {
                for (i, slot) in self.groups[group].0.iter().enumerate() {
                    let word = slot.load(Ordering::Acquire);
                    if word == EMPTY {
                        if room {
                            claim = Some((group, i, word, tag));
                            break 'groups;
                        }
                    } else if alg.idle_for_threshold(tat_of(word), tick) {
                        claim = Some((group, i, word, tag));
                        break 'groups;
                    } else {
                        let lead = alg.lead_at(tat_of(word), tick);
                        soonest = soonest.min(lead.saturating_add(alg.heal_threshold_ticks()));
                    }
                }
            }
            let Some((group, i, old, tag)) = claim else {
                let wait = alg.ticks_to_nanos_from(ns, soonest.max(1));
                return overflow(self.policy, &alg, &alg, &self.shared, n, now, wait);
            };
            // n ≤ capacity: a fresh bucket admits
            let (step, store) = alg.step(0, n, tick);
            let new = pack(tag, store.unwrap_or(0));
            if self.groups[group].0[i]
                .compare_exchange(old, new, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                if old == EMPTY {
                    self.len.fetch_add(1, Ordering::Relaxed);
                }
                return alg.decision_of(step, ns);
            }
        }
    }

    /// The key's stored TAT, if tracked (and the configuration).
    fn tat(&self, key: &K) -> (Option<u32>, TickGcra) {
        let home = self.home(key);
        loop {
            let (epoch, alg) = self.begin();
            let tat = match self.scan(home) {
                Scan::Found(_, _, word) => Some(tat_of(word)),
                Scan::Absent => None,
            };
            if self.unchanged(epoch) {
                return (tat, alg);
            }
        }
    }
}

impl<K: Hash + ?Sized, S: BuildHasher> CompactKeyedTable<K, S> {
    #[inline]
    fn check_until_full(
        &self,
        key: &K,
        n: u32,
        now: Timestamp,
    ) -> Result<Timestamp, Refusal<'static>> {
        let home = self.home(key);
        loop {
            let (epoch, alg) = self.begin();
            if n > alg.capacity() {
                return Err(alg.exceeded(n));
            }
            let Scan::Found(group, i, word) = self.scan(home) else {
                return self.check_new(home, n, now);
            };
            let ns = now.as_nanos();
            if n == 0 {
                let snapshot = alg.snapshot_of(tat_of(word), ns);
                if self.unchanged(epoch) {
                    return Ok(snapshot.full_at(ns));
                }
                continue;
            }
            if let Some(decision) = self.apply(&alg, epoch, group, i, word, n, ns, alg.tick_of(now))
            {
                return decision;
            }
        }
    }
}

impl<K: Hash + ?Sized, S: BuildHasher> Limiter<K> for CompactKeyedTable<K, S> {
    type Permit = Grant;

    super::grant_methods!();

    fn refund(&self, key: &K, n: u32, now: Timestamp) {
        let home = self.home(key);
        // under the stripe: exact against inserts of the same key
        let _stripe = lock(&self.inserts[home.group % INSERT_STRIPES]);
        let (_, alg) = self.begin();
        let tick = alg.tick_of(now);
        loop {
            match self.scan(home) {
                Scan::Found(group, i, word) => {
                    let Some(tat) = alg.refunded(tat_of(word), n, tick) else {
                        return;
                    };
                    if self.groups[group].0[i]
                        .compare_exchange(
                            word,
                            pack(tag_of(word), tat),
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        )
                        .is_ok()
                    {
                        return;
                    }
                }
                Scan::Absent => {
                    if self.policy == OverflowPolicy::SharedBucket {
                        alg.refund(&self.shared, n, now);
                    }
                    return;
                }
            }
        }
    }

    fn snapshot(&self, key: &K, now: Timestamp) -> Snapshot {
        let (tat, alg) = self.tat(key);
        alg.snapshot_of(tat.unwrap_or(0), now.as_nanos())
    }

    fn time_until_ready(
        &self,
        key: &K,
        n: u32,
        now: Timestamp,
    ) -> Result<Duration, Refusal<'static>> {
        let (tat, alg) = self.tat(key);
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
        let (tat, alg) = self.tat(key);
        alg.wait_after_of(tat.unwrap_or(0), ahead, n, now.as_nanos())
            .map(Duration::from_nanos)
    }

    fn capacity(&self, _key: &K) -> u32 {
        self.config.load().capacity()
    }
}

impl<K: Hash + ?Sized, S: BuildHasher> KeyedTable<K> for CompactKeyedTable<K, S> {
    type Algorithm = TickGcra;

    fn contains(&self, key: &K) -> bool {
        self.tat(key).0.is_some()
    }

    fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed) as usize
    }

    fn max_keys(&self) -> usize {
        self.max_keys
    }

    fn overflow_policy(&self) -> OverflowPolicy {
        self.policy
    }

    fn default_algorithm(&self) -> TickGcra {
        self.begin().1
    }

    fn shared_snapshot(&self, now: Timestamp) -> Snapshot {
        self.begin().1.snapshot(&self.shared, now)
    }

    /// Visits nothing: the table stores fingerprints, not keys.
    fn for_each_snapshot(&self, _now: Timestamp, _visit: &mut dyn FnMut(&K, Snapshot)) {}

    /// Empties every slot whose bucket has been full for at least the heal
    /// threshold (lossless for callers stale by less than that).
    fn evict_refilled(&self, now: Timestamp) -> usize {
        let _writer = lock(&self.writer);
        let alg = self.config.load();
        let tick = alg.tick_of(now);
        let mut evicted = 0;
        for group in self.groups.iter() {
            for slot in &group.0 {
                let word = slot.load(Ordering::Acquire);
                if word != EMPTY
                    && alg.idle_for_threshold(tat_of(word), tick)
                    && slot
                        .compare_exchange(word, EMPTY, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
                {
                    self.len.fetch_sub(1, Ordering::Relaxed);
                    evicted += 1;
                }
            }
        }
        evicted
    }

    fn reconfigure(&self, next: TickGcra, how: Inheritance, now: Timestamp) {
        let _writer = lock(&self.writer);
        let _stripes: Vec<_> = self.inserts.iter().map(lock).collect();
        let old = self.config.load();
        self.epoch.fetch_add(1, Ordering::AcqRel); // odd: checks wait
        self.config.store(next);
        for group in self.groups.iter() {
            for slot in &group.0 {
                let word = slot.load(Ordering::Acquire);
                if word == EMPTY {
                    continue;
                }
                // Never the very word it replaces: a check that read the
                // old configuration and this word must fail its swap. A
                // bucket full for good is emptied (lossless); one whose
                // carried TAT equals the old moves a tick later (one tick
                // less room, never more).
                let convert = |word: u64| {
                    let tat = tat_of(word);
                    match old.carried_tat(&next, tat, how, now) {
                        0 => EMPTY,
                        carried if carried == tat => {
                            pack(tag_of(word), carried.wrapping_add(1).max(1))
                        }
                        carried => pack(tag_of(word), carried),
                    }
                };
                // A check that validated the epoch before it turned odd may
                // still swap once: convert what it left.
                let mut current = word;
                let mut target = convert(word);
                while let Err(seen) =
                    slot.compare_exchange(current, target, Ordering::AcqRel, Ordering::Acquire)
                {
                    current = seen;
                    target = convert(seen);
                }
                if target == EMPTY {
                    self.len.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
        old.carry_over(&next, &self.shared, how, now);
        self.epoch.fetch_add(1, Ordering::AcqRel); // even again
    }

    /// Per-key quotas do not apply to this table: calls `update` and
    /// changes nothing else.
    fn update_key_quota(
        &self,
        _key: &K,
        _how: Inheritance,
        _now: Timestamp,
        update: &mut dyn FnMut(),
    ) {
        update();
    }
}
