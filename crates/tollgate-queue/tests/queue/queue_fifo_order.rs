//! OldestFirst (FIFO) order: exact order and instants, no starvation of a
//! large request, and 10,000 waiters served in order with one wake-up each.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tollgate::queue::Queue;
use tollgate::{Bucket, Gcra, Quota};

use support::{CountPolls, until};

fn bucket(per_second: u32, burst: u32) -> Bucket<Gcra> {
    Bucket::token_bucket(
        Quota::per_second(per_second)
            .unwrap()
            .with_burst(burst)
            .unwrap(),
    )
}

type Log = Arc<Mutex<Vec<(usize, Duration)>>>;

/// Spawns `acquire(n)` for each entry of `sizes`, in order, each one queued
/// (or granted) before the next is spawned. Logs (index, instant granted).
async fn spawn_in_order(
    queue: &Arc<Queue<Bucket<Gcra>>>,
    sizes: &[u32],
    start: Instant,
    log: &Log,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut handles = Vec::new();
    for (i, &n) in sizes.iter().enumerate() {
        let before = queue.stats();
        let seen = before.queued_requests + before.admitted_requests;
        let (q, log) = (queue.clone(), log.clone());
        handles.push(tokio::spawn(async move {
            let permit = q.acquire(&(), n).await.expect("granted");
            permit.forget();
            log.lock().unwrap().push((i, start.elapsed()));
        }));
        let q = queue.clone();
        until(move || {
            let s = q.stats();
            s.queued_requests + s.admitted_requests > seen
        })
        .await;
    }
    handles
}

#[tokio::test(start_paused = true)]
async fn oldest_first_grants_in_arrival_order_at_exact_instants() {
    // 10/s, burst 1: one permit every 100 ms.
    let queue = Arc::new(Queue::new(bucket(10, 1)));
    let start = Instant::now();
    let log: Log = Arc::default();
    let handles = spawn_in_order(&queue, &[1; 6], start, &log).await;
    for h in handles {
        h.await.unwrap();
    }
    let log = log.lock().unwrap().clone();
    let expected: Vec<_> = (0..6)
        .map(|i| (i, Duration::from_millis(100 * i as u64)))
        .collect();
    assert_eq!(log, expected);
    let stats = queue.stats();
    assert_eq!(stats.admitted_requests, 6);
    assert_eq!(stats.queued_requests, 0);
    // waited 100 + 200 + 300 + 400 + 500 ms
    assert_eq!(stats.time_in_queue, Duration::from_millis(1500));
}

#[tokio::test(start_paused = true)]
async fn a_five_permit_waiter_is_not_overtaken_by_a_stream_of_one_permit_requests() {
    // 10/s, burst 5: the 5-permit request needs the bucket completely full.
    let queue = Arc::new(Queue::new(bucket(10, 5)));
    let start = Instant::now();
    queue.acquire(&(), 5).await.unwrap().forget(); // empty the bucket at t = 0
    let log: Log = Arc::default();
    // The large request queues first...
    let mut handles = spawn_in_order(&queue, &[5], start, &log).await;
    // ...then one 1-permit request every 50 ms, twice as fast as the rate:
    // without the order they would take every token as it refills.
    for k in 0..20u64 {
        tokio::time::sleep_until(start + Duration::from_millis(50 * k)).await;
        handles.extend(spawn_in_order(&queue, &[1], start, &log).await);
    }
    for h in handles {
        h.await.unwrap();
    }
    let log = log.lock().unwrap().clone();
    // The 5-permit request (index 0 of its batch, logged first) is granted
    // as soon as the bucket is full again: 500 ms after it was emptied.
    assert_eq!(log[0], (0, Duration::from_millis(500)));
    // Every 1-permit request comes after it, one per 100 ms.
    let after: Vec<Duration> = log[1..].iter().map(|&(_, t)| t).collect();
    let expected: Vec<Duration> = (1..=20)
        .map(|k| Duration::from_millis(500 + 100 * k))
        .collect();
    assert_eq!(after, expected);
}

#[tokio::test(start_paused = true)]
async fn ten_thousand_waiters_are_served_in_order_with_one_wake_up_each() {
    const N: usize = 10_000;
    // 1000/s, burst 1: one permit per millisecond.
    let queue = Arc::new(Queue::new(bucket(1000, 1)));
    let start = Instant::now();
    let order = Arc::new(Mutex::new(Vec::with_capacity(N)));
    let polls = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::with_capacity(N);
    for i in 0..N {
        let (q, order) = (queue.clone(), order.clone());
        let task = async move {
            q.acquire(&(), 1).await.expect("granted").forget();
            order.lock().unwrap().push((i, start.elapsed()));
        };
        handles.push(tokio::spawn(CountPolls::new(task, polls.clone())));
        let q = queue.clone();
        until(move || {
            let s = q.stats();
            s.queued_requests + s.admitted_requests == i as u64 + 1
        })
        .await;
    }
    assert_eq!(queue.stats().queued_requests, N as u64 - 1);
    for h in handles {
        h.await.unwrap();
    }
    let order = order.lock().unwrap().clone();
    assert_eq!(order.len(), N);
    for (k, &(i, t)) in order.iter().enumerate() {
        assert_eq!(i, k, "served out of order");
        assert_eq!(
            t,
            Duration::from_millis(k as u64),
            "granted at the wrong instant"
        );
    }
    // Each task is polled once when spawned and once when woken with its
    // permit (the first needs no wake-up): no herd, no spurious polls.
    let total_polls = polls.load(Ordering::SeqCst);
    assert!(total_polls <= 2 * N, "{total_polls} polls for {N} tasks");
    let stats = queue.stats();
    assert_eq!(stats.wakeups, N as u64 - 1);
    assert_eq!(stats.admitted_requests, N as u64);
}
