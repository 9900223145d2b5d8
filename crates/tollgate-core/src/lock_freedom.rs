//! Which limiters are lock-free, and which may be shared with an interrupt
//! handler, on the target you build for.
//!
//! Every limiter, state and keyed table implements [`LockFreedom`]: two
//! constants computed from the build's cfgs. Assert them where it matters,
//! and a build that would deadlock in an interrupt does not compile:
//!
//! ```
//! use tollgate::tick::TickGcra;
//! use tollgate::{Bucket, LockFreedom};
//!
//! // this bucket is checked from an interrupt handler as well
//! const _: () = assert!(Bucket::<TickGcra>::IS_INTERRUPT_SAFE);
//! ```
//!
//! - [`IS_LOCK_FREE`](LockFreedom::IS_LOCK_FREE): a check, refund or
//!   snapshot never waits for another context: native atomic instructions.
//!   A critical section is *not* counted (on a multi-core chip it is a
//!   lock), nor is a spin lock or a mutex.
//! - [`IS_INTERRUPT_SAFE`](LockFreedom::IS_INTERRUPT_SAFE): the limiter may
//!   be used from an interrupt handler *and* from the code it interrupts
//!   (on the same core) without a deadlock: lock-free, or a critical
//!   section (which masks the interrupt while it is held). What is not:
//!   tollgate's spin lock (the sliding window), whose holder an interrupt
//!   handler can never wait out, and the `std` locks.
//!
//! # Per target
//!
//! Without `std`, an atomic the target lacks is a critical section
//! (`critical_section::with` around a plain cell, each operation one
//! critical section; the final binary provides the implementation, e.g.
//! cortex-m's `critical-section-single-core`). No feature of any atomics
//! crate is involved. "LF / IS" = `IS_LOCK_FREE` / `IS_INTERRUPT_SAFE`:
//!
//! | target | `TickState` (32-bit [`tick`](crate::tick) buckets) | `GcraState`, `FixedWindowState` (`AtomicU64`) |
//! |---|---|---|
//! | thumbv6m-none-eabi, riscv32imc-unknown-none-elf | no / yes (critical section) | no / yes (critical section) |
//! | thumbv7m-none-eabi, thumbv7em-none-eabi(hf), thumbv8m | **yes / yes** (`LDREX`/`STREX`) | no / yes (critical section) |
//! | riscv32imac-unknown-none-elf | **yes / yes** (`LR.W`/`SC.W`) | no / yes (critical section) |
//! | x86_64, aarch64, i686, wasm32 | yes / yes | yes / yes (native) |
//!
//! So on a microcontroller the 32-bit tick buckets are the lock-free ones,
//! and every bucket is interrupt-safe. With `std` on a 32-bit target
//! without native 64-bit atomics (mips, armv5te, powerpc), `AtomicU64` is
//! `portable-atomic`'s lock table instead: no / no.
//!
//! Always, on every target:
//!
//! | type | LF / IS |
//! |---|---|
//! | [`SlidingWindowState`], `Bucket<SlidingWindow<N>>` | no / no (a spin lock) |
//! | [`HeaplessKeyedTable`] | no / as its algorithm (a critical section around the map; the states inside are still the algorithm's atomics) |
//! | `ShardedKeyedTable` (`std`) | no / no (reader-writer locks) |
//! | `LockFreeGcraTable` (`std`) | checks of tracked keys: as `AtomicU128` (`portable-atomic`'s: yes on aarch64; on x86_64 decided at run time by `cmpxchg16b`, so the constant says no unless built with `-C target-feature=+cmpxchg16b` and [`LockFreedom::is_lock_free`] says yes on almost every CPU; **no** on i686, wasm32, 32-bit Arm and RISC-V, where it falls back to its lock table) / no (inserts lock a mutex) |
//! | [`LiveBucket`] | no (a check that meets a quota change waits for it) / without `std`, as `AtomicU64` (changes run in a critical section); with `std`, no |
//! | [`ConcurrencyLimiter`] | no (releases wake async waiters under a lock) / without `std`, yes (a critical section); with `std`, no |
//! | `Bucket<A>`, `BucketRef<A>`, `RateLimiter<C, L>`, `&L`, `Arc<L>`, `Box<L>` | as what they hold |
//! | [`Chain<A, B>`](crate::Chain) | both members |
//! | [`WithStats<L>`](crate::WithStats) | `L` and `AtomicU64` (its counters) |
//!
//! # Evidence
//!
//! `src/sync.rs` picks each atomic: `core::sync::atomic`'s under
//! `target_has_atomic = "32"` / `"64"`, otherwise (without `std`) the
//! critical-section ones of `sync::critical`. `examples/firmware` hammers one
//! tick bucket and one 64-bit `Gcra` bucket from SysTick and thread mode at
//! once under QEMU (thumbv6m on `microbit`, thumbv7m on `lm3s6965evb`,
//! thumbv7em on `mps2-an386`): each finishes with the exact count.
//! (Earlier, the 64-bit state used `portable-atomic`'s lock
//! table on thumbv7m, and that test hung there: an interrupt spun on the
//! lock held by the code it interrupted.)

