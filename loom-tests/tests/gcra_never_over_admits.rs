//! GCRA under concurrent checks: whatever the interleaving, and with each
//! thread's `now` arriving out of order, the bucket admits at most
//! `capacity + ⌊(latest now − earliest now) / T⌋` permits (the design's
//! safety bound), and every run equals some sequential order of the same
//! requests in the reference model.
#![cfg(loom)]

use core::time::Duration;

use loom::sync::Arc;
use loom_tests::{Op, admitted_by_all, check, clock_bound, leaky_bucket, model, t, token_bucket};
use tollgate::{Algorithm, Clock, Gcra, ManualClock, Quota, RateLimiter};

/// Model-checks `threads` on a fresh `gcra` bucket: linearizable, and
/// within the clock bound. The scenario must ask for more than the bound,
/// or an over-admitting bucket could not be caught.
fn never_over_admits(gcra: Gcra, threads: Vec<Vec<Op>>) {
    let nows = threads.iter().flatten().map(Op::now);
    let bound = clock_bound(gcra.capacity(), gcra.interval_nanos(), nows);
    let requested: u64 = threads
        .iter()
        .flatten()
        .map(|op| match *op {
            Op::Check { n, .. } if n <= gcra.capacity() => u64::from(n),
            _ => 0,
        })
        .sum();
    assert!(
        requested > bound,
        "scenario asks for {requested}, bound {bound}"
    );
    let ops = threads.clone();
    model::assert_linearizable(gcra, Vec::new(), threads, move |observed, _| {
        let admitted = admitted_by_all(&ops, &observed.outcomes);
        assert!(
            admitted <= bound,
            "admitted {admitted} > bound {bound}: {observed:?}"
        );
    });
}

#[test]
fn token_bucket_three_threads_at_one_instant() {
    never_over_admits(
        token_bucket(10, 2),
        vec![
            vec![check(1, 100)],
            vec![check(1, 100)],
            vec![check(1, 100)],
        ],
    );
}

#[test]
fn token_bucket_three_threads_with_out_of_order_nows() {
    // Thread 0 reads the clock twice; threads 1 and 2 hold readings that
    // may reach the bucket after fresher ones.
    never_over_admits(
        token_bucket(10, 2),
        vec![
            vec![check(1, 100), check(1, 112)],
            vec![check(1, 105)],
            vec![check(1, 100)],
        ],
    );
}

#[test]
fn token_bucket_weighted_checks_peek_and_impossible_request() {
    // n > 1 racing n = 1; a peek (n = 0) and an impossible n > burst on the
    // same bucket change nothing.
    never_over_admits(
        token_bucket(10, 3),
        vec![
            vec![check(2, 100), check(4, 100)],
            vec![check(0, 101), check(2, 100)],
            vec![check(1, 103)],
        ],
    );
}

#[test]
fn leaky_bucket_three_threads_with_out_of_order_nows() {
    never_over_admits(
        leaky_bucket(10, 1),
        vec![
            vec![check(1, 100), check(1, 110)],
            vec![check(1, 105)],
            vec![check(1, 100)],
        ],
    );
}

#[test]
fn leaky_bucket_weighted_checks() {
    // A weight-2 request occupies 2·T; nothing may start until it drains.
    never_over_admits(
        leaky_bucket(10, 2),
        vec![
            vec![check(2, 100)],
            vec![check(1, 100)],
            vec![check(2, 115)],
        ],
    );
}

#[test]
fn token_bucket_with_clock_readings_raced_by_an_advance() {
    // Real callers read a shared clock, then check: a reading can reach the
    // bucket after a fresher one. One thread advances the clock by T and
    // checks; the others read and check, the main thread twice.
    let gcra = token_bucket(10, 2);
    let start = 100;
    model::check(move || {
        let clock = Arc::new(ManualClock::starting_at(t(start)));
        let state = Arc::new(gcra.new_state());
        let advancer = {
            let (clock, state) = (Arc::clone(&clock), Arc::clone(&state));
            loom::thread::spawn(move || {
                clock.advance(Duration::from_nanos(10));
                u64::from(gcra.check_n(&state, 1, clock.now()).is_ok())
            })
        };
        let reader = {
            let (clock, state) = (Arc::clone(&clock), Arc::clone(&state));
            loom::thread::spawn(move || {
                let now = clock.now();
                u64::from(gcra.check_n(&state, 1, now).is_ok())
            })
        };
        let mut admitted = 0;
        for _ in 0..2 {
            let now = clock.now();
            admitted += u64::from(gcra.check_n(&state, 1, now).is_ok());
        }
        admitted += advancer.join().expect("advancer") + reader.join().expect("reader");
        let bound = clock_bound(
            gcra.capacity(),
            gcra.interval_nanos(),
            [start, clock.now().as_nanos()],
        );
        assert!(bound < 4, "the scenario must ask for more than the bound");
        assert!(admitted <= bound, "admitted {admitted} > bound {bound}");
    });
}

#[test]
fn rate_limiter_try_acquire_raced_by_a_clock_advance() {
    // The same through the convenience type, which reads its clock inside
    // `try_acquire`: a leaky bucket (T = 10 ns) on a shared `ManualClock`.
    // `std::sync::Arc` only shares the values; loom sees the atomics inside.
    use std::sync::Arc;
    let quota = Quota::new(1, Duration::from_nanos(10)).expect("valid model quota");
    let start = 100;
    model::check(move || {
        let clock = Arc::new(ManualClock::starting_at(t(start)));
        let limiter =
            Arc::new(RateLimiter::leaky_bucket(quota, Arc::clone(&clock)).expect("resolution"));
        let spawned: Vec<_> = [true, false]
            .into_iter()
            .map(|advance| {
                let limiter = Arc::clone(&limiter);
                loom::thread::spawn(move || {
                    if advance {
                        limiter.clock().advance(Duration::from_nanos(10));
                    }
                    u64::from(limiter.try_acquire().is_ok())
                })
            })
            .collect();
        let mut admitted = u64::from(limiter.try_acquire().is_ok());
        for t in spawned {
            admitted += t.join().expect("model thread");
        }
        let bound = clock_bound(1, 10, [start, clock.now().as_nanos()]);
        assert!(bound < 3, "the scenario must ask for more than the bound");
        assert!(admitted <= bound, "admitted {admitted} > bound {bound}");
    });
}
