//! The sliding window (a short spin lock around `SEGMENTS + 1` words)
//! under concurrent checks and refunds whose `now`s straddle segment
//! boundaries and arrive out of order. In every interleaving:
//! - the window of the latest `now` (its `SEGMENTS` segments) never admits
//!   more than the limit, at segment resolution;
//! - the protected state is consistent: every run equals some sequential
//!   order of the same operations in the reference model
//!   (`SpecSlidingWindow`), decisions, `retry_after`s and end state alike;
//! - the lock is always released: the snapshot and the drain after the
//!   threads take the lock again (loom fails a model whose threads can
//!   spin forever or deadlock).
//!
//! Two threads per model (up to two operations each): with three, two
//! waiters can hand the processor back and forth with `yield_now` while
//! the holder never runs, a path loom does not count as preemption, so the
//! search hits loom's branch limit instead of ending (a loom limitation,
//! not a livelock of the lock: a real scheduler runs the holder).
#![cfg(loom)]

use core::time::Duration;

use loom::sync::Arc;
use loom_tests::{Op, SpecSlidingWindow, check, model, refund, refund_if_allowed, t};
use tollgate::{Algorithm, SlidingWindow};

/// Segment length: windows of 2 segments are 100 ns.
const SEG: u64 = 50;

fn window(limit: u32) -> SlidingWindow<2> {
    SlidingWindow::<2>::new(limit, Duration::from_nanos(2 * SEG)).expect("valid model window")
}

/// Model-checks `threads` after `setup`: linearizable, and the two
/// segments ending with the latest `now`'s hold at most the limit.
fn bound_holds(alg: SlidingWindow<2>, setup: Vec<Op>, threads: Vec<Vec<Op>>) {
    let latest = threads.iter().flatten().map(Op::now).max().unwrap_or(0);
    let since = (latest / SEG).saturating_sub(1) * SEG;
    let spec = SpecSlidingWindow::like(&alg);
    model::assert_window_bound(alg, spec, setup, threads, since);
}

#[test]
fn checks_across_a_segment_boundary() {
    // All readings fall in segments 0 and 1: one window, limit 2, four
    // asks; the second thread's second reading is older than its first.
    bound_holds(
        window(2),
        vec![],
        vec![
            vec![check(1, 49), check(1, 50)],
            vec![check(1, 99), check(1, 50)],
        ],
    );
}

#[test]
fn checks_while_the_oldest_segment_expires() {
    // Segment 0 holds a permit until 100; callers at 60 and 100 race, then
    // a stale caller at 40 (charged to the head once it moved on).
    bound_holds(
        window(2),
        vec![check(1, 10)],
        vec![vec![check(1, 60), check(1, 40)], vec![check(1, 100)]],
    );
}

#[test]
fn check_racing_refund() {
    // The window is full; one of the setup's permits is given back while
    // a caller tries to take one, twice.
    bound_holds(
        window(2),
        vec![check(2, 10)],
        vec![vec![refund(1, 20)], vec![check(1, 60), check(1, 70)]],
    );
}

#[test]
fn chain_style_refund_racing_a_check() {
    // Take-then-give-back racing a check in the next segment.
    bound_holds(
        window(2),
        vec![check(1, 30)],
        vec![
            vec![check(1, 55), refund_if_allowed(1, 55)],
            vec![check(1, 75)],
        ],
    );
}

#[test]
fn stale_refund_racing_the_next_segment() {
    // A permit taken in segment 0 is given back with its stale `now` while
    // callers in segment 2 (segment 0 has left the window) take the only
    // permit: the refund must not free theirs.
    bound_holds(
        window(1),
        vec![check(1, 40)],
        vec![vec![refund(1, 40)], vec![check(1, 100), check(1, 100)]],
    );
}

#[test]
fn peek_snapshot_and_time_until_ready_see_whole_states() {
    // Read-only operations also take the lock: racing a check, they see
    // the state before or after it, never half-written, and leave the lock
    // free for the drain.
    let alg = window(1);
    model::check(move || {
        let state = Arc::new(alg.new_state());
        let writer = {
            let state = Arc::clone(&state);
            loom::thread::spawn(move || alg.check_n(&state, 1, t(60)).is_ok())
        };
        let snap = alg.snapshot(&state, t(60));
        let wait = alg.time_until_ready(&state, 1, t(60)).expect("n ≤ limit");
        assert!(writer.join().expect("writer"), "a fresh window admits one");
        // before the check: (1 left, ready now); after: (0 left, wait 90)
        let seen = (snap.remaining(), snap.reset_after_nanos());
        assert!(seen == (1, 0) || seen == (0, 90), "half-written: {seen:?}");
        assert!(
            wait == Duration::ZERO || wait == Duration::from_nanos(90),
            "half-written: {wait:?}"
        );
        assert!(alg.check_n(&state, 1, t(60)).is_err_and(|r| !r.is_never()));
        assert!(!alg.is_idle(&state, t(60)));
    });
}