use crate::chain::Chain;
use crate::concurrency::ConcurrencyLimiter;
use crate::gcra::{Gcra, GcraState};
use crate::keyed::HeaplessKeyedTable;
use crate::limiter::{Algorithm, Bucket, BucketRef};
use crate::live::LiveBucket;
use crate::rate_limiter::RateLimiter;
use crate::stats::WithStats;
use crate::sync::{RMW_U32_LOCK_FREE, U32_INTERRUPT_SAFE, U64_INTERRUPT_SAFE, U64_LOCK_FREE};
use crate::tick::{TickGcra, TickState};
use crate::window::{FixedWindow, FixedWindowState, SlidingWindow, SlidingWindowState};

/// Whether a limiter is lock-free, and whether it may be shared with an
/// interrupt handler, on this build. See the [module documentation](self)
/// for the definitions and the per-target table.
///
/// ```
/// use tollgate::tick::TickState;
/// use tollgate::{Bucket, Gcra, GcraState, LockFreedom, SlidingWindow};
///
/// // a host with native 64-bit atomics
/// # #[cfg(target_has_atomic = "64")] {
/// assert!(GcraState::IS_LOCK_FREE && Bucket::<Gcra>::IS_INTERRUPT_SAFE);
/// # }
/// assert!(TickState::IS_INTERRUPT_SAFE); // every target
/// assert!(!Bucket::<SlidingWindow<4>>::IS_INTERRUPT_SAFE); // a spin lock, every target
/// ```
pub trait LockFreedom {
    /// Every operation completes without waiting for another context (see
    /// the [module documentation](self)).
    const IS_LOCK_FREE: bool;

    /// The limiter may be used from an interrupt handler and from the code
    /// it interrupts on the same core without a deadlock.
    const IS_INTERRUPT_SAFE: bool;

    /// [`IS_LOCK_FREE`](Self::IS_LOCK_FREE), decided at run time where the
    /// hardware is detected then (the lock-free keyed table's 128-bit
    /// atomics on x86_64); otherwise the constant.
    ///
    /// ```
    /// use tollgate::{GcraState, LockFreedom};
    /// assert_eq!(GcraState::is_lock_free(), GcraState::IS_LOCK_FREE);
    /// ```
    #[must_use]
    fn is_lock_free() -> bool {
        Self::IS_LOCK_FREE
    }
}

macro_rules! flags {
    ($lf:expr, $is:expr; $($ty:ty),* $(,)?) => {$(
        impl LockFreedom for $ty {
            const IS_LOCK_FREE: bool = $lf;
            const IS_INTERRUPT_SAFE: bool = $is;
        }
    )*};
}

flags!(U64_LOCK_FREE, U64_INTERRUPT_SAFE; GcraState, Gcra, FixedWindowState, FixedWindow);
flags!(RMW_U32_LOCK_FREE, true; TickState, TickGcra);

impl<const N: usize> LockFreedom for SlidingWindowState<N> {
    const IS_LOCK_FREE: bool = false;
    const IS_INTERRUPT_SAFE: bool = false;
}

impl<const N: usize> LockFreedom for SlidingWindow<N> {
    const IS_LOCK_FREE: bool = false;
    const IS_INTERRUPT_SAFE: bool = false;
}

impl LockFreedom for LiveBucket {
    const IS_LOCK_FREE: bool = false;
    const IS_INTERRUPT_SAFE: bool = !cfg!(feature = "std") && U64_INTERRUPT_SAFE;
}

impl LockFreedom for ConcurrencyLimiter {
    const IS_LOCK_FREE: bool = false;
    const IS_INTERRUPT_SAFE: bool = !cfg!(feature = "std") && U32_INTERRUPT_SAFE;
}

impl<A: Algorithm + LockFreedom> LockFreedom for Bucket<A> {
    const IS_LOCK_FREE: bool = A::IS_LOCK_FREE;
    const IS_INTERRUPT_SAFE: bool = A::IS_INTERRUPT_SAFE;
}

impl<A: Algorithm + LockFreedom> LockFreedom for BucketRef<'_, A> {
    const IS_LOCK_FREE: bool = A::IS_LOCK_FREE;
    const IS_INTERRUPT_SAFE: bool = A::IS_INTERRUPT_SAFE;
}

