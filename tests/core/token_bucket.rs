//! Token bucket behaviour pinned with a ManualClock (the `gcra` module docs).

use std::time::Duration;

use tollgate::{
    Algorithm, Bucket, Clock, ConfigError, Gcra, GcraState, ManualClock, Quota, RateLimiter,
    Timestamp, valid,
};

const MS: u64 = 1_000_000;

fn t(ns: u64) -> Timestamp {
    Timestamp::from_nanos(ns)
}

fn quota(per_sec: u32, burst: u32) -> Quota {
    Quota::per_second(per_sec)
        .unwrap()
        .with_burst(burst)
        .unwrap()
}

#[test]
fn state_is_eight_bytes() {
    assert_eq!(core::mem::size_of::<GcraState>(), 8);
}

#[test]
fn fresh_bucket_admits_exactly_burst_at_once_then_rate() {
    let b = Bucket::token_bucket(quota(10, 4)); // T = 100 ms
    let now = 5 * MS;
    let admitted = (0..100).filter(|_| b.check(t(now)).is_ok()).count();
    assert_eq!(admitted, 4);
    // then exactly 10 per second: one per 100 ms
    let mut per_ms = Vec::new();
    for ms in 1..=1000u64 {
        if b.check(t(now + ms * MS)).is_ok() {
            per_ms.push(ms);
        }
    }
    assert_eq!(per_ms, (1..=10).map(|i| i * 100).collect::<Vec<_>>());
}

#[test]
fn retry_after_is_exact_to_the_nanosecond() {
    // T = 333_333_333⅓ ns, kept exact: the wait is reported in whole
    // nanoseconds rounded up
    let b = Bucket::token_bucket(quota(3, 1));
    assert!(b.check(t(1_000)).is_ok());
    let d = b.check(t(1_000 + 7)).unwrap_err();
    assert_eq!(d.retry_after_nanos(), 333_333_334 - 7);
    assert_eq!(d.retry_after(), Duration::from_nanos(333_333_334 - 7));
    // one nanosecond before is refused, at the instant is admitted
    assert!(b.check(t(1_000 + 333_333_333)).is_err());
    assert!(b.check(t(1_000 + 333_333_334)).is_ok());
    // a burst of 1 cannot bank the ⅔ ns it was admitted late: the next
    // permit is a whole T after that admission, ⌈T⌉ from now
    let d = b.check(t(1_000 + 333_333_334)).unwrap_err();
    assert_eq!(d.retry_after_nanos(), 333_333_334);

    // drained at once, a burst of 3 gets its permits back at ⌈T⌉, ⌈2T⌉ and
    // exactly 3T = 1 s (with T rounded up: 333_333_334, 666_666_668 and
    // 1_000_000_002), each refused a nanosecond before
    let b = Bucket::token_bucket(quota(3, 3));
    assert!(b.check_n(3, t(1_000)).is_ok());
    for (k, at) in [(1, 333_333_334), (2, 666_666_667), (3, 1_000_000_000)] {
        assert_eq!(
            b.time_until_ready(k, t(1_000)),
            Ok(Duration::from_nanos(at))
        );
        let before = b.check_n(k, t(1_000 + at - 1)).unwrap_err();
        assert_eq!(before.retry_after(), Duration::from_nanos(1), "{k} permits");
        assert_eq!(b.snapshot(t(1_000 + at)).remaining(), k);
    }
    assert!(b.check_n(3, t(1_001_000_000)).is_ok());
}

#[test]
fn retry_after_for_n_permits() {
    let b = Bucket::token_bucket(quota(10, 5));
    assert!(b.check_n(5, t(0)).is_ok());
    let d = b.check_n(3, t(0)).unwrap_err();
    assert_eq!(d.retry_after(), Duration::from_millis(300));
    assert_eq!(
        b.time_until_ready(3, t(0)),
        Ok(Duration::from_nanos(300 * MS))
    );
    assert_eq!(b.time_until_ready(3, t(300 * MS)), Ok(Duration::ZERO));
    assert!(b.check_n(3, t(300 * MS - 1)).is_err());
    assert!(b.check_n(3, t(300 * MS)).is_ok());
}

