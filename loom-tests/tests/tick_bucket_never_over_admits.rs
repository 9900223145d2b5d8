//! The 32-bit tick bucket (`tollgate::tick`) under racing checks and
//! refunds, on the circle of ticks: `now`s on both sides of the 2³² wrap,
//! stale callers within the heal threshold, a bucket read just inside and
//! just beyond its idle horizon, and `refresh_ticks` racing a check.
//!
//! The bucket runs at 1 GHz, so ticks are the models' nanoseconds; the
//! `now`s are `u64` here (the truth: an unwrapped clock) and wrap to `u32`
//! inside the bucket. In every interleaving:
//! - the run (outcomes and the end state) equals some sequential order of
//!   the same operations in the wrapping reference model (`SpecTick`);
//! - a drain at the latest `now` takes at most the capacity (a refund
//!   never overfills);
//! - permits admitted (less refunds) stay within `capacity + ⌊span / T⌋`
//!   over the `now`s of the unwrapped clock: wrapping never over-admits.
#![cfg(loom)]

use loom::sync::Arc;
use loom_tests::{
    Op, SpecTick, admitted_by_all, check, clock_bound, drain, model, refund, refund_if_allowed,
    refunded,
};
use tollgate::tick::{TickGcra, TickState};
use tollgate::{Algorithm, BucketKind};

/// 2³²: the tick count wraps here.
const WRAP: u64 = 1 << 32;

/// A tick bucket at 1 GHz with a small heal threshold (so `H` and the
/// horizon are small numbers the models can reach).
fn tick(kind: BucketKind, interval: u32, burst: u32, heal: u32) -> TickGcra {
    TickGcra::from_ticks(kind, interval, burst, 1_000_000_000)
        .and_then(|g| g.with_heal_threshold_ticks(heal))
        .expect("valid model bucket")
}

/// Linearizable against `SpecTick` (outcomes and the snapshot at the
/// latest `now`), a drain at the latest `now` within the capacity, and the
/// admissions of the threads and the drain, less their refunds, within
/// `capacity + ⌊span/T⌋` over the threads' `now`s (`setup` runs first,
/// sequentially; `bound_from_setup` counts its admissions in the bound too).
fn never_over_admits(
    gcra: TickGcra,
    setup: Vec<Op>,
    threads: Vec<Vec<Op>>,
    bound_from_setup: bool,
) {
    let mut nows: Vec<u64> = threads.iter().flatten().map(Op::now).collect();
    let setup_taken: u64 = if bound_from_setup {
        nows.extend(setup.iter().map(Op::now));
        setup
            .iter()
            .map(|op| match *op {
                Op::Check { n, .. } => u64::from(n),
                _ => 0,
            })
            .sum()
    } else {
        0
    };
    let latest = threads
        .iter()
        .flatten()
        .map(Op::now)
        .max()
        .expect("threads have operations");
    let capacity = gcra.capacity();
    let bound = clock_bound(capacity, u64::from(gcra.interval_ticks()), nows);
    let asked: u64 = threads
        .iter()
        .flatten()
        .map(|op| match *op {
            Op::Check { n, .. } if n <= capacity => u64::from(n),
            _ => 0,
        })
        .sum();
    assert!(
        setup_taken + asked + u64::from(capacity) > bound,
        "the scenario must ask for more than the bound {bound}"
    );
    let ops = threads.clone();
    model::assert_linearizable_as(
        gcra,
        SpecTick::like(&gcra),
        setup,
        threads,
        vec![latest],
        move |run, state| {
            let drained = drain(&gcra, state, latest);
            assert!(
                drained <= u64::from(capacity),
                "drained {drained} > capacity {capacity}: {run:?}"
            );
            let admitted = setup_taken + admitted_by_all(&ops, &run.outcomes) + drained;
            let given_back: u64 = ops
                .iter()
                .zip(&run.outcomes)
                .map(|(o, out)| refunded(o, out))
                .sum();
            assert!(
                admitted.saturating_sub(given_back) <= bound,
                "admitted {admitted} − refunded {given_back} > bound {bound}: {run:?}"
            );
        },
    );
}

