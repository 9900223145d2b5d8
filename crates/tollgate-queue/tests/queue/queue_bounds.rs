//! Queue bounds: queue_limit counted in permits, max_wait refused at once,
//! per-call deadlines, requests that can never succeed.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tollgate::queue::{Queue, WaitError};
use tollgate::{Bucket, ConcurrencyLimiter, Gcra, Quota};

use support::{concurrency, poll_once, until};

/// A concurrency limiter to queue on: the queue keeps its permit (which
/// borrows the limiter), so it is queued as a `&'static`.
fn leaked_concurrency(limit: u32) -> &'static ConcurrencyLimiter {
    Box::leak(Box::new(concurrency(limit)))
}

fn bucket(per_second: u32, burst: u32) -> Bucket<Gcra> {
    Bucket::token_bucket(
        Quota::per_second(per_second)
            .unwrap()
            .with_burst(burst)
            .unwrap(),
    )
}

#[tokio::test(start_paused = true)]
async fn queue_limit_counts_permits_and_a_refusal_says_when_there_is_room() {
    // 10/s burst 5; at most 4 permits waiting.
    let queue = Arc::new(Queue::builder(bucket(10, 5)).queue_limit(4).build());
    let start = Instant::now();
    queue.acquire(&(), 5).await.unwrap().forget(); // empty at t = 0
    let q = queue.clone();
    let a = tokio::spawn(async move { q.acquire(&(), 3).await.map(|p| p.forget()) });
    let q = queue.clone();
    until(move || q.stats().queued_permits == 3).await;
    // 3 + 2 > 4: refused at once. The 3-permit waiter is granted at 300 ms
    // (lead 500 ms, needs ≤ 200 ms), then 2 permits fit.
    let refused = queue.acquire(&(), 2).await.unwrap_err();
    assert_eq!(
        refused,
        WaitError::QueueFull {
            retry_after: Some(Duration::from_millis(300))
        }
    );
    assert_eq!(start.elapsed(), Duration::ZERO);
    // 3 + 1 ≤ 4: queued.
    let q = queue.clone();
    let c = tokio::spawn(async move {
        q.acquire(&(), 1).await.unwrap().forget();
        Instant::now()
    });
    let q = queue.clone();
    until(move || q.stats().queued_permits == 4).await;
    let stats = queue.stats();
    assert_eq!((stats.queued_requests, stats.queued_permits), (2, 4));
    // Retrying after retry_after: now it fits.
    tokio::time::sleep(refused.retry_after().unwrap()).await;
    let b = queue.acquire(&(), 2).await;
    assert!(b.is_ok());
    assert_eq!(start.elapsed(), Duration::from_millis(600));
    a.await.unwrap().unwrap();
    assert_eq!(c.await.unwrap() - start, Duration::from_millis(400));
}

#[tokio::test(start_paused = true)]
async fn a_request_whose_wait_would_exceed_max_wait_is_refused_at_once() {
    // 10/s burst 1; waits of up to 200 ms are accepted.
    let queue = Arc::new(
        Queue::builder(bucket(10, 1))
            .max_wait(Duration::from_millis(200))
            .build(),
    );
    let start = Instant::now();
    queue.acquire(&(), 1).await.unwrap().forget();
    let mut waiting = Vec::new();
    for _ in 0..2 {
        let q = queue.clone();
        let before = queue.stats().queued_requests;
        waiting.push(tokio::spawn(async move {
            q.acquire(&(), 1).await.unwrap().forget();
            Instant::now() - start
        }));
        let q = queue.clone();
        until(move || q.stats().queued_requests == before + 1).await;
    }
    // Two waiters ahead: this one would wait 300 ms.
    let err = queue.acquire(&(), 1).await.unwrap_err();
    assert_eq!(
        err,
        WaitError::MaxWaitExceeded {
            estimated_wait: Some(Duration::from_millis(300)),
            max_wait: Duration::from_millis(200),
        }
    );
    assert_eq!(start.elapsed(), Duration::ZERO);
    // The one at exactly max_wait (200 ms) was accepted and is on time.
    let mut times = Vec::new();
    for w in waiting {
        times.push(w.await.unwrap());
    }
    assert_eq!(
        times,
        [Duration::from_millis(100), Duration::from_millis(200)]
    );
    assert_eq!(queue.stats().refused_requests, 1);
}

