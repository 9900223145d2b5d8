//! [`Timestamp`]: a point on a limiter's monotonic clock.
//!
//! Every limiter operation takes `now` as a [`Timestamp`], never as a bare
//! integer, and every length of time (a heal threshold, a retry hint, a
//! clock's resolution) is a [`core::time::Duration`]. A unit mix-up —
//! milliseconds or embassy ticks where nanoseconds were meant — therefore
//! does not compile:
//!
//! ```compile_fail,E0308
//! use tollgate::{Bucket, Limiter, Quota};
//! let bucket = Bucket::token_bucket(Quota::per_second(10)?);
//! let now_ms: u64 = 1_500; // from a millisecond timer
//! let _ = bucket.check(now_ms); // expected `Timestamp`, found `u64`
//! # Ok::<(), tollgate::ConfigError>(())
//! ```
//!
//! The same holds for every other place a time goes in; each of these is
//! a compile error, not a silently wrong limit:
//!
//! ```compile_fail,E0308
//! # use tollgate::{Gcra, Quota};
//! // a heal threshold is a Duration, not "1000 of some unit"
//! let _ = Gcra::token_bucket(Quota::per_second(10)?).with_heal_threshold(1_000);
//! # Ok::<(), tollgate::ConfigError>(())
//! ```
//!
//! ```compile_fail,E0308
//! # use tollgate::{Gcra, KeyedLimiter, Quota};
//! # use tollgate::keyed::ShardedKeyedTable;
//! let table = ShardedKeyedTable::<u32, _>::builder(Gcra::token_bucket(Quota::per_second(10)?)).build()?;
//! let ticks: u64 = 32_768; // an embassy tick count
//! let _ = table.check(&7, ticks);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ```compile_fail,E0308
//! # use tollgate::ManualClock;
//! let clock = ManualClock::new();
//! clock.set(5_000); // nanoseconds? milliseconds?
//! ```
//!
//! ```compile_fail,E0277
//! # use tollgate::Timestamp;
//! let _ = Timestamp::ZERO + 250_u64; // add a Duration instead
//! ```
//!
//! ```compile_fail,E0308
//! # use tollgate::ConcurrencyLimiter;
//! let l = ConcurrencyLimiter::with_limit(4)?;
//! let _ = l.with_retry_hint(1_000_000); // a Duration, not nanoseconds
//! # Ok::<(), tollgate::ConfigError>(())
//! ```
//!
//! A timestamp is built from a count with its unit in the name, from a
//! [`Duration`] since the clock's origin, or from the clock types of the
//! platform (`StdClock::timestamp` for a `std::time::Instant`,
//! `From<embassy_time::Instant>` with feature `embassy`):
//!
//! ```
//! use core::time::Duration;
//! use tollgate::Timestamp;
//!
//! let t = Timestamp::from_millis(1_500);
//! assert_eq!(t, Timestamp::from_nanos(1_500_000_000));
//! assert_eq!(t + Duration::from_millis(500), Timestamp::from_secs(2));
//! assert_eq!(Timestamp::from_secs(2) - t, Duration::from_millis(500));
//! // Arithmetic saturates instead of wrapping or panicking.
//! assert_eq!(t - Timestamp::from_secs(9), Duration::ZERO);
//! assert_eq!(Timestamp::MAX + Duration::from_secs(1), Timestamp::MAX);
//! ```

use core::fmt;
use core::ops::{Add, AddAssign, Sub, SubAssign};
use core::time::Duration;

/// A point in time on a monotonic clock: nanoseconds since the clock's
/// origin, in a `u64` (584 years of range).
///
/// What the origin is depends on the clock: one process-wide origin for
/// every std clock ([`StdClock`](crate::StdClock), `CoarseClock`,
/// `QuantaClock`, an async runtime's), boot for an embassy tick counter, zero
/// for a [`ManualClock`](crate::ManualClock). Timestamps of clocks with
/// different origins must not be mixed on one limiter. See the [module
/// documentation](self).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[repr(transparent)]
pub struct Timestamp(u64);

const NANOS_PER_SEC: u64 = 1_000_000_000;

impl Timestamp {
    /// The clock's origin.
    pub const ZERO: Self = Self(0);
    /// The last representable instant, about 584 years after the origin.
    pub const MAX: Self = Self(u64::MAX);

    /// `nanos` nanoseconds after the origin.
    #[must_use]
    #[inline]
    pub const fn from_nanos(nanos: u64) -> Self {
        Self(nanos)
    }

    /// `micros` microseconds after the origin (saturating).
    #[must_use]
    pub const fn from_micros(micros: u64) -> Self {
        Self(micros.saturating_mul(1_000))
    }

    /// `millis` milliseconds after the origin (saturating).
    #[must_use]
    pub const fn from_millis(millis: u64) -> Self {
        Self(millis.saturating_mul(1_000_000))
    }

    /// `secs` seconds after the origin (saturating).
    #[must_use]
    pub const fn from_secs(secs: u64) -> Self {
        Self(secs.saturating_mul(NANOS_PER_SEC))
    }

