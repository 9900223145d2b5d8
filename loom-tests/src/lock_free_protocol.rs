//! A protocol model of the lock-free keyed table's slots (only under
//! `cfg(loom)`), with the memory orderings loom can check.
//!
//! `LockFreeGcraTable` keeps each key and its TAT in one 128-bit atomic
//! word. Loom has no 128-bit atomic, so under loom the table's slots are a
//! shim (`tollgate_core::sync::AtomicU128`, a loom mutex per slot) that makes
//! every slot operation one sequentially consistent step: the models of the
//! real table (`keyed_*.rs`, `live_reconfiguration_is_atomic.rs`) check
//! its algorithm, but not the `Acquire`/`Release` orderings its sequence
//! counters rely on.
//!
//! This module re-implements the table's reader/writer protocol line for
//! line (`find`, `find_unlocked`, `apply`, the locked path with its
//! insert, `sweep` with `close_holes` and `freeze`, `tat`, and the
//! reconfiguration's `convert`; see `crates/tollgate-core/src/keyed/lock_free.rs` and its `lock_free/` files) on one shard
//! whose slot word is a loom `AtomicU64`: the 128-bit word's two 64-bit
//! halves (key, stored TAT) become two 32-bit halves of one 64-bit word.
//! Each slot operation stays one atomic step, as `portable-atomic` gives
//! the table, and now carries the table's real orderings, which loom
//! checks. Every ordering is a field of [`Orders`]: [`Orders::TABLE`] is
//! the table's choice, and a model can weaken one site to show that it is
//! needed.
//!
//! The GCRA is reduced to what the protocol needs: a token bucket with
//! interval `T` and tolerance `τ` held in two configuration words (the
//! table's `GcraCell` holds six), a check of one permit, "idle" as
//! `TAT ≤ now`, and a reconfiguration that carries each frozen TAT through
//! a given function.
//!
//! Keep it in step with `crates/tollgate-core/src/keyed/lock_free.rs` and its `lock_free/` files: a change of the table's
//! protocol or orderings must be made here too (the function names match).

use loom::sync::Mutex;
use loom::sync::atomic::{AtomicU64, Ordering};

/// The memory ordering of every atomic access site of the protocol.
#[derive(Debug, Clone, Copy)]
pub struct Orders {
    /// `Shard::load` (every slot load of `find`, `sweep`, `close_holes`,
    /// `freeze`).
    pub slot_load: Ordering,
    /// Slot stores: an insert, a move's copy and clear, a carried TAT.
    pub slot_store: Ordering,
    /// Slot compare-and-swaps (check, eviction, freeze): success.
    pub slot_cas: Ordering,
    /// Slot compare-and-swaps: failure.
    pub slot_cas_failure: Ordering,
    /// Both loads of `sweeps` in `find_unlocked`.
    pub sweeps_load: Ordering,
    /// `sweeps` made odd when a sweep begins.
    pub sweeps_begin: Ordering,
    /// `sweeps` made even when it ends.
    pub sweeps_end: Ordering,
    /// Loads of `reconfig` (a check's first look and its validations).
    pub reconfig_load: Ordering,
    /// `reconfig` made odd when a conversion begins.
    pub reconfig_begin: Ordering,
    /// `reconfig` made even when it ends.
    pub reconfig_end: Ordering,
    /// Configuration word loads (`GcraCell::load`).
    pub config_load: Ordering,
    /// Configuration word stores (`GcraCell::store`).
    pub config_store: Ordering,
    /// `close_holes` freezes an entry before moving it (the table does).
    pub freeze_moves: bool,
}

impl Orders {
    /// The orderings of `crates/tollgate-core/src/keyed/lock_free.rs` and its `lock_free/` files (and `GcraCell`).
    pub const TABLE: Self = Self {
        slot_load: Ordering::Acquire,
        slot_store: Ordering::Release,
        slot_cas: Ordering::AcqRel,
        slot_cas_failure: Ordering::Acquire,
        sweeps_load: Ordering::Acquire,
        sweeps_begin: Ordering::AcqRel,
        sweeps_end: Ordering::Release,
        reconfig_load: Ordering::Acquire,
        reconfig_begin: Ordering::AcqRel,
        reconfig_end: Ordering::Release,
        config_load: Ordering::Acquire,
        config_store: Ordering::Release,
        freeze_moves: true,
    };
}

