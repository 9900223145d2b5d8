//! NewestFirst (LIFO): the newest waiter is served first, and a full queue
//! refuses its oldest waiters so that a newcomer fits (.NET semantics).

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tollgate::queue::{Queue, QueueOrder, WaitError};
use tollgate::{Bucket, Quota};

use support::until;

#[tokio::test(start_paused = true)]
async fn newest_first_serves_the_newest_and_displaces_the_oldest_when_full() {
    // 10/s, burst 1; room for 3 waiting permits.
    let bucket = Bucket::token_bucket(Quota::per_second(10).unwrap().with_burst(1).unwrap());
    let queue = Arc::new(
        Queue::builder(bucket)
            .order(QueueOrder::NewestFirst)
            .queue_limit(3)
            .build(),
    );
    let start = Instant::now();
    queue.acquire(&(), 1).await.unwrap().forget(); // empty at t = 0
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut handles = Vec::new();
    for name in ["a", "b", "c", "d"] {
        let (q, log) = (queue.clone(), log.clone());
        let seen = queue.stats().queued_requests + queue.stats().refused_requests;
        handles.push(tokio::spawn(async move {
            let outcome = q.acquire(&(), 1).await.map(|p| p.forget());
            log.lock().unwrap().push((name, start.elapsed(), outcome));
        }));
        let q = queue.clone();
        // a, b, c queue; d finds the queue full and displaces a.
        until(move || {
            let s = q.stats();
            s.queued_requests + s.refused_requests > seen || s.queued_requests == 3
        })
        .await;
        tokio::task::yield_now().await;
    }
    for h in handles {
        h.await.unwrap();
    }
    let log = log.lock().unwrap().clone();
    assert_eq!(
        log,
        vec![
            ("a", Duration::ZERO, Err(WaitError::Displaced)),
            ("d", Duration::from_millis(100), Ok(())),
            ("c", Duration::from_millis(200), Ok(())),
            ("b", Duration::from_millis(300), Ok(())),
        ]
    );
    let stats = queue.stats();
    assert_eq!((stats.admitted_requests, stats.refused_requests), (4, 1));
}

#[tokio::test(start_paused = true)]
async fn newest_first_tries_a_newcomer_at_once_and_refuses_one_larger_than_the_queue() {
    let bucket = Bucket::token_bucket(Quota::per_second(10).unwrap().with_burst(4).unwrap());
    let queue = Queue::builder(bucket)
        .order(QueueOrder::NewestFirst)
        .queue_limit(2)
        .build();
    // Capacity is there: granted without queueing.
    let p = queue.acquire(&(), 4).await.unwrap();
    assert_eq!(p.permits(), 4);
    p.forget();
    // 3 permits can never fit a queue of 2: refused at once, and the
    // retry_after is when the bucket will hold 3 (300 ms).
    let err = queue.acquire(&(), 3).await.unwrap_err();
    assert_eq!(
        err,
        WaitError::QueueFull {
            retry_after: Some(Duration::from_millis(300))
        }
    );
    assert_eq!(queue.stats().queued_requests, 0);
}
