//! Strict-pacing leaky bucket behaviour (the `gcra` module docs).

use core::time::Duration;

use tollgate::{Bucket, Limiter, Quota, Refusal, Timestamp};

const MS: u64 = 1_000_000;

fn t(ns: u64) -> Timestamp {
    Timestamp::from_nanos(ns)
}

#[test]
fn admits_exactly_one_per_interval() {
    let b = Bucket::leaky_bucket(Quota::per_second(10).unwrap()); // T = 100 ms
    let mut admitted = Vec::new();
    for ms in 0..=1000u64 {
        if b.check(t(ms * MS)).is_ok() {
            admitted.push(ms);
        }
    }
    assert_eq!(admitted, (0..=10).map(|i| i * 100).collect::<Vec<_>>());
}

#[test]
fn never_two_at_the_same_instant() {
    let b = Bucket::leaky_bucket(Quota::per_second(1000).unwrap().with_burst(1000).unwrap());
    // even with a large burst configured (the largest request it accepts),
    // the leaky bucket paces single permits one interval apart
    for now in [0, 5 * MS, 10 * MS, 3_600_000 * MS].map(t) {
        assert!(b.check(now).is_ok());
        assert!(b.check(now).is_err());
        assert_eq!(b.check(now).retry_after_nanos_or_zero(), MS);
    }
}

trait RetryNanos {
    fn retry_after_nanos_or_zero(&self) -> u64;
}
impl RetryNanos for Result<(), Refusal<'_>> {
    fn retry_after_nanos_or_zero(&self) -> u64 {
        self.as_ref().err().map_or(0, |d| d.retry_after_nanos())
    }
}

#[test]
fn retry_after_is_time_until_drained() {
    let b = Bucket::leaky_bucket(Quota::per_second(4).unwrap()); // T = 250 ms
    assert!(b.check(t(0)).is_ok());
    assert_eq!(b.check(t(100 * MS)).retry_after_nanos_or_zero(), 150 * MS);
    assert!(b.check(t(250 * MS - 1)).is_err());
    assert!(b.check(t(250 * MS)).is_ok());
}

#[test]
fn weighted_request_waits_for_drain_then_occupies_n_intervals() {
    // the largest request of a leaky bucket is the quota's burst
    let q = Quota::per_second(10).unwrap().with_burst(4).unwrap();
    let b = Bucket::leaky_bucket(q);
    assert_eq!(b.capacity(&()), 4);
    assert!(b.check_n(3, t(0)).is_ok()); // occupies 300 ms
    let d = b.check_n(1, t(100 * MS));
    assert!(!d.unwrap_err().is_never());
    assert_eq!(d.retry_after_nanos_or_zero(), 200 * MS);
    assert!(b.check_n(4, t(299 * MS)).is_err());
    assert!(b.check_n(4, t(300 * MS)).is_ok()); // occupies 400 ms
    assert!(b.check(t(699 * MS)).is_err());
    assert!(b.check(t(700 * MS)).is_ok());
}

#[test]
fn heavier_than_burst_can_never_succeed() {
    // was "max weight 1" (the old default); a burst of 1 is that bucket now
    let b = Bucket::leaky_bucket(Quota::per_second(10).unwrap().with_burst(1).unwrap());
    assert_eq!(b.capacity(&()), 1);
    let never = b.check_n(2, t(0)).unwrap_err();
    assert!(never.is_never());
    assert_eq!((never.requested(), never.limit()), (2, 1));
    let never = b.time_until_ready(2, t(0)).unwrap_err();
    assert!(never.is_never());
    assert_eq!(never.requested(), 2);
    // and it took nothing
    assert!(b.check(t(0)).is_ok());
}

/// Changed on purpose (API 13): a leaky bucket's largest request is the
/// quota's burst, which defaults to the permits per period. `per_second(10)`
/// used to accept only single permits (a separate max weight defaulting to
/// 1); it now accepts a request of up to 10 when drained, which then
/// occupies 10 intervals.
#[test]
fn default_largest_request_is_the_permits_per_period() {
    let b = Bucket::leaky_bucket(Quota::per_second(10).unwrap()); // T = 100 ms, burst 10
    assert_eq!(b.capacity(&()), 10);
    assert_eq!(b.snapshot(t(0)).limit(), 10);
    assert_eq!(b.snapshot(t(0)).remaining(), 10);
    let never = b.check_n(11, t(0)).unwrap_err();
    assert!(never.is_never());
    assert_eq!((never.requested(), never.limit()), (11, 10));
    assert!(b.check_n(10, t(0)).is_ok()); // occupies 1 s
    assert_eq!(b.snapshot(t(0)).remaining(), 0);
    let d = b.check(t(0)).unwrap_err();
    assert_eq!(d.retry_after(), Duration::from_secs(1));
    assert_eq!(
        b.time_until_ready(10, t(400 * MS)),
        Ok(Duration::from_millis(600))
    );
    assert!(b.check(t(1_000 * MS - 1)).is_err());
    // drained: single permits are paced again, one per interval
    assert!(b.check(t(1_000 * MS)).is_ok());
    assert!(b.check(t(1_000 * MS)).is_err());
    assert!(b.check(t(1_100 * MS)).is_ok());
}

#[test]
fn peek_refund_and_idle() {
    let b = Bucket::leaky_bucket(Quota::per_second(10).unwrap().with_burst(3).unwrap());
    assert!(b.is_idle(t(0)));
    assert_eq!(b.snapshot(t(0)).remaining(), 3);
    assert!(b.check_n(2, t(0)).is_ok());
    assert!(b.check_n(0, t(10 * MS)).is_ok());
    let peek = b.snapshot(t(10 * MS));
    assert_eq!(peek.remaining(), 0);
    assert_eq!(peek.reset_after_nanos(), 190 * MS);
    b.refund(1, t(10 * MS));
    assert_eq!(
        b.time_until_ready(1, t(10 * MS)),
        Ok(Duration::from_nanos(90 * MS))
    );
    b.refund(10, t(10 * MS));
    assert!(b.is_idle(t(10 * MS)));
    assert_eq!(b.snapshot(t(10 * MS)).remaining(), 3);
    // refund cannot bank capacity: still strictly paced
    assert!(b.check(t(10 * MS)).is_ok());
    assert!(b.check(t(10 * MS)).is_err());
}