impl<A: LockFreedom, B: LockFreedom> LockFreedom for Chain<A, B> {
    const IS_LOCK_FREE: bool = A::IS_LOCK_FREE && B::IS_LOCK_FREE;
    const IS_INTERRUPT_SAFE: bool = A::IS_INTERRUPT_SAFE && B::IS_INTERRUPT_SAFE;
    fn is_lock_free() -> bool {
        A::is_lock_free() && B::is_lock_free()
    }
}

impl<L: LockFreedom> LockFreedom for WithStats<L> {
    const IS_LOCK_FREE: bool = L::IS_LOCK_FREE && U64_LOCK_FREE;
    const IS_INTERRUPT_SAFE: bool = L::IS_INTERRUPT_SAFE && U64_INTERRUPT_SAFE;
    fn is_lock_free() -> bool {
        L::is_lock_free() && U64_LOCK_FREE
    }
}

impl<C, L: LockFreedom> LockFreedom for RateLimiter<C, L> {
    const IS_LOCK_FREE: bool = L::IS_LOCK_FREE;
    const IS_INTERRUPT_SAFE: bool = L::IS_INTERRUPT_SAFE;
    fn is_lock_free() -> bool {
        L::is_lock_free()
    }
}

impl<L: LockFreedom + ?Sized> LockFreedom for &L {
    const IS_LOCK_FREE: bool = L::IS_LOCK_FREE;
    const IS_INTERRUPT_SAFE: bool = L::IS_INTERRUPT_SAFE;
    fn is_lock_free() -> bool {
        L::is_lock_free()
    }
}

#[cfg(feature = "std")]
impl<L: LockFreedom + ?Sized> LockFreedom for std::sync::Arc<L> {
    const IS_LOCK_FREE: bool = L::IS_LOCK_FREE;
    const IS_INTERRUPT_SAFE: bool = L::IS_INTERRUPT_SAFE;
    fn is_lock_free() -> bool {
        L::is_lock_free()
    }
}

#[cfg(feature = "std")]
impl<L: LockFreedom + ?Sized> LockFreedom for std::boxed::Box<L> {
    const IS_LOCK_FREE: bool = L::IS_LOCK_FREE;
    const IS_INTERRUPT_SAFE: bool = L::IS_INTERRUPT_SAFE;
    fn is_lock_free() -> bool {
        L::is_lock_free()
    }
}

impl<K, A: Algorithm + LockFreedom, const N: usize, Q> LockFreedom
    for HeaplessKeyedTable<K, A, N, Q>
{
    const IS_LOCK_FREE: bool = false;
    const IS_INTERRUPT_SAFE: bool = A::IS_INTERRUPT_SAFE;
}

#[cfg(feature = "std")]
impl<K, A: Algorithm, S, Q> LockFreedom for crate::keyed::ShardedKeyedTable<K, A, S, Q> {
    const IS_LOCK_FREE: bool = false;
    const IS_INTERRUPT_SAFE: bool = false;
}

#[cfg(feature = "std")]
impl<K, S, Q> LockFreedom for crate::keyed::LockFreeGcraTable<K, S, Q> {
    const IS_LOCK_FREE: bool = crate::sync::U128_LOCK_FREE;
    const IS_INTERRUPT_SAFE: bool = false;
    fn is_lock_free() -> bool {
        crate::sync::u128_is_lock_free()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_has_native_atomics() {
        // x86_64 / aarch64 CI hosts: 32- and 64-bit atomics are native
        const { assert!(TickState::IS_LOCK_FREE && TickState::IS_INTERRUPT_SAFE) };
        const { assert!(GcraState::IS_LOCK_FREE && GcraState::IS_INTERRUPT_SAFE) };
        const { assert!(Bucket::<TickGcra>::IS_LOCK_FREE) };
        const { assert!(Chain::<Bucket<Gcra>, Bucket<TickGcra>>::IS_INTERRUPT_SAFE) };
        const { assert!(!Chain::<Bucket<Gcra>, Bucket<SlidingWindow<2>>>::IS_INTERRUPT_SAFE) };
        const { assert!(!HeaplessKeyedTable::<u8, Gcra, 4>::IS_LOCK_FREE) };
        const { assert!(HeaplessKeyedTable::<u8, TickGcra, 4>::IS_INTERRUPT_SAFE) };
        // with `std` the waker set and live changes use std locks ...
        #[cfg(feature = "std")]
        const {
            assert!(!ConcurrencyLimiter::IS_INTERRUPT_SAFE && !LiveBucket::IS_INTERRUPT_SAFE)
        };
        // ... without it, critical sections (and a native `AtomicU64` here)
        #[cfg(not(feature = "std"))]
        const {
            assert!(ConcurrencyLimiter::IS_INTERRUPT_SAFE && LiveBucket::IS_INTERRUPT_SAFE)
        };
    }
}
