//! A sequential reference model of the concurrency limiter, from its
//! contract: a count of permits in flight, at most `limit`; taking `n`
//! succeeds iff `in_flight + n ≤ limit`; giving back `n` lowers the count
//! by `n` but never below zero; a refusal (and a snapshot with permits in
//! flight) reports the retry hint, since only a release frees capacity.
//!
//! The real limiter hands out permits only as guards, so [`apply_guarded`]
//! maps the shared [`Op`] vocabulary onto its guard API: a check is
//! `try_acquire(n)` (an admitted guard is kept), a refund of the previous
//! admission drops that guard (or releases part of it), an unconditional
//! refund is `release(n)` (the path of a leaked or `into_raw` permit).

use tollgate::{ConcurrencyLimiter, ConcurrencyPermit};

use crate::ops::{Op, Outcome};
use crate::orders::SpecLimiter;

/// The reference concurrency limiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecConcurrency {
    limit: u64,
    hint: u64,
    in_flight: u64,
}

impl SpecConcurrency {
    /// A reference limiter configured like `limiter`, nothing in flight.
    #[must_use]
    pub fn like(limiter: &ConcurrencyLimiter) -> Self {
        Self::new(
            limiter.limit(),
            u64::try_from(limiter.retry_hint().as_nanos()).unwrap_or(u64::MAX),
        )
    }

    /// A reference limiter of `limit` permits whose refusals report
    /// `retry_hint` ns, nothing in flight (usable outside a loom model,
    /// where the real limiter cannot be built).
    #[must_use]
    pub const fn new(limit: u32, retry_hint: u64) -> Self {
        Self {
            limit: limit as u64,
            hint: retry_hint,
            in_flight: 0,
        }
    }

    /// Permits in flight.
    #[must_use]
    pub const fn in_flight(&self) -> u64 {
        self.in_flight
    }
}

impl SpecLimiter for SpecConcurrency {
    fn apply(&mut self, op: Op, previous: Option<Outcome>) -> Outcome {
        match op {
            Op::Check { n, .. } => {
                let n = u64::from(n);
                if n > self.limit {
                    Outcome::Exceeded
                } else if self.in_flight + n <= self.limit {
                    self.in_flight += n;
                    Outcome::Allowed
                } else {
                    Outcome::Denied {
                        retry_after: self.hint,
                    }
                }
            }
            Op::RefundIfAllowed { .. } if previous != Some(Outcome::Allowed) => Outcome::Skipped,
            Op::Refund { n, .. } | Op::RefundIfAllowed { n, .. } => {
                self.in_flight -= self.in_flight.min(u64::from(n));
                Outcome::Refunded
            }
        }
    }

    fn snapshot(&self, _now: u64) -> (u32, u64) {
        let remaining = u32::try_from(self.limit - self.in_flight).unwrap_or(u32::MAX);
        (remaining, if self.in_flight == 0 { 0 } else { self.hint })
    }
}

/// Runs one thread's `ops` on the real limiter through its guards (see the
/// [module documentation](self)) and returns what each one gave. Guards
/// still held at the end are detached (`into_raw`), so their permits stay
/// in flight as the reference model counts them.
pub fn apply_guarded(limiter: &ConcurrencyLimiter, ops: &[Op]) -> Vec<Outcome> {
    let mut outcomes: Vec<Outcome> = Vec::with_capacity(ops.len());
    let mut held: Vec<ConcurrencyPermit<&ConcurrencyLimiter>> = Vec::new();
    for &op in ops {
        let previous = outcomes.last().copied();
        let outcome = match op {
            Op::Check { n, .. } => match limiter.try_acquire(n) {
                Ok(permit) => {
                    held.push(permit);
                    Outcome::Allowed
                }
                Err(refusal) => Outcome::of_check::<()>(Err(refusal)),
            },
            Op::RefundIfAllowed { .. } if previous != Some(Outcome::Allowed) => Outcome::Skipped,
            Op::RefundIfAllowed { n, .. } => {
                // give back (part of) the previous admission's guard
                let mut permit = held.pop().expect("the previous check's guard");
                if n >= permit.permits() {
                    let rest = n - permit.permits();
                    drop(permit);
                    limiter.release(rest);
                } else {
                    permit.release_some(n);
                    held.push(permit);
                }
                Outcome::Refunded
            }
            Op::Refund { n, .. } => {
                limiter.release(n);
                Outcome::Refunded
            }
        };
        outcomes.push(outcome);
    }
    for permit in held {
        let _ = permit.into_raw();
    }
    outcomes
}

#[cfg(all(test, not(loom)))]
mod tests {
    use core::time::Duration;

    use proptest::prelude::*;
    use tollgate::ConcurrencyLimiter;

    use super::{SpecConcurrency, apply_guarded};
    use crate::ops::{Op, Outcome};
    use crate::orders::SpecLimiter;

    proptest! {
        #[test]
        fn reference_concurrency_matches_the_real_one(
            limit in 1u32..=4,
            hint in 0u64..=1_000,
            ops in prop::collection::vec(prop_oneof![
                3 => (0u32..=5).prop_map(|n| Op::Check { n, now: 0 }),
                1 => (0u32..=5).prop_map(|n| Op::Refund { n, now: 0 }),
                1 => (0u32..=5).prop_map(|n| Op::RefundIfAllowed { n, now: 0 }),
            ], 1..40),
        ) {
            // every prefix on a fresh limiter: outcomes, permits in flight
            // and snapshot agree after each operation
            for end in 1..=ops.len() {
                let limiter = ConcurrencyLimiter::with_limit(limit)
                    .unwrap()
                    .with_retry_hint(Duration::from_nanos(hint));
                let mut spec = SpecConcurrency::like(&limiter);
                let real = apply_guarded(&limiter, &ops[..end]);
                let mut previous: Option<Outcome> = None;
                let expected: Vec<Outcome> = ops[..end]
                    .iter()
                    .map(|&op| {
                        let out = spec.apply(op, previous);
                        previous = Some(out);
                        out
                    })
                    .collect();
                prop_assert_eq!(&real, &expected, "ops {:?}", &ops[..end]);
                prop_assert_eq!(u64::from(limiter.in_flight()), spec.in_flight());
                let snap = limiter.snapshot();
                prop_assert_eq!((snap.remaining(), snap.reset_after_nanos()), spec.snapshot(0));
            }
        }
    }
}
