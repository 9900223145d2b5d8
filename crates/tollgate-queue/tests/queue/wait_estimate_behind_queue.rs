//! `Limiter::time_until_ready_after` (the wait a queue quotes a newcomer
//! behind queued permits) against a plain reference model: a credit counter
//! for the token bucket and a busy-until time for the leaky bucket, stepped
//! through the queued requests one by one.

use std::time::Duration;

use proptest::prelude::*;
use tollgate::{Bucket, Limiter, Quota, Timestamp};

fn t(ns: u64) -> Timestamp {
    Timestamp::from_nanos(ns)
}

/// Token bucket as a credit counter of refill time, in units of `1/u` ns
/// (`u` = permits per period, so that `T = period / permits` is a whole
/// number of units: exact, no rounding).
struct Credit {
    full: u64,
    credit: u64,
    at: u64,
    per: u64,
}

impl Credit {
    fn at(&mut self, now: u64) {
        if now > self.at {
            self.credit = (self.credit + (now - self.at)).min(self.full);
            self.at = now;
        }
    }
    fn try_take(&mut self, k: u64, now: u64) -> bool {
        self.at(now);
        if self.credit >= k * self.per {
            self.credit -= k * self.per;
            true
        } else {
            false
        }
    }
    /// Time at which `k` permits are taken, waiting as needed.
    fn take_waiting(&mut self, k: u64, now: u64) -> u64 {
        self.at(now);
        let need = k * self.per;
        let t = if self.credit >= need {
            now
        } else {
            now + (need - self.credit)
        };
        self.at(t);
        self.credit -= need;
        t
    }
}

/// Leaky bucket: busy until the previous work has drained.
struct Busy {
    until: u64,
    per: u64,
}

impl Busy {
    fn try_take(&mut self, k: u64, now: u64) -> bool {
        if now >= self.until {
            self.until = now + k * self.per;
            true
        } else {
            false
        }
    }
    fn take_waiting(&mut self, k: u64, now: u64) -> u64 {
        let t = now.max(self.until);
        self.until = t + k * self.per;
        t
    }
}

fn history() -> impl Strategy<Value = Vec<(u64, u32)>> {
    prop::collection::vec((0u64..3_000, 1u32..=6), 0..20)
}

proptest! {
    #[test]
    fn token_bucket_estimate_matches_the_credit_model(
        permits in 1u32..=6, burst in 1u32..=6, hist in history(),
        queued in prop::collection::vec(1u32..=6, 0..8), n in 1u32..=6,
    ) {
        // permits per 10 µs: T = 10_000 / permits ns, exactly (3 and 6 per
        // 10 µs are fractions of a nanosecond; the bucket keeps them exact)
        let quota = Quota::new(permits, Duration::from_nanos(10_000)).unwrap().with_burst(burst).unwrap();
        prop_assert!(quota.is_exact());
        // the model counts in units of 1/permits ns: T = 10_000 units
        let u = u64::from(permits);
        let per = 10_000;
        let bucket = Bucket::token_bucket(quota);
        let mut model = Credit { full: u64::from(burst) * per, credit: u64::from(burst) * per, at: 0, per };
        let mut now = 1_000_000;
        model.at = now * u;
        for (dt, k) in hist {
            now += dt;
            let k = k.min(burst);
            prop_assert_eq!(bucket.check_n(k, t(now)).is_ok(), model.try_take(u64::from(k), now * u));
        }
        let queued: Vec<u32> = queued.into_iter().map(|k| k.min(burst)).collect();
        let n = n.min(burst);
        let ahead: u64 = queued.iter().map(|&k| u64::from(k)).sum();
        let estimate = bucket.time_until_ready_after(&(), ahead, n, t(now)).unwrap();
        let mut at = now * u;
        for k in queued {
            at = model.take_waiting(u64::from(k), at);
        }
        let granted = model.take_waiting(u64::from(n), at);
        // the first whole nanosecond at which the last permit is granted
        prop_assert_eq!(estimate, Duration::from_nanos((granted - now * u).div_ceil(u)));
    }

    #[test]
    fn leaky_bucket_estimate_matches_the_busy_model(
        burst in 1u32..=6, hist in history(),
        queued in prop::collection::vec(1u32..=6, 0..8), n in 1u32..=6,
    ) {
        // a leaky bucket's largest request is the quota's burst (was a
        // separate max weight before API 13)
        let quota = Quota::new(1, Duration::from_nanos(1_000)).unwrap().with_burst(burst).unwrap();
        let bucket = Bucket::leaky_bucket(quota);
        prop_assert_eq!(bucket.capacity(&()), burst);
        let mut model = Busy { until: 0, per: quota.interval_nanos() };
        let mut now = 1_000_000;
        for (dt, k) in hist {
            now += dt;
            let k = k.min(burst);
            prop_assert_eq!(bucket.check_n(k, t(now)).is_ok(), model.try_take(u64::from(k), now));
        }
        let queued: Vec<u32> = queued.into_iter().map(|k| k.min(burst)).collect();
        let n = n.min(burst);
        let ahead: u64 = queued.iter().map(|&k| u64::from(k)).sum();
        let estimate = bucket.time_until_ready_after(&(), ahead, n, t(now)).unwrap();
        let mut at = now;
        for k in queued {
            at = model.take_waiting(u64::from(k), at);
        }
        let granted = model.take_waiting(u64::from(n), at);
        prop_assert_eq!(estimate, Duration::from_nanos(granted - now));
    }
}

#[test]
fn requests_above_capacity_have_no_estimate() {
    let bucket = Bucket::token_bucket(Quota::per_second(10).unwrap().with_burst(3).unwrap());
    assert_eq!(bucket.time_until_ready_after(&(), 0, 4, t(0)), None);
    assert_eq!(
        bucket.time_until_ready_after(&(), 0, 3, t(0)),
        Some(Duration::ZERO)
    );
    // Behind 3 queued permits on a full bucket: one interval.
    assert_eq!(
        bucket.time_until_ready_after(&(), 3, 1, t(0)),
        Some(Duration::from_nanos(100_000_000))
    );
}

/// A leaky bucket's capacity is its burst, default = permits (API 13; it
/// was a max weight defaulting to 1): a default `per_second(10)` bucket
/// quotes requests of up to 10 and refuses to quote 11.
#[test]
fn default_leaky_bucket_quotes_requests_up_to_its_permits() {
    let bucket = Bucket::leaky_bucket(Quota::per_second(10).unwrap()); // T = 100 ms
    assert_eq!(bucket.time_until_ready_after(&(), 0, 11, t(0)), None);
    assert_eq!(
        bucket.time_until_ready_after(&(), 0, 10, t(0)),
        Some(Duration::ZERO)
    );
    // behind 2 queued single permits: each occupies one interval
    assert_eq!(
        bucket.time_until_ready_after(&(), 2, 10, t(0)),
        Some(Duration::from_millis(200))
    );
    // a 10-permit request occupies 10 intervals before the next starts
    assert!(bucket.check_n(10, t(0)).is_ok());
    assert_eq!(
        bucket.time_until_ready_after(&(), 0, 1, t(0)),
        Some(Duration::from_secs(1))
    );
}