/// Stored low half: 0 is an empty slot, `FROZEN` a slot being moved or
/// converted, anything else `TAT + 1` (as in the table).
const EMPTY: u64 = 0;
const FROZEN: u64 = u32::MAX as u64;
const MAX_TAT: u64 = FROZEN - 2;
const LOW: u64 = u32::MAX as u64;

fn pack(key: u64, tat: u64) -> u64 {
    (key << 32) | (tat.min(MAX_TAT) + 1)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Empty,
    Frozen,
    Live(u64, u64),
}

fn unpack(word: u64) -> Slot {
    match word & LOW {
        EMPTY => Slot::Empty,
        FROZEN => Slot::Frozen,
        stored => Slot::Live(word >> 32, stored - 1),
    }
}

enum Find {
    Found(usize, u64),
    Absent(usize),
    Busy,
}

/// The bucket configuration: interval and tolerance (the table's
/// `GcraCell`, two words here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Emission interval `T`.
    pub interval: u64,
    /// Tolerance `τ`: a check at `now` is admitted iff `TAT ≤ now + τ`.
    pub tolerance: u64,
}

impl Config {
    /// One permit at `now` on a bucket at `tat`: the decision and the TAT to
    /// store (none for a refusal, which writes nothing).
    #[must_use]
    pub fn step(&self, tat: u64, now: u64) -> (bool, Option<u64>) {
        if tat <= now + self.tolerance {
            (true, Some(tat.max(now) + self.interval))
        } else {
            (false, None)
        }
    }
}

/// What a check of the model table answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    /// Admitted.
    Allowed,
    /// Refused.
    Denied,
}

enum Attempt {
    Done(Checked),
    Locked,
}

/// One shard of the lock-free table (home slot 0 for every key, as with
/// the keyed models' `IdentityHash`).
pub struct ModelTable {
    orders: Orders,
    reconfig: AtomicU64,
    config: [AtomicU64; 2],
    slots: Vec<AtomicU64>,
    writer: Mutex<()>,
    sweeps: AtomicU64,
}

impl ModelTable {
    /// A shard of `slots` slots holding `entries` (key, TAT) in order from
    /// slot 0, running `config`, with the orderings `orders`.
    #[must_use]
    pub fn new(orders: Orders, config: Config, slots: usize, entries: &[(u64, u64)]) -> Self {
        assert!(entries.len() < slots, "a spare slot ends every probe run");
        Self {
            orders,
            reconfig: AtomicU64::new(0),
            config: [
                AtomicU64::new(config.interval),
                AtomicU64::new(config.tolerance),
            ],
            slots: (0..slots)
                .map(|i| AtomicU64::new(entries.get(i).map_or(0, |&(k, t)| pack(k, t))))
                .collect(),
            writer: Mutex::new(()),
            sweeps: AtomicU64::new(0),
        }
    }

    fn home(&self, _key: u64) -> usize {
        0
    }

    fn next(&self, i: usize) -> usize {
        if i + 1 == self.slots.len() { 0 } else { i + 1 }
    }

    fn load(&self, i: usize) -> u64 {
        self.slots[i].load(self.orders.slot_load)
    }

    fn config(&self) -> Config {
        Config {
            interval: self.config[0].load(self.orders.config_load),
            tolerance: self.config[1].load(self.orders.config_load),
        }
    }

    fn store_config(&self, config: Config) {
        self.config[0].store(config.interval, self.orders.config_store);
        self.config[1].store(config.tolerance, self.orders.config_store);
    }

