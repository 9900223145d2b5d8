//! The real clocks: they advance, report an honest resolution, and pair
//! with quotas only when they can enforce them.
#![cfg(feature = "std")]

use std::thread::sleep;
use std::time::{Duration, Instant};

use tollgate::{
    Bucket, Clock, CoarseClock, ConfigError, ManualClock, Quota, RateLimiter, StdClock, Timestamp,
};

#[test]
fn std_clock_advances_with_real_time() {
    let c = StdClock::new();
    let a = c.now();
    // Kept real sleep: the clock following real time is what is under
    // test; a sleep lasts at least 20 ms, longer on a loaded machine, so
    // the lower bound below is sound.
    sleep(Duration::from_millis(20));
    let b = c.now();
    assert!(b - a >= Duration::from_millis(20), "{:?}", b - a);
    assert_eq!(c.resolution(), Duration::from_nanos(1));
    let copy = c;
    assert!(copy.now() >= b, "copies share the origin");
}

/// Changed on purpose (API 13): every `StdClock` reads one process-wide
/// time line. Before, each `StdClock::new()` counted from its own creation,
/// so two clocks disagreed by the time between their creations.
#[test]
fn std_clocks_share_one_origin() {
    let first = StdClock::new();
    // Kept real sleeps: clocks created at different real times (at least
    // 5 ms apart, more under load) must share one origin; the only timing
    // assertion, a lower bound, is sound however long they last.
    sleep(Duration::from_millis(5));
    let second = StdClock::new();
    assert_eq!(first.origin(), second.origin());
    // a clock made on another thread, later, too
    let third = std::thread::spawn(|| {
        sleep(Duration::from_millis(5));
        StdClock::new()
    })
    .join()
    .unwrap();
    assert_eq!(first.origin(), third.origin());
    // the same instant reads the same on each
    let instant = Instant::now();
    assert_eq!(first.timestamp(instant), second.timestamp(instant));
    assert_eq!(first.timestamp(instant), third.timestamp(instant));
    assert!(first.timestamp(instant) >= Timestamp::from_millis(10));
    // and interleaved reads of different clocks are monotonic
    let a = first.now();
    let b = second.now();
    let c = third.now();
    let d = StdClock::new().now();
    assert!(a <= b && b <= c && c <= d, "{a:?} {b:?} {c:?} {d:?}");
    // an instant before the origin reads as zero
    let before = first.origin() - Duration::from_nanos(1);
    assert_eq!(second.timestamp(before), Timestamp::ZERO);
    assert_eq!(first.timestamp(first.origin()), Timestamp::ZERO);
}

/// With a shared origin a fresh `StdClock` per call is a correct (if
/// wasteful) way to read `now`: a bucket checked that way refills with real
/// time. (Before API 13 each fresh clock read about zero, so the bucket
/// never refilled.)
#[test]
fn a_fresh_std_clock_per_check_refills_the_bucket() {
    // T = 100 ms, burst 1
    const T: Duration = Duration::from_millis(100);
    let bucket = Bucket::token_bucket(Quota::per_second(10).unwrap().with_burst(1).unwrap());
    let first = StdClock::new().now();
    assert!(bucket.check(first).is_ok());
    // Each decision is checked against the readings it was given, so a
    // machine stalled for a whole interval between two reads cannot fail
    // the test: a fresh clock reads the shared time line, so the bucket
    // sees exactly the time that passed.
    let second = StdClock::new().now();
    let refused = bucket.check(second);
    if second - first < T {
        assert!(refused.is_err(), "taken {:?} ago", second - first);
        assert_eq!(refused.unwrap_err().retry_after(), T - (second - first));
    } else {
        assert!(refused.is_ok(), "refilled after {:?}", second - first);
    }
    // Kept real sleep: refilling with real time is what is under test; it
    // lasts at least 110 ms (more under load), past the last TAT.
    sleep(Duration::from_millis(110));
    let third = StdClock::new().now();
    assert!(bucket.check(third).is_ok(), "refilled");
    let fourth = StdClock::new().now();
    assert_eq!(bucket.check(fourth).is_err(), fourth - third < T);
}

#[test]
fn coarse_clock_steps_at_its_period_and_says_so() {
    let c = CoarseClock::start(Duration::from_millis(2)).unwrap();
    assert_eq!(c.resolution(), Duration::from_millis(2));
    let a = c.now();
    // The refresh thread runs every 2 ms, or later when the machine is
    // busy: wait for the timestamp to move (bounded) rather than for a
    // fixed time.
    let deadline = Instant::now() + Duration::from_secs(30);
    while c.now() == a {
        assert!(
            Instant::now() < deadline,
            "the refresh thread never moved the timestamp"
        );
        sleep(Duration::from_millis(1)); // polls a condition
    }
    let b = c.now();
    assert!(b > a, "the refresh thread moved the timestamp");
    let shared = c.clone();
    assert!(shared.now() >= b);
    // a quota finer than 2 ms cannot be enforced by this clock
    let err = RateLimiter::token_bucket(Quota::per_second(1000).unwrap(), c.clone()).unwrap_err();
    assert!(matches!(err, ConfigError::ClockTooCoarse { .. }));
    assert!(RateLimiter::token_bucket(Quota::per_second(500).unwrap(), c).is_ok());
}