#[test]
fn token_checks_racing_across_the_wrap() {
    // T = 10, burst 2; one permit taken 13 ticks before the wrap, then
    // three threads whose `now`s straddle it, out of order.
    never_over_admits(
        tick(BucketKind::TokenBucket, 10, 2, 30),
        vec![check(1, WRAP - 13)],
        vec![
            vec![check(1, WRAP - 3), check(2, WRAP + 7)],
            vec![check(1, WRAP + 1)],
            vec![check(1, WRAP - 5)],
        ],
        true,
    );
}

#[test]
fn leaky_checks_racing_across_the_wrap() {
    // Strict pacing, weights up to 2: never two admissions at one instant,
    // on either side of the wrap.
    never_over_admits(
        tick(BucketKind::LeakyBucket, 10, 2, 30),
        vec![check(1, WRAP - 13)],
        vec![
            vec![check(1, WRAP - 3), check(1, WRAP + 7)],
            vec![check(2, WRAP - 1)],
            vec![check(1, WRAP + 3)],
        ],
        true,
    );
}

#[test]
fn refunds_racing_checks_across_the_wrap() {
    // The chain pattern (take, then give back) and an over-refund race
    // fresh checks; a refund never lifts the bucket above its burst.
    never_over_admits(
        tick(BucketKind::TokenBucket, 10, 2, 30),
        vec![check(1, WRAP - 13)],
        vec![
            vec![check(2, WRAP - 3), refund_if_allowed(2, WRAP - 2)],
            vec![refund(3, WRAP + 1), check(1, WRAP + 3)],
            vec![check(1, WRAP - 1)],
        ],
        true,
    );
}

#[test]
fn stale_callers_within_the_heal_threshold_see_a_busy_bucket() {
    // Burst 2 taken at WRAP − 3 (lead 20). A caller 25 ticks stale reads a
    // lead of 45 > max_lead (20) but ≤ H (20 + 30): busy, never full.
    never_over_admits(
        tick(BucketKind::TokenBucket, 10, 2, 30),
        vec![check(2, WRAP - 3)],
        vec![
            vec![check(1, WRAP - 28)],
            vec![check(1, WRAP + 8), refund_if_allowed(1, WRAP + 8)],
            vec![check(2, WRAP - 27)],
        ],
        true,
    );
}

#[test]
fn checks_just_inside_and_beyond_the_idle_horizon() {
    // T = 10, burst 2, heal 30: H = 50, horizon 2³² − 50. One permit at
    // tick 100 leaves TAT 110; the bucket then idles. It reads full up to
    // tick 2³² + 59 (an idle span of 2³² − 50 + 10 − 1) and, from 2³² + 60,
    // may read as throttled (lead 50): it only refuses there. The truth,
    // long idle, is a full bucket: admissions stay within burst + ⌊span/T⌋
    // of the threads' own `now`s.
    never_over_admits(
        tick(BucketKind::TokenBucket, 10, 2, 30),
        vec![check(1, 100)],
        vec![
            vec![check(2, WRAP + 59)],
            vec![check(1, WRAP + 60)],
            vec![check(1, WRAP + 57), refund_if_allowed(1, WRAP + 57)],
        ],
        false,
    );
}

/// `refresh_ticks` (the sentinel) racing a check of a bucket that is just
/// becoming full: whatever the order, the result is what one of the two
/// sequential orders gives, and never a bucket fuller than the admission
/// left it.
#[test]
fn refresh_racing_a_check_never_forgets_an_admission() {
    // T = 10, burst 1, heal 30. One permit at 1000 (TAT 1010): full again
    // from 1010; full for the heal threshold from 1040.
    let gcra = tick(BucketKind::TokenBucket, 10, 1, 30);
    model::check(move || {
        let state = Arc::new(TickState::new());
        assert!(gcra.check_ticks(&state, 1_000).is_ok());
        let other = Arc::clone(&state);
        let refresher = loom::thread::spawn(move || gcra.refresh_ticks(&other, 1_045));
        let admitted = gcra.check_ticks(&state, 1_041).is_ok();
        refresher.join().expect("refresher");
        // The check at 1041 finds the bucket full and takes its permit
        // (TAT 1051) in both orders: refresh first stores the sentinel,
        // which reads full; refresh second finds the bucket busy and
        // leaves it alone.
        assert!(admitted);
        assert_eq!(
            gcra.lead_ticks(&state, 1_045),
            6,
            "the admission was forgotten"
        );
        assert!(gcra.check_ticks(&state, 1_045).is_err());
    });
}
