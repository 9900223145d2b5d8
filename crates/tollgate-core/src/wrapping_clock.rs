//! [`WrappingClock`]: a [`Clock`] on a 16- or 32-bit hardware counter that
//! wraps.
//!
//! Hardware timers are 16 or 32 bits wide and wrap: a 32-bit counter at
//! 1 MHz wraps every 71.6 minutes, a 16-bit low-power timer at 32 768 Hz
//! every 2 seconds. A [`Clock`] must read a non-wrapping [`Timestamp`], so
//! the wraps have to be counted somewhere. `WrappingClock` counts them in
//! software, from the readings alone: give it a read function (or any type
//! implementing [`WrappingCounter`]) and the counter's frequency, read it
//! often enough, and it extends the counter to 64 bits of ticks, converted
//! exactly to nanoseconds.
//!
//! ```
//! use core::num::NonZeroU64;
//! use core::sync::atomic::{AtomicU32, Ordering};
//! use tollgate::{Clock, Timestamp, WrappingClock};
//!
//! // Stands in for a 16-bit timer register at 32 768 Hz.
//! static LPTIM_CNT: AtomicU32 = AtomicU32::new(0);
//! fn read_lptim() -> u16 {
//!     LPTIM_CNT.load(Ordering::SeqCst) as u16
//! }
//!
//! static CLOCK: WrappingClock<fn() -> u16> =
//!     WrappingClock::new(read_lptim, NonZeroU64::new(32_768).unwrap());
//!
//! // Five wraps of the 16-bit counter, read every 1.5 s (the limit is
//! // three quarters of a wrap: see "The read rule" below).
//! let mut ticks = 0u64;
//! for _ in 0..10 {
//!     ticks += 49_152;
//!     LPTIM_CNT.store(ticks as u32, Ordering::SeqCst); // the hardware keeps counting
//!     assert_eq!(CLOCK.ticks(), ticks); // ... and the clock keeps up across the wraps
//! }
//! assert_eq!(CLOCK.now(), Timestamp::from_secs(15));
//! assert_eq!(CLOCK.max_read_gap().as_millis(), 1_500);
//! ```
//!
//! # How the wraps are counted
//!
//! The clock keeps one `AtomicU32` of state: the high bits of the last
//! extended tick count it saw, in *units* of `2^s` ticks (`s` = 28 for a
//! 32-bit counter, 14 for a 16-bit one). A reading
//!
//! 1. loads the state (base `B = state · 2^s`),
//! 2. reads the counter (`raw`),
//! 3. loads the state again; if it changed, someone published a newer base
//!    between 1 and 3, and the reading starts over;
//! 4. extends: `ticks = B + ((raw − B) mod 2^W)` (`W` = 16 or 32 bits): the
//!    first instant at or after `B` at which the counter showed `raw`;
//! 5. publishes `ticks / 2^s` with one `fetch_max` if it moved past the
//!    state (once every `2^s` ticks: a quarter of a 16-bit wrap, a
//!    sixteenth of a 32-bit one; every other reading only loads).
//!
//! Nothing else is shared, so the update is atomic by construction: any
//! mix of thread-mode code and interrupt handlers (and of cores) may read
//! the clock at once. It takes no lock and never masks interrupts; the
//! state only grows (`fetch_max`), so a publication delayed by preemption
//! can never move it back. Step 3 is what makes a reader that was
//! interrupted between steps 1 and 2 safe: if the interrupt read the clock
//! past a unit boundary, the interrupted reading notices and starts over
//! (at most once per unit). The state goes through tollgate's `sync`
//! module, so the loom model in `loom-tests` explores these races.
//!
//! The state is one 32-bit word on purpose: a 64-bit atomic is lock-free
//! only where the target has 64-bit atomics; on a 32-bit microcontroller it
//! is a critical section. A 32-bit word is native on every target with
//! 32-bit compare-and-swap (thumbv7m, thumbv7em, riscv32imac); on thumbv6m
//! and riscv32imc it is a critical section too. All are safe in
//! interrupts.
//!
//! # The read rule
//!
//! **The clock must be read at least once in every span of
//! [`max_read_gap`](WrappingClock::max_read_gap) =
//! `2^W − 2^s` ticks**: 15/16 of a wrap for a 32-bit counter (67.1 minutes
//! of the 71.6 at 1 MHz), 3/4 of a wrap for a 16-bit one (1.5 s at
//! 32 768 Hz, 49 ms at 1 MHz). "Read" means a whole call of
//! [`now`](Clock::now) or [`ticks`](WrappingClock::ticks) that has
//! returned; readings by different threads and interrupts all count. Any
//! limiter check reads the clock, so a busy system obeys the rule by
//! itself; an idle one should read it from a periodic interrupt, such as
//! the counter's own overflow or compare interrupt, or a task that wakes
//! at least that often.
//!
//! **What happens otherwise.** A counter that went round a whole wrap
//! between two readings shows exactly what it would have shown without the
//! wrap, so a missed wrap cannot be detected from the counter: the clock
//! does not pretend to. It reconstructs the wrong period, and the error has
//! a fixed shape, pinned by the tests: the reading is exactly a whole
//! number of wrap periods *behind* the true time (never ahead: the
//! reconstruction is always the earliest candidate after the base), and
//! every later reading continues from there. A clock that is behind only
//! makes limiters refill later: it can never make one admit more than its
//! quota. Right after the missed wrap a reading can also be up to one unit
//! (`2^s` ticks) earlier than a reading before it; tollgate's limiters
//! take that as a stale reading and admit nothing extra for it.
//!
//! # Range, origin and resolution
//!
//! - The timestamp is ticks since the counter's last zero before the
//!   clock's first reading, converted exactly (rounded down to the
//!   nanosecond, the conversion of `EmbassyClock`, for any frequency).
//! - [`resolution`](Clock::resolution) is one tick rounded up to whole
//!   nanoseconds, so a limiter finer than a tick is refused where it meets
//!   this clock ([`ConfigError::ClockTooCoarse`](crate::ConfigError::ClockTooCoarse)).
//! - The extended count covers `(2^32 − 1) · 2^s` ticks
//!   ([`max_ticks`](WrappingClock::max_ticks)): `2^60` ticks for a 32-bit
//!   counter (36 years at 1 GHz, beyond `Timestamp`'s 584 years at 31 MHz
//!   or less), `2^46` for a 16-bit one (68 years at 32 768 Hz, but only
//!   2.2 years at 1 MHz: prescale a fast 16-bit timer, or use a 32-bit
//!   one, on a device that runs longer). At the end the clock stops at
//!   `max_ticks` for good: it never wraps back.
//!
//! # The read function
//!
//! It should be a plain read of the counter register (a volatile MMIO
//! load, or a HAL's `counter()`), safe to call from every context that
//! reads the clock. The clock orders it between its two state loads with
//! sequentially consistent atomics and a fence; a *software* counter shared
//! between cores must itself be read with `SeqCst` (as in the example), so
//! that no core sees a counter value older than the state it loaded.
//!
//! `ticks` and `now` cost two atomic loads, one read of the counter and a
//! fence, plus one `fetch_max` per unit; there is no division outside the
//! tick-to-nanosecond conversion.

