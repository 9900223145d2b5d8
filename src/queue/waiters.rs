//! The waiter list: a slab of slots threaded by a doubly linked list.
//!
//! Each waiting request is one slot (a few dozen bytes: its permit count,
//! two links, its outcome and its task's waker), so memory is O(1) per
//! waiter and O(peak waiters) in total; freed slots are reused. Linking at
//! the back, unlinking any slot (cancellation) and popping either end are
//! O(1). The list is only touched under the queue's mutex, for a few
//! instructions at a time; a lock-free intrusive list would save that short
//! critical section at the price of `unsafe` code, which this crate
//! forbids.

use std::task::Waker;
use std::vec::Vec;

use super::error::WaitError;

const NIL: usize = usize::MAX;

/// What became of a waiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Still queued.
    Waiting,
    /// Granted: the permits were taken from the limiter at `at` (ns).
    Admitted { at: u64 },
    /// Refused at `at` (ns).
    Refused { at: u64, error: WaitError },
}

#[derive(Debug)]
struct Slot {
    n: u32,
    prev: usize,
    next: usize,
    in_use: bool,
    outcome: Outcome,
    waker: Option<Waker>,
    enqueued_at: u64,
}

/// Waiters in arrival order (front = oldest).
#[derive(Debug, Default)]
pub(crate) struct Waiters {
    slots: Vec<Slot>,
    free: Vec<usize>,
    head: Option<usize>,
    tail: Option<usize>,
    len: u64,
    permits: u64,
}

impl Waiters {
    /// Number of linked (waiting) requests.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Permits asked for by the linked requests.
    pub(crate) fn permits(&self) -> u64 {
        self.permits
    }

    pub(crate) fn front(&self) -> Option<usize> {
        self.head
    }

    pub(crate) fn back(&self) -> Option<usize> {
        self.tail
    }

    /// The waiter after `key` towards the back.
    pub(crate) fn next(&self, key: usize) -> Option<usize> {
        let next = self.slots[key].next;
        (next != NIL).then_some(next)
    }

    pub(crate) fn n(&self, key: usize) -> u32 {
        self.slots[key].n
    }

    pub(crate) fn enqueued_at(&self, key: usize) -> u64 {
        self.slots[key].enqueued_at
    }

    pub(crate) fn outcome(&self, key: usize) -> Outcome {
        self.slots[key].outcome
    }

    /// Links a new waiter at the back and returns its key.
    pub(crate) fn push_back(&mut self, n: u32, now: u64, waker: Waker) -> usize {
        let slot = Slot {
            n,
            prev: self.tail.unwrap_or(NIL),
            next: NIL,
            in_use: true,
            outcome: Outcome::Waiting,
            waker: Some(waker),
            enqueued_at: now,
        };
        let key = match self.free.pop() {
            Some(key) => {
                self.slots[key] = slot;
                key
            }
            None => {
                self.slots.push(slot);
                self.slots.len() - 1
            }
        };
        match self.tail {
            Some(t) => self.slots[t].next = key,
            None => self.head = Some(key),
        }
        self.tail = Some(key);
        self.len += 1;
        self.permits += u64::from(n);
        key
    }

    /// Replaces the waker of a waiting slot unless it would wake the same
    /// task.
    pub(crate) fn set_waker(&mut self, key: usize, waker: &Waker) {
        let slot = &mut self.slots[key];
        match &slot.waker {
            Some(w) if w.will_wake(waker) => {}
            _ => slot.waker = Some(waker.clone()),
        }
    }

    /// Unlinks a waiting slot and records its outcome; returns its waker.
    pub(crate) fn resolve(&mut self, key: usize, outcome: Outcome) -> Option<Waker> {
        debug_assert!(self.slots[key].outcome == Outcome::Waiting);
        let (prev, next, n) = {
            let s = &self.slots[key];
            (s.prev, s.next, s.n)
        };
        if prev == NIL {
            self.head = (next != NIL).then_some(next);
        } else {
            self.slots[prev].next = next;
        }
        if next == NIL {
            self.tail = (prev != NIL).then_some(prev);
        } else {
            self.slots[next].prev = prev;
        }
        self.len -= 1;
        self.permits -= u64::from(n);
        let slot = &mut self.slots[key];
        slot.prev = NIL;
        slot.next = NIL;
        slot.outcome = outcome;
        slot.waker.take()
    }

    /// Returns a resolved or waiting slot to the free list (the owner is
    /// done with it). A waiting slot is unlinked first.
    pub(crate) fn release(&mut self, key: usize) {
        if self.slots[key].outcome == Outcome::Waiting {
            let _ = self.resolve(key, Outcome::Waiting);
        }
        let slot = &mut self.slots[key];
        if slot.in_use {
            slot.in_use = false;
            slot.waker = None;
            self.free.push(key);
        }
        if self.len == 0 && self.free.len() == self.slots.len() {
            // All slots free: give the memory of a past peak back.
            if self.slots.capacity() > 64 {
                self.slots = Vec::new();
                self.free = Vec::new();
            }
        }
    }
}
