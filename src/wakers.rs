//! The wakers of the tasks waiting for a
//! [`ConcurrencyLimiter`](crate::ConcurrencyLimiter)'s permits, woken
//! together when permits are released: on any executor (tokio, embassy, …),
//! without a timer.
//!
//! With feature `std` the set grows as needed (a `Vec` behind a
//! `std::sync::Mutex`, slots reused), so every waiter keeps its waker and
//! sleeps until a release. Without `std` it is [`SLOTS`] slots behind a
//! `critical_section::Mutex`, no allocation: a task that registers while
//! every slot is taken wakes the others (they poll again and re-register,
//! as embassy's `MultiWakerRegistration` does), so more than [`SLOTS`]
//! simultaneous waiters cost repeated polls, never a lost wake-up. Each slot
//! has a generation, so that a cancelled waiter clears its own slot and
//! never a newer waiter's. `registered` lets a release skip the lock when
//! nobody waits.

use core::task::Waker;

use crate::sync::{AtomicU32, Ordering};

/// Slots of a `no_std` set before registering wakes the others.
#[cfg(any(not(feature = "std"), test))]
pub(crate) const SLOTS: usize = 8;

#[derive(Debug)]
struct Slots {
    #[cfg(feature = "std")]
    entries: std::vec::Vec<(u32, Option<Waker>)>,
    #[cfg(not(feature = "std"))]
    entries: [(u32, Option<Waker>); SLOTS],
}

impl Slots {
    const fn new() -> Self {
        Self {
            #[cfg(feature = "std")]
            entries: std::vec::Vec::new(),
            #[cfg(not(feature = "std"))]
            entries: [const { (0, None) }; SLOTS],
        }
    }

    fn count(&self) -> u32 {
        self.entries.iter().filter(|e| e.1.is_some()).count() as u32
    }

    /// A free slot, making room if needed; wakers displaced to make room
    /// (only without `std`) go to `overflow`.
    fn free_slot(&mut self, overflow: &mut Overflow) -> usize {
        if let Some(i) = self.entries.iter().position(|e| e.1.is_none()) {
            return i;
        }
        #[cfg(feature = "std")]
        {
            let _ = overflow;
            self.entries.push((0, None));
            self.entries.len() - 1
        }
        #[cfg(not(feature = "std"))]
        {
            // every slot taken: wake them all (outside the lock), reuse 0
            for (i, e) in self.entries.iter_mut().enumerate() {
                overflow[i] = e.1.take();
                e.0 = e.0.wrapping_add(1);
            }
            0
        }
    }
}

#[cfg(feature = "std")]
type Overflow = ();
#[cfg(not(feature = "std"))]
type Overflow = [Option<Waker>; SLOTS];

/// Where a waiter's waker is kept: `(slot, generation)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Registration {
    slot: usize,
    generation: u32,
}

#[cfg(all(feature = "std", not(loom)))]
type Lock = std::sync::Mutex<Slots>;
#[cfg(all(feature = "std", loom))]
type Lock = loom::sync::Mutex<Slots>;
#[cfg(not(feature = "std"))]
type Lock = critical_section::Mutex<core::cell::RefCell<Slots>>;

/// See the [module documentation](self).
#[derive(Debug)]
pub(crate) struct WakerSet {
    slots: Lock,
    /// Wakers kept, written under the lock; read without it by `wake_all`.
    registered: AtomicU32,
}

impl WakerSet {
    crate::sync::const_fn_unless_loom! {
        pub(crate) fn new() -> Self {
            Self {
                slots: new_lock(),
                registered: AtomicU32::new(0),
            }
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut Slots) -> R) -> R {
        #[cfg(feature = "std")]
        {
            let mut guard = self
                .slots
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let r = f(&mut guard);
            self.registered.store(guard.count(), Ordering::SeqCst);
            r
        }
        #[cfg(not(feature = "std"))]
        critical_section::with(|cs| {
            let mut slots = self.slots.borrow_ref_mut(cs);
            let r = f(&mut slots);
            self.registered.store(slots.count(), Ordering::SeqCst);
            r
        })
    }