#[tokio::test(start_paused = true)]
async fn a_deadline_before_the_estimated_wait_is_refused_at_once() {
    let queue = Queue::new(bucket(10, 1));
    let start = Instant::now();
    queue.acquire(&(), 1).await.unwrap().forget();
    let err = queue
        .acquire_until(&(), 1, start + Duration::from_millis(99))
        .await
        .unwrap_err();
    assert_eq!(err, WaitError::DeadlineExceeded);
    assert_eq!(start.elapsed(), Duration::ZERO);
    // A deadline at the estimate is met exactly.
    let ok = queue
        .acquire_until(&(), 1, start + Duration::from_millis(100))
        .await;
    assert!(ok.is_ok());
    assert_eq!(start.elapsed(), Duration::from_millis(100));
}

#[tokio::test(start_paused = true)]
async fn a_deadline_that_passes_while_waiting_refuses_the_waiter_then() {
    // A limiter that cannot predict its waits: the deadline acts as a
    // timeout.
    let queue = Queue::new(leaked_concurrency(1));
    let start = Instant::now();
    let held = queue.acquire(&(), 1).await.unwrap();
    let err = queue
        .acquire_until(&(), 1, start + Duration::from_millis(250))
        .await
        .unwrap_err();
    assert_eq!(err, WaitError::DeadlineExceeded);
    assert_eq!(start.elapsed(), Duration::from_millis(250));
    assert_eq!(queue.stats().queued_requests, 0);
    assert_eq!(queue.stats().time_in_queue, Duration::from_millis(250));
    drop(held);
    assert_eq!(queue.limiter().in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn max_wait_caps_a_wait_the_limiter_cannot_predict() {
    let queue = Queue::builder(leaked_concurrency(2))
        .max_wait(Duration::from_millis(40))
        .build();
    let start = Instant::now();
    let _held = queue.acquire(&(), 2).await.unwrap();
    let mut fut = queue.acquire(&(), 1);
    assert!(poll_once(&mut fut).await.is_pending());
    let err = fut.await.unwrap_err();
    assert_eq!(
        err,
        WaitError::MaxWaitExceeded {
            estimated_wait: None,
            max_wait: Duration::from_millis(40)
        }
    );
    assert_eq!(start.elapsed(), Duration::from_millis(40));
}

#[tokio::test(start_paused = true)]
async fn more_permits_than_the_capacity_are_refused_at_once_never_queued() {
    let queue = Queue::new(bucket(10, 3));
    queue.acquire(&(), 3).await.unwrap().forget();
    let start = Instant::now();
    // a request for 4 permits that can never succeed: the limit is 3
    let never_4_of_3 = |e: WaitError| match e {
        WaitError::CapacityExceeded(r) => {
            assert!(r.is_never(), "{r:?}");
            assert_eq!((r.requested(), r.limit()), (4, 3), "{r:?}");
        }
        e => panic!("expected CapacityExceeded, got {e:?}"),
    };
    never_4_of_3(queue.acquire(&(), 4).await.unwrap_err());
    never_4_of_3(queue.try_acquire(&(), 4).unwrap_err());
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(queue.stats().queued_requests, 0);
    // 0 permits: granted at once, takes nothing.
    assert_eq!(queue.acquire(&(), 0).await.unwrap().permits(), 0);
}

#[tokio::test(start_paused = true)]
async fn try_acquire_never_waits_and_never_overtakes_a_waiter() {
    let queue = Arc::new(Queue::new(bucket(10, 2)));
    let start = Instant::now();
    assert!(queue.try_acquire(&(), 2).is_ok());
    assert_eq!(
        queue.try_acquire(&(), 1).unwrap_err(),
        WaitError::WouldWait {
            retry_after: Some(Duration::from_millis(100))
        }
    );
    let q = queue.clone();
    let waiter = tokio::spawn(async move { q.acquire(&(), 2).await.map(|p| p.forget()) });
    let q = queue.clone();
    until(move || q.stats().queued_requests == 1).await;
    // At 100 ms one permit is back, but the 2-permit waiter is first in
    // line: try_acquire(1) refuses, with the wait behind the waiter.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        queue.try_acquire(&(), 1).unwrap_err(),
        WaitError::WouldWait {
            retry_after: Some(Duration::from_millis(200))
        }
    );
    waiter.await.unwrap().unwrap();
    assert_eq!(start.elapsed(), Duration::from_millis(200));
}
