//! The fixed window under concurrent checks and refunds whose `now`s
//! straddle a window boundary and arrive out of order (stale callers): in
//! every interleaving the window of the latest `now` never admits more than
//! its limit, and every run equals some sequential order of the same
//! operations in the reference model (`SpecFixedWindow`, written from the
//! contract): same decisions, same `retry_after`s, same end state.
#![cfg(loom)]

use core::time::Duration;
use loom_tests::{Op, SpecFixedWindow, check, model, refund, refund_if_allowed};

use tollgate::FixedWindow;

const W: u64 = 100;

fn window(limit: u32) -> FixedWindow {
    FixedWindow::new(limit, Duration::from_nanos(W)).expect("valid model window")
}

/// Model-checks `threads` after `setup`: linearizable, and the window of
/// the latest `now` never holds more than the limit.
fn per_window_bound(alg: FixedWindow, setup: Vec<Op>, threads: Vec<Vec<Op>>) {
    let latest = threads.iter().flatten().map(Op::now).max().unwrap_or(0);
    let spec = SpecFixedWindow::like(&alg);
    model::assert_window_bound(alg, spec, setup, threads, latest - latest % W);
}

#[test]
fn checks_on_both_sides_of_a_boundary() {
    // Limit 2; thread 0 reads the clock just before and at the boundary,
    // thread 2's reading is the oldest and may arrive last.
    per_window_bound(
        window(2),
        vec![],
        vec![
            vec![check(1, 99), check(1, 100)],
            vec![check(1, 100)],
            vec![check(1, 98)],
        ],
    );
}

#[test]
fn stale_callers_after_the_next_window_opened() {
    // Window 0 is spent in the setup; stale callers (now < 100) race
    // callers of window 1: a stale caller is charged to window 1 once it
    // is open, never to the spent window 0, never to a fresh one.
    per_window_bound(
        window(2),
        vec![check(2, 50)],
        vec![
            vec![check(1, 100)],
            vec![check(1, 99)],
            vec![check(1, 101), check(1, 60)],
        ],
    );
}

#[test]
fn chain_style_refund_racing_checks() {
    // A caller takes and gives back (a later chain member refused it)
    // while others take; one permit of the window is already used.
    per_window_bound(
        window(2),
        vec![check(1, 100)],
        vec![
            vec![check(1, 120), refund_if_allowed(1, 120)],
            vec![check(1, 130)],
            vec![check(1, 199)],
        ],
    );
}

#[test]
fn stale_refund_racing_the_next_window() {
    // The regression the chain model found: a permit taken at 99 is given
    // back with that stale `now` while callers at 100 open window 1. The
    // refund must not free window 1's permit (it used to: 2 of 1 admitted).
    per_window_bound(
        window(1),
        vec![check(1, 99)],
        vec![
            vec![refund(1, 99)],
            vec![check(1, 100)],
            vec![check(1, 100)],
        ],
    );
}

#[test]
fn weighted_checks_and_peeks_across_the_boundary() {
    // n = 2 racing n = 1 on both sides of the boundary, a peek and an
    // impossible request (n > limit) that must change nothing.
    per_window_bound(
        window(3),
        vec![check(2, 90)],
        vec![
            vec![check(2, 100), check(4, 100)],
            vec![check(0, 99), check(2, 99)],
            vec![check(1, 105)],
        ],
    );
}
