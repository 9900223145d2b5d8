//! GCRA refunds racing checks (and each other, with stale and fresh
//! `now`s): every run equals some sequential order of the same operations
//! in the reference model, a refund never lifts the bucket above its burst,
//! and a refund gives back at most what it refunds.
#![cfg(loom)]

use loom_tests::{
    Op, admitted_by_all, check, clock_bound, drain, leaky_bucket, model, refund, refund_if_allowed,
    refunded, token_bucket,
};
use tollgate::{Algorithm, Gcra};

/// After `setup` (sequential), `threads` run concurrently. Then, at the
/// latest `now`, the bucket is drained one permit at a time. In every
/// interleaving:
/// - the run equals a sequential order of the reference model;
/// - the drain takes at most the capacity (a refund never overfills);
/// - permits admitted after the setup (threads + drain), less the permits
///   refunded, stay within `capacity + ⌊span / T⌋` over all the `now`s.
///   With chain-style refunds (only of what was taken) this is the plain
///   safety bound; over-refunds can at most refill the bucket.
fn refunds_never_overfill(gcra: Gcra, setup: Vec<Op>, threads: Vec<Vec<Op>>) {
    let nows: Vec<u64> = setup
        .iter()
        .chain(threads.iter().flatten())
        .map(Op::now)
        .collect();
    let latest = nows.iter().copied().max().unwrap_or(0);
    let capacity = gcra.capacity();
    let bound = clock_bound(capacity, gcra.interval_nanos(), nows);
    let ops = threads.clone();
    model::assert_linearizable(gcra, setup, threads, move |observed, state| {
        let drained = drain(&gcra, state, latest);
        assert!(
            drained <= u64::from(capacity),
            "drained {drained} > capacity {capacity} after {observed:?}"
        );
        let admitted = admitted_by_all(&ops, &observed.outcomes) + drained;
        let given_back: u64 = ops
            .iter()
            .zip(&observed.outcomes)
            .map(|(o, out)| refunded(o, out))
            .sum();
        assert!(
            admitted.saturating_sub(given_back) <= bound,
            "admitted {admitted} − refunded {given_back} > bound {bound}: {observed:?}"
        );
    });
}

#[test]
fn token_bucket_chain_refunds_racing_checks() {
    // The chain pattern: take, then give back when a later stage refuses.
    refunds_never_overfill(
        token_bucket(10, 2),
        Vec::new(),
        vec![
            vec![check(2, 100), refund_if_allowed(2, 101)],
            vec![check(1, 100), refund_if_allowed(1, 100)],
            vec![check(1, 102)],
        ],
    );
}

#[test]
fn token_bucket_over_refund_racing_checks() {
    // One permit taken, then refunds of 3 and 1 race two checks.
    refunds_never_overfill(
        token_bucket(10, 2),
        vec![check(1, 100)],
        vec![
            vec![refund(3, 100)],
            vec![check(1, 100), check(1, 104)],
            vec![refund(1, 104)],
        ],
    );
}

#[test]
fn token_bucket_stale_refund_racing_fresh_checks() {
    // The refund's `now` is older than the admission it refunds.
    refunds_never_overfill(
        token_bucket(10, 2),
        vec![check(2, 100)],
        vec![
            vec![refund(2, 95)],
            vec![check(1, 110)],
            vec![check(2, 120)],
        ],
    );
}

#[test]
fn leaky_bucket_refund_racing_weighted_checks() {
    // Work of weight 1 queued at 100 drains at 110; a refund at 105 races
    // a check that the drained bucket admits at 110, and a weight-2 check.
    refunds_never_overfill(
        leaky_bucket(10, 2),
        vec![check(1, 100)],
        vec![
            vec![refund(1, 105)],
            vec![check(1, 110), refund_if_allowed(1, 112)],
            vec![check(2, 115)],
        ],
    );
}
