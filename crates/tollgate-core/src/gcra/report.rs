//! What a stored TAT reports without changing it: the snapshot of a
//! bucket and the waits until a request would be admitted.

use core::time::Duration;

use super::{BucketKind, Gcra};
use crate::refusal::Refusal;
use crate::snapshot::Snapshot;
use crate::time::duration_to_nanos;

impl Gcra {
    /// The largest lead with which `n` permits are still admitted.
    #[inline]
    const fn admit_lead(&self, n: u32) -> u64 {
        match self.kind {
            // n ≤ capacity, so n·T ≤ max_lead (saturating all the same)
            BucketKind::TokenBucket => self
                .max_lead()
                .saturating_sub((n as u64).saturating_mul(self.interval)),
            BucketKind::LeakyBucket => 0,
        }
    }

    /// The snapshot of this bucket when its theoretical arrival time lies
    /// `lead` ahead of the present (zero for a full bucket): what
    /// [`Algorithm::check_n`](crate::Algorithm::check_n) would report for
    /// such a bucket. For a store that keeps the state elsewhere and runs
    /// the same step there (in a script of a shared store, say, that
    /// returns the lead), so that it reports exactly the fields an
    /// in-process bucket would.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{Gcra, Quota};
    ///
    /// let gcra = Gcra::token_bucket(Quota::per_second(10)?.with_burst(5)?);
    /// let full = gcra.snapshot_for_lead(Duration::ZERO);
    /// assert_eq!((full.remaining(), full.reset_after()), (5, Duration::ZERO));
    /// // two permits spent: 200 ms until full again
    /// let spent = gcra.snapshot_for_lead(Duration::from_millis(200));
    /// assert_eq!((spent.remaining(), spent.reset_after()), (3, Duration::from_millis(200)));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[inline]
    #[must_use]
    pub fn snapshot_for_lead(&self, lead: Duration) -> Snapshot {
        let lead = duration_to_nanos(lead);
        if self.scale == 1 {
            self.snapshot_in::<false>(lead)
        } else {
            self.snapshot_in::<true>(lead.saturating_mul(u64::from(self.scale)))
        }
    }

    /// [`Gcra::snapshot_for_lead`]; `SCALED` is false exactly when the
    /// scale is 1 (then nothing is converted).
    #[inline(always)]
    pub(super) fn snapshot_in<const SCALED: bool>(&self, lead: u64) -> Snapshot {
        let slack = match self.kind {
            BucketKind::TokenBucket => self.max_lead().saturating_sub(lead),
            BucketKind::LeakyBucket if lead == 0 => self.max_lead(),
            BucketKind::LeakyBucket => 0,
        };
        let scale = if SCALED { self.scale as u32 } else { 1 };
        let reset_after = self.nanos_in::<SCALED>(lead);
        Snapshot::from_slack(
            self.capacity.get(),
            slack,
            self.interval,
            reset_after,
            scale,
        )
    }

    /// The snapshot of a bucket with stored `tat` at `now` (ns).
    #[inline]
    #[must_use]
    pub(crate) fn snapshot_of(&self, tat: u64, now: u64) -> Snapshot {
        if self.scale != 1 {
            return self.snapshot_scaled(tat, now);
        }
        self.snapshot_of_in::<false>(tat, now)
    }

    #[inline(never)]
    fn snapshot_scaled(&self, tat: u64, now: u64) -> Snapshot {
        self.snapshot_of_in::<true>(tat, now)
    }

    #[inline(always)]
    fn snapshot_of_in<const SCALED: bool>(&self, tat: u64, now: u64) -> Snapshot {
        self.snapshot_in::<SCALED>(self.lead_at(tat, self.units_in::<SCALED>(now)))
    }

    /// Nanoseconds (rounded up) until `n` permits would be admitted by a
    /// bucket with stored `tat` (0 if now).
    ///
    /// # Errors
    /// A refusal that [`is_never`](Refusal::is_never) if `n` can never be
    /// granted.
    #[inline]
    pub(crate) fn wait_of(&self, tat: u64, n: u32, now: u64) -> Result<u64, Refusal<'static>> {
        if n > self.capacity.get() {
            return Err(self.exceeded(n));
        }
        if n == 0 {
            return Ok(0);
        }
        if self.scale != 1 {
            return Ok(self.wait_scaled(tat, n, now));
        }
        Ok(self.wait_in::<false>(tat, n, now))
    }

    #[inline(never)]
    fn wait_scaled(&self, tat: u64, n: u32, now: u64) -> u64 {
        self.wait_in::<true>(tat, n, now)
    }

    #[inline(always)]
    fn wait_in<const SCALED: bool>(&self, tat: u64, n: u32, now: u64) -> u64 {
        let wait = self
            .lead_at(tat, self.units_in::<SCALED>(now))
            .saturating_sub(self.admit_lead(n));
        self.nanos_in::<SCALED>(wait)
    }

    /// Nanoseconds (rounded up) until a bucket with stored `tat` could
    /// admit the last of `ahead + n` permits, `ahead` of them queued first
    /// in requests of at most the capacity each (see
    /// [`Algorithm::time_until_ready_after`](crate::Algorithm::time_until_ready_after)).
    /// `None` if `n` can never be granted.
    pub(crate) fn wait_after_of(&self, tat: u64, ahead: u64, n: u32, now: u64) -> Option<u64> {
        if n > self.capacity.get() {
            return None;
        }
        let lead = self.lead_at(tat, self.units(now));
        let ahead_cost = ahead.saturating_mul(self.interval);
        let wait = match self.kind {
            BucketKind::TokenBucket => lead
                .saturating_add(ahead_cost)
                .saturating_add((n as u64) * self.interval)
                .saturating_sub(self.max_lead()),
            BucketKind::LeakyBucket if n == 0 && ahead == 0 => 0,
            BucketKind::LeakyBucket => lead.saturating_add(ahead_cost),
        };
        Some(self.nanos_ceil(wait))
    }
}
