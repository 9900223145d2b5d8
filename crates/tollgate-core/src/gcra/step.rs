//! The GCRA step as a pure function of a stored TAT: the [`Outcome`] of
//! a check, its verdict, and the TAT after a refund.

use super::Gcra;
use crate::refusal::Refusal;
use crate::time::Timestamp;

/// What one GCRA step decided, in the bucket's units, before it is turned
/// into a verdict: two words, so that it travels in registers.
#[derive(Clone, Copy)]
pub(crate) struct Outcome {
    /// 0 if admitted (or a peek); else the wait until the request fits
    /// (a refusal always has one of at least 1 unit).
    retry: u64,
    /// The TAT's lead after the step (after the admission, or unchanged).
    lead: u64,
}

impl Gcra {
    /// GCRA as a pure function of a stored TAT: the decision for `n`
    /// permits at `now` (ns), and the TAT to store (`None`: leave it
    /// unchanged). TATs are in the bucket's units.
    ///
    /// This is [`Algorithm::check_n`](crate::Algorithm::check_n) without
    /// the atomic: for stores that keep the TAT elsewhere (a lock-free
    /// keyed slot) and install the new value with their own
    /// compare-and-swap. `n = 0` is a peek. (The live bucket, which holds
    /// the decision across its swap, uses the two halves instead:
    /// [`Gcra::step_outcome`] and [`Gcra::decision`].)
    #[cfg(feature = "std")]
    #[inline]
    pub(crate) fn step(
        &self,
        tat: u64,
        n: u32,
        now: u64,
    ) -> (Result<Timestamp, Refusal<'static>>, Option<u64>) {
        // The one branch a whole-nanosecond quota pays: it then runs the
        // unscaled code with the scale a constant 1, inline; a scaled
        // bucket calls the scaled code (out of line, so that callers stay
        // small enough to inline the unscaled path).
        if self.scale != 1 {
            return self.step_scaled(tat, n, now);
        }
        self.step_in::<false>(tat, n, self.clamped(now), now)
    }

