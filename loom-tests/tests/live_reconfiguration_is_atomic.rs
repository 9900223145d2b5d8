//! Live reconfiguration racing checks: a `LiveBucket`'s `set_quota`, and
//! the `reconfigure` of the lock-free and sharded keyed tables racing
//! checks of a tracked key.
//!
//! The contract (`tollgate::live`): a change is atomic with respect to
//! every check, which is decided entirely under the old configuration (and
//! then carried over by the inheritance rule) or entirely under the new
//! one. So in every interleaving:
//! - every admission is explained by the old quota before the change or
//!   the new one after it: with both quotas of burst 1 and one `now`, at
//!   most 1 admission before the change plus what the rule leaves after it
//!   (2 in all with `Reset`, 1 with `UsedAmount` or `UsedFraction`);
//! - more precisely, the run (each check's decision and `retry_after`, and
//!   the bucket's end state) equals what some sequential order of the same
//!   operations gives on the GCRA reference model with the inheritance
//!   rules (`loom_tests::live_spec`, proptested against the real
//!   `LiveBucket`).
//!
//! The two quotas have different intervals, so the end state tells which
//! configuration charged each admission.
//!
//! Two threads per model: a check that meets a change in progress spins
//! (`LiveBucket`), and with three threads loom's search of a spin loop
//! hits its branch limit (see the README's pitfalls).
#![cfg(loom)]

use core::time::Duration;

use loom::sync::Arc;
use loom_tests::keyed_model::{self as km, KeyedOp, KeyedOutcome, KeyedTable};
use loom_tests::{LiveOp, Outcome, live_admitted, live_check, live_runs, model, t};
use tollgate::keyed::OverflowPolicy;
use tollgate::live::{Inheritance, LiveBucket};
use tollgate::{Gcra, Quota};

/// Every `now` of the models: one instant.
const NOW: u64 = 100;

/// Burst 1, one permit every `interval` ns.
fn quota(interval: u64) -> Quota {
    Quota::new(1, Duration::from_nanos(interval)).expect("valid model quota")
}

/// The configuration before the change: burst 1, T = 10 ns.
fn old() -> Gcra {
    Gcra::token_bucket(quota(10))
}

/// The quota after the change: burst 1, T = 20 ns.
fn new_quota() -> Quota {
    quota(20)
}

/// The most admissions any sequential order of `threads` (after `setup`)
/// gives on the reference model; asserts that it is `most` (the bound
/// the contract states) and that the scenario asks for more, so an
/// over-admitting implementation could be caught.
fn check_bound(
    start: Gcra,
    setup: &[LiveOp],
    threads: &[Vec<LiveOp>],
    most: u64,
    stamps_full: bool,
) {
    let runs = live_runs(start, setup, threads, latest(setup, threads), stamps_full);
    let sequential_most = runs
        .iter()
        .map(|(outcomes, _)| live_admitted(threads, outcomes))
        .max()
        .unwrap_or(0);
    assert_eq!(
        sequential_most, most,
        "the stated bound is the reference model's"
    );
    let asked: u64 = threads
        .iter()
        .flatten()
        .map(|op| match *op {
            LiveOp::Check { n, .. } => u64::from(n),
            _ => 0,
        })
        .sum();
    assert!(
        asked > most,
        "the scenario must ask for more than the bound"
    );
}

/// The latest `now` of the scenario: where the end state is read.
fn latest(setup: &[LiveOp], threads: &[Vec<LiveOp>]) -> u64 {
    setup
        .iter()
        .chain(threads.iter().flatten())
        .map(LiveOp::now)
        .max()
        .unwrap_or(0)
}

/// What a model asserts in every interleaving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Assert {
    /// At most the stated number of admissions.
    Bound,
    /// That bound, and the run equals some sequential order's.
    BoundAndLinearizable,
}

/// Model-checks `threads` on a `LiveBucket` running `start` (after the
/// sequential `setup`): at most `most` admissions, and (if asked)
/// linearizable.
fn live_bucket(
    start: Gcra,
    setup: Vec<LiveOp>,
    threads: Vec<Vec<LiveOp>>,
    most: u64,
    what: Assert,
) {
    check_bound(start, &setup, &threads, most, true);
    let probe = latest(&setup, &threads);
    let allowed = live_runs(start, &setup, &threads, probe, true);
    model::check(move || {
        let bucket = Arc::new(LiveBucket::new(start));
        for &op in &setup {
            let _ = apply(&bucket, op);
        }
        let (last, spawned) = threads.split_last().expect("threads");
        let handles: Vec<_> = spawned
            .iter()
            .map(|ops| {
                let (bucket, ops) = (Arc::clone(&bucket), ops.clone());
                loom::thread::spawn(move || ops.iter().map(|&op| apply(&bucket, op)).collect())
            })
            .collect();
        let mine: Vec<Outcome> = last.iter().map(|&op| apply(&bucket, op)).collect();
        let mut outcomes: Vec<Vec<Outcome>> = handles
            .into_iter()
            .map(|h| h.join().expect("model thread panicked"))
            .collect();
        outcomes.push(mine);
        let admitted = live_admitted(&threads, &outcomes);
        assert!(
            admitted <= most,
            "admitted {admitted} > {most}, which neither quota explains: {outcomes:?}"
        );
        let snap = bucket.snapshot(t(probe));
        let run = (outcomes, (snap.remaining(), snap.reset_after_nanos()));
        assert!(
            what == Assert::Bound || allowed.contains(&run),
            "no sequential order of {threads:?} gives {run:?}; sequential runs: {allowed:?}"
        );
    });
}

