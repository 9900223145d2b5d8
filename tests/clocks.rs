//! The real clocks: they advance, report an honest resolution, and pair
//! with quotas only when they can enforce them.

use std::thread::sleep;
use std::time::Duration;

use tollgate::{Clock, CoarseClock, ManualClock, Quota, QuotaError, RateLimiter, StdClock};

#[test]
fn std_clock_advances_with_real_time() {
    let c = StdClock::new();
    let a = c.now();
    sleep(Duration::from_millis(20));
    let b = c.now();
    assert!(b - a >= 20_000_000, "{} ns", b - a);
    assert_eq!(c.resolution(), 1);
    let copy = c;
    assert!(copy.now() >= b, "copies share the origin");
}

#[test]
fn coarse_clock_steps_at_its_period_and_says_so() {
    let c = CoarseClock::start(Duration::from_millis(2)).unwrap();
    assert_eq!(c.resolution(), 2_000_000);
    let a = c.now();
    sleep(Duration::from_millis(30));
    let b = c.now();
    assert!(b > a, "the refresh thread moved the timestamp");
    let shared = c.clone();
    assert!(shared.now() >= b);
    // a quota finer than 2 ms cannot be enforced by this clock
    let err = RateLimiter::token_bucket(Quota::per_second(1000).unwrap(), c.clone()).unwrap_err();
    assert!(matches!(err, QuotaError::BelowClockResolution { .. }));
    assert!(RateLimiter::token_bucket(Quota::per_second(500).unwrap(), c).is_ok());
}

#[test]
fn manual_clock_is_shared_and_saturates() {
    let c = std::sync::Arc::new(ManualClock::new(u64::MAX - 5));
    let c2 = std::sync::Arc::clone(&c);
    std::thread::spawn(move || c2.advance(Duration::from_secs(1)))
        .join()
        .unwrap();
    assert_eq!(c.now(), u64::MAX);
    c.set(7);
    assert_eq!(Clock::now(&c), 7);
    assert_eq!(ManualClock::with_resolution(0, 0).resolution(), 1);
}

#[cfg(feature = "quanta")]
#[test]
fn quanta_clock_advances_with_real_time() {
    let c = tollgate::QuantaClock::new();
    let a = c.now();
    sleep(Duration::from_millis(20));
    let b = c.now();
    assert!(b - a >= 19_000_000, "{} ns", b - a);
    let rl = RateLimiter::token_bucket(Quota::per_second(10).unwrap(), c).unwrap();
    assert!(rl.try_acquire().is_allowed());
}