    fn cas(&self, i: usize, current: u64, new: u64) -> Result<u64, u64> {
        self.slots[i].compare_exchange(
            current,
            new,
            self.orders.slot_cas,
            self.orders.slot_cas_failure,
        )
    }

    fn find(&self, key: u64) -> Find {
        let mut i = self.home(key);
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

    fn find_unlocked(&self, key: u64) -> Find {
        let seq = self.sweeps.load(self.orders.sweeps_load);
        match self.find(key) {
            Find::Absent(_) if seq % 2 == 1 || self.sweeps.load(self.orders.sweeps_load) != seq => {
                Find::Busy
            }
            found => found,
        }
    }

    fn lock(&self) -> loom::sync::MutexGuard<'_, ()> {
        self.writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `LockFreeGcraTable::apply`.
    fn apply(
        &self,
        seq: u64,
        key: u64,
        mut i_word: (usize, u64),
        now: u64,
        locked: bool,
    ) -> Option<Attempt> {
        loop {
            let (i, word) = i_word;
            let Slot::Live(k, tat) = unpack(word) else {
                return None;
            };
            if k != key {
                return None;
            }
            let config = self.config();
            let unmoved = || locked || self.reconfig.load(self.orders.reconfig_load) == seq;
            if !unmoved() {
                return Some(Attempt::Locked);
            }
            let (allowed, store) = config.step(tat, now);
            match store {
                Some(_) if !unmoved() => return Some(Attempt::Locked),
                Some(new_tat) => {
                    if let Err(current) = self.cas(i, word, pack(key, new_tat)) {
                        i_word = (i, current);
                        continue;
                    }
                }
                None => {}
            }
            return Some(Attempt::Done(if allowed {
                Checked::Allowed
            } else {
                Checked::Denied
            }));
        }
    }

    /// `LockFreeGcraTable::check_unlocked`, for a tracked key (a new key
    /// goes to the locked path).
    fn check_unlocked(&self, key: u64, now: u64) -> Attempt {
        let seq = self.reconfig.load(self.orders.reconfig_load);
        if seq % 2 == 1 {
            return Attempt::Locked;
        }
        match self.find_unlocked(key) {
            Find::Found(i, w) => self
                .apply(seq, key, (i, w), now, false)
                .unwrap_or(Attempt::Locked),
            Find::Absent(_) | Find::Busy => Attempt::Locked,
        }
    }

    /// `LockFreeGcraTable::check_locked` (no overflow: the models leave
    /// room).
    fn check_locked(&self, key: u64, now: u64) -> Checked {
        let _writer = self.lock();
        let config = self.config();
        let seq = self.reconfig.load(self.orders.reconfig_load);
        match self.find(key) {
            Find::Found(i, w) => match self.apply(seq, key, (i, w), now, true) {
                Some(Attempt::Done(result)) => result,
                _ => panic!("the writer found its own key moved"),
            },
            Find::Absent(free) => {
                let (allowed, store) = config.step(0, now);
                if let Some(tat) = store {
                    self.slots[free].store(pack(key, tat), self.orders.slot_store);
                }
                if allowed {
                    Checked::Allowed
                } else {
                    Checked::Denied
                }
            }
            Find::Busy => panic!("a frozen slot outside a writer"),
        }
    }

    /// A check of one permit for `key` at `now` (`Limiter::try_acquire`).
    pub fn check(&self, key: u64, now: u64) -> Checked {
        match self.check_unlocked(key, now) {
            Attempt::Done(result) => result,
            Attempt::Locked => self.check_locked(key, now),
        }
    }

    /// `LockFreeGcraTable::tat`: the stored TAT of `key`, if tracked
    /// (what `contains`, `snapshot` and `time_until_ready` read), and the
    /// configuration it runs.
    pub fn tat(&self, key: u64) -> (Option<u64>, Config) {
        let read = |found: Find| match found {
            Find::Found(_, w) => match unpack(w) {
                Slot::Live(_, tat) => Some(tat),
                _ => None,
            },
            _ => None,
        };
        let seq = self.reconfig.load(self.orders.reconfig_load);
        if seq % 2 == 0 {
            let found = self.find_unlocked(key);
            if !matches!(found, Find::Busy) {
                let tat = read(found);
                let config = self.config();
                if self.reconfig.load(self.orders.reconfig_load) == seq {
                    return (tat, config);
                }
            }
        }
        let _writer = self.lock();
        (read(self.find(key)), self.config())
    }

    /// `evict_refilled`: takes the mutex and sweeps.
    pub fn evict_refilled(&self, now: u64) -> usize {
        let _writer = self.lock();
        self.sweep(now)
    }

    /// `LockFreeGcraTable::sweep` (caller holds the mutex).
    fn sweep(&self, now: u64) -> usize {
        let Some(start) = (0..self.slots.len()).find(|&i| unpack(self.load(i)) == Slot::Empty)
        else {
            return 0;
        };
        self.sweeps.fetch_add(1, self.orders.sweeps_begin);
        let mut evicted = 0;
        for i in 0..self.slots.len() {
            let mut word = self.load(i);
            while let Slot::Live(_, tat) = unpack(word) {
                if tat > now {
                    break;
                }
                match self.cas(i, word, 0) {
                    Ok(_) => {
                        evicted += 1;
                        break;
                    }
                    Err(current) => word = current,
                }
            }
        }
        if evicted > 0 {
            self.close_holes(start);
        }
        self.sweeps.fetch_add(1, self.orders.sweeps_end);
        evicted
    }

    /// `LockFreeGcraTable::close_holes`.
    fn close_holes(&self, start: usize) {
        let len = self.slots.len();
        let mut i = start;
        for _ in 0..len {
            i = self.next(i);
            let Slot::Live(key, _) = unpack(self.load(i)) else {
                continue;
            };
            let mut j = self.home(key);
            while j != i && unpack(self.load(j)) != Slot::Empty {
                j = self.next(j);
            }
            if j == i {
                continue;
            }
            let word = if self.orders.freeze_moves {
                self.freeze(i)
            } else {
                self.load(i) // the broken variant: copy without freezing
            };
            self.slots[j].store(word, self.orders.slot_store);
            self.slots[i].store(0, self.orders.slot_store);
        }
    }

    /// `freeze`: swaps slot `i`'s TAT half for `FROZEN`; the word it held.
    fn freeze(&self, i: usize) -> u64 {
        let mut word = self.load(i);
        loop {
            let frozen = (word & !LOW) | FROZEN;
            match self.cas(i, word, frozen) {
                Ok(_) => return word,
                Err(current) => word = current,
            }
        }
    }

    /// `reconfigure` through `LockFreeGcraTable::convert`: every tracked
    /// key's TAT is frozen, the configuration changes to `next`, and each
    /// frozen TAT is replaced by `carry(tat)`.
    pub fn reconfigure(&self, next: Config, carry: impl Fn(u64) -> u64) {
        let _writer = self.lock();
        self.reconfig.fetch_add(1, self.orders.reconfig_begin); // odd
        let mut frozen = Vec::new();
        for i in 0..self.slots.len() {
            if let Slot::Live(..) = unpack(self.load(i)) {
                let word = self.freeze(i);
                if let Slot::Live(key, tat) = unpack(word) {
                    frozen.push((i, key, tat));
                }
            }
        }
        self.store_config(next);
        for (i, key, tat) in frozen {
            self.slots[i].store(pack(key, carry(tat)), self.orders.slot_store);
        }
        self.reconfig.fetch_add(1, self.orders.reconfig_end); // even
    }

    /// Every tracked (key, TAT), in slot order, read under the mutex
    /// (`for_each_snapshot`).
    pub fn entries(&self) -> Vec<(u64, u64)> {
        let _writer = self.lock();
        (0..self.slots.len())
            .filter_map(|i| match unpack(self.load(i)) {
                Slot::Live(k, t) => Some((k, t)),
                _ => None,
            })
            .collect()
    }
}
