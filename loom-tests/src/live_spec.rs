//! Live reconfiguration, sequentially: one vocabulary ([`LiveOp`]) of
//! checks and quota changes for a `LiveBucket` or one key of a keyed table,
//! and every result a sequential order of them gives on the GCRA
//! reference model ([`SpecBucket::reconfigure`]).
//!
//! The concurrent models (`tests/live_reconfiguration_is_atomic.rs`)
//! require that what they observe is one of these results: every check
//! decided entirely under the old configuration (and then carried over) or
//! entirely under the new one.

use std::collections::HashSet;

use tollgate::live::Inheritance;
use tollgate::{BucketKind, Gcra, Quota};

use crate::ops::{Op, Outcome};
use crate::orders::interleavings;
use crate::spec::SpecBucket;

/// One operation of a thread on a reconfigurable bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveOp {
    /// `check_n(n, now)`.
    Check {
        /// Permits requested.
        n: u32,
        /// The caller's clock reading, in nanoseconds.
        now: u64,
    },
    /// `LiveBucket::set_quota(quota, how, now)`: the same kind of bucket
    /// and heal threshold, a new quota.
    SetQuota {
        /// The new quota.
        quota: Quota,
        /// What is carried over.
        how: Inheritance,
        /// The caller's clock reading, in nanoseconds.
        now: u64,
    },
    /// `set_algorithm(next, how, now)` or a keyed table's
    /// `reconfigure(next, how, now)`: `next` entirely.
    Reconfigure {
        /// The new configuration.
        next: Gcra,
        /// What is carried over.
        how: Inheritance,
        /// The caller's clock reading, in nanoseconds.
        now: u64,
    },
}

impl LiveOp {
    /// The `now` this operation was made with.
    #[must_use]
    pub const fn now(&self) -> u64 {
        match *self {
            Self::Check { now, .. }
            | Self::SetQuota { now, .. }
            | Self::Reconfigure { now, .. } => now,
        }
    }

    /// True for a check.
    #[must_use]
    pub const fn is_check(&self) -> bool {
        matches!(self, Self::Check { .. })
    }
}

/// `LiveOp::Check`.
#[must_use]
pub const fn live_check(n: u32, now: u64) -> LiveOp {
    LiveOp::Check { n, now }
}

/// The GCRA a `set_quota(quota)` installs on a bucket running `current`
/// (same kind and heal threshold).
#[must_use]
pub fn with_quota(current: &Gcra, quota: Quota) -> Gcra {
    let kind = match current.kind() {
        BucketKind::LeakyBucket => BucketKind::LeakyBucket,
        _ => BucketKind::TokenBucket,
    };
    Gcra::new(kind, quota).with_heal_threshold(current.heal_threshold())
}

/// Applies `op` to the reference bucket `spec` (whose configuration is
/// `current`, updated by a change) and returns what it returns.
pub fn apply_live(
    spec: &mut SpecBucket,
    current: &mut Gcra,
    op: LiveOp,
    stamps_full: bool,
) -> Outcome {
    match op {
        LiveOp::Check { n, now } => spec.apply(Op::Check { n, now }, None),
        LiveOp::SetQuota { quota, how, now } => {
            let next = with_quota(current, quota);
            spec.reconfigure(&next, true, how, now, stamps_full);
            *current = next;
            Outcome::Reconfigured
        }
        LiveOp::Reconfigure { next, how, now } => {
            spec.reconfigure(&next, false, how, now, stamps_full);
            *current = next;
            Outcome::Reconfigured
        }
    }
}

/// What a run produced: each thread's outcomes, and the bucket's
/// `(remaining, reset_after)` at the probe instant.
pub type LiveRun = (Vec<Vec<Outcome>>, (u32, u64));

/// Every result a sequential order of `threads` gives, starting from a
/// fresh bucket running `start` after the sequential `setup`, with the
/// end state read at `probe` (no earlier than any `now`). `stamps_full`:
/// see [`SpecBucket::reconfigure`].
#[must_use]
pub fn live_runs(
    start: Gcra,
    setup: &[LiveOp],
    threads: &[Vec<LiveOp>],
    probe: u64,
    stamps_full: bool,
) -> HashSet<LiveRun> {
    let mut spec = SpecBucket::like(&start);
    let mut current = start;
    for &op in setup {
        let _ = apply_live(&mut spec, &mut current, op, stamps_full);
    }
    interleavings(threads)
        .into_iter()
        .map(|order| {
            let (mut spec, mut current) = (spec, current);
            let mut outcomes: Vec<Vec<Outcome>> = threads
                .iter()
                .map(|ops| vec![Outcome::Reconfigured; ops.len()])
                .collect();
            for (t, i) in order {
                outcomes[t][i] = apply_live(&mut spec, &mut current, threads[t][i], stamps_full);
            }
            (outcomes, spec.snapshot(probe))
        })
        .collect()
}

