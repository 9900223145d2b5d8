//! The line of tasks waiting for a
//! [`ConcurrencyLimiter`](crate::ConcurrencyLimiter)'s permits, in the
//! order they started waiting, served by the releases: on any executor
//! (embassy, RTIC, a plain `block_on`, …), without a timer.
//!
//! The line is a slab of slots linked in arrival order. A release hands the
//! freed permits to the front of the line while they fit (taking them on
//! the waiters' behalf, so a woken waiter finds its permits already taken
//! and resolves on its next poll) and wakes exactly those waiters; the
//! protocol is in [`crate::concurrency`].
//!
//! With feature `std` the slab grows as needed (a `Vec` behind a
//! `std::sync::Mutex`, slots reused). Without `std` it is [`SLOTS`] slots
//! behind a `critical_section::Mutex`, no allocation: a waiter that finds
//! every slot taken is not in the line and [`push_back`](Line::push_back)
//! says so; the limiter then has it poll again (see its documentation).
//!
//! Each slot has a generation, so that a ticket of a slot that was freed
//! and reused never reaches the newer waiter.

use core::task::Waker;

/// Slots of a `no_std` line, and the most wakers one pass of a release
/// collects before waking them outside the lock.
pub(crate) const SLOTS: usize = 8;

/// No slot (the end of the line).
const NIL: u32 = u32::MAX;

/// Where a waiter is kept: `(slot, generation)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticket {
    slot: u32,
    generation: u32,
}

/// What became of a waiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// The slot is free.
    Free,
    /// In the line.
    Waiting,
    /// Out of the line: its permits were taken on its behalf.
    Granted,
    /// Out of the line: the limit (the value held) was lowered below its
    /// permits.
    Refused(u32),
}

#[derive(Debug)]
struct Slot {
    generation: u32,
    n: u32,
    state: State,
    waker: Option<Waker>,
    prev: u32,
    next: u32,
}

impl Slot {
    const FREE: Self = Self {
        generation: 0,
        n: 0,
        state: State::Free,
        waker: None,
        prev: NIL,
        next: NIL,
    };
}

/// The waiters, front to back (see the [module documentation](self)).
#[derive(Debug)]
pub(crate) struct Line {
    #[cfg(feature = "std")]
    slots: std::vec::Vec<Slot>,
    #[cfg(not(feature = "std"))]
    slots: [Slot; SLOTS],
    /// Free slots to reuse (with `std`; without it a free slot is found by
    /// looking at each).
    #[cfg(feature = "std")]
    free: std::vec::Vec<u32>,
    head: u32,
    tail: u32,
}

impl Line {
    /// An empty line.
    pub(crate) const fn new() -> Self {
        Self {
            #[cfg(feature = "std")]
            slots: std::vec::Vec::new(),
            #[cfg(not(feature = "std"))]
            slots: [Slot::FREE; SLOTS],
            #[cfg(feature = "std")]
            free: std::vec::Vec::new(),
            head: NIL,
            tail: NIL,
        }
    }