use core::fmt;
use core::num::NonZeroU64;
use core::time::Duration;

use crate::clock::Clock;
use crate::sync::{AtomicU32, Ordering, fence, spin_loop};
use crate::ticks::TickRate;
use crate::time::Timestamp;

mod sealed {
    pub trait Sealed {}
    impl Sealed for u16 {}
    impl Sealed for u32 {}
}

/// The width of a wrapping hardware counter: implemented for `u16` and
/// `u32` only (sealed).
pub trait CounterWidth: Copy + sealed::Sealed {
    /// The counter's width in bits (16 or 32).
    const BITS: u32;

    /// The reading as a `u64`.
    #[doc(hidden)]
    fn widen(self) -> u64;
}

impl CounterWidth for u16 {
    const BITS: u32 = 16;
    #[inline]
    fn widen(self) -> u64 {
        u64::from(self)
    }
}

impl CounterWidth for u32 {
    const BITS: u32 = 32;
    #[inline]
    fn widen(self) -> u64 {
        u64::from(self)
    }
}

/// A free-running hardware counter that counts up by one per tick and
/// wraps from its maximum to zero: what a [`WrappingClock`] extends.
///
/// Implemented for every `Fn() -> u16` and `Fn() -> u32` (a function
/// pointer or a closure); implement it for a type that owns a timer.
/// A down-counter can be turned into an up-counter by subtracting its
/// reading from its maximum.
///
/// ```
/// use core::num::NonZeroU64;
/// use tollgate::wrapping_clock::WrappingCounter;
/// use tollgate::WrappingClock;
///
/// /// A 32-bit timer counting down from u32::MAX at 1 MHz.
/// struct Tim2;
/// impl WrappingCounter for Tim2 {
///     type Ticks = u32;
///     fn read(&self) -> u32 {
///         # let down_count: u32 = u32::MAX - 1_000;
///         u32::MAX - down_count // the register read goes here
///     }
/// }
///
/// let clock = WrappingClock::new(Tim2, NonZeroU64::new(1_000_000).unwrap());
/// assert_eq!(clock.ticks(), 1_000);
/// ```
pub trait WrappingCounter {
    /// `u16` or `u32`: the counter's width.
    type Ticks: CounterWidth;

