//! # tollgate-rtic
//!
//! RTIC integration: any RTIC monotonic as a tollgate [`Clock`]. `no_std`.
//! Use it as `tollgate::rtic` with feature `rtic` of `tollgate` (which
//! re-exports this crate; add `tollgate`, not this crate).
//!
//! RTIC's timers implement [`rtic_time::Timebase`]; those whose instants
//! form a total order are [`rtic_time::Monotonic`]s (rtic-time 3). Their
//! instants and durations are `fugit` types counting ticks of a fixed
//! length (`NOM / DENOM` seconds), and most drivers pick
//! `fugit::MonotonicTimerInstantU64<HZ>`.
//!
//! - [`RticClock<M>`] reads `M::now()` and converts its ticks to a
//!   [`Timestamp`] exactly (rounded down to the nanosecond, the conversion
//!   of `EmbassyClock`, for any tick length, without overflow). Its
//!   [`resolution`](Clock::resolution) is one tick rounded up, so a
//!   limiter finer than a tick is refused wherever it meets the clock
//!   ([`ConfigError::ClockTooCoarse`](tollgate_core::ConfigError::ClockTooCoarse)).
//!   [`RticClock::instant_at`] goes back (rounded up to a tick: a wake-up
//!   for `M::delay_until` is never early), and [`RticClock::duration`] /
//!   [`RticClock::fugit_duration`] convert durations both ways.
//! - For a timebase whose instants *wrap*
//!   (`fugit::WrappingTimerInstantU32<HZ>`, not a `Monotonic`),
//!   `RticClock<M>` is a [`WrappingCounter`], and [`RticClock::wrapping`]
//!   extends it to a [`WrappingClock`], with that clock's read rule.
//!
//! Conversions go through the [`TickCount`] trait, implemented for
//! fugit's monotonic and wrapping instants and its durations (`u32` and
//! `u64` ticks);
//! implement it for a monotonic with instant types of its own.
//!
//! ```
//! use core::time::Duration;
//! use tollgate::rtic::RticClock;
//! use tollgate::{Clock, Quota, RateLimiter, Timestamp};
//! # use tollgate::rtic::rtic_time::{fugit, Timebase, TimeoutError};
//! # use core::sync::atomic::{AtomicU64, Ordering};
//! # static TICKS: AtomicU64 = AtomicU64::new(0);
//! # /// An RTIC monotonic at 32 768 Hz (a stand-in for `rtic_monotonics`' drivers).
//! # struct Mono;
//! # impl Timebase for Mono {
//! #     type Instant = fugit::MonotonicTimerInstantU64<32_768>;
//! #     type Duration = fugit::TimerDurationU64<32_768>;
//! #     fn now() -> Self::Instant { Self::Instant::from_ticks(TICKS.load(Ordering::SeqCst)) }
//! #     async fn delay(_: Self::Duration) {}
//! #     async fn delay_until(_: Self::Instant) {}
//! #     async fn timeout_at<F: core::future::Future>(_: Self::Instant, f: F) -> Result<F::Output, TimeoutError> { Ok(f.await) }
//! #     async fn timeout_after<F: core::future::Future>(_: Self::Duration, f: F) -> Result<F::Output, TimeoutError> { Ok(f.await) }
//! # }
//!
//! // `Mono` is the application's RTIC monotonic, at 32 768 Hz.
//! let clock = RticClock::<Mono>::new();
//! assert_eq!(clock.resolution(), Duration::from_nanos(30_518)); // one tick, rounded up
//! # TICKS.store(3 * 32_768, Ordering::SeqCst);
//! assert_eq!(clock.now(), Timestamp::from_secs(3));
//!
//! // When to wake up for a limiter's retry: the first tick at or after it.
//! let wake = RticClock::<Mono>::instant_at(Timestamp::from_millis(3_500));
//! assert_eq!(wake.as_ticks(), 114_688);
//!
//! let limiter = RateLimiter::token_bucket(Quota::per_second(10)?, clock)?;
//! assert!(limiter.try_acquire().is_ok());
//! # Ok::<(), tollgate::ConfigError>(())
//! ```

#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_debug_implementations)]
#![doc(test(attr(deny(unused_imports))))]

use core::fmt;
use core::marker::PhantomData;
use core::time::Duration;

pub use rtic_time;
use rtic_time::fugit;
use rtic_time::{Monotonic, Timebase};

use tollgate_core::clock::Clock;
use tollgate_core::clock::TickRate;
use tollgate_core::time::{Timestamp, duration_to_nanos};
use tollgate_core::wrapping_clock::{WrappingClock, WrappingCounter};

