//! close() refuses every waiter and every later call.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tollgate::queue::{Queue, WaitError};
use tollgate::{Bucket, Quota};

use support::until;

#[tokio::test(start_paused = true)]
async fn close_refuses_every_waiter_and_every_later_call() {
    let bucket = Bucket::token_bucket(Quota::per_second(10).unwrap().with_burst(1).unwrap());
    let queue = Arc::new(Queue::new(bucket));
    let start = Instant::now();
    queue.acquire(&(), 1).await.unwrap().forget();
    let mut waiters = Vec::new();
    for i in 0..5u64 {
        let q = queue.clone();
        waiters.push(tokio::spawn(async move {
            q.acquire(&(), 1).await.map(|p| p.forget())
        }));
        let q = queue.clone();
        until(move || q.stats().queued_requests == i + 1).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    queue.close();
    assert!(queue.is_closed());
    for w in waiters {
        assert_eq!(w.await.unwrap(), Err(WaitError::Closed));
    }
    // Refused at 50 ms, before any of them was due.
    assert_eq!(start.elapsed(), Duration::from_millis(50));
    tokio::time::sleep(Duration::from_secs(1)).await; // capacity is back...
    assert_eq!(queue.acquire(&(), 1).await.unwrap_err(), WaitError::Closed);
    assert_eq!(queue.try_acquire(&(), 1).unwrap_err(), WaitError::Closed);
    let stats = queue.stats();
    assert_eq!(stats.queued_requests, 0);
    assert_eq!(stats.refused_requests, 7);
    assert_eq!(stats.admitted_requests, 1);
    assert_eq!(stats.wakeups, 5);
    assert_eq!(stats.time_in_queue, Duration::from_millis(250));
    assert_eq!(WaitError::Closed.to_string(), "rate-limit queue closed");
}

#[tokio::test(start_paused = true)]
async fn clones_are_handles_to_the_same_queue() {
    let bucket = Bucket::token_bucket(Quota::per_second(10).unwrap().with_burst(1).unwrap());
    let queue = Queue::new(bucket);
    let handle = queue.clone();
    queue.acquire(&(), 1).await.unwrap().forget();
    let waiter = tokio::spawn(async move { handle.acquire(&(), 1).await.map(|p| p.forget()) });
    let q = queue.clone();
    until(move || q.stats().queued_requests == 1).await;
    queue.close();
    assert_eq!(waiter.await.unwrap(), Err(WaitError::Closed));
}
