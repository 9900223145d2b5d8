//! Strict-pacing leaky bucket behaviour (DESIGN.md §2).

use tollgate::{Bucket, CapacityExceeded, Limiter, Quota};

const MS: u64 = 1_000_000;

#[test]
fn admits_exactly_one_per_interval() {
    let b = Bucket::leaky_bucket(Quota::per_second(10).unwrap()); // T = 100 ms
    let mut admitted = Vec::new();
    for ms in 0..=1000u64 {
        if b.check(ms * MS).is_allowed() {
            admitted.push(ms);
        }
    }
    assert_eq!(admitted, (0..=10).map(|i| i * 100).collect::<Vec<_>>());
}

#[test]
fn never_two_at_the_same_instant() {
    let b = Bucket::leaky_bucket(Quota::per_second(1000).unwrap().allow_burst(1000).unwrap());
    // even with a large token-bucket burst configured, the leaky bucket paces
    for t in [0, 5 * MS, 10 * MS, 3_600_000 * MS] {
        assert!(b.check(t).is_allowed());
        assert!(b.check(t).is_denied());
        assert_eq!(b.check(t).retry_after_nanos_or_zero(), MS);
    }
}

trait RetryNanos {
    fn retry_after_nanos_or_zero(&self) -> u64;
}
impl RetryNanos for tollgate::Decision {
    fn retry_after_nanos_or_zero(&self) -> u64 {
        self.denied().map_or(0, |d| d.retry_after_nanos())
    }
}

#[test]
fn retry_after_is_time_until_drained() {
    let b = Bucket::leaky_bucket(Quota::per_second(4).unwrap()); // T = 250 ms
    assert!(b.check(0).is_allowed());
    assert_eq!(b.check(100 * MS).retry_after_nanos_or_zero(), 150 * MS);
    assert!(b.check(250 * MS - 1).is_denied());
    assert!(b.check(250 * MS).is_allowed());
}

#[test]
fn weighted_request_waits_for_drain_then_occupies_n_intervals() {
    let q = Quota::per_second(10).unwrap().max_weight(4).unwrap();
    let b = Bucket::leaky_bucket(q);
    assert_eq!(b.capacity(), 4);
    assert!(b.check_n(3, 0).unwrap().is_allowed()); // occupies 300 ms
    let d = b.check_n(1, 100 * MS).unwrap();
    assert_eq!(d.retry_after_nanos_or_zero(), 200 * MS);
    assert!(b.check_n(4, 299 * MS).unwrap().is_denied());
    assert!(b.check_n(4, 300 * MS).unwrap().is_allowed()); // occupies 400 ms
    assert!(b.check(699 * MS).is_denied());
    assert!(b.check(700 * MS).is_allowed());
}

#[test]
fn heavier_than_max_weight_can_never_succeed() {
    let b = Bucket::leaky_bucket(Quota::per_second(10).unwrap()); // max weight 1
    assert_eq!(
        b.check_n(2, 0),
        Err(CapacityExceeded {
            requested: 2,
            capacity: 1
        })
    );
}

#[test]
fn peek_refund_and_idle() {
    let b = Bucket::leaky_bucket(Quota::per_second(10).unwrap().max_weight(3).unwrap());
    assert!(b.is_idle(0));
    assert_eq!(b.snapshot(0).remaining(), 3);
    assert!(b.check_n(2, 0).unwrap().is_allowed());
    let peek = b.check_n(0, 10 * MS).unwrap();
    assert!(peek.is_allowed());
    assert_eq!(peek.snapshot().remaining(), 0);
    assert_eq!(peek.snapshot().reset_after_nanos(), 190 * MS);
    b.refund(1, 10 * MS);
    assert_eq!(b.time_until_ready(1, 10 * MS), Ok(90 * MS));
    b.refund(10, 10 * MS);
    assert!(b.is_idle(10 * MS));
    assert_eq!(b.snapshot(10 * MS).remaining(), 3);
    // refund cannot bank capacity: still strictly paced
    assert!(b.check(10 * MS).is_allowed());
    assert!(b.check(10 * MS).is_denied());
}