    /// The counter's current value.
    fn read(&self) -> Self::Ticks;
}

impl<F, T> WrappingCounter for F
where
    F: Fn() -> T,
    T: CounterWidth,
{
    type Ticks = T;

    #[inline]
    fn read(&self) -> T {
        self()
    }
}

/// The state value that means "the extended count reached its end": the
/// clock then reads [`WrappingClock::max_ticks`] for good.
const ENDED: u32 = u32::MAX;

/// `s`: the state counts units of `2^s` ticks, leaving the top `W − s`
/// bits of the counter to tell a fresh reading from a stale one.
const fn unit_shift(bits: u32) -> u32 {
    if bits <= 16 { 14 } else { 28 }
}

/// A [`Clock`] that extends a 16- or 32-bit wrapping counter to a
/// [`Timestamp`], lock-free and safe to read from interrupt handlers. See
/// the [module documentation](self) for the algorithm, the rule on how
/// often it must be read and what happens when that rule is broken.
///
/// ```
/// use core::num::NonZeroU64;
/// use core::time::Duration;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use tollgate::{Clock, Quota, RateLimiter, WrappingClock};
///
/// // A 32-bit counter at 1 MHz, simulated: `hw` is the true tick count.
/// let hw = AtomicU64::new(u64::from(u32::MAX) - 10);
/// let clock = WrappingClock::new(|| hw.load(Ordering::SeqCst) as u32, NonZeroU64::new(1_000_000).unwrap());
/// assert_eq!(clock.resolution(), Duration::from_micros(1));
/// assert_eq!(clock.max_read_gap(), Duration::from_micros((1 << 32) - (1 << 28)));
///
/// let before = clock.now();
/// hw.fetch_add(20, Ordering::SeqCst); // the counter wraps
/// assert_eq!(clock.now() - before, Duration::from_micros(20));
///
/// // It is a Clock like any other.
/// let limiter = RateLimiter::token_bucket(Quota::per_second(100)?, &clock)?;
/// assert!(limiter.try_acquire().is_ok());
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
pub struct WrappingClock<C> {
    counter: C,
    /// The extended tick count of the latest published reading, divided
    /// by `2^s`; [`ENDED`] once the count reached its end.
    state: AtomicU32,
    ratio: TickRate,
}

impl<C: WrappingCounter> WrappingClock<C> {
    crate::sync::const_fn_unless_loom! {
        /// A clock on `counter`, which counts `hz` ticks per second.
        ///
        /// `const`, so the clock can be a `static` read from thread mode
        /// and from interrupt handlers alike (with a function pointer as
        /// the counter: `WrappingClock<fn() -> u32>`).
        #[must_use]
        pub fn new(counter: C, hz: NonZeroU64) -> Self {
            Self::with_rate(counter, TickRate::from_hz(hz.get()))
        }
    }

    crate::sync::const_fn_unless_loom! {
        /// A clock on `counter`, which ticks at `rate`: for a rate that is
        /// not a whole number of hertz (a `fugit` fraction, say).
        ///
        /// ```
        /// use tollgate::clock::TickRate;
        /// use tollgate::WrappingClock;
        ///
        /// fn counter() -> u16 { 0 }
        /// // a tick of 3/32768 s (a prescaled 32.768 kHz RTC)
        /// static CLOCK: WrappingClock<fn() -> u16> =
        ///     WrappingClock::with_rate(counter, TickRate::from_seconds_per_tick(3, 32_768));
        /// assert_eq!(CLOCK.ticks(), 0);
        /// ```
        #[must_use]
        pub fn with_rate(counter: C, ratio: TickRate) -> Self {
            Self {
                counter,
                state: AtomicU32::new(0),
                ratio,
            }
        }
    }

