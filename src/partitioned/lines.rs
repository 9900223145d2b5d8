//! The store of an in-flight policy: the keyed table of permits in flight,
//! and each key's line of waiters, served by the releases of that key.
//!
//! A waiter ([`Partitioned::acquire_key_in_line`](super::Partitioned::acquire_key_in_line))
//! that finds its key full joins the back of the key's line. A release of
//! the key's permits (a lease dropped or cancelled) hands the freed
//! permits to the front of the line while they fit — taking them in the
//! table on the waiter's behalf — and wakes exactly those waiters: one
//! wake-up per admission, none for the waiters of other keys, and no timer.
//! While a key has a line, a newcomer's plain check for that key is
//! refused (it would overtake the line), so each key is served in arrival
//! order, a large request included. A key refused because the table is
//! full of busy keys (it has no slot, so none of its own releases would
//! come) is refused at once rather than queued.
//!
//! # State protocol (for model checking)
//!
//! `waiting` counts the waiters in every line; it is written under the
//! lines' mutex and read without it. A release gives its permits back to
//! the table (the key's counter), then a `SeqCst` fence, then reads
//! `waiting`: at zero it returns without touching the lock, so a release
//! costs one load more when nobody waits. A waiter increments `waiting`
//! (under the lock, `SeqCst`), then a fence, then checks the table: so
//! either its check sees the release's permits, or the release sees the
//! waiter and serves the line under the lock. A waiter granted permits but
//! dropped before it saw them gives them back through the release path,
//! which hands them to the next waiter: no permit is lost or given twice.

use core::task::{Poll, Waker};
use std::collections::{HashMap, VecDeque};
use std::vec::Vec;

use crate::concurrency::InFlight;
use crate::keyed::KeyedTable;
use crate::keyed::ShardedKeyedTable;
use crate::limiter::{Grant, Limiter};
use crate::refusal::Refusal;
use crate::sync::{fence, AtomicU64, Mutex, MutexGuard, Ordering};
use crate::time::Timestamp;

/// Where a queued waiter is kept: `(slot, generation)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ticket {
    slot: usize,
    generation: u64,
}

