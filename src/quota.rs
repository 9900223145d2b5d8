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
//! The emission interval `T = period / permits` is rounded **up** to whole
//! nanoseconds, so rounding can only admit less than promised, never more.
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
    permits: u32,
    interval: u64,
    burst: u32,
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
        // Round up: the bucket may admit less than promised, never more.
        let interval = period_nanos.div_ceil(permits as u64);
        let quota = Self {
            period: period_nanos,
            permits,
            interval,
            burst: permits,
        };
        quota.with_burst(permits)
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
    pub const fn with_burst(self, burst: u32) -> Result<Self, ConfigError> {
        if burst == 0 {
            return Err(ConfigError::ZeroBurst);
        }
        if self.interval.checked_mul(burst as u64).is_none() {
            return Err(ConfigError::ToleranceOverflow {
                burst,
                interval: Duration::from_nanos(self.interval),
            });
        }
        Ok(Self { burst, ..self })
    }

    /// Checks that a clock of `resolution` can enforce this quota: its
    /// emission interval must be at least one clock step.
    ///
    /// # Errors
    /// [`ConfigError::ClockTooCoarse`] if the interval is finer than the
    /// clock.
    pub const fn check_resolution(self, resolution: Duration) -> Result<Self, ConfigError> {
        match crate::error::check_clock(Duration::from_nanos(self.interval), resolution) {
            Ok(()) => Ok(self),
            Err(e) => Err(e),
        }
    }

    /// The emission interval `T` (period / permits, rounded up).
    #[must_use]
    pub const fn interval(&self) -> Duration {
        Duration::from_nanos(self.interval)
    }

    /// The emission interval `T` in nanoseconds.
    #[must_use]
    pub const fn interval_nanos(&self) -> u64 {
        self.interval
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
    fn interval_rounds_up() {
        let q = Quota::per_second(3).unwrap();
        assert_eq!(q.interval_nanos(), 333_333_334);
        assert!(q.interval_nanos() * 3 >= NANOS_PER_SEC);
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
        assert!(Quota::per_second(1000)
            .unwrap()
            .check_resolution(us)
            .is_ok());
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
