//! A sequential reference model of the concurrency limiter, from its
//! contract: a count of permits in flight, at most `limit`; taking `n`
//! succeeds iff `in_flight + n ≤ limit`; giving back `n` lowers the count
//! by `n` but never below zero; a refusal (and a snapshot with permits in
//! flight) reports the retry hint, since only a release frees capacity.

use tollgate::{Algorithm, Concurrency};

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
    /// A reference limiter configured like `concurrency`, nothing in flight.
    #[must_use]
    pub fn like(concurrency: &Concurrency) -> Self {
        Self {
            limit: u64::from(concurrency.capacity()),
            hint: concurrency.retry_hint_nanos(),
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

#[cfg(all(test, not(loom)))]
mod tests {
    use proptest::prelude::*;
    use tollgate::{Algorithm, Concurrency};

    use super::SpecConcurrency;
    use crate::ops::{apply, Op, Outcome};
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
            let alg = Concurrency::new(limit).unwrap().with_retry_hint(hint);
            let state = alg.new_state();
            let mut spec = SpecConcurrency::like(&alg);
            let mut previous: Option<Outcome> = None;
            for op in ops {
                let real = apply(&alg, &state, op, previous);
                let expected = spec.apply(op, previous);
                previous = Some(expected);
                prop_assert_eq!(real, expected, "op {:?}", op);
                prop_assert_eq!(u64::from(state.in_flight()), spec.in_flight());
                let snap = alg.snapshot(&state, 0);
                prop_assert_eq!((snap.remaining(), snap.reset_after_nanos()), spec.snapshot(0));
            }
        }
    }
}