/// Permits admitted by the checks of `threads` given their `outcomes`.
#[must_use]
pub fn live_admitted(threads: &[Vec<LiveOp>], outcomes: &[Vec<Outcome>]) -> u64 {
    threads
        .iter()
        .zip(outcomes)
        .flat_map(|(ops, outs)| ops.iter().zip(outs))
        .map(|(op, out)| match (*op, *out) {
            (LiveOp::Check { n, .. }, Outcome::Allowed) => u64::from(n),
            _ => 0,
        })
        .sum()
}

#[cfg(all(test, not(loom)))]
mod tests {
    //! The reference model agrees with the real `LiveBucket` on any
    //! sequential run of checks, refunds-free, and changes of quota or
    //! algorithm (either kind, every inheritance rule), so a loom model's
    //! "no sequential order gives this" means a concurrency bug.

    use core::time::Duration;

    use proptest::prelude::*;
    use tollgate::live::{Inheritance, LiveBucket};
    use tollgate::{Gcra, Quota};

    use super::{LiveOp, apply_live};
    use crate::ops::Outcome;
    use crate::spec::SpecBucket;
    use crate::t;

    fn quota() -> impl Strategy<Value = Quota> {
        (1u64..=40, 1u32..=4).prop_map(|(interval, burst)| {
            Quota::new(1, Duration::from_nanos(interval))
                .and_then(|q| q.with_burst(burst))
                .expect("small quotas are valid")
        })
    }

    fn gcra() -> impl Strategy<Value = Gcra> {
        (quota(), any::<bool>(), 0u64..=200).prop_map(|(quota, leaky, heal)| {
            let gcra = if leaky {
                Gcra::leaky_bucket(quota)
            } else {
                Gcra::token_bucket(quota)
            };
            gcra.with_heal_threshold(Duration::from_nanos(heal))
        })
    }

    fn how() -> impl Strategy<Value = Inheritance> {
        prop_oneof![
            Just(Inheritance::UsedAmount),
            Just(Inheritance::UsedFraction),
            Just(Inheritance::Reset),
        ]
    }

    fn op() -> impl Strategy<Value = LiveOp> {
        prop_oneof![
            4 => (0u32..=5, 0u64..=400).prop_map(|(n, now)| LiveOp::Check { n, now }),
            1 => (quota(), how(), 0u64..=400)
                .prop_map(|(quota, how, now)| LiveOp::SetQuota { quota, how, now }),
            1 => (gcra(), how(), 0u64..=400)
                .prop_map(|(next, how, now)| LiveOp::Reconfigure { next, how, now }),
        ]
    }

    proptest! {
        #[test]
        fn reference_model_matches_live_bucket_sequentially(
            start in gcra(),
            ops in prop::collection::vec(op(), 1..40),
        ) {
            let bucket = LiveBucket::new(start);
            let mut spec = SpecBucket::like(&start);
            let mut current = start;
            for op in ops {
                let real = match op {
                    LiveOp::Check { n, now } => Outcome::of_check(bucket.check_n(n, t(now))),
                    LiveOp::SetQuota { quota, how, now } => {
                        bucket.set_quota(quota, how, t(now));
                        Outcome::Reconfigured
                    }
                    LiveOp::Reconfigure { next, how, now } => {
                        bucket.set_algorithm(next, how, t(now));
                        Outcome::Reconfigured
                    }
                };
                let expected = apply_live(&mut spec, &mut current, op, true);
                prop_assert_eq!(real, expected, "op {:?}", op);
                prop_assert_eq!(bucket.algorithm(), current, "configuration after {:?}", op);
                // the end state, read where no heal applies
                let probe = op.now().max(400);
                let snap = bucket.snapshot(t(probe));
                prop_assert_eq!(
                    (snap.remaining(), snap.reset_after_nanos()),
                    spec.snapshot(probe),
                    "snapshot after {:?}",
                    op
                );
            }
        }
    }
}
