//! The waiting lines: one per key that has waiters, each a doubly linked
//! list threaded through one slab of waiter slots.
//!
//! Each waiting request is one slot (its permit count, two links, its
//! line, its outcome — the limiter's permit once granted — and its task's
//! waker), so memory is O(1) per waiter and O(peak waiters) in total;
//! freed slots are reused. A key's line exists only while it has waiters.
//! Linking at the back, unlinking any slot (cancellation) and popping
//! either end are O(1). Everything here is touched only under the queue's
//! mutex, for a few instructions at a time; a lock-free intrusive list
//! would save that short critical section at the price of `unsafe` code,
//! which this crate forbids.

use core::hash::Hash;
use std::collections::HashMap;
use std::task::Waker;
use std::vec::Vec;

use super::error::WaitError;
use super::timer::QueueTimer;
use tollgate_core::keyed::RandomSeed;

const NIL: usize = usize::MAX;

/// What became of a waiter.
pub(crate) enum Outcome<P> {
    /// Still queued.
    Waiting,
    /// Granted at `at` (ns): the limiter's permit, until the waiter takes it.
    Admitted { at: u64, permit: Option<P> },
    /// Refused at `at` (ns).
    Refused { at: u64, error: WaitError },
}

struct Slot<P> {
    n: u32,
    prev: usize,
    next: usize,
    line: usize,
    in_use: bool,
    outcome: Outcome<P>,
    waker: Option<Waker>,
    enqueued_at: u64,
}

/// One key's line.
pub(crate) struct Line<K> {
    pub(crate) key: K,
    head: usize,
    tail: usize,
    len: u64,
    permits: u64,
    /// The line's timer, armed at its serving waiter's `retry_after`.
    pub(crate) timer: QueueTimer,
    /// Its waker (wakes the queue for this line).
    pub(crate) timer_waker: Waker,
    /// Its serving waiter waits for a release, not for time.
    pub(crate) for_release: bool,
    /// The instant (ns) its timer was armed for: its serving waiter's
    /// turn. The waiter is charged at its turn, not at the (later)
    /// instant the timer fired, so a line's admissions keep the limiter's
    /// exact spacing instead of each adding the timer's lateness.
    pub(crate) turn: Option<u64>,
}

/// Every line, and every waiter slot.
pub(crate) struct Waiters<K, P> {
    slots: Vec<Slot<P>>,
    free: Vec<usize>,
    lines: Vec<Option<Line<K>>>,
    free_lines: Vec<usize>,
    /// Seeded per process (as the keyed tables): a client cannot choose
    /// keys that collide.
    by_key: HashMap<K, usize, RandomSeed>,
    len: u64,
    permits: u64,
}

impl<K, P> Default for Waiters<K, P> {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
            lines: Vec::new(),
            free_lines: Vec::new(),
            by_key: HashMap::with_hasher(RandomSeed::new()),
            len: 0,
            permits: 0,
        }
    }
}

impl<K: Hash + Eq + Clone, P> Waiters<K, P> {
    /// Number of linked (waiting) requests, in every line.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Permits asked for by the linked requests, in every line.
    pub(crate) fn permits(&self) -> u64 {
        self.permits
    }

    /// The line of `key`, if it has waiters.
    pub(crate) fn line_of(&self, key: &K) -> Option<usize> {
        self.by_key.get(key).copied()
    }

    /// One past the highest line id in use (lines below it may be free).
    pub(crate) fn line_slots(&self) -> usize {
        self.lines.len()
    }

    pub(crate) fn line(&self, line: usize) -> Option<&Line<K>> {
        self.lines.get(line).and_then(Option::as_ref)
    }

    pub(crate) fn line_mut(&mut self, line: usize) -> Option<&mut Line<K>> {
        self.lines.get_mut(line).and_then(Option::as_mut)
    }

    /// Permits waiting in `line`.
    pub(crate) fn line_permits(&self, line: usize) -> u64 {
        self.line(line).map_or(0, |l| l.permits)
    }

    pub(crate) fn front(&self, line: usize) -> Option<usize> {
        self.line(line)
            .and_then(|l| (l.head != NIL).then_some(l.head))
    }

    pub(crate) fn back(&self, line: usize) -> Option<usize> {
        self.line(line)
            .and_then(|l| (l.tail != NIL).then_some(l.tail))
    }

    /// The waiter after `key` towards the back of its line.
    pub(crate) fn next(&self, key: usize) -> Option<usize> {
        let next = self.slots[key].next;
        (next != NIL).then_some(next)
    }

    pub(crate) fn n(&self, key: usize) -> u32 {
        self.slots[key].n
    }

    /// The line a waiting slot is linked in.
    pub(crate) fn line_of_slot(&self, key: usize) -> usize {
        self.slots[key].line
    }

