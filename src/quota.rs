//! Quotas: how many permits per period, with what burst.
//!
//! A [`Quota`] is a rate (`permits` per `period`) plus the shape of the
//! bucket that enforces it:
//!
//! - **burst**: how many permits a fresh token bucket admits at once
//!   (defaults to `permits`, so `per_second(10)` admits 10 at once and then
//!   one every 100 ms);
//! - **max weight**: the heaviest single request a strict-pacing leaky
//!   bucket accepts (defaults to 1).
//!
//! The emission interval `T = period / permits` is rounded **up** to whole
//! nanoseconds, so rounding can only admit less than promised, never more.
//!
//! Every constructor is a `const fn` returning a `Result`, so a quota can be
//! a `static` in firmware and a bad one fails the build:
//!
//! ```
//! use tollgate::Quota;
//!
//! static TELEMETRY: Quota = match Quota::per_second(10) {
//!     Ok(q) => q,
//!     Err(_) => panic!("bad quota"),
//! };
//! assert_eq!(TELEMETRY.interval_nanos(), 100_000_000);
//! assert_eq!(TELEMETRY.burst(), 10);
//! ```
//!
//! Invalid input is a [`QuotaError`] naming what is wrong; nothing is
//! silently clamped:
//!
//! ```
//! use tollgate::{Quota, QuotaError};
//!
//! assert_eq!(Quota::per_second(0), Err(QuotaError::ZeroPermits));
//! assert!(matches!(
//!     Quota::per_second(10).and_then(|q| q.allow_burst(0)),
//!     Err(QuotaError::ZeroBurst)
//! ));
//! ```

use core::fmt;
use core::time::Duration;

use crate::clock::duration_to_nanos;

const NANOS_PER_SEC: u64 = 1_000_000_000;

/// A validated rate limit: permits per period, burst, and largest weight.
///
/// See the [module documentation](self) for the meaning of each part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quota {
    period: u64,
    permits: u32,
    interval: u64,
    burst: u32,
    max_weight: u32,
}

impl Quota {
    /// `permits` permits per `period`, burst `permits`, max weight 1.
    ///
    /// # Errors
    /// [`QuotaError::ZeroPermits`] if `permits` is 0;
    /// [`QuotaError::IntervalTooShort`] if `period / permits` is under 1 ns;
    /// [`QuotaError::ToleranceOverflow`] if the burst does not fit in `u64`
    /// nanoseconds.
    pub const fn new(permits: u32, period: Duration) -> Result<Self, QuotaError> {
        Self::from_nanos(permits, duration_to_nanos(period))
    }

    /// `permits` permits per `period_nanos` nanoseconds. See [`Quota::new`].
    ///
    /// # Errors
    /// As [`Quota::new`].
    pub const fn from_nanos(permits: u32, period_nanos: u64) -> Result<Self, QuotaError> {
        if permits == 0 {
            return Err(QuotaError::ZeroPermits);
        }
        if period_nanos < permits as u64 {
            return Err(QuotaError::IntervalTooShort {
                permits,
                period_nanos,
            });
        }
        // Round up: the bucket may admit less than promised, never more.
        let interval = period_nanos.div_ceil(permits as u64);
        let quota = Self {
            period: period_nanos,
            permits,
            interval,
            burst: permits,
            max_weight: 1,
        };
        quota.allow_burst(permits)
    }

    /// `permits` per second (ten per second for `per_second(10)`).
    ///
    /// # Errors
    /// As [`Quota::new`].
    pub const fn per_second(permits: u32) -> Result<Self, QuotaError> {
        Self::from_nanos(permits, NANOS_PER_SEC)
    }

    /// `permits` per minute.
    ///
    /// # Errors
    /// As [`Quota::new`].
    pub const fn per_minute(permits: u32) -> Result<Self, QuotaError> {
        Self::from_nanos(permits, 60 * NANOS_PER_SEC)
    }

    /// `permits` per hour.
    ///
    /// # Errors
    /// As [`Quota::new`].
    pub const fn per_hour(permits: u32) -> Result<Self, QuotaError> {
        Self::from_nanos(permits, 3600 * NANOS_PER_SEC)
    }

    /// One permit every `period` (burst 1). `with_period(100 ms)` is the same
    /// rate as `per_second(10)` but with a burst of one.
    ///
    /// # Errors
    /// [`QuotaError::IntervalTooShort`] for a zero period.
    pub const fn with_period(period: Duration) -> Result<Self, QuotaError> {
        Self::new(1, period)
    }

    /// Sets the token-bucket burst: how many permits a full bucket admits at
    /// once. The rate is unchanged.
    ///
    /// # Errors
    /// [`QuotaError::ZeroBurst`] for 0; [`QuotaError::ToleranceOverflow`] if
    /// `burst × interval` does not fit in `u64` nanoseconds.
    pub const fn allow_burst(self, burst: u32) -> Result<Self, QuotaError> {
        if burst == 0 {
            return Err(QuotaError::ZeroBurst);
        }
        if self.interval.checked_mul(burst as u64).is_none() {
            return Err(QuotaError::ToleranceOverflow {
                capacity: burst,
                interval_nanos: self.interval,
            });
        }
        Ok(Self { burst, ..self })
    }

