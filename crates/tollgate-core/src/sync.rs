//! The one place that names atomic types and locks.
//!
//! Every atomic (and every lock of the `std` keyed tables and of the crates
//! built on this one) in tollgate comes from here, so that a `--cfg loom` build swaps all of them for loom's
//! model-checked twins at once.
//!
//! Outside loom, each atomic is the target's own where it has one
//! (`core::sync::atomic`). Where it has none, without `std` (every 32-bit
//! microcontroller for `AtomicU64`; thumbv6m and riscv32imc, which have no
//! compare-and-swap, for `AtomicU32`), it is a `critical_section::Mutex`
//! around a plain cell with the same methods (`critical` below): the final
//! binary provides the critical section, as it does for the `no_std` keyed
//! table, and an interrupt handler can never spin on a lock held by the code
//! it interrupted. So a `no_std` build needs no feature of any atomics
//! crate, on any target. With `std` on a 32-bit target without 64-bit
//! atomics (mips, armv5te, powerpc), `AtomicU64` is `portable-atomic`'s
//! lock table instead (threads, no interrupts); `portable-atomic` also
//! supplies the `std` keyed table's `AtomicU128`.
//!
//! The 32-bit tick buckets ([`crate::tick`]) keep their state in an
//! `RmwU32`: native compare-and-swap on this module's `AtomicU32` where
//! the target has it (`cfg(target_has_atomic = "32")`), a
//! `critical_section::with` around a plain cell where it does not
//! (thumbv6m, riscv32imc). The
//! `*_LOCK_FREE` / `*_INTERRUPT_SAFE` flags below say what each atomic is
//! on the build at hand; [`crate::lock_freedom`] publishes them per type.
//!
//! Memory ordering: each limiter keeps all of its state in one atomic word
//! and publishes no other data through it, so read-modify-write operations on
//! that word are totally ordered by themselves and `Relaxed` is sufficient.
//! Limiters that use more than one word document their orderings locally.

#[cfg(all(not(loom), target_has_atomic = "32"))]
#[allow(unused_imports)]
pub use core::sync::atomic::AtomicU32;
#[cfg(all(not(loom), target_has_atomic = "64"))]
#[allow(unused_imports)]
pub use core::sync::atomic::AtomicU64;
#[cfg(not(loom))]
#[allow(unused_imports)]
pub use core::sync::atomic::Ordering;
#[cfg(all(not(loom), not(target_has_atomic = "32")))]
#[allow(unused_imports)]
pub use critical::AtomicU32;
#[cfg(all(not(loom), not(target_has_atomic = "64"), not(feature = "std")))]
#[allow(unused_imports)]
pub use critical::AtomicU64;
#[cfg(loom)]
#[allow(unused_imports)]
pub use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};
#[cfg(all(loom, feature = "std"))]
#[allow(unused_imports)]
pub use loom_u128::AtomicU128;
#[cfg(all(not(loom), not(target_has_atomic = "64"), feature = "std"))]
#[allow(unused_imports)]
pub use portable_atomic::AtomicU64;
/// 128-bit slots of the lock-free keyed table (key and TAT in one word).
/// Loom has no 128-bit atomic: under loom it is the `loom_u128` shim below.
#[cfg(all(not(loom), feature = "std"))]
#[allow(unused_imports)]
pub use portable_atomic::AtomicU128;

/// Atomics as critical sections, for targets without native ones (and for
/// this crate's tests of them on any target).
#[cfg(any(
    test,
    all(not(loom), not(target_has_atomic = "32")),
    all(not(loom), not(target_has_atomic = "64"), not(feature = "std"))
))]
pub mod critical;

#[cfg(not(loom))]
#[allow(unused_imports)]
pub use core::hint::spin_loop;
#[cfg(not(loom))]
#[allow(unused_imports)]
pub use core::sync::atomic::fence;
/// The busy-wait hint for spin loops (loom's yields to its scheduler, so a
/// model of a spin lock terminates).
#[cfg(loom)]
#[allow(unused_imports)]
pub use loom::hint::spin_loop;
#[cfg(loom)]
#[allow(unused_imports)]
pub use loom::sync::atomic::fence;

