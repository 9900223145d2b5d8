//! Window limiters under callers whose `now` is stale (up to a lag below the
//! heal threshold behind the newest instant seen): a stale `now` is charged
//! to the newer window, never to a fresh older one, so no window admits more
//! than its limit.
//!
//! The window an admission was charged to is read back from the admission:
//! `Algorithm::check_n` answers the instant the state is full again
//! (`now + reset_after`), the end of that window (fixed) or the instant the
//! head segment leaves the window (sliding).

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;
use tollgate::{Algorithm, Bucket, FixedWindow, SlidingWindow, Timestamp};

fn t(ns: u64) -> Timestamp {
    Timestamp::from_nanos(ns)
}

/// A heal threshold far above the largest lag: staleness, not a jump.
const HEAL: Duration = Duration::from_nanos(10_000);

/// `(advance, lag, n)`: the newest instant moves by `advance`, the caller
/// reads it `lag` ns late, and asks for `n`.
fn steps() -> impl Strategy<Value = Vec<(u64, u64, u32)>> {
    prop::collection::vec((0u64..60, 0u64..200, 0u32..4), 1..200)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn fixed_window_stale_callers_never_over_admit(limit in 1u32..6, window in 8u64..100, steps in steps()) {
        // heal threshold far above the largest lag: staleness, not a jump
        let limiter = Bucket::new(
            FixedWindow::new(limit, Duration::from_nanos(window)).unwrap().with_heal_threshold(HEAL),
        );
        let mut newest = 1_000u64;
        let mut charged = BTreeMap::<u64, u64>::new();
        for (advance, lag, n) in steps {
            newest += advance;
            let now = newest - lag;
            if let Ok(full) = limiter.algorithm().check_n(limiter.state(), n, t(now)) {
                if n == 0 { continue; }
                let end = full.as_nanos();
                prop_assert_eq!(end % window, 0, "reset_after runs to a window boundary");
                let e = end / window - 1;
                prop_assert!(e >= now / window && e <= newest / window, "charged to window {e}");
                *charged.entry(e).or_default() += n as u64;
            }
        }
        for (e, total) in charged {
            prop_assert!(total <= limit as u64, "window {e}: {total}");
        }
    }

    #[test]
    fn sliding_window_stale_callers_never_over_admit(limit in 1u32..6, segment in 2u64..30, steps in steps()) {
        const S: u64 = 4;
        let limiter = Bucket::new(
            SlidingWindow::<4>::new(limit, Duration::from_nanos(segment * S))
                .unwrap()
                .with_heal_threshold(HEAL),
        );
        let mut newest = 1_000u64;
        let mut charged = BTreeMap::<u64, u64>::new();
        for (advance, lag, n) in steps {
            newest += advance;
            let now = newest - lag;
            if let Ok(full) = limiter.algorithm().check_n(limiter.state(), n, t(now)) {
                if n == 0 { continue; }
                // full again (now + reset_after): when the head segment
                // (holding this request) leaves
                let leaves = full.as_nanos();
                prop_assert_eq!(leaves % segment, 0);
                let head = leaves / segment - S;
                prop_assert!(head >= now / segment && head <= newest / segment, "charged to segment {head}");
                *charged.entry(head).or_default() += n as u64;
            }
        }
        // any S consecutive segments hold at most `limit`
        for &first in charged.keys() {
            let total: u64 = charged.range(first..first + S).map(|(_, n)| n).sum();
            prop_assert!(total <= limit as u64, "segments {first}..+{S}: {total}");
        }
    }
}

/// Found by the loom model `chain_refusal_leaves_members_unchanged`: a chain
/// takes a permit at 99 (window 0), a direct caller opens window 1 at 100,
/// then the chain's refund arrives with its `now` of 99. It used to give the
/// permit back to window 1, which then admitted `limit + 1`. A stale refund
/// now gives nothing back (its permit may belong to a window that is over).
#[test]
fn fixed_window_stale_refund_never_credits_a_newer_window() {
    let limiter = Bucket::new(FixedWindow::new(1, Duration::from_nanos(100)).unwrap());
    assert!(limiter.check(t(99)).is_ok()); // the chain's take, window 0
    assert!(limiter.check(t(100)).is_ok()); // a direct caller, window 1
    limiter.refund(1, t(99)); // the chain's refund, stale
    assert!(limiter.check(t(100)).is_err(), "window 1 admitted 2 of 1");
    // a fresh refund still gives back to its own window
    limiter.refund(1, t(100));
    assert!(limiter.check(t(150)).is_ok());
}

/// The same for the sliding window (2 segments of 50 ns): a permit taken in
/// segment 0, then segment 2 opened by a direct caller; the stale refund
/// (segment 0) must not take the direct caller's permit out of segment 2.
#[test]
fn sliding_window_stale_refund_never_credits_a_newer_segment() {
    let limiter = Bucket::new(SlidingWindow::<2>::new(1, Duration::from_nanos(100)).unwrap());
    assert!(limiter.check(t(40)).is_ok()); // segment 0
    assert!(limiter.check(t(100)).is_ok()); // segment 2: segment 0 left
    limiter.refund(1, t(40)); // stale
    assert!(
        limiter.check(t(100)).is_err(),
        "segments 1..=2 admitted 2 of 1"
    );
    // a refund from the head segment's own time still works
    limiter.refund(1, t(120));
    assert!(limiter.check(t(120)).is_ok());
}