#[test]
fn manual_clock_is_shared_and_saturates() {
    let c = std::sync::Arc::new(ManualClock::starting_at(Timestamp::from_nanos(
        u64::MAX - 5,
    )));
    let c2 = std::sync::Arc::clone(&c);
    std::thread::spawn(move || c2.advance(Duration::from_secs(1)))
        .join()
        .unwrap();
    assert_eq!(c.now(), Timestamp::MAX);
    c.set(Timestamp::from_nanos(7));
    assert_eq!(Clock::now(&c), Timestamp::from_nanos(7));
    assert_eq!(
        ManualClock::with_resolution(Timestamp::ZERO, Duration::ZERO).resolution(),
        Duration::from_nanos(1)
    );
}

#[cfg(feature = "quanta")]
#[test]
fn quanta_clock_advances_with_real_time() {
    let c = tollgate::QuantaClock::new();
    let a = c.now();
    // Kept real sleep: the clock following real time is what is under
    // test; a sleep lasts at least 20 ms (more under load), and 19 ms
    // allows for the TSC's calibration against the OS clock.
    sleep(Duration::from_millis(20));
    let b = c.now();
    assert!(b - a >= Duration::from_millis(19), "{:?}", b - a);
    let rl = RateLimiter::token_bucket(Quota::per_second(10).unwrap(), c).unwrap();
    assert!(rl.try_acquire().is_ok());
}

/// Every std clock counts from the one process origin: readings of
/// `StdClock`, `QuantaClock`, `TokioClock` (real time) and `CoarseClock`
/// taken one after another lie on one time line. Before, `QuantaClock`
/// and `TokioClock` read zero when made, so a mix was silently wrong by
/// the time since the process's first `StdClock`.
#[cfg(all(feature = "quanta", feature = "tokio"))]
#[tokio::test]
async fn std_quanta_tokio_and_coarse_clocks_share_one_time_line() {
    let std_clock = StdClock::new();
    // The clocks below are made once the time line has run at least 10 ms
    // (at once with one shared origin, which lies before the first clock):
    // a clock that counted from its own creation would then read at least
    // 10 ms behind. Polls a condition, bounded.
    let deadline = Instant::now() + Duration::from_secs(30);
    while std_clock.now() < Timestamp::from_millis(10) {
        assert!(Instant::now() < deadline, "the OS clock stood still");
        sleep(Duration::from_millis(1));
    }
    let coarse = CoarseClock::start(Duration::from_millis(1)).unwrap();
    let quanta = tollgate::QuantaClock::new();
    let tokio_clock = tollgate::TokioClock::new();

    let a = std_clock.now();
    let q = quanta.now();
    let t = tokio_clock.now();
    let b = std_clock.now();
    // tokio's clock (not paused) is the OS clock: exactly between the two
    // reads around it
    assert!(a <= t && t <= b, "{a:?} <= {t:?} <= {b:?}");
    // quanta's TSC is anchored to the origin once, to within a microsecond,
    // then runs at its calibrated rate (off by at most 2e-4 in a loaded
    // debug build, see QuantaClock's docs: 5 ms would take 25 s of this
    // process after the anchor). 5 ms is far below the 10 ms a clock of
    // its own would be off by, and far above what rate and anchor explain.
    let bound = Duration::from_millis(5);
    assert!(
        q + bound >= a && q <= b + bound,
        "quanta {q:?} not within {bound:?} of [{a:?}, {b:?}]"
    );
    // the coarse clock lags by its refresh period (more when its thread is
    // descheduled): wait until it has refreshed after `a`, then it lies
    // between `a` and a later OS reading. A clock of its own origin would
    // never reach `a` (it would read 10 ms less), and the wait would fail.
    while coarse.now() < a {
        assert!(
            Instant::now() < deadline,
            "the coarse clock never reached the OS clock's reading: {:?} < {a:?}",
            coarse.now()
        );
        sleep(Duration::from_millis(1)); // polls a condition
    }
    let c = coarse.now();
    let d = std_clock.now();
    assert!(a <= c && c <= d, "{a:?} <= {c:?} <= {d:?}");
    // and each clock keeps its shared origin: the same instant, the same
    // timestamp on StdClock and TokioClock
    let instant = Instant::now();
    assert_eq!(
        tokio_clock.timestamp(tokio::time::Instant::from_std(instant)),
        std_clock.timestamp(instant)
    );
    assert_eq!(tokio_clock.origin().into_std(), std_clock.origin());
}