    /// `elapsed` after the origin (saturating at [`Timestamp::MAX`]).
    #[must_use]
    pub const fn since_origin(elapsed: Duration) -> Self {
        Self(duration_to_nanos(elapsed))
    }

    /// Nanoseconds since the origin.
    #[must_use]
    #[inline]
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// The time since the origin.
    #[must_use]
    pub const fn elapsed_since_origin(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// `self + by`, or `None` past [`Timestamp::MAX`].
    #[must_use]
    pub const fn checked_add(self, by: Duration) -> Option<Self> {
        let secs = by.as_secs();
        if secs > u64::MAX / NANOS_PER_SEC {
            return None;
        }
        match (secs * NANOS_PER_SEC).checked_add(by.subsec_nanos() as u64) {
            Some(ns) => match self.0.checked_add(ns) {
                Some(t) => Some(Self(t)),
                None => None,
            },
            None => None,
        }
    }

    /// `self + by`, saturating at [`Timestamp::MAX`].
    #[must_use]
    #[inline]
    pub const fn saturating_add(self, by: Duration) -> Self {
        Self(self.0.saturating_add(duration_to_nanos(by)))
    }

    /// `self − by`, saturating at [`Timestamp::ZERO`].
    #[must_use]
    #[inline]
    pub const fn saturating_sub(self, by: Duration) -> Self {
        Self(self.0.saturating_sub(duration_to_nanos(by)))
    }

    /// The time from `earlier` to `self`, zero if `earlier` is later.
    #[must_use]
    #[inline]
    pub const fn saturating_duration_since(self, earlier: Self) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Timestamp {
    type Output = Self;
    /// Saturates at [`Timestamp::MAX`] (never panics).
    #[inline]
    fn add(self, by: Duration) -> Self {
        self.saturating_add(by)
    }
}

impl AddAssign<Duration> for Timestamp {
    #[inline]
    fn add_assign(&mut self, by: Duration) {
        *self = self.saturating_add(by);
    }
}

impl Sub<Duration> for Timestamp {
    type Output = Self;
    /// Saturates at [`Timestamp::ZERO`] (never panics).
    #[inline]
    fn sub(self, by: Duration) -> Self {
        self.saturating_sub(by)
    }
}

impl SubAssign<Duration> for Timestamp {
    #[inline]
    fn sub_assign(&mut self, by: Duration) {
        *self = self.saturating_sub(by);
    }
}

impl Sub for Timestamp {
    type Output = Duration;
    /// [`saturating_duration_since`](Timestamp::saturating_duration_since).
    #[inline]
    fn sub(self, earlier: Self) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Timestamp({:?})", self.elapsed_since_origin())
    }
}

impl fmt::Display for Timestamp {
    /// The time since the origin, as `Duration`'s `Debug` writes it
    /// (`1.5s`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.elapsed_since_origin())
    }
}

/// A [`Duration`] in nanoseconds, saturating at `u64::MAX` (about 584
/// years) instead of wrapping: the unit of every limiter's arithmetic.
///
/// ```
/// use core::time::Duration;
/// use tollgate::time::duration_to_nanos;
///
/// assert_eq!(duration_to_nanos(Duration::from_millis(1500)), 1_500_000_000);
/// assert_eq!(duration_to_nanos(Duration::MAX), u64::MAX);
/// ```
#[inline]
#[must_use]
pub const fn duration_to_nanos(d: Duration) -> u64 {
    let ns = d.as_secs().saturating_mul(NANOS_PER_SEC);
    ns.saturating_add(d.subsec_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_agree() {
        assert_eq!(Timestamp::from_secs(2), Timestamp::from_millis(2_000));
        assert_eq!(Timestamp::from_millis(2), Timestamp::from_micros(2_000));
        assert_eq!(Timestamp::from_micros(2), Timestamp::from_nanos(2_000));
        assert_eq!(
            Timestamp::since_origin(Duration::from_millis(1_500)),
            Timestamp::from_millis(1_500)
        );
        assert_eq!(Timestamp::from_secs(u64::MAX), Timestamp::MAX);
        assert_eq!(Timestamp::since_origin(Duration::MAX), Timestamp::MAX);
    }

    #[test]
    fn arithmetic_saturates() {
        let t = Timestamp::from_secs(1);
        assert_eq!(
            t.checked_add(Duration::from_secs(1)),
            Some(Timestamp::from_secs(2))
        );
        assert_eq!(Timestamp::MAX.checked_add(Duration::from_nanos(1)), None);
        assert_eq!(t.checked_add(Duration::MAX), None);
        assert_eq!(t - Duration::from_secs(5), Timestamp::ZERO);
        let mut u = t;
        u += Duration::from_millis(1);
        u -= Duration::from_millis(2);
        assert_eq!(u, Timestamp::from_millis(999));
        assert_eq!(t - u, Duration::from_millis(1));
        assert_eq!(u - t, Duration::ZERO);
    }

    #[test]
    fn formats_as_a_duration() {
        extern crate std;
        use std::format;
        assert_eq!(format!("{}", Timestamp::from_millis(1_500)), "1.5s");
        assert_eq!(
            format!("{:?}", Timestamp::from_millis(1_500)),
            "Timestamp(1.5s)"
        );
    }
}
