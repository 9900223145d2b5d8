//! What a check returns.
//!
//! A check of `n` permits at `now` gives one of three answers:
//!
//! - [`Decision::Allowed`] with a [`Snapshot`] of the limiter after the
//!   admission: the limit, the permits still `remaining`, and `reset_after`
//!   (the time until the limiter is back to full);
//! - [`Decision::Denied`] with a [`Denied`]: `retry_after`, the exact wait
//!   (to the nanosecond) after which the same request would be admitted if
//!   nothing else took capacity meanwhile, plus the snapshot of the limiter
//!   as it stands;
//! - `Err(`[`CapacityExceeded`]`)` when the request can never succeed
//!   (`n` larger than the burst, the largest weight or the limit), so a
//!   caller never waits for the impossible.
//!
//! Building a decision is cheap: the snapshot stores raw figures and
//! computes `remaining` (a division) only when asked.

use core::fmt;
use core::time::Duration;

/// The state of a limiter at one instant, as headers and callers need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Snapshot {
    limit: u32,
    /// The unit of `slack` and `per_permit`: `1/scale` ns (1 except for a
    /// GCRA bucket with an exact fractional interval, see [`crate::gcra`]).
    scale: u32,
    /// In nanoseconds.
    reset_after: u64,
    // remaining = min(slack / per_permit, limit), computed on demand
    slack: u64,
    per_permit: u64,
}

impl Snapshot {
    /// A snapshot: at most `limit` permits, `remaining` of them free now,
    /// full again after `reset_after`.
    #[must_use]
    pub const fn new(limit: u32, remaining: u32, reset_after: Duration) -> Self {
        Self::exact(
            limit,
            remaining,
            crate::time::duration_to_nanos(reset_after),
        )
    }

    /// [`Snapshot::new`] with `reset_after` in nanoseconds.
    #[inline]
    pub(crate) const fn exact(limit: u32, remaining: u32, reset_after_nanos: u64) -> Self {
        Self {
            limit,
            scale: 1,
            reset_after: reset_after_nanos,
            slack: remaining as u64,
            per_permit: 1,
        }
    }

    /// A snapshot whose `remaining` is `slack / per_permit` (capped at
    /// `limit`), computed lazily. Used by time-based buckets: `slack` and
    /// `per_permit` in units of `1/scale` ns (`scale ≥ 1`), `reset_after`
    /// in nanoseconds.
    #[inline]
    pub(crate) const fn from_slack(
        limit: u32,
        slack: u64,
        per_permit: u64,
        reset_after_nanos: u64,
        scale: u32,
    ) -> Self {
        Self {
            limit,
            scale,
            reset_after: reset_after_nanos,
            slack,
            per_permit: if per_permit == 0 { 1 } else { per_permit },
        }
    }

    /// [`reset_after`](Self::reset_after) less the time `permits` permits
    /// take to come back (a token bucket's `permits × T`), in nanoseconds
    /// rounded up: when the work queued ahead of the last `permits` ends.
    /// For a snapshot with an exact count, a permit takes 1 ns.
    #[cfg(feature = "std")]
    #[inline]
    pub(crate) const fn reset_after_less_permits_nanos(&self, permits: u64) -> u64 {
        let cost = self.per_permit.saturating_mul(permits);
        if self.scale <= 1 {
            return self.reset_after.saturating_sub(cost);
        }
        // The lead in units: a token bucket's exactly (its slack is the
        // largest lead, limit × T, less the lead); `reset_after` in units
        // bounds it within a nanosecond for any snapshot.
        let scale = self.scale as u64;
        let by_slack = (self.limit as u64 * self.per_permit).saturating_sub(self.slack);
        let by_reset = self.reset_after.saturating_mul(scale);
        let lead = if by_slack < by_reset {
            by_slack
        } else {
            by_reset
        };
        units_to_nanos_ceil(lead.saturating_sub(cost), self.scale)
    }