fn apply(bucket: &LiveBucket, op: LiveOp) -> Outcome {
    match op {
        LiveOp::Check { n, now } => Outcome::of_check(bucket.check_n(n, t(now))),
        LiveOp::SetQuota { quota, how, now } => {
            bucket.set_quota(quota, how, t(now));
            Outcome::Reconfigured
        }
        LiveOp::Reconfigure { next, how, now } => {
            bucket.set_algorithm(next, how, t(now));
            Outcome::Reconfigured
        }
    }
}

/// Checks at `NOW` racing `set_quota(burst 1, T = 20 ns, how)`: two on
/// one thread, and (`check_after`) one more after the change on the
/// changing thread, so that a `Reset` model asks for 3 (bound 2).
fn checks_racing_set_quota(how: Inheritance, check_after: bool, most: u64, what: Assert) {
    let mut changer = vec![LiveOp::SetQuota {
        quota: new_quota(),
        how,
        now: NOW,
    }];
    if check_after {
        changer.push(live_check(1, NOW));
    }
    live_bucket(
        old(),
        vec![],
        vec![vec![live_check(1, NOW), live_check(1, NOW)], changer],
        most,
        what,
    );
}

#[test]
fn live_bucket_set_quota_reset() {
    // 1 admission under the old quota, the reset refills: 1 more.
    checks_racing_set_quota(Inheritance::Reset, true, 2, Assert::BoundAndLinearizable);
}

#[test]
fn live_bucket_set_quota_used_amount() {
    // the permit used stays used under the new quota: 1 in all.
    checks_racing_set_quota(
        Inheritance::UsedAmount,
        false,
        1,
        Assert::BoundAndLinearizable,
    );
}

#[test]
fn live_bucket_set_quota_used_fraction() {
    checks_racing_set_quota(
        Inheritance::UsedFraction,
        false,
        1,
        Assert::BoundAndLinearizable,
    );
}

/// One key (1), tracked by the setup's check at `NOW - 50`, then checked
/// twice at `NOW` while the table is reconfigured to burst 1, T = 20 ns
/// (and, with `check_after`, once more after the change).
fn keyed_checks_racing_reconfigure<T, M>(
    make: M,
    how: Inheritance,
    check_after: bool,
    most: u64,
    what: Assert,
    stamps_full: bool,
) where
    T: KeyedTable,
    M: Fn(Gcra, usize, OverflowPolicy) -> T + Send + Sync + 'static,
{
    let next = Gcra::token_bucket(new_quota());
    let setup = vec![KeyedOp::check(1, NOW - 50)];
    let mut changer = vec![KeyedOp::Reconfigure {
        next,
        how,
        now: NOW,
    }];
    if check_after {
        changer.push(KeyedOp::check(1, NOW));
    }
    let threads = vec![
        vec![KeyedOp::check(1, NOW), KeyedOp::check(1, NOW)],
        changer,
    ];
    let as_live = |ops: &[KeyedOp]| -> Vec<LiveOp> {
        ops.iter()
            .map(|op| match *op {
                KeyedOp::Check { n, now, .. } => LiveOp::Check { n, now },
                KeyedOp::Reconfigure { next, how, now } => LiveOp::Reconfigure { next, how, now },
                KeyedOp::Evict { .. } => unreachable!("no eviction in these models"),
            })
            .collect()
    };
    let live_setup = as_live(&setup);
    let live_threads: Vec<Vec<LiveOp>> = threads.iter().map(|ops| as_live(ops)).collect();
    check_bound(old(), &live_setup, &live_threads, most, stamps_full);
    let probe = latest(&live_setup, &live_threads);
    let allowed = live_runs(old(), &live_setup, &live_threads, probe, stamps_full);
    model::check(move || {
        let table = Arc::new(make(old(), 2, OverflowPolicy::SharedBucket));
        let outcomes = km::run_keyed(&table, &setup, &threads);
        // every check of the tracked key is answered by its own state: a
        // refusal names its path; an admission does not, but the key is
        // the only one, so it keeps its slot and the shared overflow
        // bucket is never asked (checked below)
        let outcomes: Vec<Vec<Outcome>> = outcomes
            .iter()
            .map(|outs| {
                outs.iter()
                    .map(|out| match *out {
                        KeyedOutcome::Admitted { .. } => Outcome::Allowed,
                        KeyedOutcome::Refused { path, retry_after } => {
                            assert_eq!(path, tollgate::keyed::KeyedPath::Own, "{outs:?}");
                            Outcome::Denied { retry_after }
                        }
                        KeyedOutcome::Reconfigured => Outcome::Reconfigured,
                        other => panic!("unexpected {other:?}"),
                    })
                    .collect()
            })
            .collect();
        assert!(table.contains(1) && table.len() == 1, "{outcomes:?}");
        let shared = table.shared_snapshot(probe);
        assert_eq!(
            (shared.remaining(), shared.reset_after_nanos()),
            (1, 0),
            "the shared bucket was used: {outcomes:?}"
        );
        let admitted = live_admitted(&live_threads, &outcomes);
        assert!(
            admitted <= most,
            "admitted {admitted} > {most}, which neither quota explains: {outcomes:?}"
        );
        let snap = table.snapshot(1, probe);
        let run = (outcomes, (snap.remaining(), snap.reset_after_nanos()));
        assert!(
            what == Assert::Bound || allowed.contains(&run),
            "no sequential order of {threads:?} gives {run:?}; sequential runs: {allowed:?}"
        );
    });
}

