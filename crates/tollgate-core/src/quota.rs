//! Quotas: how many permits per period, with what burst.
//!
//! A [`Quota`] is a rate (`permits` per `period`) plus a **burst**: the most
//! permits the bucket admits at one instant. It defaults to `permits`, so
//! `per_second(10)` admits 10 at once and then one every 100 ms.
//!
//! - A token bucket ([`Gcra::token_bucket`](crate::Gcra::token_bucket))
//!   admits up to `burst` permits at once from a full bucket, then refills
//!   at the rate.
//! - A leaky bucket ([`Gcra::leaky_bucket`](crate::Gcra::leaky_bucket))
//!   admits a request of up to `burst` permits at one instant only when the
//!   previous work has drained, then paces: single permits are exactly one
//!   interval apart. Set `with_burst(1)` for a bucket that refuses any
//!   request heavier than one permit.
//!
//! Every setting applies to both, so no setting is ever silently ignored.
//!
//! # Exact rates
//!
//! The emission interval is `T = period / permits`, a rational number of
//! nanoseconds. Write it reduced, `T = P / d` with `g = gcd(period, permits)`,
//! `P = period / g` and `d = permits / g` (the denominator of `T` in
//! nanoseconds). A bucket enforces it in one of two regimes:
//!
//! - **exact** — `d = 1` (`per_second(10)`, `per_minute(60)`, `per_hour(1)`:
//!   `T` is a whole number of nanoseconds), or `2 ≤ d ≤ 16` and the bucket's
//!   largest lead `burst × T` is under 2^60 / d ns (`per_second(3)`, `(6)`,
//!   `(7)`, `(12)`, `per_minute(7)`): every admission costs exactly `n × T`,
//!   so after exactly `k` periods exactly `k × permits` permits are back —
//!   `per_second(3)` gives 3 permits back after one second, as .NET's
//!   `TokenBucketRateLimiter`, nginx and a person expect. For `d > 1` the
//!   bucket keeps its time in units of `1/d` ns (see [`crate::gcra`]), which
//!   shrinks the clock range it can serve from 584 years to `584 / d` years
//!   (at least 34 years): see *horizon* below.
//! - **rounded** — `d > 16` (`per_second(17)`, `per_second(999)`,
//!   `per_minute(7_001)`) or a largest lead beyond the bound above: `T` is
//!   rounded **up** to whole nanoseconds, so rounding can only admit less
//!   than promised, never more (`per_second(17)` gives 16 permits back after
//!   exactly one second, the 17th 10 ns later).
//!
//! Which quotas are exact: `per_second(n)` when `d = n / gcd(n, 10^9)`
//! (`n` without the factors 2 and 5 it shares with 10^9) is at most 16:
//! every `n ≤ 16`, and 18, 20, 22, 24, 25, 26, 28, 30, …; rounded for 17,
//! 19, 21, 23, 27, 29, …. `per_minute(n)` and `per_hour(n)` likewise with
//! `gcd(n, 60 × 10^9)` and `gcd(n, 3600 × 10^9)`: `per_minute(7)`,
//! `per_minute(48)`, `per_hour(7)` exact, `per_minute(17)` rounded. [`Quota::is_exact`] says which regime a
//! quota is in; [`Quota::interval`] reports `T` rounded up to whole
//! nanoseconds in both. Either way, on a monotonic clock a bucket admits
//! at most `burst + ⌊t / T⌋` permits over any span of length `t`, with the
//! exact `T`.
//!
//! **Horizon.** An exact quota with `d > 1` serves clock readings up to
//! `(2^64 − burst × P) / d` nanoseconds after the clock's origin: at least
//! 34 years (`d = 16`), 194 years for `per_second(3)`. The clocks of the
//! crate count from process start (`StdClock`, feature `std`), boot
//! (embassy) or wherever a [`ManualClock`](crate::ManualClock) starts. A
//! bucket driven past its horizon stops refilling (it never admits more
//! than it did at the horizon), so it fails closed, never open. A clock
//! counting from the Unix epoch (about 56 years ago) is beyond the horizon
//! of `d ≥ 11` today: give such a clock a recent origin.
//!
//! Every constructor is a `const fn` returning a `Result`; a `static` quota
//! is unwrapped at compile time by [`valid!`](crate::valid), so a bad one
//! fails the build, with no `match` and no `panic!` in your code:
//!
//! ```
//! use tollgate::{valid, Quota};
//!
//! static TELEMETRY: Quota = valid!(Quota::per_second(10));
//! assert_eq!(TELEMETRY.interval(), core::time::Duration::from_millis(100));
//! assert_eq!(TELEMETRY.burst(), 10);
//! ```
//!
//! Invalid input is a [`ConfigError`] naming what is wrong:
//!
//! ```
//! use tollgate::{ConfigError, Quota};
//!
//! assert_eq!(Quota::per_second(0), Err(ConfigError::ZeroPermits));
//! assert!(matches!(
//!     Quota::per_second(10).and_then(|q| q.with_burst(0)),
//!     Err(ConfigError::ZeroBurst)
//! ));
//! ```

