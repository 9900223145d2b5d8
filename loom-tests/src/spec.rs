//! A sequential reference model of the GCRA, written from the design
//! contract (the `gcra` module docs) rather than from the code in `crates/tollgate-core/src/gcra.rs`.
//!
//! The state is the theoretical arrival time `tat`, held as a `u128` so the
//! model needs no saturation: the models use small numbers and any
//! disagreement is a real one. The contract, with interval `T`, capacity
//! `c` (burst, or largest weight for the leaky bucket), tolerance
//! `τ = (burst − 1)·T` (0 for the leaky bucket) and heal threshold `H`:
//!
//! - `n > c` can never succeed; `n = 0` is a peek that changes nothing;
//! - if `tat − now > c·T + H` the clock went back: the bucket becomes
//!   "empty at now", `tat = now + τ + T`, and the request is decided on that;
//! - token bucket: `new = max(tat, now) + n·T`; admitted iff
//!   `new ≤ now + τ + T` (then `tat = new`), else refused with
//!   `retry_after = new − (now + τ + T)`;
//! - leaky bucket: admitted iff `tat ≤ now` (then `tat = now + n·T`), else
//!   refused with `retry_after = tat − now`;
//! - refund of `n`: nothing if `tat ≤ now`, else `tat = max(tat − n·T, now)`.
//!
//! A live reconfiguration to a new bucket `T'`, `c'` at `now` (the
//! `tollgate::live` contract: what was used is carried over by the
//! inheritance rule, rounding leaves less room, never more): with the lead
//! `L = tat − now` (healed to `τ + T` past `c·T + H`), a full bucket
//! (`L = 0`) keeps its `tat`; otherwise `Reset` makes it full (`tat = now`),
//! `UsedAmount` keeps the permits used (`L' = ⌈L·T'/T⌉`), `UsedFraction`
//! the fraction used (`L' = ⌈L·c'T'/(cT)⌉`), and `tat = now + min(L', c'·T')`
//! (more used than the new bucket holds is an empty bucket, no debt).

use tollgate::live::Inheritance;
use tollgate::{Algorithm, BucketKind, Gcra};

use crate::ops::{Op, Outcome};

/// The reference bucket: configuration plus `tat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecBucket {
    leaky: bool,
    interval: u128,
    capacity: u32,
    heal_threshold: u128,
    tat: u128,
}

impl SpecBucket {
    /// A fresh reference bucket configured like `gcra` (its interval,
    /// capacity, kind and heal threshold).
    #[must_use]
    pub fn like(gcra: &Gcra) -> Self {
        Self {
            leaky: gcra.kind() == BucketKind::LeakyBucket,
            interval: u128::from(gcra.interval_nanos()),
            capacity: gcra.capacity(),
            heal_threshold: gcra.heal_threshold().as_nanos(),
            tat: 0,
        }
    }

    /// The same bucket with its theoretical arrival time set to `tat`.
    #[must_use]
    pub const fn with_tat(self, tat: u64) -> Self {
        Self {
            tat: tat as u128,
            ..self
        }
    }

    /// The theoretical arrival time.
    #[must_use]
    pub const fn tat(&self) -> u128 {
        self.tat
    }

    /// `τ + T`: how far ahead of `now` the queued work may reach.
    fn tolerance_plus_interval(&self) -> u128 {
        if self.leaky {
            self.interval
        } else {
            u128::from(self.capacity) * self.interval
        }
    }

    /// Applies `op` and returns what the contract says it returns;
    /// `previous` is what the same thread's previous operation returned.
    pub fn apply(&mut self, op: Op, previous: Option<Outcome>) -> Outcome {
        match op {
            Op::Check { n, now } => self.check(n, u128::from(now)),
            Op::RefundIfAllowed { n, now } => {
                if previous == Some(Outcome::Allowed) {
                    self.refund(n, u128::from(now));
                    Outcome::Refunded
                } else {
                    Outcome::Skipped
                }
            }
            Op::Refund { n, now } => {
                self.refund(n, u128::from(now));
                Outcome::Refunded
            }
        }
    }

    fn check(&mut self, n: u32, now: u128) -> Outcome {
        if n > self.capacity {
            return Outcome::Exceeded;
        }
        if n == 0 {
            return Outcome::Allowed;
        }
        let cost = u128::from(n) * self.interval;
        let largest_lead = u128::from(self.capacity) * self.interval;
        if self.tat > now && self.tat - now > largest_lead + self.heal_threshold {
            self.tat = now + self.tolerance_plus_interval();
        }
        let limit = now + self.tolerance_plus_interval();
        if self.leaky {
            if self.tat <= now {
                self.tat = now + cost;
                Outcome::Allowed
            } else {
                Outcome::Denied {
                    retry_after: to_u64(self.tat - now),
                }
            }
        } else {
            let new = self.tat.max(now) + cost;
            if new <= limit {
                self.tat = new;
                Outcome::Allowed
            } else {
                Outcome::Denied {
                    retry_after: to_u64(new - limit),
                }
            }
        }
    }