/// What joining a key's line gave.
#[derive(Debug)]
pub(super) enum Join {
    /// The permits were free and nobody was ahead: taken now.
    Taken,
    /// In the line; poll the ticket.
    Queued(Ticket),
    /// The key's line is full (or the key has no slot in a full table,
    /// the refusal's path): refused now.
    Full(Refusal<'static>),
    /// More permits than the limit: refused for ever.
    Capacity(Refusal<'static>),
}

#[derive(Debug, Clone, Copy)]
enum State {
    Free,
    Waiting,
    /// The permits were taken on the waiter's behalf.
    Granted,
    /// The limit was lowered below the waiter's permits.
    Refused(Refusal<'static>),
}

#[derive(Debug)]
struct Slot<K> {
    generation: u64,
    key: Option<K>,
    n: u32,
    state: State,
    waker: Option<Waker>,
}

/// Every key's line: a slab of waiters, and per key the slots in arrival
/// order. A key without waiters has no entry (memory follows the waiters).
#[derive(Debug)]
struct Lines<K> {
    slots: Vec<Slot<K>>,
    free: Vec<usize>,
    by_key: HashMap<K, VecDeque<usize>>,
}

/// An in-flight policy's store (see the [module documentation](self)).
#[derive(Debug)]
pub(super) struct InFlightStore<K> {
    pub(super) table: ShardedKeyedTable<K, InFlight>,
    /// Waiters in every line: written under `lines`, read without it.
    waiting: AtomicU64,
    lines: Mutex<Lines<K>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // every critical section leaves the lines consistent
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl<K: core::hash::Hash + Eq + Clone> InFlightStore<K> {
    pub(super) fn new(table: ShardedKeyedTable<K, InFlight>) -> Self {
        Self {
            table,
            waiting: AtomicU64::new(0),
            lines: Mutex::new(Lines {
                slots: Vec::new(),
                free: Vec::new(),
                by_key: HashMap::new(),
            }),
        }
    }

    /// The refusal of a key whose permits are all held (or whose line is
    /// in the way), with the retry hint.
    fn denied(&self, key: &K) -> Refusal<'static> {
        let alg = self.table.default_algorithm();
        Refusal::from_nanos(alg.retry_hint, self.table.snapshot(key, Timestamp::ZERO))
            .until_release()
    }

    /// A newcomer's check: refused while the key has a line.
    pub(super) fn check_n(
        &self,
        key: &K,
        n: u32,
        now: Timestamp,
    ) -> Result<Grant, Refusal<'static>> {
        if n != 0
            && self.waiting.load(Ordering::SeqCst) != 0
            && lock(&self.lines).by_key.contains_key(key)
        {
            if n > self.table.capacity(key) {
                return Err(Refusal::never(n, self.table.snapshot(key, Timestamp::ZERO)));
            }
            return Err(self.denied(key));
        }
        self.table.try_acquire_n(key, n, now)
    }

    /// Gives back `n` permits of `key` and serves its line.
    pub(super) fn release(&self, key: &K, n: u32) {
        self.table.refund(key, n, Timestamp::ZERO);
        self.serve(key);
    }

    /// Hands the permits free for `key` to its line's front, if anyone
    /// waits (one load when nobody does).
    pub(super) fn serve(&self, key: &K) {
        fence(Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) == 0 {
            return;
        }
        let woken = {
            let mut lines = lock(&self.lines);
            self.serve_locked(&mut lines, key)
        };
        for w in woken {
            w.wake();
        }
    }

    /// Serves every line (the limit was raised).
    pub(super) fn serve_all(&self) {
        fence(Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) == 0 {
            return;
        }
        let woken = {
            let mut lines = lock(&self.lines);
            let keys: Vec<K> = lines.by_key.keys().cloned().collect();
            let mut woken = Vec::new();
            for key in keys {
                woken.extend(self.serve_locked(&mut lines, &key));
            }
            woken
        };
        for w in woken {
            w.wake();
        }
    }

    fn serve_locked(&self, lines: &mut Lines<K>, key: &K) -> Vec<Waker> {
        let mut woken = Vec::new();
        let Lines { slots, by_key, .. } = lines;
        let Some(line) = by_key.get_mut(key) else {
            return woken;
        };
        while let Some(&i) = line.front() {
            let slot = &mut slots[i];
            slot.state = match self.table.try_acquire_n(key, slot.n, Timestamp::ZERO) {
                Ok(_) => State::Granted,
                Err(e) if e.is_never() => State::Refused(e),
                Err(_) => break,
            };
            line.pop_front();
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            if let Some(w) = slot.waker.take() {
                woken.push(w);
            }
        }
        if line.is_empty() {
            by_key.remove(key);
        }
        woken
    }

    /// Takes `n` permits for `key` now if they are free and nobody waits
    /// ahead; else joins the back of the key's line (at most `limit`
    /// waiters), to be woken through `waker`.
    pub(super) fn join(&self, key: &K, n: u32, limit: usize, waker: &Waker) -> Join {
        let take = |this: &Self| match this.table.try_acquire_n(key, n, Timestamp::ZERO) {
            Ok(_) => Some(Join::Taken),
            Err(e) if e.is_never() => Some(Join::Capacity(e)),
            // a full table of busy keys: no release of this key (it has no
            // slot) would ever serve a line, so no line
            Err(denied) if denied.path().is_overflow() => Some(Join::Full(denied)),
            Err(_) => None,
        };
        if n == 0 || self.waiting.load(Ordering::SeqCst) == 0 {
            // the lock-free path: nobody waits anywhere
            if let Some(done) = take(self) {
                return done;
            }
        }
        let mut lines = lock(&self.lines);
        // announce, then look again: a release in between either is seen
        // by this look or sees the waiter (see the module documentation)
        self.waiting.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let queued = lines.by_key.get(key).map_or(0, VecDeque::len);
        if queued == 0 {
            if let Some(done) = take(self) {
                self.waiting.fetch_sub(1, Ordering::SeqCst);
                return done;
            }
        }
        if queued >= limit {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            return Join::Full(self.denied(key));
        }
        let slot = Slot {
            generation: 0,
            key: Some(key.clone()),
            n,
            state: State::Waiting,
            waker: Some(waker.clone()),
        };
        let i = match lines.free.pop() {
            Some(i) => {
                let generation = lines.slots[i].generation.wrapping_add(1);
                lines.slots[i] = Slot { generation, ..slot };
                i
            }
            None => {
                lines.slots.push(slot);
                lines.slots.len() - 1
            }
        };
        lines.by_key.entry(key.clone()).or_default().push_back(i);
        Join::Queued(Ticket {
            slot: i,
            generation: lines.slots[i].generation,
        })
    }

    /// The queued waiter's outcome: its permits (taken on its behalf), a
    /// refusal, or still waiting (keeping `waker`).
    pub(super) fn poll(&self, ticket: Ticket, waker: &Waker) -> Poll<Result<(), Refusal<'static>>> {
        let mut lines = lock(&self.lines);
        let Some(slot) = lines
            .slots
            .get_mut(ticket.slot)
            .filter(|s| s.generation == ticket.generation)
        else {
            return Poll::Ready(Err(Refusal::above(0, 0)));
        };
        let outcome = match slot.state {
            State::Waiting => {
                match &slot.waker {
                    Some(w) if w.will_wake(waker) => {}
                    _ => slot.waker = Some(waker.clone()),
                }
                return Poll::Pending;
            }
            State::Granted => Ok(()),
            State::Refused(e) => Err(e),
            State::Free => Err(Refusal::above(slot.n, 0)),
        };
        lines.free_slot(ticket.slot);
        Poll::Ready(outcome)
    }

    /// A waiter that goes away: leaves its line (the waiters behind it may
    /// now fit), or gives back the permits it was granted but never saw.
    pub(super) fn leave(&self, ticket: Ticket) {
        let (granted, woken) = {
            let mut lines = lock(&self.lines);
            let Some(slot) = lines
                .slots
                .get_mut(ticket.slot)
                .filter(|s| s.generation == ticket.generation)
            else {
                return;
            };
            let n = slot.n;
            let key = slot.key.take();
            let state = slot.state;
            lines.free_slot(ticket.slot);
            match (state, key) {
                (State::Waiting, Some(key)) => {
                    self.waiting.fetch_sub(1, Ordering::SeqCst);
                    let mut was_front = false;
                    if let Some(line) = lines.by_key.get_mut(&key) {
                        was_front = line.front() == Some(&ticket.slot);
                        line.retain(|&i| i != ticket.slot);
                        if line.is_empty() {
                            lines.by_key.remove(&key);
                        }
                    }
                    let woken = if was_front {
                        self.serve_locked(&mut lines, &key)
                    } else {
                        Vec::new()
                    };
                    (None, woken)
                }
                (State::Granted, Some(key)) => (Some((key, n)), Vec::new()),
                _ => (None, Vec::new()),
            }
        };
        for w in woken {
            w.wake();
        }
        if let Some((key, n)) = granted {
            self.release(&key, n);
        }
    }
}

impl<K> Lines<K> {
    fn free_slot(&mut self, i: usize) {
        if let Some(slot) = self.slots.get_mut(i) {
            if !matches!(slot.state, State::Free) {
                slot.state = State::Free;
                slot.key = None;
                slot.waker = None;
                self.free.push(i);
            }
        }
        if self.free.len() == self.slots.len() && self.slots.capacity() > 64 {
            // every slot free: give a past peak's memory back
            self.slots = Vec::new();
            self.free = Vec::new();
        }
    }
}