    /// [`Gcra::step`] before its decision is built: the [`Outcome`] (two
    /// words) and the TAT to store. A store that loops on a
    /// compare-and-swap (the live bucket) steps inside the loop and builds
    /// the decision with [`Gcra::decision`] once, after the swap stands, so
    /// that nothing but two words is held across it.
    #[inline]
    pub(crate) fn step_outcome(
        &self,
        tat: u64,
        n: u32,
        now: u64,
    ) -> Result<(Outcome, Option<u64>), Refusal<'static>> {
        if n > self.capacity.get() {
            return Err(self.exceeded(n));
        }
        let now = if self.scale != 1 {
            self.scaled(now)
        } else {
            self.clamped(now)
        };
        Ok(self.outcome_in(tat, n, now))
    }

    /// The verdict of an [`Outcome`] of [`Gcra::step_outcome`].
    #[inline(always)]
    pub(crate) fn decision(
        &self,
        outcome: Outcome,
        now: u64,
    ) -> Result<Timestamp, Refusal<'static>> {
        if self.scale != 1 {
            return self.decision_of::<true>(outcome, now);
        }
        self.decision_of::<false>(outcome, now)
    }

    /// [`Gcra::step`] of a bucket in units of `1/d` ns, `d > 1`.
    #[cfg(feature = "std")]
    #[inline(never)]
    fn step_scaled(
        &self,
        tat: u64,
        n: u32,
        now: u64,
    ) -> (Result<Timestamp, Refusal<'static>>, Option<u64>) {
        self.step_in::<true>(tat, n, self.scaled(now), now)
    }

    /// [`Gcra::step`] with `now` already in the bucket's units; `SCALED`
    /// is false exactly when the scale is 1.
    #[cfg(feature = "std")]
    #[inline(always)]
    fn step_in<const SCALED: bool>(
        &self,
        tat: u64,
        n: u32,
        now: u64,
        now_nanos: u64,
    ) -> (Result<Timestamp, Refusal<'static>>, Option<u64>) {
        if n > self.capacity.get() {
            return (Err(self.exceeded(n)), None);
        }
        let (outcome, store) = self.outcome_in(tat, n, now);
        (self.decision_of::<SCALED>(outcome, now_nanos), store)
    }

    /// The GCRA step for `n ≤ capacity` as scalars: what was decided and
    /// the TAT to store (`None`: leave it unchanged), in the bucket's
    /// units. `n = 0` is a peek.
    ///
    /// Ordered for the common cases: an admission is decided by one
    /// compare, a refusal by two (the second rules out a clock that went
    /// back), and only a lead beyond the heal limit takes the third path.
    /// The largest lead with which `n ≥ 1` permits are admitted is `τ + T −
    /// n·T` for a token bucket and 0 for a leaky bucket; both are
    /// `empty_lead − n·T`, saturating (a leaky bucket's `empty_lead` is
    /// `T`), so no branch on the kind is needed.
    #[inline(always)]
    pub(super) fn outcome_in(&self, tat: u64, n: u32, now: u64) -> (Outcome, Option<u64>) {
        let raw_lead = tat.saturating_sub(now);
        if n == 0 {
            return (
                Outcome {
                    retry: 0,
                    lead: self.lead_of(raw_lead),
                },
                None,
            );
        }
        // n ≤ capacity, so n·T ≤ max_lead (saturating all the same)
        let cost = (n as u64).saturating_mul(self.interval);
        let admit_lead = if n == 1 {
            self.admit_one
        } else {
            self.empty_lead().saturating_sub(cost)
        };
        if raw_lead <= admit_lead {
            // admit_lead ≤ max_lead ≤ heal_limit: not a clock gone back
            let new_lead = raw_lead + cost; // ≤ max_lead
            return (
                Outcome {
                    retry: 0,
                    lead: new_lead,
                },
                Some(now.saturating_add(new_lead)),
            );
        }
        if raw_lead <= self.heal_limit {
            return (
                Outcome {
                    retry: raw_lead - admit_lead,
                    lead: raw_lead,
                },
                None,
            );
        }
        self.healed_refusal(admit_lead, now)
    }

    /// The refusal of a bucket whose lead is beyond what a monotonic clock
    /// can leave (the clock went back): its lead is taken as "empty at
    /// `now`", which refuses every request (`empty_lead` exceeds the
    /// largest admitting lead of any `n ≥ 1`), and that TAT is stored so
    /// the bucket recovers instead of healing again on every check.
    #[cold]
    #[inline(never)]
    fn healed_refusal(&self, admit_lead: u64, now: u64) -> (Outcome, Option<u64>) {
        (
            Outcome {
                retry: self.empty_lead() - admit_lead,
                lead: self.empty_lead(),
            },
            Some(now.saturating_add(self.empty_lead())),
        )
    }

    /// The verdict of an [`Outcome`] at `now` (ns): on an admission, the
    /// instant the bucket is full again (a caller that does not read it
    /// pays nothing for it; the snapshot is computed when asked); on a
    /// refusal, its wait and snapshot.
    #[inline(always)]
    pub(super) fn decision_of<const SCALED: bool>(
        &self,
        outcome: Outcome,
        now: u64,
    ) -> Result<Timestamp, Refusal<'static>> {
        if outcome.retry == 0 {
            Ok(Timestamp::from_nanos(
                now.saturating_add(self.nanos_in::<SCALED>(outcome.lead)),
            ))
        } else {
            // the exact wait in whole nanoseconds rounded up: the first
            // instant at which the retry succeeds
            Err(Refusal::from_nanos(
                self.nanos_in::<SCALED>(outcome.retry),
                self.snapshot_in::<SCALED>(outcome.lead),
            ))
        }
    }

    /// The TAT after refunding `n` permits at `now` (ns; `None`:
    /// unchanged). Never before `now`, so a refund cannot lift capacity
    /// above the burst.
    #[inline]
    #[must_use]
    pub(crate) fn refunded(&self, tat: u64, n: u32, now: u64) -> Option<u64> {
        let now = self.units(now);
        let give_back = (n as u64).saturating_mul(self.interval);
        if give_back == 0 || tat <= now {
            return None;
        }
        Some(core::cmp::max(tat.saturating_sub(give_back), now))
    }
}