/// An instant or duration that counts ticks of `NOM / DENOM` seconds: what
/// [`RticClock`] converts.
///
/// Implemented for `fugit::Instant<u32 | u64, NOM, DENOM, K>` (monotonic
/// or wrapping) and
/// `fugit::Duration<u32 | u64, NOM, DENOM>`.
///
/// ```
/// use tollgate::rtic::rtic_time::fugit;
/// use tollgate::rtic::TickCount;
///
/// let d = fugit::MillisDurationU32::from_ticks(1_500);
/// assert_eq!(d.ticks(), 1_500);
/// assert_eq!(<fugit::MillisDurationU32 as TickCount>::from_ticks_saturating(u64::MAX).ticks(), u64::from(u32::MAX));
/// ```
pub trait TickCount: Copy {
    /// A tick lasts `NOM / DENOM` seconds: numerator.
    const NOM: u64;
    /// A tick lasts `NOM / DENOM` seconds: denominator.
    const DENOM: u64;

    /// The tick count.
    fn ticks(self) -> u64;

    /// The value of `ticks` ticks, saturating at the type's largest.
    fn from_ticks_saturating(ticks: u64) -> Self;
}

/// Monotonic and wrapping instants alike (fugit's `Kind`).
impl<const NOM: u64, const DENOM: u64, K: fugit::kind::Kind> TickCount
    for fugit::Instant<u64, NOM, DENOM, K>
{
    const NOM: u64 = NOM;
    const DENOM: u64 = DENOM;
    #[inline]
    fn ticks(self) -> u64 {
        self.as_ticks()
    }
    fn from_ticks_saturating(ticks: u64) -> Self {
        Self::from_ticks(ticks)
    }
}

/// Monotonic and wrapping instants alike (fugit's `Kind`).
impl<const NOM: u64, const DENOM: u64, K: fugit::kind::Kind> TickCount
    for fugit::Instant<u32, NOM, DENOM, K>
{
    const NOM: u64 = NOM;
    const DENOM: u64 = DENOM;
    #[inline]
    fn ticks(self) -> u64 {
        u64::from(self.as_ticks())
    }
    fn from_ticks_saturating(ticks: u64) -> Self {
        Self::from_ticks(u32::try_from(ticks).unwrap_or(u32::MAX))
    }
}

impl<const NOM: u64, const DENOM: u64> TickCount for fugit::Duration<u64, NOM, DENOM> {
    const NOM: u64 = NOM;
    const DENOM: u64 = DENOM;
    #[inline]
    fn ticks(self) -> u64 {
        self.as_ticks()
    }
    fn from_ticks_saturating(ticks: u64) -> Self {
        Self::from_ticks(ticks)
    }
}

impl<const NOM: u64, const DENOM: u64> TickCount for fugit::Duration<u32, NOM, DENOM> {
    const NOM: u64 = NOM;
    const DENOM: u64 = DENOM;
    #[inline]
    fn ticks(self) -> u64 {
        u64::from(self.as_ticks())
    }
    fn from_ticks_saturating(ticks: u64) -> Self {
        Self::from_ticks(u32::try_from(ticks).unwrap_or(u32::MAX))
    }
}

/// The tick length of `T` as nanoseconds per tick, in `const`.
const fn ratio_of<T: TickCount>() -> TickRate {
    TickRate::from_seconds_per_tick(T::NOM, T::DENOM)
}

/// An RTIC [`Monotonic`] as a tollgate [`Clock`]: the time since the
/// monotonic's tick 0; or a timebase whose instants wrap as a
/// [`WrappingCounter`] (see [`RticClock::wrapping`]). See the
/// [module documentation](self).
///
/// It holds nothing (the monotonic is a type with a global driver), so it
/// is free to copy and `const` to build.
pub struct RticClock<M> {
    monotonic: PhantomData<fn() -> M>,
}

impl<M> RticClock<M> {
    /// The clock of monotonic `M`.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            monotonic: PhantomData,
        }
    }
}