    /// The most permits this limiter can ever hold (burst, largest weight,
    /// window limit or concurrency limit).
    #[must_use]
    pub const fn limit(&self) -> u32 {
        self.limit
    }

    /// Permits that could be taken right now.
    #[must_use]
    pub const fn remaining(&self) -> u32 {
        let r = self.slack / self.per_permit;
        if r > self.limit as u64 {
            self.limit
        } else {
            r as u32
        }
    }

    /// Time until the limiter is back to full capacity (zero when full).
    #[must_use]
    pub const fn reset_after(&self) -> Duration {
        Duration::from_nanos(self.reset_after_nanos())
    }

    /// [`reset_after`](Self::reset_after) in nanoseconds (rounded up for a
    /// bucket whose exact time falls between two nanoseconds: at `now +
    /// reset_after` it is full, a nanosecond earlier it is not).
    #[must_use]
    pub const fn reset_after_nanos(&self) -> u64 {
        self.reset_after
    }

    /// [`reset_after`](Self::reset_after) in whole seconds, rounded up.
    #[must_use]
    pub const fn reset_after_secs_ceil(&self) -> u64 {
        nanos_to_secs_ceil(self.reset_after)
    }
}

/// `units` of `1/scale` ns in whole nanoseconds, rounded up.
#[inline]
pub(crate) const fn units_to_nanos_ceil(units: u64, scale: u32) -> u64 {
    if scale <= 1 {
        units
    } else {
        units.div_ceil(scale as u64)
    }
}

/// A refusal: when to retry, and the limiter's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Denied {
    retry_after: u64,
    snapshot: Snapshot,
}

impl Denied {
    /// A refusal with the exact wait `retry_after`.
    #[must_use]
    pub const fn new(retry_after: Duration, snapshot: Snapshot) -> Self {
        Self::from_nanos(crate::time::duration_to_nanos(retry_after), snapshot)
    }

    /// [`Denied::new`] with the wait in nanoseconds.
    #[inline]
    pub(crate) const fn from_nanos(retry_after_nanos: u64, snapshot: Snapshot) -> Self {
        Self {
            retry_after: retry_after_nanos,
            snapshot,
        }
    }

    /// The exact time after which the same request would be admitted if no
    /// other request takes capacity first.
    #[must_use]
    pub const fn retry_after(&self) -> Duration {
        Duration::from_nanos(self.retry_after)
    }

    /// [`retry_after`](Self::retry_after) in nanoseconds.
    #[must_use]
    pub const fn retry_after_nanos(&self) -> u64 {
        self.retry_after
    }

    /// [`retry_after`](Self::retry_after) in whole seconds rounded **up**:
    /// what an HTTP `Retry-After` header needs. Never 0 for a positive wait
    /// (a 300 ms wait gives 1).
    #[must_use]
    pub const fn retry_after_secs_ceil(&self) -> u64 {
        nanos_to_secs_ceil(self.retry_after)
    }

    /// The limiter's state at the refusal (nothing was taken).
    #[must_use]
    pub const fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// The limiter's limit (burst, window limit, ...).
    #[must_use]
    pub const fn limit(&self) -> u32 {
        self.snapshot.limit
    }
}

/// The answer to a check that could succeed.
#[must_use = "a rate-limit decision that is not inspected limits nothing"]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decision {
    /// Admitted; the snapshot is the state after taking the permits.
    Allowed(Snapshot),
    /// Refused; nothing was taken.
    Denied(Denied),
}

impl Decision {
    /// True if the request was admitted.
    #[must_use]
    pub const fn is_allowed(&self) -> bool {
        matches!(self, Self::Allowed(_))
    }

    /// True if the request was refused.
    #[must_use]
    pub const fn is_denied(&self) -> bool {
        matches!(self, Self::Denied(_))
    }

    /// The limiter state carried by either answer.
    #[must_use]
    pub const fn snapshot(&self) -> &Snapshot {
        match self {
            Self::Allowed(s) => s,
            Self::Denied(d) => &d.snapshot,
        }
    }