    /// `(remaining, reset_after)` at `now`, as a snapshot reports them, for
    /// a `now` no earlier than any the bucket has seen (no heal).
    #[must_use]
    pub fn snapshot(&self, now: u64) -> (u32, u64) {
        let lead = self.tat.saturating_sub(u128::from(now));
        let room = if self.leaky {
            if lead == 0 { self.capacity } else { 0 }
        } else {
            let slack = (u128::from(self.capacity) * self.interval).saturating_sub(lead);
            u32::try_from(slack / self.interval.max(1)).unwrap_or(u32::MAX)
        };
        (room, to_u64(lead))
    }

    /// Switches to the configuration of `next` (keeping this bucket's heal
    /// threshold if `keep_heal`) at `now`, carrying what was used over by
    /// `how` (see the [module documentation](self)).
    ///
    /// `stamps_full`: the bucket is a word that lock-free checks swap on (a
    /// `LiveBucket`, the lock-free table); there a bucket full since before
    /// `now` is stamped one nanosecond later (tollgate's `distinct_from`).
    pub fn reconfigure(
        &mut self,
        next: &Gcra,
        keep_heal: bool,
        how: Inheritance,
        now: u64,
        stamps_full: bool,
    ) {
        let now = u128::from(now);
        let mut to = Self::like(next);
        if keep_heal {
            to.heal_threshold = self.heal_threshold;
        }
        let old_largest = u128::from(self.capacity) * self.interval;
        let mut lead = self.tat.saturating_sub(now);
        if lead > old_largest + self.heal_threshold {
            lead = self.tolerance_plus_interval();
        }
        let new_largest = u128::from(to.capacity) * to.interval;
        to.tat = if lead == 0 {
            if stamps_full && self.tat < now {
                self.tat + 1
            } else {
                self.tat
            }
        } else {
            let carried = match how {
                Inheritance::Reset => 0,
                Inheritance::UsedAmount => (lead * to.interval).div_ceil(self.interval),
                Inheritance::UsedFraction => (lead * new_largest).div_ceil(old_largest.max(1)),
                other => panic!("an inheritance rule the model does not know: {other:?}"),
            };
            now + carried.min(new_largest)
        };
        *self = to;
    }

    fn refund(&mut self, n: u32, now: u128) {
        if self.tat > now {
            let back = u128::from(n) * self.interval;
            self.tat = self.tat.saturating_sub(back).max(now);
        }
    }
}

fn to_u64(x: u128) -> u64 {
    u64::try_from(x).unwrap_or(u64::MAX)
}

#[cfg(all(test, not(loom)))]
mod tests {
    //! The reference model agrees with the real GCRA on any sequential
    //! run, including clocks that go backwards and heals. This is what
    //! makes a loom model's "observed ∉ sequential outcomes" failure mean a
    //! concurrency bug, not a model mismatch.

    use core::time::Duration;

    use proptest::prelude::*;
    use tollgate::{Algorithm, Gcra, Quota};

    use super::SpecBucket;
    use crate::ops::{Op, Outcome, apply};

    fn gcra() -> impl Strategy<Value = Gcra> {
        (1u32..=4, 1u64..=50, 1u32..=4, any::<bool>(), 0u64..=200).prop_map(
            |(permits, interval, cap, leaky, heal)| {
                let quota =
                    Quota::new(permits, Duration::from_nanos(interval * u64::from(permits)))
                        .and_then(|q| q.with_burst(cap))
                        .expect("small quotas are valid");
                let gcra = if leaky {
                    Gcra::leaky_bucket(quota)
                } else {
                    Gcra::token_bucket(quota)
                };
                gcra.with_heal_threshold(Duration::from_nanos(heal))
            },
        )
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0u32..=5, 0u64..=600).prop_map(|(n, now)| Op::Check { n, now }),
            1 => (0u32..=5, 0u64..=600).prop_map(|(n, now)| Op::Refund { n, now }),
            1 => (0u32..=5, 0u64..=600).prop_map(|(n, now)| Op::RefundIfAllowed { n, now }),
        ]
    }

    proptest! {
        #[test]
        fn reference_model_matches_gcra_sequentially(
            gcra in gcra(),
            ops in prop::collection::vec(op(), 1..40),
        ) {
            let state = gcra.new_state();
            let mut spec = SpecBucket::like(&gcra);
            let mut previous: Option<Outcome> = None;
            for op in ops {
                let real = apply(&gcra, &state, op, previous);
                let expected = spec.apply(op, previous);
                previous = Some(expected);
                prop_assert_eq!(real, expected, "op {:?}", op);
                prop_assert_eq!(u128::from(state.tat(&gcra).as_nanos()), spec.tat(), "tat after {:?}", op);
            }
        }
    }
}