use core::time::Duration;

use crate::error::ConfigError;
use crate::time::duration_to_nanos;

const NANOS_PER_SEC: u64 = 1_000_000_000;

/// A validated rate limit: permits per period, and a burst.
///
/// See the [module documentation](self) for the meaning of each part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quota {
    period: u64,
    /// The emission interval in the bucket's unit of time, `1/scale` ns:
    /// exactly `period × scale / permits` in the exact regime, else the
    /// interval rounded up to whole nanoseconds (`scale` 1).
    interval: u64,
    permits: u32,
    burst: u32,
    /// `d`, the denominator of `T` in nanoseconds, for an exact quota with
    /// `d > 1`; 1 otherwise (see the [module documentation](self)).
    scale: u8,
}

/// The largest denominator `d` of `T` (in nanoseconds) kept exact: time in
/// units of `1/d` ns shrinks a `u64` clock from 584 years to 584/d years.
pub(crate) const MAX_EXACT_SCALE: u64 = 16;

/// The largest lead (`burst × T`, in units of `1/d` ns) of an exact bucket
/// with `d > 1`: it keeps the horizon above `(2^64 − 2^60) / 16` ns, 34
/// years.
pub(crate) const MAX_EXACT_LEAD: u64 = 1 << 60;

const fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        let r = a % b;
        a = b;
        b = r;
    }
    a
}

impl Quota {
    /// `permits` permits per `period`, burst `permits`.
    ///
    /// # Errors
    /// [`ConfigError::ZeroPermits`] if `permits` is 0;
    /// [`ConfigError::IntervalTooShort`] if `period / permits` is under
    /// 1 ns; [`ConfigError::ToleranceOverflow`] if the burst does not fit in
    /// `u64` nanoseconds.
    pub const fn new(permits: u32, period: Duration) -> Result<Self, ConfigError> {
        Self::from_period_nanos(permits, duration_to_nanos(period))
    }

    pub(crate) const fn from_period_nanos(
        permits: u32,
        period_nanos: u64,
    ) -> Result<Self, ConfigError> {
        if permits == 0 {
            return Err(ConfigError::ZeroPermits);
        }
        if period_nanos < permits as u64 {
            return Err(ConfigError::IntervalTooShort {
                permits,
                period: Duration::from_nanos(period_nanos),
            });
        }
        Self::build(period_nanos, permits, permits)
    }

    /// The quota of `permits` per `period_nanos` with `burst`, in its
    /// regime (see the [module documentation](self)). `period_nanos ≥
    /// permits ≥ 1`.
    const fn build(period_nanos: u64, permits: u32, burst: u32) -> Result<Self, ConfigError> {
        if burst == 0 {
            return Err(ConfigError::ZeroBurst);
        }
        // T rounded up: what the rounded regime enforces, and the bound
        // every quota must fit
        let rounded = period_nanos.div_ceil(permits as u64);
        if rounded.checked_mul(burst as u64).is_none() {
            return Err(ConfigError::ToleranceOverflow {
                burst,
                interval: Duration::from_nanos(rounded),
            });
        }
        let g = gcd(period_nanos, permits as u64);
        let d = permits as u64 / g;
        let p = period_nanos / g; // T × d, a whole number
        let exact = d > 1
            && d <= MAX_EXACT_SCALE
            && match p.checked_mul(burst as u64) {
                Some(lead) => lead <= MAX_EXACT_LEAD,
                None => false,
            };
        let (interval, scale) = if exact {
            (p, d as u8)
        } else {
            // d = 1: p = rounded, exact in whole nanoseconds. Otherwise
            // round up: the bucket may admit less than promised, never more.
            (rounded, 1)
        };
        Ok(Self {
            period: period_nanos,
            interval,
            permits,
            burst,
            scale,
        })
    }

    /// `permits` per second (ten per second for `per_second(10)`).
    ///
    /// # Errors
    /// As [`Quota::new`].
    pub const fn per_second(permits: u32) -> Result<Self, ConfigError> {
        Self::from_period_nanos(permits, NANOS_PER_SEC)
    }

    /// `permits` per minute.
    ///
    /// # Errors
    /// As [`Quota::new`].
    pub const fn per_minute(permits: u32) -> Result<Self, ConfigError> {
        Self::from_period_nanos(permits, 60 * NANOS_PER_SEC)
    }

    /// `permits` per hour.
    ///
    /// # Errors
    /// As [`Quota::new`].
    pub const fn per_hour(permits: u32) -> Result<Self, ConfigError> {
        Self::from_period_nanos(permits, 3600 * NANOS_PER_SEC)
    }