#[test]
fn n_above_burst_can_never_succeed() {
    let b = Bucket::token_bucket(quota(10, 5));
    let never = b.check_n(6, t(0)).unwrap_err();
    assert!(never.is_never());
    assert_eq!((never.requested(), never.limit()), (6, 5));
    assert_eq!(b.time_until_ready(6, t(0)).unwrap_err().requested(), 6);
    assert!(b.time_until_ready(6, t(0)).unwrap_err().is_never());
    assert!(b.check_n(u32::MAX, Timestamp::MAX).unwrap_err().is_never());
    // and it took nothing
    assert_eq!(b.snapshot(t(0)).remaining(), 5);
}

#[test]
fn n_zero_is_a_peek_that_changes_nothing() {
    let b = Bucket::token_bucket(quota(10, 5));
    assert!(b.check_n(2, t(0)).is_ok());
    let tat = b.state().tat(b.algorithm());
    assert!(b.check_n(0, t(50 * MS)).is_ok());
    let peek = b.snapshot(t(50 * MS));
    assert_eq!(peek.remaining(), 3);
    assert_eq!(peek.reset_after_nanos(), 150 * MS);
    assert_eq!(b.state().tat(b.algorithm()), tat);
}

#[test]
fn refund_never_lifts_capacity_above_burst() {
    let b = Bucket::token_bucket(quota(10, 3));
    assert!(b.check_n(2, t(0)).is_ok());
    assert_eq!(b.snapshot(t(0)).remaining(), 1);
    b.refund(1, t(0));
    assert_eq!(b.snapshot(t(0)).remaining(), 2);
    b.refund(100, t(0));
    assert_eq!(b.snapshot(t(0)).remaining(), 3);
    // a full bucket still admits exactly the burst, not more
    let admitted = (0..10).filter(|_| b.check(t(0)).is_ok()).count();
    assert_eq!(admitted, 3);
    b.refund(u32::MAX, Timestamp::MAX);
    assert!(b.is_idle(Timestamp::MAX));
}

#[test]
fn idle_bucket_refills_to_burst_and_no_further() {
    let b = Bucket::token_bucket(quota(10, 4));
    for _ in 0..4 {
        assert!(b.check(t(0)).is_ok());
    }
    assert!(!b.is_idle(t(0)));
    assert_eq!(b.snapshot(t(200 * MS)).remaining(), 2);
    assert!(!b.is_idle(t(399 * MS)));
    assert!(b.is_idle(t(400 * MS)));
    // an hour of idleness still gives only the burst
    let later = t(3_600_000 * MS);
    assert_eq!(b.snapshot(later).remaining(), 4);
    let admitted = (0..100).filter(|_| b.check(later).is_ok()).count();
    assert_eq!(admitted, 4);
}

#[test]
fn snapshot_reports_remaining_and_reset_after() {
    let b = Bucket::token_bucket(quota(10, 4));
    assert!(b.check(t(0)).is_ok());
    let s = b.snapshot(t(0));
    assert_eq!((s.limit(), s.remaining()), (4, 3));
    assert_eq!(s.reset_after(), Duration::from_millis(100));
    assert!(b.check_n(3, t(0)).is_ok());
    let s = b.snapshot(t(0));
    assert_eq!((s.remaining(), s.reset_after_nanos()), (0, 400 * MS));
    assert_eq!(b.snapshot(t(250 * MS)).remaining(), 2);
}

#[test]
fn rate_limiter_reads_its_clock() {
    let clock = ManualClock::new();
    let rl = RateLimiter::token_bucket(quota(2, 1), &clock).unwrap();
    assert!(rl.try_acquire().is_ok());
    assert_eq!(
        rl.try_acquire().unwrap_err().retry_after(),
        Duration::from_millis(500)
    );
    assert_eq!(rl.time_until_ready(1), Ok(Duration::from_millis(500)));
    clock.advance(Duration::from_millis(500));
    assert!(rl.try_acquire_n(1).is_ok());
    rl.refund(1);
    assert_eq!(rl.snapshot().remaining(), 1);
}

#[test]
fn quota_finer_than_the_clock_is_a_construction_error() {
    // 1 ms ticks
    let tick_clock = ManualClock::with_resolution(Timestamp::ZERO, Duration::from_millis(1));
    assert_eq!(tick_clock.resolution(), Duration::from_nanos(1_000_000));
    let err = RateLimiter::token_bucket(Quota::per_second(2000).unwrap(), &tick_clock).unwrap_err();
    assert_eq!(
        err,
        ConfigError::ClockTooCoarse {
            step: Duration::from_nanos(500_000),
            resolution: Duration::from_nanos(1_000_000)
        }
    );
    assert!(RateLimiter::token_bucket(Quota::per_second(1000).unwrap(), &tick_clock).is_ok());
}

