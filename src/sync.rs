//! The one place that names atomic types.
//!
//! Every atomic in tollgate comes from here, so that a `--cfg loom` build
//! swaps all of them for loom's model-checked twins at once. Loom cannot see
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
/// 128-bit slots of the lock-free keyed table (key and TAT in one word).
/// Loom has no 128-bit atomic, so that table does not exist under loom.
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