    /// The refusal, if any.
    #[must_use]
    pub const fn denied(&self) -> Option<&Denied> {
        match self {
            Self::Allowed(_) => None,
            Self::Denied(d) => Some(d),
        }
    }

    /// The wait before retrying: zero when allowed.
    #[must_use]
    pub const fn retry_after(&self) -> Duration {
        match self {
            Self::Allowed(_) => Duration::ZERO,
            Self::Denied(d) => d.retry_after(),
        }
    }

    /// `Ok(snapshot)` when allowed, `Err(denied)` when refused, for `?`.
    ///
    /// # Errors
    /// The [`Denied`] refusal.
    pub const fn into_result(self) -> Result<Snapshot, Denied> {
        match self {
            Self::Allowed(s) => Ok(s),
            Self::Denied(d) => Err(d),
        }
    }
}

/// A request that can never succeed: it asks for more permits than the
/// limiter can ever hold at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CapacityExceeded {
    /// Permits asked for.
    pub requested: u32,
    /// The most the limiter can ever grant at once.
    pub capacity: u32,
}

impl CapacityExceeded {
    /// A request for `requested` permits from a limiter that grants at most
    /// `capacity` at once.
    #[must_use]
    pub const fn new(requested: u32, capacity: u32) -> Self {
        Self {
            requested,
            capacity,
        }
    }
}

impl fmt::Display for CapacityExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "request for {} permits can never succeed: capacity is {}",
            self.requested, self.capacity
        )
    }
}

impl core::error::Error for CapacityExceeded {}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rate limited: retry after {:?}", self.retry_after())
    }
}

impl core::error::Error for Denied {}

const fn nanos_to_secs_ceil(nanos: u64) -> u64 {
    nanos.div_ceil(1_000_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        let s = Snapshot::new(10, 0, Duration::ZERO);
        let ns = |n| Denied::new(Duration::from_nanos(n), s).retry_after_secs_ceil();
        assert_eq!(ns(0), 0);
        assert_eq!(ns(1), 1);
        assert_eq!(ns(300_000_000), 1);
        assert_eq!(ns(1_000_000_000), 1);
        assert_eq!(ns(1_000_000_001), 2);
        assert_eq!(ns(u64::MAX), 18_446_744_074);
    }

    #[test]
    fn lazy_remaining_is_capped_at_limit() {
        assert_eq!(Snapshot::from_slack(5, 1_000, 100, 0, 1).remaining(), 5);
        assert_eq!(Snapshot::from_slack(5, 399, 100, 0, 1).remaining(), 3);
        assert_eq!(Snapshot::from_slack(5, 0, 0, 0, 1).remaining(), 0);
        // slack and per permit in thirds of a nanosecond
        let s = Snapshot::from_slack(5, 399, 100, 4, 3);
        assert_eq!((s.remaining(), s.reset_after_nanos()), (3, 4));
        for scale in 0..=40 {
            for units in [0, 1, 2, 15, 16, 17, 1_000_000_007, u64::MAX - 1, u64::MAX] {
                let want = units.div_ceil(u64::from(scale.max(1)));
                assert_eq!(units_to_nanos_ceil(units, scale), want, "{units}/{scale}");
            }
        }
        let s = Snapshot::new(5, 2, Duration::from_nanos(7));
        assert_eq!(s.remaining(), 2);
        assert_eq!(s.reset_after_nanos(), 7);
    }

    #[test]
    fn decision_accessors() {
        let s = Snapshot::new(3, 1, Duration::from_nanos(10));
        let a = Decision::Allowed(s);
        assert!(a.is_allowed() && !a.is_denied());
        assert_eq!(a.retry_after(), Duration::ZERO);
        assert_eq!(a.into_result(), Ok(s));
        let d = Decision::Denied(Denied::new(Duration::from_nanos(5), s));
        assert!(d.is_denied());
        assert_eq!(d.retry_after(), Duration::from_nanos(5));
        assert_eq!(d.denied().unwrap().limit(), 3);
        assert_eq!(d.snapshot(), &s);
    }
}
