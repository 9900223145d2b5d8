//! Clocks that go backwards never grant extra capacity, and heal
//! (the `gcra` module docs).

use core::time::Duration;

use tollgate::{Bucket, Gcra, Quota, Refusal, Timestamp};

const MS: u64 = 1_000_000;
const HOUR: u64 = 3_600_000 * MS;

fn t(ns: u64) -> Timestamp {
    Timestamp::from_nanos(ns)
}

#[test]
fn jump_back_one_hour_heals_within_one_interval_and_never_over_admits() {
    let q = Quota::per_second(10).unwrap().with_burst(5).unwrap(); // T = 100 ms
    let b = Bucket::token_bucket(q);
    let t0 = 10 * HOUR;
    // drain the bucket
    assert_eq!((0..10).filter(|_| b.check(t(t0)).is_ok()).count(), 5);
    // the clock jumps back one hour
    let back = t0 - HOUR;
    let d = b.check(t(back));
    assert!(d.is_err(), "a backwards jump must not refill the bucket");
    assert_eq!(
        d.retry_after_nanos(),
        100 * MS,
        "healed: service resumes after one interval"
    );
    // within that interval: nothing
    assert!(b.check(t(back + 100 * MS - 1)).is_err());
    // then the normal rate, never a burst
    let mut admitted = 0;
    for ms in (100..=1100).step_by(1) {
        if b.check(t(back + ms * MS)).is_ok() {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 11, "one per 100 ms from 100 ms to 1100 ms");
}

trait RetryNanos {
    fn retry_after_nanos(&self) -> u64;
}
impl RetryNanos for Result<(), Refusal<'_>> {
    fn retry_after_nanos(&self) -> u64 {
        self.as_ref().err().map_or(0, |d| d.retry_after_nanos())
    }
}

#[test]
fn jump_back_heals_a_leaky_bucket_too() {
    let b = Bucket::leaky_bucket(Quota::per_second(10).unwrap());
    let t0 = t(5 * HOUR);
    assert!(b.check(t0).is_ok());
    let back = t0 - Duration::from_nanos(HOUR);
    assert_eq!(b.check(back).retry_after_nanos(), 100 * MS);
    assert!(b.check(back + Duration::from_millis(100)).is_ok());
    assert!(b.check(back + Duration::from_millis(100)).is_err());
}

#[test]
fn stale_now_under_the_threshold_never_grants_extra() {
    let q = Quota::per_second(10).unwrap().with_burst(3).unwrap();
    let b = Bucket::token_bucket(q);
    let now = HOUR;
    assert_eq!((0..5).filter(|_| b.check(t(now)).is_ok()).count(), 3);
    let tat = b.state().tat(b.algorithm());
    // callers whose `now` is stale by up to just under the threshold
    for stale in [1, MS, 500 * MS, 999 * MS] {
        let d = b.check(t(now - stale));
        assert!(d.is_err());
        assert_eq!(
            b.state().tat(b.algorithm()),
            tat,
            "a stale caller must not move the TAT"
        );
        // it sees the bucket as emptier than it is, never fuller
        assert!(d.unwrap_err().retry_after_nanos() >= 100 * MS);
    }
    // and a fresh caller continues exactly as before
    assert!(b.check(t(now + 100 * MS - 1)).is_err());
    assert!(b.check(t(now + 100 * MS)).is_ok());
}

#[test]
fn heal_threshold_is_configurable() {
    let q = Quota::per_second(10).unwrap().with_burst(1).unwrap();
    let gcra = Gcra::token_bucket(q).with_heal_threshold(Duration::from_nanos(10 * MS));
    assert_eq!(gcra.heal_threshold(), Duration::from_nanos(10 * MS));
    let b = Bucket::new(gcra);
    assert!(b.check(t(HOUR)).is_ok());
    // 50 ms back: the lead (150 ms) exceeds τ + T (100 ms) by more than 10 ms → heal
    let d = b.check(t(HOUR - 50 * MS));
    assert_eq!(d.retry_after_nanos(), 100 * MS);
    // with the default 1 s threshold the same step is just a stale caller
    let b = Bucket::token_bucket(q);
    assert!(b.check(t(HOUR)).is_ok());
    assert_eq!(b.check(t(HOUR - 50 * MS)).retry_after_nanos(), 150 * MS);
}

#[test]
fn snapshot_and_time_until_ready_see_the_healed_view() {
    let b = Bucket::token_bucket(Quota::per_second(10).unwrap());
    assert!(b.check_n(10, t(2 * HOUR)).is_ok());
    let back = t(HOUR);
    assert_eq!(
        b.time_until_ready(1, back),
        Ok(Duration::from_nanos(100 * MS))
    );
    assert_eq!(b.snapshot(back).remaining(), 0);
    assert!(!b.is_idle(back));
}

#[test]
fn heal_starts_exactly_past_the_threshold() {
    // burst 1, T = 100 ms: a monotonic clock leaves a lead of at most 100 ms
    let q = Quota::per_second(10).unwrap().with_burst(1).unwrap();
    let threshold = 40 * MS;
    let gcra = Gcra::token_bucket(q).with_heal_threshold(Duration::from_nanos(threshold));
    // lead exactly τ + T + threshold: a stale caller, no heal
    let b = Bucket::new(gcra);
    assert!(b.check(t(HOUR)).is_ok()); // TAT = HOUR + 100 ms
    let at_limit = HOUR - threshold;
    assert_eq!(b.check(t(at_limit)).retry_after_nanos(), 140 * MS);
    assert_eq!(b.state().tat(b.algorithm()), t(HOUR + 100 * MS));
    // one nanosecond further back: heal to "empty at now"
    let past = at_limit - 1;
    assert_eq!(b.check(t(past)).retry_after_nanos(), 100 * MS);
    assert_eq!(b.state().tat(b.algorithm()), t(past + 100 * MS));
}

/// A leaky bucket's largest lead is its largest request (the quota's burst,
/// default = permits, since API 13) times the interval: after a full-size
/// request a caller that far behind plus the threshold is still just stale,
/// one nanosecond further is a jump back and heals to one interval.
#[test]
fn leaky_heal_starts_past_the_largest_request_plus_the_threshold() {
    let threshold = 10 * MS;
    // T = 100 ms, burst 10: a drained bucket admits 10 at once, lead 1 s
    let gcra = Gcra::leaky_bucket(Quota::per_second(10).unwrap())
        .with_heal_threshold(Duration::from_nanos(threshold));
    let b = Bucket::new(gcra);
    assert!(b.check_n(10, t(HOUR)).is_ok()); // TAT = HOUR + 1 s
    let at_limit = HOUR - threshold;
    assert_eq!(
        b.check(t(at_limit)).retry_after_nanos(),
        1_000 * MS + threshold
    );
    assert_eq!(b.state().tat(b.algorithm()), t(HOUR + 1_000 * MS));
    let past = at_limit - 1;
    assert_eq!(b.check(t(past)).retry_after_nanos(), 100 * MS);
    assert_eq!(b.state().tat(b.algorithm()), t(past + 100 * MS));
    assert!(b.check(t(past + 100 * MS)).is_ok());
}