    /// Sets the leaky bucket's largest weight: the most permits one request
    /// may take (default 1). A weighted request is admitted only once the
    /// previous work has drained, then occupies `weight × interval`.
    ///
    /// # Errors
    /// [`QuotaError::ZeroWeight`] for 0; [`QuotaError::ToleranceOverflow`]
    /// if `weight × interval` does not fit in `u64` nanoseconds.
    pub const fn max_weight(self, max_weight: u32) -> Result<Self, QuotaError> {
        if max_weight == 0 {
            return Err(QuotaError::ZeroWeight);
        }
        if self.interval.checked_mul(max_weight as u64).is_none() {
            return Err(QuotaError::ToleranceOverflow {
                capacity: max_weight,
                interval_nanos: self.interval,
            });
        }
        Ok(Self { max_weight, ..self })
    }

    /// Checks that a clock of `resolution_nanos` can enforce this quota: its
    /// emission interval must be at least one clock step.
    ///
    /// # Errors
    /// [`QuotaError::BelowClockResolution`] if the interval is finer than
    /// the clock.
    pub const fn check_resolution(self, resolution_nanos: u64) -> Result<Self, QuotaError> {
        if self.interval < resolution_nanos {
            return Err(QuotaError::BelowClockResolution {
                interval_nanos: self.interval,
                resolution_nanos,
            });
        }
        Ok(self)
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

    /// The token-bucket burst.
    #[must_use]
    pub const fn burst(&self) -> u32 {
        self.burst
    }

    /// The leaky bucket's largest weight.
    #[must_use]
    pub const fn weight_limit(&self) -> u32 {
        self.max_weight
    }
}

/// Why a [`Quota`] could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QuotaError {
    /// The rate has zero permits per period.
    ZeroPermits,
    /// The burst is zero: a bucket that can never admit anything.
    ZeroBurst,
    /// The leaky bucket's largest weight is zero.
    ZeroWeight,
    /// `period / permits` is under one nanosecond (or the period is zero).
    IntervalTooShort {
        /// Permits asked for.
        permits: u32,
        /// Period asked for, in nanoseconds.
        period_nanos: u64,
    },
    /// The emission interval is finer than the clock can resolve.
    BelowClockResolution {
        /// The quota's emission interval in nanoseconds.
        interval_nanos: u64,
        /// The clock's resolution in nanoseconds.
        resolution_nanos: u64,
    },
    /// `capacity × interval` overflows `u64` nanoseconds (about 584 years).
    ToleranceOverflow {
        /// The burst or largest weight asked for.
        capacity: u32,
        /// The emission interval in nanoseconds.
        interval_nanos: u64,
    },
}

impl fmt::Display for QuotaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::ZeroPermits => f.write_str("quota rate must be at least 1 permit per period"),
            Self::ZeroBurst => f.write_str("quota burst must be at least 1"),
            Self::ZeroWeight => f.write_str("leaky bucket max weight must be at least 1"),
            Self::IntervalTooShort {
                permits,
                period_nanos,
            } => write!(
                f,
                "{permits} permits per {period_nanos} ns is an emission interval under 1 ns"
            ),
            Self::BelowClockResolution {
                interval_nanos,
                resolution_nanos,
            } => write!(
                f,
                "emission interval of {interval_nanos} ns is finer than the clock resolution of {resolution_nanos} ns"
            ),
            Self::ToleranceOverflow {
                capacity,
                interval_nanos,
            } => write!(
                f,
                "capacity {capacity} x interval {interval_nanos} ns overflows u64 nanoseconds"
            ),
        }
    }
}

impl core::error::Error for QuotaError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_second_means_n_per_second() {
        let q = Quota::per_second(10).unwrap();
        assert_eq!(q.interval_nanos(), 100_000_000);
        assert_eq!(q.burst(), 10);
        assert_eq!(q.weight_limit(), 1);
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
        assert_eq!(Quota::per_second(0), Err(QuotaError::ZeroPermits));
        assert_eq!(
            Quota::with_period(Duration::ZERO),
            Err(QuotaError::IntervalTooShort {
                permits: 1,
                period_nanos: 0
            })
        );
        assert_eq!(
            Quota::from_nanos(10, 9),
            Err(QuotaError::IntervalTooShort {
                permits: 10,
                period_nanos: 9
            })
        );
        // exactly 1 ns is fine
        assert_eq!(Quota::from_nanos(10, 10).unwrap().interval_nanos(), 1);
        let q = Quota::per_second(1).unwrap();
        assert_eq!(q.allow_burst(0), Err(QuotaError::ZeroBurst));
        assert_eq!(q.max_weight(0), Err(QuotaError::ZeroWeight));
        assert!(matches!(
            Quota::per_hour(1).unwrap().allow_burst(u32::MAX),
            Err(QuotaError::ToleranceOverflow { .. })
        ));
        assert!(matches!(
            Quota::per_hour(1).unwrap().max_weight(u32::MAX),
            Err(QuotaError::ToleranceOverflow { .. })
        ));
        assert_eq!(
            Quota::from_nanos(1000, 1000)
                .unwrap()
                .check_resolution(1000),
            Err(QuotaError::BelowClockResolution {
                interval_nanos: 1,
                resolution_nanos: 1000
            })
        );
        assert!(Quota::per_second(1000)
            .unwrap()
            .check_resolution(1000)
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

    #[test]
    fn display_mentions_the_field() {
        extern crate std;
        use std::string::ToString;
        assert!(QuotaError::ZeroBurst.to_string().contains("burst"));
        assert!(QuotaError::ZeroPermits.to_string().contains("permit"));
    }
}
