//! The core's construction error, [`ConfigError`] (a limiter, quota or
//! table that cannot be built as asked). An acquisition that is refused
//! returns a [`Refusal`](crate::Refusal), which is not an error of the
//! program but an answer.
//!
//! Each layer follows the same naming: a `ConfigError` for construction
//! (this crate's [`ConfigError`], and one per layer that has settings of
//! its own), a [`Refusal`](crate::Refusal) for an attempt that does not
//! wait, and a `WaitError` for one that waits
//! ([`wait::WaitError`](crate::wait::WaitError), and the layers' own). An error
//! that wraps another reports it through
//! [`source`](core::error::Error::source) and does not repeat its text in
//! its own `Display`.

use core::fmt;
use core::time::Duration;

/// Why a quota, limiter, clock pairing or keyed table could not be built.
/// Every variant names the value that is wrong; nothing is silently clamped.
///
/// ```
/// use tollgate::{ConfigError, Quota};
///
/// assert_eq!(Quota::per_second(0), Err(ConfigError::ZeroPermits));
/// let e = Quota::per_second(10).and_then(|q| q.with_burst(0)).unwrap_err();
/// assert_eq!(e.to_string(), "quota burst must be at least 1");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigError {
    /// A rate of zero permits per period.
    ZeroPermits,
    /// A burst of zero: a bucket that could never admit anything.
    ZeroBurst,
    /// `period / permits` is under one nanosecond (or the period is zero).
    IntervalTooShort {
        /// Permits asked for.
        permits: u32,
        /// Period asked for.
        period: Duration,
    },
    /// `burst × interval` does not fit in the 584 years a `u64` of
    /// nanoseconds can hold.
    ToleranceOverflow {
        /// The burst asked for.
        burst: u32,
        /// The emission interval.
        interval: Duration,
    },
    /// A quota with a burst other than its permits per period given to a
    /// window limiter, which has no burst of its own (it admits `permits`
    /// per window): the burst would be silently ignored.
    BurstNotSupported {
        /// The quota's burst.
        burst: u32,
        /// The quota's permits per period.
        permits: u32,
    },
    /// A limit of zero permits (window or concurrency limiter).
    ZeroLimit,
    /// A window of length zero.
    ZeroWindow,
    /// A sliding window with zero segments.
    ZeroSegments,
    /// The window is not a whole number of nanoseconds per segment.
    WindowNotDivisible {
        /// Window length asked for.
        window: Duration,
        /// Segments asked for.
        segments: u64,
    },
    /// A fixed window this short cannot number every window next to a count
    /// of `limit` in one 64-bit word (more than about one permit per
    /// nanosecond).
    WindowTooShort {
        /// Window length asked for.
        window: Duration,
        /// The limit asked for.
        limit: u32,
        /// The shortest window accepted for this limit.
        min_window: Duration,
    },
    /// The limiter's finest step (an emission interval, a window or a
    /// segment) is shorter than the clock can resolve, so the clock cannot
    /// enforce it.
    ClockTooCoarse {
        /// The limiter's finest step.
        step: Duration,
        /// The clock's resolution.
        resolution: Duration,
    },
    /// A keyed table must hold at least one key.
    ZeroKeys,
    /// More keys than the table supports.
    TooManyKeys {
        /// Keys asked for.
        requested: usize,
        /// The most this table supports.
        max: usize,
    },
    /// The shard count must be a power of two between 1 and `max`.
    InvalidShards {
        /// Shard count asked for.
        requested: usize,
        /// The largest shard count.
        max: usize,
    },
    /// A tick bucket ([`crate::tick`]) on a clock of 0 ticks per second.
    ZeroTickRate,
    /// A 32-bit tick bucket's largest lead (`burst × interval`) plus its
    /// heal threshold, in ticks, does not stay under 2³¹ ticks: beyond that
    /// a wrapping `u32` could not tell a throttled bucket from an idle one
    /// (see [`crate::tick`]).
    TickHorizonExceeded {
        /// `burst × interval + heal threshold`, in ticks.
        ticks: u64,
        /// The most accepted: 2³¹ − 1 ticks.
        max: u32,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::ZeroPermits => f.write_str("quota rate must be at least 1 permit per period"),
            Self::ZeroBurst => f.write_str("quota burst must be at least 1"),
            Self::IntervalTooShort { permits, period } => write!(
                f,
                "{permits} permits per {period:?} is an emission interval under 1 ns"
            ),
            Self::ToleranceOverflow { burst, interval } => write!(
                f,
                "burst {burst} x interval {interval:?} overflows 584 years of nanoseconds"
            ),
            Self::BurstNotSupported { burst, permits } => write!(
                f,
                "a window admits its {permits} permits per window and has no burst: burst {burst} would be ignored"
            ),
            Self::ZeroLimit => f.write_str("limit must be at least 1 permit"),
            Self::ZeroWindow => f.write_str("window length must be at least 1 ns"),
            Self::ZeroSegments => f.write_str("a sliding window needs at least 1 segment"),
            Self::WindowNotDivisible { window, segments } => write!(
                f,
                "a window of {window:?} cannot be split into {segments} whole-nanosecond segments"
            ),
            Self::WindowTooShort {
                window,
                limit,
                min_window,
            } => write!(
                f,
                "a fixed window of {window:?} is too short for a limit of {limit} (at least {min_window:?})"
            ),
            Self::ClockTooCoarse { step, resolution } => write!(
                f,
                "the limiter's step of {step:?} is finer than the clock resolution of {resolution:?}"
            ),
            Self::ZeroKeys => f.write_str("keyed table must hold at least 1 key"),
            Self::TooManyKeys { requested, max } => {
                write!(
                    f,
                    "keyed table of {requested} keys exceeds the maximum {max}"
                )
            }
            Self::InvalidShards { requested, max } => write!(
                f,
                "keyed table shard count {requested} must be a power of two between 1 and {max}"
            ),
            Self::ZeroTickRate => f.write_str("a tick clock must run at 1 tick per second or more"),
            Self::TickHorizonExceeded { ticks, max } => write!(
                f,
                "burst x interval + heal threshold is {ticks} ticks, beyond the 32-bit tick horizon of {max}"
            ),
        }
    }
}

