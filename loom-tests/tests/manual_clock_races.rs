//! `ManualClock` is an atomic too: concurrent `advance` and `set` end in a
//! value some sequential order gives, no advance is lost, readers never
//! see time move backwards while it only advances, and advances saturate
//! at the end of time instead of wrapping.
#![cfg(loom)]

use std::collections::HashSet;

use core::time::Duration;

use loom::sync::Arc;
use loom_tests::{model, t};
use tollgate::{Clock, ManualClock};

#[derive(Debug, Clone, Copy)]
enum ClockOp {
    Advance(u64),
    Set(u64),
}

impl ClockOp {
    fn run(self, clock: &ManualClock) {
        match self {
            ClockOp::Advance(by) => clock.advance(Duration::from_nanos(by)),
            ClockOp::Set(to) => clock.set(t(to)),
        }
    }

    /// The plain sequential meaning: saturating add, or overwrite.
    fn after(self, value: u64) -> u64 {
        match self {
            ClockOp::Advance(by) => value.saturating_add(by),
            ClockOp::Set(to) => to,
        }
    }
}

/// Final values of every sequential order of `ops` from `start`.
fn sequential_finals(start: u64, ops: &[ClockOp]) -> HashSet<u64> {
    if ops.is_empty() {
        return HashSet::from([start]);
    }
    let mut finals = HashSet::new();
    for (i, op) in ops.iter().enumerate() {
        let mut rest = ops.to_vec();
        rest.remove(i);
        finals.extend(sequential_finals(op.after(start), &rest));
    }
    finals
}

/// Runs `ops` concurrently (one per thread, the last on the main thread)
/// on a clock starting at `start`; returns the final reading.
fn race(start: u64, ops: &[ClockOp]) -> u64 {
    let clock = Arc::new(ManualClock::starting_at(t(start)));
    let (last, spawned) = ops.split_last().expect("at least one op");
    let handles: Vec<_> = spawned
        .iter()
        .map(|&op| {
            let clock = Arc::clone(&clock);
            loom::thread::spawn(move || op.run(&clock))
        })
        .collect();
    last.run(&clock);
    for h in handles {
        h.join().expect("clock thread");
    }
    clock.now().as_nanos()
}

#[test]
fn advances_and_set_race_to_a_sequential_result() {
    let ops = [ClockOp::Advance(5), ClockOp::Advance(7), ClockOp::Set(100)];
    let finals = sequential_finals(10, &ops);
    // The orders really differ, so a wrong interleaving could show.
    assert!(finals.len() > 1, "{finals:?}");
    model::check(move || {
        let got = race(10, &ops);
        assert!(finals.contains(&got), "final {got} not in {finals:?}");
    });
}

#[test]
fn set_backwards_racing_an_advance_ends_in_a_sequential_result() {
    let ops = [ClockOp::Set(3), ClockOp::Advance(4)];
    let finals = sequential_finals(50, &ops);
    model::check(move || {
        let got = race(50, &ops);
        assert!(finals.contains(&got), "final {got} not in {finals:?}");
    });
}

#[test]
fn concurrent_advances_are_never_lost_and_readers_see_time_move_forward() {
    let advances = [ClockOp::Advance(5), ClockOp::Advance(7)];
    // A reader may see the start, either advance alone, or both.
    let readable: HashSet<u64> = [&[][..], &advances[..1], &advances[1..], &advances[..]]
        .into_iter()
        .flat_map(|subset| sequential_finals(10, subset))
        .collect();
    let finals = sequential_finals(10, &advances);
    model::check(move || {
        let clock = Arc::new(ManualClock::starting_at(t(10)));
        let handles: Vec<_> = advances
            .iter()
            .map(|&op| {
                let clock = Arc::clone(&clock);
                loom::thread::spawn(move || op.run(&clock))
            })
            .collect();
        let first = clock.now().as_nanos();
        let second = clock.now().as_nanos();
        assert!(first <= second, "time went back: {first} then {second}");
        assert!(readable.contains(&first) && readable.contains(&second));
        for h in handles {
            h.join().expect("clock thread");
        }
        let last = clock.now().as_nanos();
        assert!(finals.contains(&last), "lost an advance: {last}");
    });
}

#[test]
fn concurrent_advances_saturate_at_the_end_of_time() {
    let start = u64::MAX - 3;
    model::check(move || {
        let clock = Arc::new(ManualClock::starting_at(t(start)));
        let other = Arc::clone(&clock);
        let t = loom::thread::spawn(move || other.advance(Duration::from_nanos(2)));
        clock.advance(Duration::from_nanos(2));
        let seen = clock.now().as_nanos();
        assert!(seen >= start, "wrapped: {seen}");
        t.join().expect("clock thread");
        assert_eq!(clock.now().as_nanos(), u64::MAX);
    });
}
