//! A queue in front of a fixed or sliding window says when to retry, as
//! .NET does since its RetryAfter fix for window limiters: a full queue, a
//! wait beyond `max_wait` and a `try_acquire` that would wait all carry the
//! time until the request could go (never `None`).

use core::time::Duration;
use std::sync::Arc;

use tollgate::queue::{Queue, WaitError};
use tollgate::{Bucket, Clock, FixedWindow, SlidingWindow, TokioClock};

/// Advances tokio's paused time to the start of the next window of length
/// `len`: windows start at multiples of their length on the queue's clock,
/// which counts from the process origin (not from the test's start).
async fn to_a_window_start(len: Duration) {
    let len = len.as_nanos() as u64;
    let into = TokioClock::new().now().as_nanos() % len;
    if into != 0 {
        tokio::time::advance(Duration::from_nanos(len - into)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_fixed_window_queue_reports_retry_after() {
    // 2 per 20 s, both used at t = 0; one permit may wait
    let window = Bucket::new(FixedWindow::new(2, Duration::from_secs(20)).unwrap());
    let queue = Arc::new(Queue::builder(window).queue_limit(1).build());
    to_a_window_start(Duration::from_secs(20)).await;
    queue.acquire(&(), 2).await.unwrap().forget();
    // a request that must wait is told when: the next window, 20 s away
    let e = queue.try_acquire(&(), 1).unwrap_err();
    assert_eq!(e.retry_after(), Some(Duration::from_secs(20)));
    // one waiter fills the queue
    let q = Arc::clone(&queue);
    let waiter = tokio::spawn(async move { q.acquire(&(), 1).await.map(|p| p.forget()) });
    tokio::task::yield_now().await;
    // a second is refused for a full queue, told when the queue has room
    // (when the first waiter goes, at 20 s)
    match queue.acquire(&(), 1).await {
        Err(WaitError::QueueFull { retry_after }) => {
            assert_eq!(retry_after, Some(Duration::from_secs(20)));
        }
        other => panic!("expected QueueFull, got {other:?}"),
    }
    waiter.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_wait_beyond_max_wait_is_refused_with_the_estimate() {
    let window = Bucket::new(FixedWindow::new(2, Duration::from_secs(20)).unwrap());
    let queue = Queue::builder(window)
        .max_wait(Duration::from_secs(10))
        .build();
    to_a_window_start(Duration::from_secs(20)).await;
    queue.acquire(&(), 2).await.unwrap().forget();
    match queue.acquire(&(), 1).await {
        Err(WaitError::MaxWaitExceeded {
            estimated_wait,
            max_wait,
        }) => {
            assert_eq!(estimated_wait, Some(Duration::from_secs(20)));
            assert_eq!(max_wait, Duration::from_secs(10));
        }
        other => panic!("expected MaxWaitExceeded, got {other:?}"),
    };
}

#[tokio::test(start_paused = true)]
async fn a_sliding_window_queue_reports_when_segments_expire() {
    // 4 per second in 4 segments of 250 ms
    let window = Bucket::new(SlidingWindow::<4>::new(4, Duration::from_secs(1)).unwrap());
    let queue = Queue::builder(window)
        .max_wait(Duration::from_millis(100))
        .build();
    to_a_window_start(Duration::from_secs(1)).await;
    queue.acquire(&(), 3).await.unwrap().forget();
    tokio::time::advance(Duration::from_millis(600)).await;
    queue.acquire(&(), 1).await.unwrap().forget();
    // 3 permits (segment 0) leave at 1 s: 400 ms from now
    let e = queue.try_acquire(&(), 2).unwrap_err();
    assert_eq!(e.retry_after(), Some(Duration::from_millis(400)));
    match queue.acquire(&(), 2).await {
        Err(WaitError::MaxWaitExceeded { estimated_wait, .. }) => {
            assert_eq!(estimated_wait, Some(Duration::from_millis(400)));
        }
        other => panic!("expected MaxWaitExceeded, got {other:?}"),
    };
}
