//! GCRA with clocks that go backwards, concurrently.
//!
//! A thread whose `now` is merely stale (read, then preempted) sees the
//! bucket as fuller than it is; under the heal threshold it must never heal
//! a fresher thread's TAT downward, which would grant extra capacity. A
//! real backwards jump beyond the threshold heals the bucket to "empty at
//! now", and that heal racing checks (from before and after the jump) must
//! still equal some sequential order and never over-admit.
#![cfg(loom)]

use core::time::Duration;

use loom_tests::{Op, admitted_by_all, check, leaky_bucket, model, token_bucket};
use tollgate::{Algorithm, Gcra};

/// The bucket is made empty at `fresh` by the setup; threads with stale
/// `now`s (up to `fresh`) race a fresh one. Nothing may be admitted before
/// `fresh + T`, and the TAT never moves down.
fn stale_nows_grant_nothing(gcra: Gcra, fresh: u64, threads: Vec<Vec<Op>>) {
    let setup = vec![check(gcra.capacity(), fresh)];
    let empty_tat = u128::from(fresh + u64::from(gcra.capacity()) * gcra.interval_nanos());
    let requested: u32 = threads
        .iter()
        .flatten()
        .map(|op| match *op {
            Op::Check { n, .. } => n,
            _ => 0,
        })
        .sum();
    assert!(requested > 0);
    for op in threads.iter().flatten() {
        assert!(
            op.now() <= fresh && u128::from(fresh - op.now()) <= gcra.heal_threshold().as_nanos()
        );
    }
    let ops = threads.clone();
    model::assert_linearizable(gcra, setup, threads, move |observed, _| {
        assert_eq!(
            admitted_by_all(&ops, &observed.outcomes),
            0,
            "a stale now was admitted from an empty bucket: {observed:?}"
        );
        assert!(
            observed.tat >= empty_tat,
            "a stale now healed the TAT downward: {observed:?}"
        );
    });
}

#[test]
fn token_bucket_stale_nows_under_threshold_grant_nothing() {
    // T = 100, burst 2, heal threshold 400; bucket empty at 300 (TAT 500).
    // Staleness of up to 300 ns < threshold: no heal, no admission.
    stale_nows_grant_nothing(
        token_bucket(100, 2).with_heal_threshold(Duration::from_nanos(400)),
        300,
        vec![
            vec![check(1, 0)],
            vec![check(1, 250), check(1, 100)],
            vec![check(1, 300)],
        ],
    );
}

#[test]
fn leaky_bucket_stale_nows_under_threshold_grant_nothing() {
    stale_nows_grant_nothing(
        leaky_bucket(100, 2).with_heal_threshold(Duration::from_nanos(400)),
        300,
        vec![vec![check(2, 0)], vec![check(1, 150)], vec![check(1, 300)]],
    );
}

#[test]
fn heal_threshold_below_staleness_would_over_admit() {
    // The counter-example the threshold exists for, showing the test above
    // is not vacuous: with a threshold (50 ns) below the staleness (300 ns),
    // a stale reading heals the empty bucket down and a fresh check at the
    // same instant gets a permit the bucket never had.
    let gcra = token_bucket(100, 2).with_heal_threshold(Duration::from_nanos(50));
    model::check(move || {
        let (observed, _) =
            model::run_gcra(gcra, &[check(2, 300)], &[vec![check(1, 0), check(1, 300)]]);
        assert!(observed.outcomes[0][1].is_allowed(), "{observed:?}");
    });
}

/// The setup runs at `before` (pre-jump); threads race after the clock
/// went back. Every run must be a sequential order of the reference model,
/// and after-jump admissions stay within what an "empty at the earliest
/// after-jump now" bucket allows: `⌊(latest − earliest) / T⌋`.
fn heal_racing_checks(gcra: Gcra, setup: Vec<Op>, threads: Vec<Vec<Op>>, jump_to: u64) {
    let after: Vec<Op> = threads
        .iter()
        .flatten()
        .copied()
        .filter(|op| op.now() < jump_to)
        .collect();
    let earliest = after.iter().map(Op::now).min().unwrap_or(0);
    let latest = after.iter().map(Op::now).max().unwrap_or(0);
    let after_bound = (latest - earliest) / gcra.interval_nanos();
    let ops = threads.clone();
    model::assert_linearizable(gcra, setup, threads, move |observed, _| {
        let after_jump: u64 = ops
            .iter()
            .zip(&observed.outcomes)
            .flat_map(|(o, out)| o.iter().zip(out))
            .filter(|(op, out)| op.now() < jump_to && out.is_allowed())
            .map(|(op, _)| match *op {
                Op::Check { n, .. } => u64::from(n),
                _ => 0,
            })
            .sum();
        assert!(
            after_jump <= after_bound,
            "{after_jump} admitted after the jump > {after_bound}: {observed:?}"
        );
    });
}

#[test]
fn token_bucket_heal_racing_checks_after_a_backwards_jump() {
    // Empty at 10 000 (TAT 10 200), then the clock jumps back to ~0: the
    // first post-jump check heals to "empty at now"; others race it.
    heal_racing_checks(
        token_bucket(100, 2).with_heal_threshold(Duration::from_nanos(1_000)),
        vec![check(2, 10_000)],
        vec![
            vec![check(1, 0)],
            vec![check(1, 50)],
            vec![check(1, 300), check(1, 300)],
        ],
        10_000,
    );
}

#[test]
fn token_bucket_heal_racing_a_pre_jump_check() {
    // A thread still holding a pre-jump reading (10 100) races the heal.
    heal_racing_checks(
        token_bucket(100, 2).with_heal_threshold(Duration::from_nanos(1_000)),
        vec![check(2, 10_000)],
        vec![
            vec![check(1, 10_100)],
            vec![check(1, 0)],
            vec![check(1, 250)],
        ],
        10_000,
    );
}

#[test]
fn leaky_bucket_heal_racing_checks_after_a_backwards_jump() {
    heal_racing_checks(
        leaky_bucket(100, 1).with_heal_threshold(Duration::from_nanos(1_000)),
        vec![check(1, 10_000)],
        vec![vec![check(1, 0)], vec![check(1, 150)], vec![check(1, 200)]],
        10_000,
    );
}