    /// One permit every `period` (burst 1). `with_period(100 ms)` is the same
    /// rate as `per_second(10)` but with a burst of one.
    ///
    /// # Errors
    /// [`ConfigError::IntervalTooShort`] for a zero period.
    pub const fn with_period(period: Duration) -> Result<Self, ConfigError> {
        Self::new(1, period)
    }

    /// The same rate with another burst: the most permits admitted at one
    /// instant (see the [module documentation](self)).
    ///
    /// # Errors
    /// [`ConfigError::ZeroBurst`] for 0; [`ConfigError::ToleranceOverflow`]
    /// if `burst × interval` does not fit in `u64` nanoseconds.
    ///
    /// The burst can move a quota between the exact and the rounded regime
    /// (an exact bucket's largest lead is bounded; see the
    /// [module documentation](self)).
    pub const fn with_burst(self, burst: u32) -> Result<Self, ConfigError> {
        Self::build(self.period, self.permits, burst)
    }

    /// Checks that a clock of `resolution` can enforce this quota: its
    /// emission interval must be at least one clock step.
    ///
    /// # Errors
    /// [`ConfigError::ClockTooCoarse`] if the interval is finer than the
    /// clock.
    pub const fn check_resolution(self, resolution: Duration) -> Result<Self, ConfigError> {
        match crate::error::check_clock(self.interval(), resolution) {
            Ok(()) => Ok(self),
            Err(e) => Err(e),
        }
    }

    /// The emission interval `T` (period / permits), rounded up to whole
    /// nanoseconds. Whether buckets enforce it exactly or rounded is
    /// [`is_exact`](Self::is_exact).
    #[must_use]
    pub const fn interval(&self) -> Duration {
        Duration::from_nanos(self.interval_nanos())
    }

    /// The emission interval `T` in nanoseconds, rounded up.
    #[must_use]
    pub const fn interval_nanos(&self) -> u64 {
        if self.scale == 1 {
            self.interval
        } else {
            self.interval.div_ceil(self.scale as u64)
        }
    }

    /// True if buckets enforcing this quota refill at exactly `permits` per
    /// `period` (the exact regime); false if they use the interval rounded
    /// up to whole nanoseconds. See the [module documentation](self).
    ///
    /// ```
    /// use tollgate::Quota;
    ///
    /// assert!(Quota::per_second(10)?.is_exact()); // T = 100 ms
    /// assert!(Quota::per_second(3)?.is_exact()); // T = 333,333,333⅓ ns
    /// assert!(!Quota::per_second(17)?.is_exact()); // T = 58,823,529 + 7/17 ns
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub const fn is_exact(&self) -> bool {
        self.scale > 1 || self.period.is_multiple_of(self.permits as u64)
    }

    /// The emission interval in the bucket's unit of time (`1/scale` ns)
    /// and that scale: `(T × d, d)` for an exact quota with `d > 1`, else
    /// `(T rounded up, 1)`.
    pub(crate) const fn scaled_interval(&self) -> (u64, u64) {
        (self.interval, self.scale as u64)
    }

    /// The permits of the rate as given (`10` for `per_second(10)`).
    #[must_use]
    pub const fn permits(&self) -> u32 {
        self.permits
    }

    /// The period of the rate as given (1 s for `per_second(10)`).
    #[must_use]
    pub const fn period(&self) -> Duration {
        Duration::from_nanos(self.period)
    }

    /// The period of the rate in nanoseconds.
    #[must_use]
    pub const fn period_nanos(&self) -> u64 {
        self.period
    }