#[test]
fn algorithm_and_state_apart() {
    // one algorithm value, many 8-byte states
    let gcra = Gcra::token_bucket(quota(1, 1));
    let states: Vec<GcraState> = (0..3).map(|_| gcra.new_state()).collect();
    for s in &states {
        assert!(gcra.check_n(s, 1, t(0)).is_ok());
        assert!(gcra.check_n(s, 1, t(0)).is_err());
    }
    assert_eq!(gcra.capacity(), 1);
    assert_eq!(gcra.tolerance(), Duration::ZERO);
}

#[test]
fn static_bucket_in_const_context() {
    const Q: Quota = valid!(Quota::per_minute(60));
    static B: Bucket<Gcra> = Bucket::token_bucket(Q);
    assert!(B.check(Timestamp::ZERO).is_ok());
}

#[test]
fn extreme_instants_never_panic() {
    let b = Bucket::token_bucket(quota(10, 10));
    for now in [0, 1, u64::MAX / 2, u64::MAX - 1, u64::MAX].map(t) {
        let _ = b.check(now);
        let _ = b.check_n(10, now);
        b.refund(3, now);
        let _ = b.snapshot(now).remaining();
        let _ = b.time_until_ready(10, now);
    }
    let century = Quota::new(1, Duration::from_secs(100 * 365 * 86_400)).unwrap();
    let b = Bucket::token_bucket(century);
    let late = t(u64::MAX - 4_000_000_000_000_000_000); // a century still fits after it
    assert!(b.check(late).is_ok());
    assert!(b.check(late).is_err());
    // at the very end of time the TAT saturates: decisions, never a panic or wrap
    let _ = b.check(Timestamp::MAX);
    let _ = b.check(Timestamp::MAX);
}

/// One `RateLimiter` front for a keyed table too: each key has its own
/// bucket, the key calls read the bundled clock, and a clock too coarse
/// for the table's default quota is refused as it is for a direct bucket.
#[cfg(feature = "std")]
#[test]
fn a_rate_limiter_over_a_table_limits_each_key_and_checks_its_clock() {
    use std::sync::Arc;
    use tollgate::keyed::ShardedKeyedTable;
    use tollgate::{ConfigError, Gcra, KeyedTable, ManualClock, Quota, RateLimiter};

    let clock = Arc::new(ManualClock::new());
    let limiter = RateLimiter::keyed(Quota::per_second(2).unwrap(), Arc::clone(&clock)).unwrap();
    assert!(limiter.try_acquire_key(&"a").is_ok());
    assert!(limiter.try_acquire_key(&"a").is_ok());
    let refused = limiter.try_acquire_key(&"a").unwrap_err();
    assert_eq!(refused.retry_after(), Duration::from_millis(500));
    assert_eq!(
        limiter.time_until_key_ready(&"a", 1).unwrap(),
        Duration::from_millis(500)
    );
    // another key has its own bucket
    assert!(limiter.try_acquire_key_n(&"b", 2).is_ok());
    assert_eq!(limiter.snapshot_key(&"b").remaining(), 0);
    limiter.refund_key(&"b", 1);
    assert_eq!(limiter.snapshot_key(&"b").remaining(), 1);
    clock.advance(Duration::from_millis(500));
    assert!(limiter.try_acquire_key(&"a").is_ok());
    assert_eq!(limiter.limiter().len(), 2);

    // a 1 ms step cannot be enforced by a 2 ms clock
    #[derive(Debug)]
    struct Coarse;
    impl tollgate::Clock for Coarse {
        fn now(&self) -> tollgate::Timestamp {
            tollgate::Timestamp::ZERO
        }
        fn resolution(&self) -> Duration {
            Duration::from_millis(2)
        }
    }
    let table = ShardedKeyedTable::<u64, Gcra>::builder(Gcra::token_bucket(
        Quota::per_second(1000).unwrap(),
    ))
    .build()
    .unwrap();
    let err = RateLimiter::from_limiter(table, Coarse).unwrap_err();
    assert!(matches!(err, ConfigError::ClockTooCoarse { .. }), "{err:?}");
}
