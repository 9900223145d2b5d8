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
//! only where the target has 64-bit atomics or where the application picked
//! portable-atomic's interrupt-masking strategies; on a Cortex-M3/M4 with
//! the default fallback it is a spin lock, which an interrupt handler must
//! not take. A 32-bit word is native on every target with 32-bit
//! compare-and-swap (thumbv7m, thumbv7em, riscv32imac); on thumbv6m and
//! riscv32imc it goes through portable-atomic's `critical-section` or
//! single-core strategy, both safe in interrupts.
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
use crate::sync::{fence, spin_loop, AtomicU32, Ordering};
use crate::ticks::Ratio;
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
    if bits <= 16 {
        14
    } else {
        28
    }
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
    ratio: Ratio,
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
            Self::with_ratio(counter, Ratio::from_hz(hz.get()))
        }
    }

    crate::sync::const_fn_unless_loom! {
        /// A clock on `counter` whose tick lasts `ratio`.
        pub(crate) fn with_ratio(counter: C, ratio: Ratio) -> Self {
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
mod tests {
    extern crate std;

    use super::*;
    use proptest::prelude::*;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering as StdOrdering};
    use std::sync::Arc;
    use std::vec::Vec;

    /// A simulated counter: the true tick count, read truncated.
    #[derive(Debug, Clone, Default)]
    struct Hardware(Arc<AtomicU64>);

    impl Hardware {
        fn at(ticks: u64) -> Self {
            Self(Arc::new(AtomicU64::new(ticks)))
        }
        fn truth(&self) -> u64 {
            self.0.load(StdOrdering::SeqCst)
        }
        fn advance(&self, by: u64) {
            self.0.fetch_add(by, StdOrdering::SeqCst);
        }
    }

    struct Counter16(Hardware);
    impl WrappingCounter for Counter16 {
        type Ticks = u16;
        fn read(&self) -> u16 {
            self.0.truth() as u16
        }
    }

    struct Counter32(Hardware);
    impl WrappingCounter for Counter32 {
        type Ticks = u32;
        fn read(&self) -> u32 {
            self.0.truth() as u32
        }
    }

    fn hz(hz: u64) -> NonZeroU64 {
        NonZeroU64::new(hz).expect("nonzero")
    }

    #[test]
    fn documented_limits() {
        type C16 = WrappingClock<fn() -> u16>;
        type C32 = WrappingClock<fn() -> u32>;
        assert_eq!(C16::max_read_gap_ticks(), 49_152); // 3/4 of 65 536
        assert_eq!(C32::max_read_gap_ticks(), 15 << 28); // 15/16 of 2^32
        assert_eq!(C16::max_ticks(), (u64::from(u32::MAX)) << 14);
        assert_eq!(C32::max_ticks(), (u64::from(u32::MAX)) << 28);
        let mhz = C32::new(|| 0, hz(1_000_000));
        assert_eq!(mhz.wrap_period(), Duration::from_micros(1 << 32)); // 71.58 min
        assert_eq!(mhz.max_read_gap().as_secs(), 4_026); // 67.1 min
        let lptim = C16::new(|| 0, hz(32_768));
        assert_eq!(lptim.wrap_period(), Duration::from_secs(2));
        assert_eq!(lptim.max_read_gap(), Duration::from_millis(1_500));
        assert_eq!(lptim.resolution(), Duration::from_nanos(30_518));
        assert_eq!(lptim.tick_length(32_768), Duration::from_secs(1));
        assert_eq!(lptim.tick_length(1), Duration::from_nanos(30_517));
        assert_eq!(lptim.ticks_at(Timestamp::from_secs(1)), 32_768);
        assert_eq!(lptim.ticks_at(Timestamp::from_nanos(1)), 1);
    }

    #[test]
    fn follows_a_16_bit_counter_across_many_wraps() {
        let hw = Hardware::at(0);
        let clock = WrappingClock::new(Counter16(hw.clone()), hz(1_000_000));
        let gap = WrappingClock::<Counter16>::max_read_gap_ticks();
        let mut last = 0;
        // 1 000 wraps in steps up to the limit, including exactly the limit
        for i in 0..2_500u64 {
            hw.advance(if i % 3 == 0 { gap } else { 1 + i * 7919 % gap });
            let t = clock.ticks();
            assert_eq!(t, hw.truth());
            assert!(t >= last);
            last = t;
        }
        assert!(last > 1_000 * 65_536, "{last}");
        assert_eq!(clock.now(), Timestamp::from_micros(last));
    }

    #[test]
    fn follows_a_32_bit_counter_across_many_wraps() {
        let start = u64::from(u32::MAX) - 5;
        let hw = Hardware::at(start);
        let clock = WrappingClock::new(Counter32(hw.clone()), hz(32_768));
        // the origin is the counter's last zero before the first reading
        assert_eq!(clock.ticks(), start);
        let gap = WrappingClock::<Counter32>::max_read_gap_ticks();
        for _ in 0..100 {
            hw.advance(gap);
            assert_eq!(clock.ticks(), hw.truth());
        }
        // 100 · 15/16 of a wrap: 93 wraps and a bit
        assert_eq!(hw.truth() >> 32, 94);
        let secs = hw.truth() / 32_768;
        assert_eq!(clock.now().as_nanos() / 1_000_000_000, secs);
    }

    #[test]
    fn a_missed_wrap_leaves_the_clock_whole_periods_behind_never_ahead() {
        let hw = Hardware::at(1_000);
        let clock = WrappingClock::new(Counter16(hw.clone()), hz(1_000));
        assert_eq!(clock.ticks(), 1_000);
        // unread for 2.5 wraps: the two whole wraps are invisible
        hw.advance(2 * 65_536 + 30_000);
        assert_eq!(clock.ticks(), 31_000);
        assert_eq!(hw.truth() - 31_000, 2 * 65_536);
        // afterwards it follows again, from where it thinks it is
        hw.advance(40_000);
        assert_eq!(clock.ticks(), 71_000);
        // The limit is tight. The latest reading is one tick short of the
        // next unit (the published base is still 0): exactly the gap later
        // the clock is exact, one tick more and the wrap is lost.
        let gap = WrappingClock::<Counter16>::max_read_gap_ticks();
        for (late, expected) in [(0, 65_535), (1, 0)] {
            let hw = Hardware::at(0);
            let clock = WrappingClock::new(Counter16(hw.clone()), hz(1_000));
            hw.advance(16_383);
            assert_eq!(clock.ticks(), 16_383);
            hw.advance(gap + late);
            assert_eq!(clock.ticks(), expected);
            // the lost wrap: one period behind, and one reading back by
            // less than a unit (2^14 ticks)
            assert_eq!(hw.truth() - expected, 65_536 * late);
        }
    }

    #[test]
    fn stops_at_the_end_of_its_range_and_never_wraps_back() {
        let hw = Hardware::at(0);
        let clock = WrappingClock::new(Counter16(hw.clone()), hz(1_000_000));
        let max = WrappingClock::<Counter16>::max_ticks();
        // jump close to the end without reading 2^32 units one by one:
        // publish a state just below the end by hand
        clock.state.store(ENDED - 1, Ordering::SeqCst);
        hw.0.store(max - (1 << 14), StdOrdering::SeqCst);
        assert_eq!(clock.ticks(), max - (1 << 14));
        hw.advance((1 << 14) - 1);
        assert_eq!(clock.ticks(), max - 1);
        hw.advance(1);
        assert_eq!(clock.ticks(), max);
        for _ in 0..10 {
            hw.advance(40_000);
            assert_eq!(clock.ticks(), max);
        }
        assert_eq!(clock.now(), clock.timestamp(max));
    }

    #[test]
    fn readers_on_many_threads_agree_with_the_hardware() {
        // A ticker advances a 16-bit counter (wrapping every 65 536 ticks)
        // and reads the clock after each step, so the read rule holds;
        // four readers race it and each other. Every reading must lie
        // between the true counts just before and just after it, and each
        // thread's readings must never go back.
        let hw = Hardware::at(0);
        let clock = Arc::new(WrappingClock::new(Counter16(hw.clone()), hz(1_000_000)));
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..4)
            .map(|_| {
                let (hw, clock, stop) = (hw.clone(), Arc::clone(&clock), Arc::clone(&stop));
                std::thread::spawn(move || {
                    let (mut last, mut reads) = (0, 0u64);
                    while !stop.load(StdOrdering::SeqCst) {
                        let before = hw.truth();
                        let t = clock.ticks();
                        let after = hw.truth();
                        assert!(before <= t && t <= after, "{before} <= {t} <= {after}");
                        assert!(t >= last, "went back from {last} to {t}");
                        last = t;
                        reads += 1;
                    }
                    reads
                })
            })
            .collect();
        let mut x = 12_345u64;
        for _ in 0..200_000 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            hw.advance(1 + (x >> 33) % 20_000);
            assert_eq!(clock.ticks(), hw.truth());
        }
        stop.store(true, StdOrdering::SeqCst);
        let reads: u64 = readers.into_iter().map(|r| r.join().expect("reader")).sum();
        assert!(reads > 0);
        assert!(hw.truth() > 10_000 * 65_536, "{} wraps", hw.truth() >> 16);
    }

    #[test]
    fn debug_shows_the_tick() {
        let clock = WrappingClock::new(|| 0u32, hz(48_000_000));
        let text = std::format!("{clock:?}");
        // 48 MHz: 125 ns per 6 ticks
        assert!(text.contains("num: 125, den: 6"), "{text}");
    }

    /// A step of the simulation: advance the hardware by some ticks, then
    /// maybe read the clock.
    fn steps(max_step: u64) -> impl Strategy<Value = Vec<(u64, bool)>> {
        proptest::collection::vec((0..=max_step, proptest::bool::weighted(0.8)), 1..200)
    }

    proptest! {
        /// Against a reference (the true 64-bit count): while the read rule
        /// holds, every reading is exact, in ticks and in nanoseconds.
        #[test]
        fn exact_while_the_rule_holds_16(
            start in any::<u16>(),
            hz_value in prop_oneof![Just(32_768u64), Just(1_000_000), 1u64..=4_000_000_000],
            steps in steps(49_152),
        ) {
            let hw = Hardware::at(u64::from(start));
            let clock = WrappingClock::new(Counter16(hw.clone()), hz(hz_value));
            prop_assert_eq!(clock.ticks(), u64::from(start));
            let mut since_read = 0;
            for (step, read) in steps {
                if since_read + step > 49_152 {
                    // the read the rule requires before the counter moves on
                    prop_assert_eq!(clock.ticks(), hw.truth());
                    since_read = 0;
                }
                hw.advance(step);
                since_read += step;
                if read {
                    let t = clock.ticks();
                    prop_assert_eq!(t, hw.truth());
                    let ns = u128::from(t) * 1_000_000_000 / u128::from(hz_value);
                    prop_assert_eq!(u128::from(clock.now().as_nanos()), ns);
                    since_read = 0;
                }
            }
        }

        #[test]
        fn exact_while_the_rule_holds_32(
            start in any::<u32>(),
            steps in proptest::collection::vec(0..=(15u64 << 28), 1..100),
        ) {
            let hw = Hardware::at(u64::from(start));
            let clock = WrappingClock::new(Counter32(hw.clone()), hz(1_000_000));
            prop_assert_eq!(clock.ticks(), u64::from(start));
            for step in steps {
                hw.advance(step);
                prop_assert_eq!(clock.ticks(), hw.truth());
                prop_assert_eq!(clock.now(), Timestamp::from_micros(hw.truth()));
            }
        }

        /// With arbitrary gaps, including ones that break the rule, a
        /// reading is never ahead of the hardware and always shows the
        /// counter's value: it can only lose whole wraps.
        #[test]
        fn never_ahead_only_whole_wraps_behind(
            start in any::<u16>(),
            steps in steps(300_000),
        ) {
            let hw = Hardware::at(u64::from(start));
            let clock = WrappingClock::new(Counter16(hw.clone()), hz(1_000));
            for (step, read) in steps {
                hw.advance(step);
                if read {
                    let t = clock.ticks();
                    let truth = hw.truth();
                    prop_assert!(t <= truth, "{} ahead of {}", t, truth);
                    prop_assert_eq!((truth - t) % 65_536, 0);
                }
            }
        }
    }
}