    /// Keeps `waker` (replacing the waiter's earlier registration `previous`,
    /// if it is still there). The caller must check its condition again
    /// after this returns, before sleeping: a wake-up that happened before
    /// the registration is not remembered.
    pub(crate) fn register(&self, waker: &Waker, previous: Option<Registration>) -> Registration {
        #[cfg(feature = "std")]
        let mut overflow: Overflow = ();
        #[cfg(not(feature = "std"))]
        let mut overflow: Overflow = [const { None }; SLOTS];
        let registration = self.with(|slots| {
            if let Some(r) = previous {
                if let Some((generation, Some(w))) = slots.entries.get_mut(r.slot) {
                    if *generation == r.generation {
                        w.clone_from(waker);
                        return r;
                    }
                }
            }
            let slot = slots.free_slot(&mut overflow);
            let entry = &mut slots.entries[slot];
            entry.0 = entry.0.wrapping_add(1);
            entry.1 = Some(waker.clone());
            Registration {
                slot,
                generation: entry.0,
            }
        });
        #[cfg(not(feature = "std"))]
        for w in overflow.into_iter().flatten() {
            w.wake();
        }
        // pairs with the fence in `wake_all`: the caller's next look at its
        // condition sees a release that did not see this registration
        crate::sync::fence(Ordering::SeqCst);
        registration
    }

    /// Forgets a waiter's registration (a cancelled or satisfied waiter).
    pub(crate) fn unregister(&self, registration: Registration) {
        self.with(|slots| {
            if let Some(entry) = slots.entries.get_mut(registration.slot) {
                if entry.0 == registration.generation {
                    entry.1 = None;
                }
            }
        });
    }

    /// Wakes every kept waker. Call after making the condition true.
    pub(crate) fn wake_all(&self) {
        crate::sync::fence(Ordering::SeqCst);
        if self.registered.load(Ordering::SeqCst) == 0 {
            return;
        }
        #[cfg(feature = "std")]
        let woken: std::vec::Vec<Waker> = self.with(|slots| {
            slots
                .entries
                .iter_mut()
                .filter_map(|e| e.1.take())
                .collect()
        });
        #[cfg(not(feature = "std"))]
        let woken: [Option<Waker>; SLOTS] = {
            let mut woken = [const { None }; SLOTS];
            self.with(|slots| {
                for (i, e) in slots.entries.iter_mut().enumerate() {
                    woken[i] = e.1.take();
                }
            });
            woken
        };
        #[cfg(feature = "std")]
        for w in woken {
            w.wake();
        }
        #[cfg(not(feature = "std"))]
        for w in woken.into_iter().flatten() {
            w.wake();
        }
    }
}

crate::sync::const_fn_unless_loom! {
    fn new_lock() -> Lock {
        #[cfg(feature = "std")]
        {
            Lock::new(Slots::new())
        }
        #[cfg(not(feature = "std"))]
        {
            critical_section::Mutex::new(core::cell::RefCell::new(Slots::new()))
        }
    }
}

#[cfg(all(test, feature = "std", not(loom)))]
mod tests {
    extern crate std;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    use std::task::Wake;

    use super::*;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn counter() -> (Arc<Count>, Waker) {
        let c = Arc::new(Count(AtomicUsize::new(0)));
        (c.clone(), Waker::from(c))
    }

    fn woken(c: &Count) -> usize {
        c.0.load(std::sync::atomic::Ordering::SeqCst)
    }

    #[test]
    fn wakes_every_registered_waiter_once() {
        let set = WakerSet::new();
        let (a, wa) = counter();
        let (b, wb) = counter();
        set.register(&wa, None);
        set.register(&wb, None);
        set.wake_all();
        set.wake_all(); // nothing left to wake
        assert_eq!((woken(&a), woken(&b)), (1, 1));
    }

    #[test]
    fn many_waiters_sleep_until_a_release() {
        // with std the set grows: registering never wakes anybody
        let set = WakerSet::new();
        let counters: std::vec::Vec<_> = (0..4 * SLOTS).map(|_| counter()).collect();
        for (_, w) in &counters {
            set.register(w, None);
        }
        assert!(counters.iter().all(|(c, _)| woken(c) == 0));
        set.wake_all();
        assert!(counters.iter().all(|(c, _)| woken(c) == 1));
    }

    #[test]
    fn unregister_only_clears_its_own_generation() {
        let set = WakerSet::new();
        let (a, wa) = counter();
        let (b, wb) = counter();
        let ra = set.register(&wa, None);
        set.unregister(ra);
        let rb = set.register(&wb, None);
        assert_eq!(rb.slot, ra.slot); // the slot was reused
        set.unregister(ra); // stale: must not remove b
        set.wake_all();
        assert_eq!((woken(&a), woken(&b)), (0, 1));
        // re-registering with a live registration updates it in place
        let r1 = set.register(&wa, None);
        let r2 = set.register(&wa, Some(r1));
        assert_eq!(r1, r2);
    }
}