impl core::error::Error for ConfigError {}

/// Checks that a clock of `resolution` can enforce a limiter whose finest
/// step is `step` ([`Limiter::required_resolution`](crate::Limiter::required_resolution)):
/// what a front that pairs a limiter with a clock checks before the first
/// decision. A zero step works on any clock.
///
/// ```
/// use core::time::Duration;
/// use tollgate::error::check_clock;
/// use tollgate::ConfigError;
///
/// // 1 ms steps on a 1 ms clock: fine; on a 10 ms clock: refused
/// assert!(check_clock(Duration::from_millis(1), Duration::from_millis(1)).is_ok());
/// let coarse = check_clock(Duration::from_millis(1), Duration::from_millis(10));
/// assert!(matches!(coarse, Err(ConfigError::ClockTooCoarse { .. })));
/// ```
///
/// # Errors
/// [`ConfigError::ClockTooCoarse`] when `step` is shorter than `resolution`.
pub const fn check_clock(step: Duration, resolution: Duration) -> Result<(), ConfigError> {
    // a limiter without a time step (zero) works on any clock
    if !step.is_zero() && step.as_nanos() < resolution.as_nanos() {
        return Err(ConfigError::ClockTooCoarse { step, resolution });
    }
    Ok(())
}

/// Unwraps a `const` constructor's `Result` at compile time: a `static`
/// quota, window or limiter needs no `match` and no `panic!`, and an invalid
/// argument fails the build instead of the program.
///
/// ```
/// use tollgate::{valid, Bucket, FixedWindow, Gcra, Quota};
/// use core::time::Duration;
///
/// static RADIO: Bucket<Gcra> = Bucket::leaky_bucket(valid!(Quota::per_second(50)));
/// static API: Bucket<FixedWindow> =
///     Bucket::fixed_window(valid!(FixedWindow::new(100, Duration::from_secs(60))));
/// ```
///
/// (A [`ConcurrencyLimiter`](crate::ConcurrencyLimiter) needs no `valid!`:
/// its `const` constructor takes a `NonZeroU32`, so it cannot fail.)
///
/// A value that is not valid does not compile:
///
/// ```compile_fail,E0080
/// use tollgate::{valid, Quota};
/// static NEVER: Quota = valid!(Quota::per_second(0));
/// ```
///
/// The expression is evaluated in a `const` block, so it may not use
/// run-time values; at run time use `?` on the `Result` instead.
#[macro_export]
macro_rules! valid {
    ($constructor:expr) => {
        const {
            match $constructor {
                ::core::result::Result::Ok(value) => value,
                ::core::result::Result::Err(_) => ::core::panic!(::core::concat!(
                    "invalid tollgate configuration: ",
                    ::core::stringify!($constructor)
                )),
            }
        }
    };
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::string::ToString;

    use super::*;

    #[test]
    fn every_config_error_names_the_problem() {
        let ms = Duration::from_millis;
        let cases: [(ConfigError, &str); 17] = [
            (
                ConfigError::BurstNotSupported {
                    burst: 5,
                    permits: 10,
                },
                "burst 5 would be ignored",
            ),
            (ConfigError::ZeroPermits, "at least 1 permit per period"),
            (ConfigError::ZeroBurst, "burst must be at least 1"),
            (
                ConfigError::IntervalTooShort {
                    permits: 10,
                    period: Duration::from_nanos(9),
                },
                "10 permits per 9ns",
            ),
            (
                ConfigError::ToleranceOverflow {
                    burst: 7,
                    interval: ms(1),
                },
                "burst 7 x interval 1ms",
            ),
            (ConfigError::ZeroLimit, "limit must be at least 1"),
            (ConfigError::ZeroWindow, "window length"),
            (ConfigError::ZeroSegments, "at least 1 segment"),
            (
                ConfigError::WindowNotDivisible {
                    window: Duration::from_nanos(10),
                    segments: 3,
                },
                "10ns cannot be split into 3",
            ),
            (
                ConfigError::WindowTooShort {
                    window: Duration::from_nanos(3),
                    limit: 7,
                    min_window: Duration::from_nanos(8),
                },
                "at least 8ns",
            ),
            (
                ConfigError::ClockTooCoarse {
                    step: ms(1),
                    resolution: ms(10),
                },
                "step of 1ms is finer than the clock resolution of 10ms",
            ),
            (ConfigError::ZeroKeys, "at least 1 key"),
            (
                ConfigError::TooManyKeys {
                    requested: 9,
                    max: 8,
                },
                "9 keys exceeds the maximum 8",
            ),
            (
                ConfigError::InvalidShards {
                    requested: 3,
                    max: 64,
                },
                "shard count 3",
            ),
            (ConfigError::ZeroLimit, "limit"),
            (ConfigError::ZeroTickRate, "1 tick per second"),
            (
                ConfigError::TickHorizonExceeded {
                    ticks: 1 << 31,
                    max: (1 << 31) - 1,
                },
                "2147483648 ticks, beyond the 32-bit tick horizon of 2147483647",
            ),
        ];
        for (error, text) in cases {
            assert!(error.to_string().contains(text), "{error}: {text}");
        }
    }

    #[test]
    fn clock_check_compares_steps() {
        let ms = Duration::from_millis;
        assert_eq!(check_clock(ms(10), ms(10)), Ok(()));
        assert_eq!(check_clock(Duration::ZERO, ms(10)), Ok(()));
        assert_eq!(
            check_clock(ms(9), ms(10)),
            Err(ConfigError::ClockTooCoarse {
                step: ms(9),
                resolution: ms(10)
            })
        );
    }
}
