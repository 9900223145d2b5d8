//! The one place that names atomic types and locks.
//!
//! Every atomic (and every lock of the `std` keyed tables) in tollgate comes
//! from here, so that a `--cfg loom` build swaps all of them for loom's
//! model-checked twins at once. Loom cannot see
//! `portable_atomic` types: code written against them directly would pass a
//! loom model while being racy. Outside loom, `portable-atomic` supplies
//! `AtomicU64` on every target, including 32-bit microcontrollers without
//! native 64-bit atomics (through its `fallback` feature; the final binary
//! picks `critical-section` or `unsafe-assume-single-core`, never this crate).
//!
//! Memory ordering: each limiter keeps all of its state in one atomic word
//! and publishes no other data through it, so read-modify-write operations on
//! that word are totally ordered by themselves and `Relaxed` is sufficient.
//! Limiters that use more than one word document their orderings locally.

#[cfg(loom)]
#[allow(unused_imports)]
pub use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};
#[cfg(all(loom, feature = "std"))]
#[allow(unused_imports)]
pub use loom_u128::AtomicU128;
/// 128-bit slots of the lock-free keyed table (key and TAT in one word).
/// Loom has no 128-bit atomic: under loom it is the `loom_u128` shim below.
#[cfg(not(loom))]
#[allow(unused_imports)]
pub use portable_atomic::AtomicU128;
#[cfg(not(loom))]
#[allow(unused_imports)]
pub use portable_atomic::{AtomicU32, AtomicU64, Ordering};

#[cfg(not(loom))]
#[allow(unused_imports)]
pub use core::hint::spin_loop;
/// The busy-wait hint for spin loops (loom's yields to its scheduler, so a
/// model of a spin lock terminates).
#[cfg(loom)]
#[allow(unused_imports)]
pub use loom::hint::spin_loop;
#[cfg(loom)]
#[allow(unused_imports)]
pub use loom::sync::atomic::fence;
#[cfg(not(loom))]
#[allow(unused_imports)]
pub use portable_atomic::fence;

// The locks of the `std` keyed tables: std's, or loom's under loom so that
// a model sees their synchronisation. Both return `LockResult`; loom's
// never poison, and have no `clear_poison` (see [`clear_poison`]).
#[cfg(all(loom, feature = "std"))]
#[allow(unused_imports)]
pub use loom::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
#[cfg(all(feature = "std", not(loom)))]
#[allow(unused_imports)]
pub use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Clears a poisoned lock (std's `RwLock::clear_poison`). Loom's locks
/// never poison, so under loom there is nothing to clear.
#[cfg(all(feature = "std", not(loom)))]
#[allow(dead_code)]
#[inline]
pub fn clear_poison<T>(lock: &RwLock<T>) {
    lock.clear_poison();
}
/// Clears a poisoned lock: loom's locks never poison, so nothing to do.
#[cfg(all(loom, feature = "std"))]
#[allow(dead_code)]
#[inline]
pub fn clear_poison<T>(_lock: &RwLock<T>) {}

#[cfg(all(loom, feature = "std"))]
mod loom_u128 {
    //! A 128-bit atomic for loom models, which have none.
    //!
    //! Each operation runs under a loom [`Mutex`](loom::sync::Mutex), so
    //! loom explores interleavings at the granularity of whole 128-bit
    //! operations: each `load`, `store` and `compare_exchange` is one atomic
    //! step. That is what `portable-atomic` provides on every target
    //! (`cmpxchg16b`, `casp`/`ldxp`, or its lock-based fallback). Two loom
    //! `AtomicU64`s would not be: a compare-and-swap of both halves could
    //! then interleave with another thread's.
    //!
    //! What the shim does not model: orderings weaker than sequential
    //! consistency on the slot itself (every operation synchronises through
    //! the mutex, as if `AcqRel`), and spurious failures of
    //! `compare_exchange_weak` (it never fails spuriously). Loom still sees
    //! every other atomic of the table (its sequence counter, length and
    //! sweep hint) with the orderings the code asks for.

    use super::Ordering;
    use loom::sync::Mutex;

    /// A `u128` whose every operation is one atomic step (see the module
    /// docs). Only the methods the lock-free keyed table uses.
    #[derive(Debug)]
    pub struct AtomicU128(Mutex<u128>);

    impl AtomicU128 {
        /// A new atomic holding `value`.
        pub fn new(value: u128) -> Self {
            Self(Mutex::new(value))
        }

        fn with<R>(&self, f: impl FnOnce(&mut u128) -> R) -> R {
            let mut guard = self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            f(&mut guard)
        }

        /// The current value.
        pub fn load(&self, _order: Ordering) -> u128 {
            self.with(|v| *v)
        }

        /// Replaces the value.
        pub fn store(&self, value: u128, _order: Ordering) {
            self.with(|v| *v = value);
        }

        /// Replaces the value with `new` if it is `current`; the previous
        /// value either way (`Ok` if replaced).
        ///
        /// # Errors
        /// The value found, if it was not `current`.
        pub fn compare_exchange(
            &self,
            current: u128,
            new: u128,
            _success: Ordering,
            _failure: Ordering,
        ) -> Result<u128, u128> {
            self.with(|v| {
                if *v == current {
                    *v = new;
                    Ok(current)
                } else {
                    Err(*v)
                }
            })
        }

        /// [`compare_exchange`](Self::compare_exchange) (the shim never
        /// fails spuriously).
        ///
        /// # Errors
        /// The value found, if it was not `current`.
        pub fn compare_exchange_weak(
            &self,
            current: u128,
            new: u128,
            success: Ordering,
            failure: Ordering,
        ) -> Result<u128, u128> {
            self.compare_exchange(current, new, success, failure)
        }
    }
}

/// Declares a function that is `const fn` in normal builds and a plain `fn`
/// under `cfg(loom)`, where atomic constructors are not `const`.
macro_rules! const_fn_unless_loom {
    ($(#[$attr:meta])* $vis:vis fn $($rest:tt)*) => {
        #[cfg(not(loom))]
        $(#[$attr])*
        $vis const fn $($rest)*
        #[cfg(loom)]
        $(#[$attr])*
        $vis fn $($rest)*
    };
}
pub(crate) use const_fn_unless_loom;
