//! `AtomicU32` and `AtomicU64` for targets that lack them, as a
//! `critical_section::Mutex` around a plain cell: the same methods (those
//! tollgate uses) and the same answers, each operation one critical section.
//!
//! [`sync`](super) exports them, under the std names, where the target has
//! no native atomic of that width and no `std`: `AtomicU64` on every 32-bit
//! microcontroller (thumbv6m, thumbv7m, thumbv7em, riscv32imc, riscv32imac,
//! ...), `AtomicU32` where there is no compare-and-swap at all (thumbv6m,
//! riscv32imc). The final binary provides the critical section (on a
//! single-core Cortex-M, cortex-m's `critical-section-single-core`:
//! interrupts masked for the few instructions of one operation; a
//! multi-core chip's HAL provides one that also takes a hardware lock).
//! Unlike a lock table, a critical section never spins on a lock held by the
//! code an interrupt handler interrupted: these atomics are interrupt-safe.
//! They are not lock-free (`LockFreedom::IS_LOCK_FREE` says so).
//!
//! The orderings are accepted and ignored: a critical section orders every
//! operation inside it before every one after it.

use core::cell::Cell;
use core::fmt;

use critical_section::Mutex;

use super::Ordering;

macro_rules! critical_atomic {
    ($(#[$doc:meta])* $name:ident, $int:ty) => {
        $(#[$doc])*
        pub struct $name(Mutex<Cell<$int>>);

        #[allow(dead_code)]
        impl $name {
            /// An atomic holding `value`.
            #[must_use]
            pub const fn new(value: $int) -> Self {
                Self(Mutex::new(Cell::new(value)))
            }

            /// Runs `f` on the cell inside one critical section.
            #[inline]
            fn with<R>(&self, f: impl FnOnce(&Cell<$int>) -> R) -> R {
                critical_section::with(|cs| f(self.0.borrow(cs)))
            }

            /// The current value.
            #[inline]
            pub fn load(&self, _order: Ordering) -> $int {
                self.with(Cell::get)
            }

            /// Replaces the value.
            #[inline]
            pub fn store(&self, value: $int, _order: Ordering) {
                self.with(|c| c.set(value));
            }

            /// Replaces the value; the previous one.
            #[inline]
            pub fn swap(&self, value: $int, _order: Ordering) -> $int {
                self.with(|c| c.replace(value))
            }

            /// Replaces the value with `new` if it is `current`.
            ///
            /// # Errors
            /// The value found, if it was not `current` (nothing changed).
            #[inline]
            pub fn compare_exchange(
                &self,
                current: $int,
                new: $int,
                _success: Ordering,
                _failure: Ordering,
            ) -> Result<$int, $int> {
                self.with(|c| {
                    let found = c.get();
                    if found == current {
                        c.set(new);
                        Ok(found)
                    } else {
                        Err(found)
                    }
                })
            }

            /// [`compare_exchange`](Self::compare_exchange): never fails
            /// spuriously.
            ///
            /// # Errors
            /// The value found, if it was not `current` (nothing changed).
            #[inline]
            pub fn compare_exchange_weak(
                &self,
                current: $int,
                new: $int,
                success: Ordering,
                failure: Ordering,
            ) -> Result<$int, $int> {
                self.compare_exchange(current, new, success, failure)
            }

            /// Adds `value`, wrapping on overflow; the previous value.
            #[inline]
            pub fn fetch_add(&self, value: $int, _order: Ordering) -> $int {
                self.with(|c| c.replace(c.get().wrapping_add(value)))
            }

            /// Subtracts `value`, wrapping on overflow; the previous value.
            #[inline]
            pub fn fetch_sub(&self, value: $int, _order: Ordering) -> $int {
                self.with(|c| c.replace(c.get().wrapping_sub(value)))
            }

            /// Stores the larger of the value and `value`; the previous value.
            #[inline]
            pub fn fetch_max(&self, value: $int, _order: Ordering) -> $int {
                self.with(|c| c.replace(c.get().max(value)))
            }

            /// Stores the smaller of the value and `value`; the previous value.
            #[inline]
            pub fn fetch_min(&self, value: $int, _order: Ordering) -> $int {
                self.with(|c| c.replace(c.get().min(value)))
            }

            /// Stores what `f` returns for the current value (`None`: leave
            /// it), all in one critical section.
            ///
            /// # Errors
            /// The current value, if `f` returned `None`.
            #[inline]
            pub fn fetch_update(
                &self,
                _set_order: Ordering,
                _fetch_order: Ordering,
                mut f: impl FnMut($int) -> Option<$int>,
            ) -> Result<$int, $int> {
                self.with(|c| {
                    let previous = c.get();
                    match f(previous) {
                        Some(new) => {
                            c.set(new);
                            Ok(previous)
                        }
                        None => Err(previous),
                    }
                })
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new(0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.load(Ordering::Relaxed), f)
            }
        }
    };
}

critical_atomic!(
    /// A `u64` whose every operation runs in one critical section (see the
    /// [module documentation](self)).
    AtomicU64,
    u64
);
critical_atomic!(
    /// A `u32` whose every operation runs in one critical section (see the
    /// [module documentation](self)).
    AtomicU32,
    u32
);

#[cfg(test)]
mod tests {
    use super::{AtomicU32, AtomicU64, Ordering::Relaxed};

    #[test]
    fn critical_atomics_answer_as_core_atomics_do() {
        let a = AtomicU64::new(u64::MAX - 1);
        assert_eq!(a.fetch_add(3, Relaxed), u64::MAX - 1);
        assert_eq!(a.load(Relaxed), 1); // wrapped
        assert_eq!(a.fetch_sub(2, Relaxed), 1);
        assert_eq!(a.load(Relaxed), u64::MAX);
        assert_eq!(a.compare_exchange(5, 6, Relaxed, Relaxed), Err(u64::MAX));
        assert_eq!(
            a.compare_exchange_weak(u64::MAX, 6, Relaxed, Relaxed),
            Ok(u64::MAX)
        );
        assert_eq!(a.swap(9, Relaxed), 6);
        assert_eq!(a.fetch_max(4, Relaxed), 9);
        assert_eq!(a.fetch_min(4, Relaxed), 9);
        assert_eq!(a.load(Relaxed), 4);
        assert_eq!(
            a.fetch_update(Relaxed, Relaxed, |v| v.checked_sub(5)),
            Err(4)
        );
        assert_eq!(a.fetch_update(Relaxed, Relaxed, |v| Some(v * 10)), Ok(4));
        a.store(7, Relaxed);
        assert_eq!(a.load(Relaxed), 7);

        let b = AtomicU32::default();
        assert_eq!(b.fetch_sub(1, Relaxed), 0);
        assert_eq!(b.load(Relaxed), u32::MAX);
    }
}