    /// Nobody waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.head == NIL
    }

    fn slot(&mut self, i: u32) -> Option<&mut Slot> {
        self.slots.get_mut(i as usize)
    }

    fn free_slot(&mut self) -> Option<u32> {
        #[cfg(feature = "std")]
        {
            if let Some(i) = self.free.pop() {
                return Some(i);
            }
            let i = u32::try_from(self.slots.len()).ok().filter(|&i| i != NIL)?;
            self.slots.push(Slot::FREE);
            Some(i)
        }
        #[cfg(not(feature = "std"))]
        {
            let i = self.slots.iter().position(|s| s.state == State::Free)?;
            u32::try_from(i).ok()
        }
    }

    /// Adds a waiter of `n` permits at the back; `None` if no slot is free
    /// (only without `std`).
    pub(crate) fn push_back(&mut self, n: u32, waker: &Waker) -> Option<Ticket> {
        let i = self.free_slot()?;
        let tail = self.tail;
        let slot = self.slot(i)?;
        slot.generation = slot.generation.wrapping_add(1);
        slot.n = n;
        slot.state = State::Waiting;
        slot.waker = Some(waker.clone());
        slot.prev = tail;
        slot.next = NIL;
        let generation = slot.generation;
        match self.slot(tail) {
            Some(t) => t.next = i,
            None => self.head = i,
        }
        self.tail = i;
        Some(Ticket {
            slot: i,
            generation,
        })
    }

    /// The permits the front waiter asks for.
    pub(crate) fn front(&mut self) -> Option<u32> {
        let head = self.head;
        self.slot(head).map(|s| s.n)
    }

    /// Takes the front waiter out of the line as `state`; its waker.
    pub(crate) fn pop_front(&mut self, state: State) -> Option<Waker> {
        let head = self.head;
        self.unlink(head);
        let slot = self.slot(head)?;
        slot.state = state;
        slot.waker.take()
    }

    /// Takes the first waiter asking for more than `limit` out of the line
    /// (refused); its waker, or `None` if there is none.
    pub(crate) fn refuse_first_above(&mut self, limit: u32) -> Option<Option<Waker>> {
        let mut i = self.head;
        while let Some(slot) = self.slots.get(i as usize) {
            if slot.n > limit {
                self.unlink(i);
                let slot = self.slot(i)?;
                slot.state = State::Refused(limit);
                return Some(slot.waker.take());
            }
            i = slot.next;
        }
        None
    }

    fn unlink(&mut self, i: u32) {
        let Some(slot) = self.slot(i) else {
            return;
        };
        let (prev, next) = (slot.prev, slot.next);
        slot.prev = NIL;
        slot.next = NIL;
        match self.slot(prev) {
            Some(p) => p.next = next,
            None => self.head = next,
        }
        match self.slot(next) {
            Some(n) => n.prev = prev,
            None => self.tail = prev,
        }
    }

    fn release(&mut self, i: u32) {
        if let Some(slot) = self.slot(i) {
            slot.state = State::Free;
            slot.waker = None;
            #[cfg(feature = "std")]
            self.free.push(i);
        }
        #[cfg(feature = "std")]
        if self.head == NIL && self.free.len() == self.slots.len() && self.slots.capacity() > 64 {
            // nobody left: give a past peak's memory back
            self.slots = std::vec::Vec::new();
            self.free = std::vec::Vec::new();
        }
    }

    /// The waiter's state, keeping `waker` if it still waits; a resolved
    /// waiter (granted or refused) leaves its slot. `None` for a stale
    /// ticket.
    pub(crate) fn poll(&mut self, ticket: Ticket, waker: &Waker) -> Option<(State, u32)> {
        let slot = self
            .slot(ticket.slot)
            .filter(|s| s.generation == ticket.generation && s.state != State::Free)?;
        let answer = (slot.state, slot.n);
        if slot.state == State::Waiting {
            match &slot.waker {
                Some(w) if w.will_wake(waker) => {}
                _ => slot.waker = Some(waker.clone()),
            }
        } else {
            self.release(ticket.slot);
        }
        Some(answer)
    }

    /// A waiter that goes away: out of the line and its slot freed. Its
    /// state and permits, and whether it was at the front.
    pub(crate) fn remove(&mut self, ticket: Ticket) -> Option<(State, u32, bool)> {
        let head = self.head;
        let slot = self
            .slot(ticket.slot)
            .filter(|s| s.generation == ticket.generation && s.state != State::Free)?;
        let answer = (slot.state, slot.n, head == ticket.slot);
        if slot.state == State::Waiting {
            self.unlink(ticket.slot);
        }
        self.release(ticket.slot);
        Some(answer)
    }
}

/// Wakers collected under the lock, woken after it is let go.
pub(crate) struct Woken {
    wakers: [Option<Waker>; SLOTS],
    len: usize,
}

impl Woken {
    pub(crate) const fn new() -> Self {
        Self {
            wakers: [const { None }; SLOTS],
            len: 0,
        }
    }

    /// No room for another waker.
    pub(crate) fn is_full(&self) -> bool {
        self.len == SLOTS
    }

    /// Keeps `waker` (the caller checked [`is_full`](Self::is_full)).
    pub(crate) fn push(&mut self, waker: Option<Waker>) {
        if let Some(place) = self.wakers.get_mut(self.len) {
            *place = waker;
            self.len += 1;
        }
    }

    /// Wakes them all.
    pub(crate) fn wake(self) {
        for w in self.wakers.into_iter().flatten() {
            w.wake();
        }
    }
}

#[cfg(all(test, feature = "std", not(loom)))]
mod tests {
    extern crate std;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    use super::*;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn waker() -> Waker {
        Waker::from(Arc::new(Count(AtomicUsize::new(0))))
    }

    #[test]
    fn the_line_keeps_arrival_order_across_removals() {
        let mut line = Line::new();
        let w = waker();
        let tickets: std::vec::Vec<Ticket> =
            (1..=4).map(|n| line.push_back(n, &w).unwrap()).collect();
        // the second leaves from the middle, the first is served
        assert_eq!(line.remove(tickets[1]), Some((State::Waiting, 2, false)));
        assert_eq!(line.front(), Some(1));
        assert!(line.pop_front(State::Granted).is_some());
        assert_eq!(line.front(), Some(3));
        // a newcomer reuses a freed slot but joins the back
        let t5 = line.push_back(5, &w).unwrap();
        assert_eq!(line.refuse_first_above(3).map(|w| w.is_some()), Some(true));
        assert_eq!(line.front(), Some(3));
        assert!(line.pop_front(State::Granted).is_some());
        assert_eq!(line.front(), Some(5));
        assert_eq!(line.remove(t5), Some((State::Waiting, 5, true)));
        assert!(line.is_empty());
        // resolved waiters read their outcome once
        assert_eq!(line.poll(tickets[0], &w), Some((State::Granted, 1)));
        assert_eq!(line.poll(tickets[0], &w), None);
        assert_eq!(line.poll(tickets[3], &w), Some((State::Refused(3), 4)));
        assert_eq!(line.remove(tickets[1]), None, "a stale ticket");
    }
}
