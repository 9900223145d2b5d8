//! A small fixed set of task wakers, woken together: how a
//! [`ConcurrencyLimiter`](crate::ConcurrencyLimiter) wakes the tasks waiting
//! for a permit when one is released, on any executor (tokio, embassy, …),
//! without a timer and without allocating.
//!
//! Up to [`SLOTS`] wakers are kept. A task that registers while every slot is
//! taken wakes all of them and takes a slot (they poll again and re-register,
//! as embassy's `MultiWakerRegistration` does): with more waiters than slots
//! this costs extra polls, never a lost wake-up. Each slot has a generation,
//! so that a cancelled waiter can clear its own slot without clearing a
//! newer waiter's.
//!
//! The slots are behind `std::sync::Mutex` with feature `std` and a
//! `critical_section::Mutex` without it (`no_std`); either is held for a few
//! instructions. `registered` lets a release skip the lock when nobody
//! waits.

use core::task::Waker;

use crate::sync::{AtomicU32, Ordering};

/// How many wakers are kept before registering wakes them all.
pub(crate) const SLOTS: usize = 4;

#[derive(Debug)]
struct Slots {
    wakers: [Option<Waker>; SLOTS],
    generations: [u32; SLOTS],
}

impl Slots {
    const fn new() -> Self {
        Self {
            wakers: [const { None }; SLOTS],
            generations: [0; SLOTS],
        }
    }

    fn count(&self) -> u32 {
        self.wakers.iter().filter(|w| w.is_some()).count() as u32
    }
}

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
        let mut overflow: [Option<Waker>; SLOTS] = [const { None }; SLOTS];
        let registration = self.with(|slots| {
            if let Some(r) = previous {
                if slots.generations[r.slot] == r.generation {
                    if let Some(w) = &mut slots.wakers[r.slot] {
                        w.clone_from(waker);
                        return r;
                    }
                }
            }
            let slot = match slots.wakers.iter().position(Option::is_none) {
                Some(free) => free,
                None => {
                    // every slot taken: wake them all (outside the lock)
                    // and reuse the first
                    for (i, w) in slots.wakers.iter_mut().enumerate() {
                        overflow[i] = w.take();
                        slots.generations[i] = slots.generations[i].wrapping_add(1);
                    }
                    0
                }
            };
            slots.generations[slot] = slots.generations[slot].wrapping_add(1);
            slots.wakers[slot] = Some(waker.clone());
            Registration {
                slot,
                generation: slots.generations[slot],
            }
        });
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
            if slots.generations[registration.slot] == registration.generation {
                slots.wakers[registration.slot] = None;
            }
        });
    }

    /// Wakes every kept waker. Call after making the condition true.
    pub(crate) fn wake_all(&self) {
        crate::sync::fence(Ordering::SeqCst);
        if self.registered.load(Ordering::SeqCst) == 0 {
            return;
        }
        let mut woken: [Option<Waker>; SLOTS] = [const { None }; SLOTS];
        self.with(|slots| {
            for (i, w) in slots.wakers.iter_mut().enumerate() {
                woken[i] = w.take();
            }
        });
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
    fn overflow_wakes_the_others_instead_of_losing_them() {
        let set = WakerSet::new();
        let counters: std::vec::Vec<_> = (0..=SLOTS).map(|_| counter()).collect();
        for (_, w) in &counters[..SLOTS] {
            set.register(w, None);
        }
        // one more than fits: the kept ones are woken to re-register
        set.register(&counters[SLOTS].1, None);
        assert!(counters[..SLOTS].iter().all(|(c, _)| woken(c) == 1));
        set.wake_all();
        assert_eq!(woken(&counters[SLOTS].0), 1);
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