#[test]
fn lock_free_reconfigure_reset() {
    keyed_checks_racing_reconfigure(
        km::lock_free,
        Inheritance::Reset,
        true,
        2,
        Assert::BoundAndLinearizable,
        true,
    );
}

#[test]
fn lock_free_reconfigure_used_amount() {
    keyed_checks_racing_reconfigure(
        km::lock_free,
        Inheritance::UsedAmount,
        false,
        1,
        Assert::BoundAndLinearizable,
        true,
    );
}

#[test]
fn sharded_reconfigure_reset() {
    keyed_checks_racing_reconfigure(
        km::sharded,
        Inheritance::Reset,
        true,
        2,
        Assert::BoundAndLinearizable,
        false,
    );
}

#[test]
fn sharded_reconfigure_used_amount() {
    keyed_checks_racing_reconfigure(
        km::sharded,
        Inheritance::UsedAmount,
        false,
        1,
        Assert::BoundAndLinearizable,
        false,
    );
}

/// The admission the ABA bug (fixed) let through: a check at `NOW` decided under the
/// old quota lands after the change (the change restored the same TAT, so
/// the check's compare-and-swap succeeded), so it is never carried over,
/// and a check 10 ns later is admitted although any sequential order
/// charges the first admission 20 ns under the new quota (1 admission at
/// most).
#[test]
fn live_bucket_later_check_after_used_amount() {
    let change = LiveOp::SetQuota {
        quota: new_quota(),
        how: Inheritance::UsedAmount,
        now: NOW,
    };
    live_bucket(
        old(),
        vec![],
        vec![
            vec![live_check(1, NOW)],
            vec![change, live_check(1, NOW + 10)],
        ],
        1,
        Assert::Bound,
    );
}

#[test]
fn lock_free_later_check_after_used_amount() {
    let next = Gcra::token_bucket(new_quota());
    let setup = vec![KeyedOp::check(1, NOW - 50)];
    let threads = vec![
        vec![KeyedOp::check(1, NOW)],
        vec![
            KeyedOp::Reconfigure {
                next,
                how: Inheritance::UsedAmount,
                now: NOW,
            },
            KeyedOp::check(1, NOW + 10),
        ],
    ];
    let live_setup = vec![live_check(1, NOW - 50)];
    let live_threads = vec![
        vec![live_check(1, NOW)],
        vec![
            LiveOp::Reconfigure {
                next,
                how: Inheritance::UsedAmount,
                now: NOW,
            },
            live_check(1, NOW + 10),
        ],
    ];
    check_bound(old(), &live_setup, &live_threads, 1, true);
    model::check(move || {
        let table = Arc::new(km::lock_free(old(), 2, OverflowPolicy::SharedBucket));
        let outcomes = km::run_keyed(&table, &setup, &threads);
        let admitted: usize = outcomes.iter().flatten().filter(|o| o.is_allowed()).count();
        assert!(
            admitted <= 1,
            "admitted {admitted} > 1, which neither quota explains: {outcomes:?}"
        );
    });
}