    pub(crate) fn enqueued_at(&self, key: usize) -> u64 {
        self.slots[key].enqueued_at
    }

    /// True while the slot waits in its line (not yet resolved).
    pub(crate) fn is_waiting(&self, key: usize) -> bool {
        matches!(self.slots[key].outcome, Outcome::Waiting)
    }

    /// A new line for `key`, which has none, with `make_waker(line)` as
    /// its timer's waker.
    pub(crate) fn new_line(&mut self, key: &K, make_waker: impl FnOnce(usize) -> Waker) -> usize {
        let id = self.free_lines.pop().unwrap_or(self.lines.len());
        let line = Line {
            key: key.clone(),
            head: NIL,
            tail: NIL,
            len: 0,
            permits: 0,
            timer: QueueTimer::default(),
            timer_waker: make_waker(id),
            for_release: false,
            turn: None,
        };
        if id == self.lines.len() {
            self.lines.push(Some(line));
        } else {
            self.lines[id] = Some(line);
        }
        self.by_key.insert(key.clone(), id);
        id
    }

    /// Links a new waiter at the back of `line` and returns its key.
    pub(crate) fn push_back(&mut self, line: usize, n: u32, now: u64, waker: Waker) -> usize {
        debug_assert!(
            self.line(line).is_some(),
            "a waiter joins a line that exists"
        );
        let tail = self.line(line).map_or(NIL, |l| l.tail);
        let slot = Slot {
            n,
            prev: tail,
            next: NIL,
            line,
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
        if tail != NIL {
            self.slots[tail].next = key;
        }
        if let Some(l) = self.line_mut(line) {
            if tail == NIL {
                l.head = key;
            }
            l.tail = key;
            l.len += 1;
            l.permits += u64::from(n);
        }
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
    /// A line left empty is removed (its timer with it).
    pub(crate) fn resolve(&mut self, key: usize, outcome: Outcome<P>) -> Option<Waker> {
        debug_assert!(self.is_waiting(key));
        let (prev, next, n, line) = {
            let s = &self.slots[key];
            (s.prev, s.next, s.n, s.line)
        };
        if prev != NIL {
            self.slots[prev].next = next;
        }
        if next != NIL {
            self.slots[next].prev = prev;
        }
        let mut empty = false;
        if let Some(l) = self.line_mut(line) {
            if prev == NIL {
                l.head = next;
            }
            if next == NIL {
                l.tail = prev;
            }
            l.len -= 1;
            l.permits -= u64::from(n);
            empty = l.len == 0;
        }
        if empty {
            if let Some(l) = self.lines[line].take() {
                self.by_key.remove(&l.key);
            }
            self.free_lines.push(line);
        }
        self.len -= 1;
        self.permits -= u64::from(n);
        let slot = &mut self.slots[key];
        slot.prev = NIL;
        slot.next = NIL;
        slot.outcome = outcome;
        slot.waker.take()
    }

    /// Takes the permit of an admitted slot (once).
    pub(crate) fn take_permit(&mut self, key: usize) -> Option<P> {
        match &mut self.slots[key].outcome {
            Outcome::Admitted { permit, .. } => permit.take(),
            _ => None,
        }
    }

    /// When a resolved slot was resolved, and the refusal of a refused one.
    pub(crate) fn resolved(&self, key: usize) -> Option<(u64, Option<WaitError>)> {
        match &self.slots[key].outcome {
            Outcome::Waiting => None,
            Outcome::Admitted { at, .. } => Some((*at, None)),
            Outcome::Refused { at, error } => Some((*at, Some(*error))),
        }
    }

    /// Returns a resolved or waiting slot to the free list (the owner is
    /// done with it). A waiting slot is unlinked first; a permit still in
    /// the slot is dropped (the caller took what it needed).
    pub(crate) fn release(&mut self, key: usize) {
        if self.is_waiting(key) {
            let _ = self.resolve(
                key,
                Outcome::Refused {
                    at: 0,
                    error: WaitError::Closed,
                },
            );
        }
        let slot = &mut self.slots[key];
        if slot.in_use {
            slot.in_use = false;
            slot.waker = None;
            // resolved for good: a free slot is never unlinked again
            slot.outcome = Outcome::Refused {
                at: 0,
                error: WaitError::Closed,
            };
            self.free.push(key);
        }
        if self.len == 0 && self.free.len() == self.slots.len() {
            // All slots free: give the memory of a past peak back.
            if self.slots.capacity() > 64 {
                self.slots = Vec::new();
                self.free = Vec::new();
            }
            if self.lines.capacity() > 64 {
                self.lines = Vec::new();
                self.free_lines = Vec::new();
                self.by_key = HashMap::with_hasher(RandomSeed::new());
            }
        }
    }
}