impl<M: Monotonic> RticClock<M>
where
    M::Instant: TickCount,
{
    const RATIO: TickRate = ratio_of::<M::Instant>();

    /// One tick of `M`, rounded up to whole nanoseconds: what
    /// [`Clock::resolution`] reports, usable in `const` quota checks
    /// ([`Quota::check_resolution`](tollgate_core::Quota::check_resolution)).
    pub const RESOLUTION: Duration = Duration::from_nanos(Self::RATIO.resolution_nanos());

    /// The timestamp of an instant of `M` (its ticks, rounded down to the
    /// nanosecond, saturating).
    #[must_use]
    pub fn timestamp(instant: M::Instant) -> Timestamp {
        Timestamp::from_nanos(Self::RATIO.ticks_to_nanos(instant.ticks()))
    }

    /// The first instant of `M` at which this clock reads at least `at`:
    /// the time rounded **up** to a whole tick, saturating at the
    /// instant type's largest. Pass it to `M::delay_until` to sleep until
    /// a limiter's retry time.
    #[must_use]
    pub fn instant_at(at: Timestamp) -> M::Instant {
        M::Instant::from_ticks_saturating(Self::RATIO.nanos_to_ticks_ceil(at.as_nanos()))
    }
}

impl<M> RticClock<M> {
    /// A fugit duration (such as `M::Duration`) as a
    /// [`core::time::Duration`], exactly (rounded down to the nanosecond,
    /// saturating).
    #[must_use]
    pub fn duration<D: TickCount>(d: D) -> Duration {
        let ratio = const { ratio_of::<D>() };
        Duration::from_nanos(ratio.ticks_to_nanos(d.ticks()))
    }

    /// A [`core::time::Duration`] as a fugit duration (such as
    /// `M::Duration`), rounded **up** to whole ticks (saturating): a
    /// tollgate `retry_after` for `M::delay`, never short.
    #[must_use]
    pub fn fugit_duration<D: TickCount>(d: Duration) -> D {
        let ratio = const { ratio_of::<D>() };
        D::from_ticks_saturating(ratio.nanos_to_ticks_ceil(duration_to_nanos(d)))
    }
}

impl<M: Monotonic> Clock for RticClock<M>
where
    M::Instant: TickCount,
{
    #[inline]
    fn now(&self) -> Timestamp {
        Self::timestamp(M::now())
    }

    fn resolution(&self) -> Duration {
        Self::RESOLUTION
    }
}

impl<M> Clone for RticClock<M> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<M> Copy for RticClock<M> {}
impl<M> Default for RticClock<M> {
    fn default() -> Self {
        Self::new()
    }
}
impl<M> fmt::Debug for RticClock<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RticClock<{}>", core::any::type_name::<M>())
    }
}

/// A timebase whose instants *wrap* (`fugit::WrappingTimerInstantU32<HZ>`,
/// not a [`Monotonic`]) is not a [`Clock`] by itself: its `RticClock` is a
/// [`WrappingCounter`] (the low 32 bits of its ticks), and
/// [`RticClock::wrapping`] extends it to a [`WrappingClock`] (lock-free,
/// interrupt-safe; read it at least once per 15/16 of the timer's wrap
/// period, see the [read rule](tollgate_core::wrapping_clock#the-read-rule)).
///
/// ```
/// use tollgate::rtic::RticClock;
/// use tollgate::{Clock, Timestamp};
/// # use tollgate::rtic::rtic_time::{fugit, Timebase, TimeoutError};
/// # use core::sync::atomic::{AtomicU64, Ordering};
/// # static TICKS: AtomicU64 = AtomicU64::new(0);
/// # /// A 32-bit RTIC timebase at 1 MHz whose instants wrap.
/// # struct Timer32;
/// # impl Timebase for Timer32 {
/// #     type Instant = fugit::WrappingTimerInstantU32<1_000_000>;
/// #     type Duration = fugit::TimerDurationU32<1_000_000>;
/// #     fn now() -> Self::Instant { Self::Instant::from_ticks(TICKS.load(Ordering::SeqCst) as u32) }
/// #     async fn delay(_: Self::Duration) {}
/// #     async fn delay_until(_: Self::Instant) {}
/// #     async fn timeout_at<F: core::future::Future>(_: Self::Instant, f: F) -> Result<F::Output, TimeoutError> { Ok(f.await) }
/// #     async fn timeout_after<F: core::future::Future>(_: Self::Duration, f: F) -> Result<F::Output, TimeoutError> { Ok(f.await) }
/// # }
///
/// // `Timer32` is a 32-bit RTIC timebase at 1 MHz: it wraps every 71.6 minutes.
/// static CLOCK: tollgate::WrappingClock<RticClock<Timer32>> = RticClock::wrapping();
/// assert_eq!(CLOCK.max_read_gap().as_secs(), 4_026);
/// # let mut t = 0;
/// for _ in 0..5 {
/// #   t += 4_000_000_000u64; TICKS.store(t, Ordering::SeqCst);
///     // ... an hour passes, the counter wraps, the clock is read ...
///     CLOCK.now();
/// }
/// assert_eq!(CLOCK.now(), Timestamp::from_secs(20_000));
/// ```
impl<M: Timebase> WrappingCounter for RticClock<M>
where
    M::Instant: TickCount,
{
    type Ticks = u32;

    #[inline]
    fn read(&self) -> u32 {
        // the low 32 bits: exact for a 32-bit wrapping instant, and a
        // wrapping counter of any wider one
        M::now().ticks() as u32
    }
}