// ---------------------------------------------------------------------------
// What the atomics above are on this build (see `crate::lock_freedom`):
// native atomics are lock-free and interrupt-safe; the critical-section ones
// are interrupt-safe, not lock-free. With `std` and no native 64-bit
// atomics, `AtomicU64` is portable-atomic's lock table (its `fallback`
// feature, `src/imp/fallback/` in portable-atomic 1.15), whose writers spin
// without masking interrupts: neither.

/// `AtomicU64` (every 64-bit bucket, window and counter) never waits for
/// another context.
#[allow(dead_code)]
pub(crate) const U64_LOCK_FREE: bool = cfg!(target_has_atomic = "64");
/// `AtomicU64` may be used from an interrupt handler and from the code it
/// interrupts (native, or a critical section; not a lock table).
#[allow(dead_code)]
pub(crate) const U64_INTERRUPT_SAFE: bool = U64_LOCK_FREE || !cfg!(feature = "std");
/// `AtomicU32` never waits for another context: native on every target with
/// compare-and-swap, a critical section on thumbv6m / riscv32imc.
#[allow(dead_code)]
pub(crate) const U32_LOCK_FREE: bool = cfg!(target_has_atomic = "32");
/// `AtomicU32` may be used from an interrupt handler and from the code it
/// interrupts: native or a critical section, on every target.
#[allow(dead_code)]
pub(crate) const U32_INTERRUPT_SAFE: bool = true;
/// `AtomicU128` (the lock-free keyed table's slots) is lock-free on every
/// CPU this build can run on (x86_64 without a compile-time `cmpxchg16b`
/// says `false` here and decides at run time: [`u128_is_lock_free`]).
#[cfg(feature = "std")]
#[allow(dead_code)]
pub(crate) const U128_LOCK_FREE: bool = portable_atomic::AtomicU128::is_always_lock_free();
/// Whether `AtomicU128` is lock-free on this CPU (run-time detection where
/// portable-atomic has it).
#[cfg(feature = "std")]
#[allow(dead_code)]
pub(crate) fn u128_is_lock_free() -> bool {
    portable_atomic::AtomicU128::is_lock_free()
}
// `fetch_update` under a name of its own: core's atomics are renaming it
// `try_update` (deprecated on nightly, not stable at this crate's MSRV).
macro_rules! update_fns {
    ($($(#[$doc:meta])* $name:ident: $atomic:ident, $int:ty;)*) => {$(
        $(#[$doc])*
        ///
        /// Stores what `f` returns for the current value (`None`: leave it),
        /// by a `Relaxed` compare-and-swap loop that calls `f` again on the
        /// value another context stored meanwhile: what `fetch_update` does.
        ///
        /// # Errors
        /// The current value, if `f` returned `None` (nothing stored).
        #[inline]
        pub fn $name(atomic: &$atomic, mut f: impl FnMut($int) -> Option<$int>) -> Result<$int, $int> {
            let mut current = atomic.load(Ordering::Relaxed);
            while let Some(new) = f(current) {
                match atomic.compare_exchange_weak(current, new, Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(previous) => return Ok(previous),
                    Err(found) => current = found,
                }
            }
            Err(current)
        }
    )*};
}
update_fns! {
    /// Updates an [`AtomicU32`] of this module; the previous value.
    update_u32: AtomicU32, u32;
    /// Updates an [`AtomicU64`] of this module; the previous value.
    update_u64: AtomicU64, u64;
}

/// [`RmwU32`] is native compare-and-swap (not a critical section).
#[allow(dead_code)]
pub(crate) const RMW_U32_LOCK_FREE: bool = cfg!(target_has_atomic = "32");

// ---------------------------------------------------------------------------
// A 32-bit word updated by read-modify-write, never through portable-atomic's
// emulation: native compare-and-swap where the target has it (LDREX/STREX on
// Armv7-M, LR/SC on RISC-V "A", a locked CMPXCHG on x86), otherwise a
// `critical_section::with` around a plain cell (thumbv6m, riscv32imc: loads
// and stores only). Under loom it is loom's `AtomicU32`.

#[cfg(target_has_atomic = "32")]
mod rmw32 {
    use super::{AtomicU32, Ordering};

    /// A `u32` changed only by [`update`](RmwU32::update): a
    /// compare-and-swap loop on one atomic word (`Relaxed`: the word
    /// publishes no other data).
    #[derive(Debug, Default)]
    #[repr(transparent)]
    pub(crate) struct RmwU32(AtomicU32);

    impl RmwU32 {
        crate::sync::const_fn_unless_loom! {
            /// A word holding `value`.
            pub(crate) fn new(value: u32) -> Self {
                Self(AtomicU32::new(value))
            }
        }

        /// The current value.
        #[inline]
        pub(crate) fn load(&self) -> u32 {
            self.0.load(Ordering::Relaxed)
        }

        /// Replaces the value (only for a caller that excludes every other
        /// operation, such as a keyed table converting under its lock).
        #[inline]
        pub(crate) fn store(&self, value: u32) {
            self.0.store(value, Ordering::Relaxed);
        }

        /// Applies `f` to the current value: `f` returns its answer and the
        /// value to store (`None`: leave it). If another context changed
        /// the word meanwhile, `f` runs again on the new value, so the
        /// answer returned is always the one whose store took effect.
        #[inline]
        pub(crate) fn update<R>(&self, mut f: impl FnMut(u32) -> (R, Option<u32>)) -> R {
            let mut current = self.0.load(Ordering::Relaxed);
            loop {
                let (answer, store) = f(current);
                let Some(new) = store else {
                    return answer;
                };
                match self.0.compare_exchange_weak(
                    current,
                    new,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return answer,
                    Err(found) => current = found,
                }
            }
        }
    }
}

#[cfg(not(target_has_atomic = "32"))]
mod rmw32 {
    use core::cell::Cell;

    use critical_section::Mutex;

    /// A `u32` changed only inside `critical_section::with`: for targets
    /// without compare-and-swap. The final binary provides the critical
    /// section (on a single-core Cortex-M, cortex-m's
    /// `critical-section-single-core`: interrupts masked for the few
    /// instructions of one update).
    #[derive(Debug)]
    pub(crate) struct RmwU32(Mutex<Cell<u32>>);

    impl Default for RmwU32 {
        fn default() -> Self {
            Self::new(0)
        }
    }

    impl RmwU32 {
        /// A word holding `value`.
        pub(crate) const fn new(value: u32) -> Self {
            Self(Mutex::new(Cell::new(value)))
        }

        /// The current value.
        #[inline]
        pub(crate) fn load(&self) -> u32 {
            critical_section::with(|cs| self.0.borrow(cs).get())
        }

        /// Replaces the value.
        #[inline]
        pub(crate) fn store(&self, value: u32) {
            critical_section::with(|cs| self.0.borrow(cs).set(value));
        }

        /// Applies `f` to the current value inside one critical section and
        /// stores what it returns (`None`: leave it).
        #[inline]
        pub(crate) fn update<R>(&self, mut f: impl FnMut(u32) -> (R, Option<u32>)) -> R {
            critical_section::with(|cs| {
                let cell = self.0.borrow(cs);
                let (answer, store) = f(cell.get());
                if let Some(new) = store {
                    cell.set(new);
                }
                answer
            })
        }
    }
}

#[allow(unused_imports)]
pub(crate) use rmw32::RmwU32;

// The locks of the `std` keyed tables and of the queue's waiter list:
// std's, or loom's under loom so that a model sees their synchronisation.
// Both return `LockResult`; loom's
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
/// under `cfg(loom)`, where atomic constructors are not `const`: for a type
/// built on [`sync`](crate::sync)'s atomics that wants a `const`
/// constructor (a `static`) and loom models alike.
///
/// ```
/// use tollgate_core::sync::{AtomicU32, Ordering};
///
/// pub struct Counter(AtomicU32);
///
/// impl Counter {
///     tollgate_core::const_fn_unless_loom! {
///         /// A counter at zero.
///         pub fn new() -> Self {
///             Self(AtomicU32::new(0))
///         }
///     }
/// }
///
/// static HITS: Counter = Counter::new();
/// assert_eq!(HITS.0.fetch_add(1, Ordering::Relaxed), 0);
/// ```
#[macro_export]
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
pub(crate) use crate::const_fn_unless_loom;
