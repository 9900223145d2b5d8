//! Cancellation safety: a dropped acquire future leaves the queue as if it
//! had never queued, and a forgotten one does not wedge it.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tollgate::queue::Queue;
use tollgate::{Bucket, Clock, Gcra, Quota};

use support::{poll_once, until};

fn bucket() -> Bucket<Gcra> {
    // 10/s, burst 1: one permit every 100 ms.
    Bucket::token_bucket(Quota::per_second(10).unwrap().with_burst(1).unwrap())
}

/// Spawns a waiter and returns its handle once it is queued; the task
/// returns the instant it was granted.
async fn queued_waiter(queue: &Arc<Queue<Bucket<Gcra>>>) -> tokio::task::JoinHandle<Instant> {
    let before = queue.stats().queued_requests;
    let q = queue.clone();
    let handle = tokio::spawn(async move {
        q.acquire(&(), 1).await.unwrap().forget();
        Instant::now()
    });
    let q = queue.clone();
    until(move || q.stats().queued_requests == before + 1).await;
    handle
}

#[tokio::test(start_paused = true)]
async fn dropping_a_waiting_future_serves_the_next_as_if_it_had_never_queued() {
    let queue = Arc::new(Queue::new(bucket()));
    let start = Instant::now();
    queue.acquire(&(), 1).await.unwrap().forget(); // empty at t = 0
    // The first waiter gives up after 50 ms (a timeout around acquire).
    let q = queue.clone();
    let quitter = tokio::spawn(async move {
        tokio::time::timeout(Duration::from_millis(50), q.acquire(&(), 1))
            .await
            .is_err()
    });
    let q = queue.clone();
    until(move || q.stats().queued_requests == 1).await;
    let next = queued_waiter(&queue).await;
    assert!(quitter.await.unwrap(), "the quitter timed out");
    // Alone, the second waiter would be granted at 100 ms: it is.
    assert_eq!(next.await.unwrap() - start, Duration::from_millis(100));
    let stats = queue.stats();
    assert_eq!(stats.cancelled_requests, 1);
    assert_eq!(stats.admitted_requests, 2);
    assert_eq!(stats.queued_requests, 0);
}

#[tokio::test(start_paused = true)]
async fn dropping_a_granted_but_unpolled_future_refunds_its_permits() {
    let queue = Arc::new(Queue::new(bucket()));
    let start = Instant::now();
    queue.acquire(&(), 1).await.unwrap().forget(); // empty at t = 0
    let mut first = queue.acquire(&(), 1);
    assert!(poll_once(&mut first).await.is_pending());
    let second = queued_waiter(&queue).await;
    // At 100 ms the queue's timer grants `first`, but its future is never
    // polled again: it is dropped instead.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(queue.stats().queued_requests, 1, "first was granted");
    drop(first);
    // Its permit goes back and the second waiter gets it at once, at the
    // instant it would have had it had `first` never queued.
    assert_eq!(second.await.unwrap() - start, Duration::from_millis(100));
    // And the bucket is exactly as if one permit was taken at 100 ms.
    let now = queue.clock().now();
    assert_eq!(
        queue.limiter().time_until_ready(1, now),
        Ok(Duration::from_millis(100))
    );
    assert_eq!(queue.stats().cancelled_requests, 1);
}

#[tokio::test(start_paused = true)]
async fn a_forgotten_future_does_not_wedge_the_waiters_behind_it() {
    let queue = Arc::new(Queue::new(bucket()));
    let start = Instant::now();
    queue.acquire(&(), 1).await.unwrap().forget(); // empty at t = 0
    let mut head = Box::pin(queue.acquire(&(), 1));
    assert!(poll_once(&mut head).await.is_pending());
    // The head of the line is leaked: nothing will ever poll or drop it.
    std::mem::forget(head);
    let behind = queued_waiter(&queue).await;
    // The forgotten waiter is granted (and its permit spent) at 100 ms;
    // the next one follows at 200 ms as usual.
    assert_eq!(behind.await.unwrap() - start, Duration::from_millis(200));
    assert_eq!(queue.stats().queued_requests, 0);
}
