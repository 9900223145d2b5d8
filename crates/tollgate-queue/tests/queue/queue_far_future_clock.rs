//! A queue whose clock has run (or been advanced) for a very long time
//! still waits exactly and never spins: deadlines are computed from now,
//! not capped at a date after the clock's origin.

use core::time::Duration;

use tokio::time::Instant;
use tollgate::queue::Queue;
use tollgate::{Bucket, Quota, Timestamp, TokioClock};

#[tokio::test(start_paused = true)]
async fn a_clock_advanced_by_2_pow_32_seconds_still_waits_exactly() {
    let clock = TokioClock::new();
    let bucket = Bucket::token_bucket(Quota::per_second(5).unwrap().with_burst(1).unwrap());
    let queue = Queue::builder(bucket).clock(clock).build();
    tokio::time::advance(Duration::from_secs(1 << 32)).await;
    assert!(tollgate::Clock::now(&clock) >= Timestamp::from_secs(1 << 32));
    queue.acquire(&(), 1).await.unwrap().forget();
    let start = Instant::now();
    queue.acquire(&(), 1).await.unwrap().forget();
    assert_eq!(start.elapsed(), Duration::from_millis(200));
    // the queue's timer woke once per admission, not in a loop
    assert!(queue.stats().wakeups <= 2, "{:?}", queue.stats());
}

#[tokio::test(start_paused = true)]
async fn a_deadline_beyond_any_instant_means_never() {
    let clock = TokioClock::new();
    let far = clock.instant_at(Timestamp::MAX);
    let in_30_years = Instant::now() + Duration::from_secs(86_400 * 365 * 30);
    assert_eq!(far, in_30_years);
    tokio::time::advance(Duration::from_secs(1 << 32)).await;
    // still 30 years from the (new) now, never in the past
    assert!(clock.instant_at(Timestamp::MAX) > Instant::now());
    let soon = tollgate::Clock::now(&clock) + Duration::from_millis(5);
    assert_eq!(
        clock.instant_at(soon),
        Instant::now() + Duration::from_millis(5)
    );
}