    const SHIFT: u32 = unit_shift(C::Ticks::BITS);
    const MASK: u64 = (1u64 << C::Ticks::BITS) - 1;

    /// The ticks since the clock's origin: the counter extended to 64 bits.
    ///
    /// Exact as long as the [read rule](self#the-read-rule) holds; it
    /// stops at [`max_ticks`](Self::max_ticks).
    pub fn ticks(&self) -> u64 {
        loop {
            let seen = self.state.load(Ordering::SeqCst);
            if seen == ENDED {
                return Self::max_ticks();
            }
            let raw = self.counter.read().widen();
            // The counter read must not drift past the second load.
            fence(Ordering::SeqCst);
            if self.state.load(Ordering::SeqCst) != seen {
                // Another reading published a newer base after `seen` was
                // loaded: `seen` may be too old to place `raw`. Start over.
                spin_loop();
                continue;
            }
            let base = u64::from(seen) << Self::SHIFT;
            let ticks = base + (raw.wrapping_sub(base) & Self::MASK);
            let unit = ticks >> Self::SHIFT;
            if unit > u64::from(seen) {
                // a unit of ENDED or more is the end of the range
                let next = u32::try_from(unit).unwrap_or(ENDED);
                self.state.fetch_max(next, Ordering::SeqCst);
                if next == ENDED {
                    return Self::max_ticks();
                }
            }
            return ticks;
        }
    }

    /// The longest the clock may go unread, in ticks: `2^W − 2^s` (see
    /// [the read rule](self#the-read-rule)).
    #[must_use]
    pub const fn max_read_gap_ticks() -> u64 {
        (1u64 << C::Ticks::BITS) - (1u64 << Self::SHIFT)
    }

    /// The longest the clock may go unread (rounded down to the
    /// nanosecond): 15/16 of the counter's wrap period for a 32-bit
    /// counter, 3/4 for a 16-bit one. Read the clock at least this often.
    #[must_use]
    pub const fn max_read_gap(&self) -> Duration {
        Duration::from_nanos(self.ratio.ticks_to_nanos(Self::max_read_gap_ticks()))
    }

    /// The time it takes the counter to wrap once.
    #[must_use]
    pub const fn wrap_period(&self) -> Duration {
        Duration::from_nanos(self.ratio.ticks_to_nanos(1u64 << C::Ticks::BITS))
    }

    /// The last tick count the clock can show, `(2^32 − 1) · 2^s`: after
    /// it the clock stops (see [range](self#range-origin-and-resolution)).
    #[must_use]
    pub const fn max_ticks() -> u64 {
        (ENDED as u64) << Self::SHIFT
    }

    /// The length of `n` ticks (rounded down to the nanosecond,
    /// saturating): `tick_length(1)` is one tick exactly where a tick is a
    /// whole number of nanoseconds.
    #[must_use]
    pub const fn tick_length(&self, n: u64) -> Duration {
        Duration::from_nanos(self.ratio.ticks_to_nanos(n))
    }

    /// The timestamp of a tick count of this clock (rounded down to the
    /// nanosecond, saturating).
    #[must_use]
    pub const fn timestamp(&self, ticks: u64) -> Timestamp {
        Timestamp::from_nanos(self.ratio.ticks_to_nanos(ticks))
    }

    /// The first tick count at which this clock reads at least `at`
    /// (rounded up to a whole tick, saturating): when to set a compare
    /// interrupt to wake up at `at`.
    #[must_use]
    pub const fn ticks_at(&self, at: Timestamp) -> u64 {
        self.ratio.nanos_to_ticks_ceil(at.as_nanos())
    }

    /// The counter this clock reads.
    pub const fn counter(&self) -> &C {
        &self.counter
    }
}

impl<C: WrappingCounter> Clock for WrappingClock<C> {
    #[inline]
    fn now(&self) -> Timestamp {
        self.timestamp(self.ticks())
    }

    fn resolution(&self) -> Duration {
        Duration::from_nanos(self.ratio.resolution_nanos())
    }
}

impl<C> fmt::Debug for WrappingClock<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WrappingClock")
            .field("ns_per_tick", &self.ratio)
            .field("state", &self.state.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
