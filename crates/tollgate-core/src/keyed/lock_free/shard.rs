//! A shard of the table: its slots (a key and its TAT packed into one
//! 128-bit atomic word), the probe that finds a key, and freezing a slot
//! while a writer moves or converts it.

use std::vec::Vec;

use crate::gcra::Gcra;
use crate::keyed::AtomicSweepHint;
use crate::live::GcraCell;
use crate::sync::{AtomicU64, AtomicU128, Ordering};
use crate::sync::{Mutex, MutexGuard};

/// Stored low word: 0 is an empty slot, `FROZEN` a slot being moved,
/// anything else `TAT + 1`.
const EMPTY: u64 = 0;
const FROZEN: u64 = u64::MAX;
const MAX_TAT: u64 = u64::MAX - 2;

#[inline]
pub(super) fn pack(key: u64, tat: u64) -> u128 {
    (u128::from(key) << 64) | u128::from(tat.min(MAX_TAT) + 1)
}

#[derive(Clone, Copy)]
pub(super) enum Slot {
    Empty,
    Frozen,
    Live(u64, u64),
}

#[inline]
pub(super) fn unpack(word: u128) -> Slot {
    let key = (word >> 64) as u64;
    match word as u64 {
        EMPTY => Slot::Empty,
        FROZEN => Slot::Frozen,
        stored => Slot::Live(key, stored - 1),
    }
}

pub(super) enum Find {
    Found(usize, u128),
    Absent(usize),
    /// Met a frozen slot: a writer is moving entries.
    Busy,
}

#[repr(align(128))]
pub(super) struct Shard {
    /// Odd while a reconfiguration converts this shard (see the
    /// [module docs](super)).
    pub(super) reconfig: AtomicU64,
    /// The default configuration of this shard's keys.
    pub(super) config: GcraCell,
    pub(super) slots: Vec<AtomicU128>,
    writer: Mutex<()>,
    /// Tracked keys; changed only under `writer`.
    pub(super) len: AtomicU64,
    pub(super) capacity: usize,
    pub(super) hint: AtomicSweepHint,
    /// Odd while a sweep is evicting or moving entries (a sequence lock for
    /// lock-free "absent" answers: a probe can stop at a hole that a move
    /// is about to fill).
    pub(super) sweeps: AtomicU64,
}

impl Shard {
    pub(super) fn new(capacity: usize, default: Gcra) -> Self {
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
    pub(super) fn home(&self, hash: u64) -> usize {
        ((u64::from(hash as u32) * self.slots.len() as u64) >> 32) as usize
    }

    #[inline]
    pub(super) fn next(&self, i: usize) -> usize {
        if i + 1 == self.slots.len() { 0 } else { i + 1 }
    }

    #[inline]
    pub(super) fn load(&self, i: usize) -> u128 {
        self.slots[i].load(Ordering::Acquire)
    }

    #[inline]
    pub(super) fn find(&self, key: u64, hash: u64) -> Find {
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
    pub(super) fn find_unlocked(&self, key: u64, hash: u64) -> Find {
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
    pub(super) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed) as usize
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, ()> {
        // the guarded data is `()`: a panic elsewhere cannot leave it broken
        self.writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Freezes slot `i` (readers then fall back to the mutex) and returns the
/// word it held.
pub(super) fn freeze(shard: &Shard, i: usize) -> u128 {
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
