//! `WithStats` counts exactly the permits its limiter admitted, refused and
//! had refunded, and reports the available permits, also under threads.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use tollgate::{Bucket, FixedWindow, Limiter, Quota, SlidingWindow, Timestamp, WithStats};

fn t(ns: u64) -> Timestamp {
    Timestamp::from_nanos(ns)
}

proptest! {
    /// The counters equal the sums of the decisions the caller saw.
    #[test]
    fn counters_match_the_decisions(
        steps in prop::collection::vec((0u64..50, 0u32..8, 0u32..3), 1..80),
    ) {
        let limiter = WithStats::new(Bucket::token_bucket(
            Quota::new(3, Duration::from_nanos(60)).and_then(|q| q.with_burst(5)).unwrap(),
        ));
        let (mut admitted, mut refused, mut refunded) = (0u64, 0u64, 0u64);
        let mut now = 0;
        for (dt, n, give_back) in steps {
            now += dt;
            let now = t(now);
            match limiter.try_acquire_n(&(), n, now) {
                Ok(_) => admitted += n as u64,
                Err(_) => refused += n as u64,
            }
            limiter.refund(&(), give_back, now);
            refunded += give_back as u64;
            let stats = limiter.statistics(&(), now);
            prop_assert_eq!((stats.admitted, stats.refused, stats.refunded), (admitted, refused, refunded));
            prop_assert_eq!(stats.available, limiter.inner().snapshot(now).remaining());
        }
        let taken = limiter.take();
        prop_assert_eq!(taken.admitted, admitted);
        prop_assert_eq!(limiter.statistics(&(), t(now)).admitted, 0);
    }
}

#[test]
fn counts_are_exact_under_threads() {
    let limiter = WithStats::new(Bucket::new(
        SlidingWindow::<4>::new(1_000, Duration::from_nanos(4_000)).unwrap(),
    ));
    let seen_admitted = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (limiter, seen) = (&limiter, &seen_admitted);
            s.spawn(move || {
                for i in 0..1_000u64 {
                    if limiter
                        .try_acquire(&(), Timestamp::from_nanos((i + t) % 4_000))
                        .is_ok()
                    {
                        seen.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let stats = limiter.statistics(&(), t(3_999));
    assert_eq!(stats.admitted, seen_admitted.load(Ordering::Relaxed));
    assert_eq!(stats.admitted, 1_000);
    assert_eq!(stats.admitted + stats.refused, 4_000);
    assert_eq!(stats.available, 0);
}

#[test]
fn peeks_count_nothing() {
    let limiter = WithStats::new(Bucket::new(
        FixedWindow::new(1, Duration::from_nanos(8)).unwrap(),
    ));
    assert!(limiter.try_acquire_n(&(), 0, t(0)).is_ok());
    assert_eq!(limiter.statistics(&(), t(0)).admitted, 0);
    assert_eq!(limiter.statistics(&(), t(0)).available, 1);
}