    /// The burst: the most permits admitted at one instant.
    #[must_use]
    pub const fn burst(&self) -> u32 {
        self.burst
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_second_means_n_per_second() {
        let q = Quota::per_second(10).unwrap();
        assert_eq!(q.interval_nanos(), 100_000_000);
        assert_eq!(q.burst(), 10);
        assert_eq!(q.permits(), 10);
        assert_eq!(q.period(), Duration::from_secs(1));
    }

    #[test]
    fn minute_and_hour() {
        assert_eq!(
            Quota::per_minute(60).unwrap().interval_nanos(),
            NANOS_PER_SEC
        );
        assert_eq!(
            Quota::per_hour(1).unwrap().interval_nanos(),
            3600 * NANOS_PER_SEC
        );
    }

    #[test]
    fn with_period_is_one_per_period() {
        let q = Quota::with_period(Duration::from_millis(250)).unwrap();
        assert_eq!(q.interval_nanos(), 250_000_000);
        assert_eq!(q.burst(), 1);
    }

    #[test]
    fn interval_is_reported_rounded_up_and_kept_exact_where_it_can() {
        // T = 333,333,333⅓ ns: reported rounded up, enforced exactly in
        // units of 1/3 ns (3 × T = 1 s, to the unit)
        let q = Quota::per_second(3).unwrap();
        assert_eq!(q.interval_nanos(), 333_333_334);
        assert!(q.interval_nanos() * 3 >= NANOS_PER_SEC);
        assert!(q.is_exact());
        assert_eq!(q.scaled_interval(), (NANOS_PER_SEC, 3));
        // reduced: 12 per second is T = 250,000,000/3 ns (d = 3, not 12)
        let q = Quota::per_second(12).unwrap();
        assert_eq!(q.scaled_interval(), (250_000_000, 3));
        assert_eq!(q.interval_nanos(), 83_333_334);
        assert_eq!(
            Quota::per_minute(7).unwrap().scaled_interval(),
            (60 * NANOS_PER_SEC, 7)
        );
        assert_eq!(
            Quota::per_second(16).unwrap().scaled_interval(),
            (62_500_000, 1)
        );
        // whole nanoseconds: exact, unscaled
        let q = Quota::per_second(10).unwrap();
        assert!(q.is_exact());
        assert_eq!(q.scaled_interval(), (100_000_000, 1));
        // d = 17 and d = 999: rounded up
        for permits in [17, 999] {
            let q = Quota::per_second(permits).unwrap();
            assert!(!q.is_exact(), "{permits}");
            let t = NANOS_PER_SEC.div_ceil(u64::from(permits));
            assert_eq!(q.scaled_interval(), (t, 1));
            assert_eq!(q.interval_nanos(), t);
        }
        // an exact quota whose largest lead would pass 2^60 units: rounded
        let q = Quota::per_hour(7).unwrap();
        assert_eq!(q.scaled_interval(), (3600 * NANOS_PER_SEC, 7));
        let huge = q.with_burst(1_000_000).unwrap();
        assert!(!huge.is_exact());
        assert_eq!(huge.scaled_interval(), (514_285_714_286, 1));
        assert_eq!(huge.with_burst(7).unwrap(), q);
        // the lists of the module documentation
        for n in 1..=30 {
            let rounded = [17, 19, 21, 23, 27, 29].contains(&n);
            assert_eq!(Quota::per_second(n).unwrap().is_exact(), !rounded, "{n}/s");
        }
        for (n, exact) in [(7, true), (48, true), (17, false)] {
            assert_eq!(Quota::per_minute(n).unwrap().is_exact(), exact, "{n}/min");
        }
        assert!(Quota::per_hour(7).unwrap().is_exact());
        assert!(!Quota::per_minute(7_001).unwrap().is_exact());
    }

    #[test]
    fn errors_name_the_problem() {
        assert_eq!(Quota::per_second(0), Err(ConfigError::ZeroPermits));
        assert_eq!(
            Quota::with_period(Duration::ZERO),
            Err(ConfigError::IntervalTooShort {
                permits: 1,
                period: Duration::ZERO
            })
        );
        assert_eq!(
            Quota::new(10, Duration::from_nanos(9)),
            Err(ConfigError::IntervalTooShort {
                permits: 10,
                period: Duration::from_nanos(9)
            })
        );
        // exactly 1 ns is fine
        assert_eq!(
            Quota::new(10, Duration::from_nanos(10))
                .unwrap()
                .interval_nanos(),
            1
        );
        let q = Quota::per_second(1).unwrap();
        assert_eq!(q.with_burst(0), Err(ConfigError::ZeroBurst));
        assert!(matches!(
            Quota::per_hour(1).unwrap().with_burst(u32::MAX),
            Err(ConfigError::ToleranceOverflow { .. })
        ));
        let us = Duration::from_micros(1);
        assert_eq!(
            Quota::new(1000, us).unwrap().check_resolution(us),
            Err(ConfigError::ClockTooCoarse {
                step: Duration::from_nanos(1),
                resolution: us
            })
        );
        assert!(
            Quota::per_second(1000)
                .unwrap()
                .check_resolution(us)
                .is_ok()
        );
    }

    #[test]
    fn huge_period_is_fine_or_an_error_never_a_panic() {
        let century = Duration::from_secs(100 * 365 * 24 * 3600);
        let q = Quota::new(1, century).unwrap();
        assert_eq!(q.interval(), century);
        for permits in [1, 2, 1000, u32::MAX] {
            for period in [
                Duration::ZERO,
                Duration::from_nanos(1),
                century,
                Duration::MAX,
            ] {
                if let Ok(q) = Quota::new(permits, period) {
                    assert!(q.interval_nanos() >= 1);
                    assert!(q.interval_nanos().checked_mul(q.burst() as u64).is_some());
                    assert!(
                        q.interval_nanos() as u128 * permits as u128
                            >= duration_to_nanos(period) as u128
                    );
                }
            }
        }
        assert!(Quota::new(1, Duration::MAX).is_ok());
    }
}
