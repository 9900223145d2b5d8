//! The state of a limiter at one instant, computed when asked.
//!
//! A [`Snapshot`] is what rate-limit headers need: the limit, the permits
//! still `remaining` and `reset_after` (the time until the limiter is back
//! to full). An acquisition does not build one; ask the limiter
//! ([`Limiter::snapshot`](crate::Limiter::snapshot)) when you need it, or
//! read the one a [`Refusal`](crate::Refusal) carries. It stores raw
//! figures and computes `remaining` (a division) only when asked.

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
        Self::from_nanos(
            limit,
            remaining,
            crate::time::duration_to_nanos(reset_after),
        )
    }

    /// [`Snapshot::new`] with `reset_after` in nanoseconds.
    ///
    /// ```
    /// use tollgate::Snapshot;
    ///
    /// let s = Snapshot::from_nanos(10, 3, 1_500_000_000);
    /// assert_eq!((s.limit(), s.remaining(), s.reset_after_secs_ceil()), (10, 3, 2));
    /// ```
    #[inline]
    #[must_use]
    pub const fn from_nanos(limit: u32, remaining: u32, reset_after_nanos: u64) -> Self {
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

    /// The instant the limiter is full again, for a snapshot taken at
    /// `now` (ns).
    #[inline]
    pub(crate) const fn full_at(&self, now: u64) -> crate::time::Timestamp {
        crate::time::Timestamp::from_nanos(now.saturating_add(self.reset_after))
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

/// Nanoseconds in whole seconds, rounded up.
pub(crate) const fn nanos_to_secs_ceil(nanos: u64) -> u64 {
    nanos.div_ceil(1_000_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
