//! The real clocks: they advance, report an honest resolution, and pair
//! with quotas only when they can enforce them.
#![cfg(feature = "std")]

use std::thread::sleep;
use std::time::{Duration, Instant};

use tollgate::{
    Bucket, Clock, CoarseClock, ConfigError, Limiter, ManualClock, Quota, RateLimiter, StdClock,
    Timestamp,
};

#[test]
fn std_clock_advances_with_real_time() {
    let c = StdClock::new();
    let a = c.now();
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
    let bucket = Bucket::token_bucket(Quota::per_second(10).unwrap().with_burst(1).unwrap());
    assert!(bucket.check(StdClock::new().now()).is_allowed());
    let refused = bucket.check(StdClock::new().now());
    assert!(refused.is_denied(), "taken moments ago");
    assert!(refused.retry_after() <= Duration::from_millis(100));
    sleep(Duration::from_millis(110));
    assert!(bucket.check(StdClock::new().now()).is_allowed(), "refilled");
    assert!(bucket.check(StdClock::new().now()).is_denied());
}

#[test]
fn coarse_clock_steps_at_its_period_and_says_so() {
    let c = CoarseClock::start(Duration::from_millis(2)).unwrap();
    assert_eq!(c.resolution(), Duration::from_millis(2));
    let a = c.now();
    sleep(Duration::from_millis(30));
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
    sleep(Duration::from_millis(20));
    let b = c.now();
    assert!(b - a >= Duration::from_millis(19), "{:?}", b - a);
    let rl = RateLimiter::token_bucket(Quota::per_second(10).unwrap(), c).unwrap();
    assert!(rl.try_acquire().is_allowed());
}