impl<M: Timebase> RticClock<M>
where
    M::Instant: TickCount,
{
    tollgate_core::const_fn_unless_loom! {
        /// A [`WrappingClock`] on `M`'s ticks (a timebase whose instants
        /// wrap), converted exactly at `M`'s tick length. See the
        /// [`WrappingCounter`] impl above.
        #[must_use]
        pub fn wrapping() -> WrappingClock<Self> {
            WrappingClock::with_rate(Self::new(), ratio_of::<M::Instant>())
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    extern crate std;

    use super::*;
    use core::future::Future;
    use core::sync::atomic::{AtomicU64, Ordering};
    use proptest::prelude::*;
    use rtic_time::TimeoutError;
    use tollgate_core::{ConfigError, Quota, RateLimiter};

    /// A host implementation of RTIC's time traits: `now()` reads a
    /// static tick count the test sets.
    macro_rules! host_timebase {
        ($name:ident, $ticks:ident, $instant:ty, $duration:ty, $read:expr) => {
            static $ticks: AtomicU64 = AtomicU64::new(0);
            struct $name;
            impl Timebase for $name {
                type Instant = $instant;
                type Duration = $duration;
                fn now() -> Self::Instant {
                    #[allow(clippy::redundant_closure_call)]
                    <$instant>::from_ticks(($read)($ticks.load(Ordering::SeqCst)))
                }
                async fn delay(_: Self::Duration) {}
                async fn delay_until(_: Self::Instant) {}
                async fn timeout_at<F: Future>(
                    _: Self::Instant,
                    f: F,
                ) -> Result<F::Output, TimeoutError> {
                    Ok(f.await)
                }
                async fn timeout_after<F: Future>(
                    _: Self::Duration,
                    f: F,
                ) -> Result<F::Output, TimeoutError> {
                    Ok(f.await)
                }
            }
        };
    }

    host_timebase!(
        Khz32,
        KHZ32_TICKS,
        fugit::MonotonicTimerInstantU64<32_768>,
        fugit::TimerDurationU64<32_768>,
        |t: u64| t
    );
    host_timebase!(
        Mhz1U32,
        MHZ1_TICKS,
        fugit::MonotonicTimerInstantU32<1_000_000>,
        fugit::TimerDurationU32<1_000_000>,
        |t: u64| t as u32
    );
    // a tick of 3/7 of a second: fugit allows any ratio
    host_timebase!(
        Odd,
        ODD_TICKS,
        fugit::MonotonicInstant<u64, 3, 7>,
        fugit::Duration<u64, 3, 7>,
        |t: u64| t
    );
    host_timebase!(
        Wrap32,
        WRAP32_TICKS,
        fugit::WrappingTimerInstantU32<1_000>,
        fugit::TimerDurationU32<1_000>,
        |t: u64| t as u32
    );

    fn assert_monotonic<M: Monotonic>() {}

    #[test]
    fn a_monotonic_is_a_clock_with_exact_conversion() {
        assert_monotonic::<Khz32>();
        let clock = RticClock::<Khz32>::new();
        KHZ32_TICKS.store(0, Ordering::SeqCst);
        assert_eq!(clock.now(), Timestamp::ZERO);
        KHZ32_TICKS.store(1, Ordering::SeqCst);
        assert_eq!(clock.now(), Timestamp::from_nanos(30_517)); // 30 517.578 ns, floor
        KHZ32_TICKS.store(32_768 * 3_600, Ordering::SeqCst);
        assert_eq!(clock.now(), Timestamp::from_secs(3_600));
        assert_eq!(clock.resolution(), Duration::from_nanos(30_518));
        assert_eq!(RticClock::<Khz32>::RESOLUTION, Duration::from_nanos(30_518));
        // back: the first tick at or after
        let i = RticClock::<Khz32>::instant_at(Timestamp::from_nanos(30_518));
        assert_eq!(i.as_ticks(), 2);
        assert_eq!(
            RticClock::<Khz32>::instant_at(Timestamp::from_nanos(30_517)).as_ticks(),
            1
        );
        // durations both ways
        let d = fugit::TimerDurationU64::<32_768>::from_ticks(16_384);
        assert_eq!(RticClock::<Khz32>::duration(d), Duration::from_millis(500));
        let back: fugit::TimerDurationU64<32_768> =
            RticClock::<Khz32>::fugit_duration(Duration::from_nanos(1));
        assert_eq!(back.as_ticks(), 1);
        let ms: fugit::MillisDurationU32 = RticClock::<Khz32>::fugit_duration(Duration::MAX);
        assert_eq!(ms.as_ticks(), u32::MAX);
        assert_eq!(
            RticClock::<Khz32>::duration(fugit::MinutesDurationU32::from_ticks(2)),
            Duration::from_secs(120)
        );
    }

    #[test]
    fn u32_instants_and_odd_tick_lengths() {
        let clock = RticClock::<Mhz1U32>::default();
        MHZ1_TICKS.store(u64::from(u32::MAX), Ordering::SeqCst);
        assert_eq!(clock.now(), Timestamp::from_micros(u64::from(u32::MAX)));
        assert_eq!(clock.resolution(), Duration::from_micros(1));
        // past the end of a u32 instant: saturates, never wraps
        let far = RticClock::<Mhz1U32>::instant_at(Timestamp::from_secs(1_000_000));
        assert_eq!(far.as_ticks(), u32::MAX);

        let odd = RticClock::<Odd>::new();
        ODD_TICKS.store(7, Ordering::SeqCst);
        assert_eq!(odd.now(), Timestamp::from_secs(3));
        ODD_TICKS.store(1, Ordering::SeqCst);
        assert_eq!(odd.now(), Timestamp::from_nanos(428_571_428)); // 3/7 s, floor
        assert_eq!(odd.resolution(), Duration::from_nanos(428_571_429));
        assert_eq!(
            RticClock::<Odd>::instant_at(Timestamp::from_secs(3)).as_ticks(),
            7
        );
        let text = std::format!("{odd:?}");
        assert!(text.contains("Odd"), "{text}");
    }

    #[test]
    fn a_limiter_finer_than_a_tick_is_refused() {
        let coarse = RticClock::<Odd>::new();
        let fine = Quota::per_second(10).unwrap(); // 100 ms < 3/7 s
        assert!(matches!(
            RateLimiter::token_bucket(fine, coarse),
            Err(ConfigError::ClockTooCoarse { .. })
        ));
        let ok = Quota::per_minute(60).unwrap();
        assert!(RateLimiter::token_bucket(ok, coarse).is_ok());
    }

    #[test]
    fn a_wrapping_timebase_goes_through_the_wrapping_clock() {
        let clock = RticClock::<Wrap32>::wrapping();
        let text = std::format!("{:?}", clock.counter());
        assert!(text.contains("Wrap32"), "{text}");
        assert_eq!(clock.resolution(), Duration::from_millis(1));
        // 1 kHz, 32 bits: wraps every 49.7 days; read every 40 days
        let mut t = 0u64;
        for _ in 0..20 {
            t += 40 * 86_400_000;
            WRAP32_TICKS.store(t, Ordering::SeqCst);
            assert_eq!(clock.now(), Timestamp::from_millis(t));
        }
        assert!(t > 16 * (1u64 << 32));
    }

    proptest! {
        /// Against the u128 reference, for any tick count.
        #[test]
        fn conversion_matches_reference(ticks in any::<u64>()) {
            let i = fugit::MonotonicTimerInstantU64::<32_768>::from_ticks(ticks);
            let expected = u128::from(ticks) * 1_000_000_000 / 32_768;
            prop_assert_eq!(u128::from(RticClock::<Khz32>::timestamp(i).as_nanos()), expected.min(u128::from(u64::MAX)));
            let i = fugit::MonotonicInstant::<u64, 3, 7>::from_ticks(ticks);
            let expected = u128::from(ticks) * 3_000_000_000 / 7;
            prop_assert_eq!(u128::from(RticClock::<Odd>::timestamp(i).as_nanos()), expected.min(u128::from(u64::MAX)));
        }

        /// The instant for a timestamp is the first tick at or after it.
        #[test]
        fn instant_at_is_the_first_tick_at_or_after(nanos in 0u64..=u64::MAX / 2) {
            let at = Timestamp::from_nanos(nanos);
            let i = RticClock::<Odd>::instant_at(at);
            prop_assert!(RticClock::<Odd>::timestamp(i) >= at);
            if i.as_ticks() > 0 {
                let before = fugit::MonotonicInstant::<u64, 3, 7>::from_ticks(i.as_ticks() - 1);
                prop_assert!(RticClock::<Odd>::timestamp(before) < at);
            }
        }
    }
}
