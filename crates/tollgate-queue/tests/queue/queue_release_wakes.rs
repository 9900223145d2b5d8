//! Release-based limiters under the queue: returning capacity through a
//! permit wakes the next waiter that fits, in order, and nobody else.
//!
//! The queue takes tollgate's `ConcurrencyLimiter` as a `&'static` (here
//! leaked) and always gives a permit's share back when the permit drops.
//! `InFlight` (tollgate-test-support) is a release-based `Limiter` of the
//! test's own around the same limiter, with a counter of its checks.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::time::Instant;
use tollgate::queue::Queue;

use support::{CountPolls, InFlight, concurrency, until};

/// tollgate's `ConcurrencyLimiter` of `limit`, leaked: the queue takes it
/// as a `&'static` (its permits borrow it).
fn leaked(limit: u32) -> &'static tollgate::ConcurrencyLimiter {
    Box::leak(Box::new(concurrency(limit)))
}

#[tokio::test(start_paused = true)]
async fn dropping_a_permit_wakes_the_next_waiter_that_fits_in_fifo_order() {
    // No `release_on_drop(true)`: a concurrency limiter's permits always
    // come back when a queue permit drops.
    let queue = Arc::new(Queue::new(leaked(3)));
    let start = Instant::now();
    let p1 = queue.acquire(&(), 1).await.unwrap();
    let p2 = queue.acquire(&(), 1).await.unwrap();
    let p3 = queue.acquire(&(), 1).await.unwrap();
    let polls = Arc::new(AtomicUsize::new(0));
    // A large waiter (2), then a small one (1) behind it.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for (name, n) in [("large", 2u32), ("small", 1)] {
        let (q, tx) = (queue.clone(), tx.clone());
        let before = queue.stats().queued_requests;
        tokio::spawn(CountPolls::new(
            async move {
                let permit = q.acquire(&(), n).await.unwrap();
                tx.send((name, Instant::now() - start)).unwrap();
                // hold it until the test says so
                tokio::time::sleep(Duration::from_secs(10)).await;
                drop(permit);
            },
            polls.clone(),
        ));
        let q = queue.clone();
        until(move || q.stats().queued_requests == before + 1).await;
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    // One slot free: the small waiter would fit but must not overtake.
    drop(p1);
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(rx.try_recv().is_err(), "nobody fits in order yet");
    assert_eq!(queue.stats().queued_requests, 2);
    // Two free: the large one goes, at the instant of the release.
    drop(p2);
    assert_eq!(
        rx.recv().await.unwrap(),
        ("large", Duration::from_millis(20))
    );
    // The small one needs the third slot.
    tokio::time::sleep(Duration::from_millis(5)).await;
    p3.release();
    assert_eq!(
        rx.recv().await.unwrap(),
        ("small", Duration::from_millis(25))
    );
    // Each waiter task: one poll when spawned, one when granted (the
    // sleeps that follow add one each). No timer ever ran for them.
    let stats = queue.stats();
    assert_eq!(stats.wakeups, 2);
    assert!(polls.load(Ordering::SeqCst) <= 4);
    assert_eq!(queue.limiter().in_flight(), 3);
}

#[tokio::test(start_paused = true)]
async fn permits_of_a_rate_limiter_are_spent_unless_released() {
    use tollgate::{Bucket, Clock, Quota};
    let bucket = Bucket::token_bucket(Quota::per_second(1).unwrap().with_burst(2).unwrap());
    let queue = Queue::new(bucket);
    let now = queue.clock().now();
    drop(queue.acquire(&(), 1).await.unwrap()); // spent: no refund on drop
    assert_eq!(queue.limiter().snapshot(now).remaining(), 1);
    queue.acquire(&(), 1).await.unwrap().release(); // given back explicitly
    assert_eq!(queue.limiter().snapshot(now).remaining(), 1);
}

#[tokio::test(start_paused = true)]
async fn permits_of_a_concurrency_limiter_come_back_on_drop_even_with_release_on_drop_off() {
    // The queue keeps the concurrency limiter's guard inside its permit:
    // dropping the permit drops the guard, whatever `release_on_drop` says.
    let queue = Queue::builder(leaked(2)).release_on_drop(false).build();
    let permit = queue.acquire(&(), 2).await.unwrap();
    assert_eq!(queue.limiter().in_flight(), 2);
    drop(permit);
    assert_eq!(queue.limiter().in_flight(), 0);
    // `forget` still keeps them in flight, until released by hand.
    queue.acquire(&(), 1).await.unwrap().forget();
    assert_eq!(queue.limiter().in_flight(), 1);
    queue.limiter().release(1);
    assert_eq!(queue.limiter().in_flight(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releases_racing_arrivals_on_many_threads_never_lose_a_wake_up() {
    // 24 tasks share 3 slots for 400 ms of real time, holding each for
    // 0–2 ms and asking for 1 or 2. A lost wake-up would leave a waiter
    // asleep with free capacity: the run would hang (caught by the timeout).
    let queue = Arc::new(Queue::new(leaked(3)));
    let end = Instant::now() + Duration::from_millis(400);
    let run = async {
        let mut tasks = Vec::new();
        for id in 0..24u64 {
            let q = queue.clone();
            tasks.push(tokio::spawn(async move {
                let mut k = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                let mut granted = 0u64;
                while Instant::now() < end {
                    k ^= k << 13;
                    k ^= k >> 7;
                    k ^= k << 17;
                    let n = 1 + (k % 2) as u32;
                    let permit = q.acquire(&(), n).await.unwrap();
                    assert!(q.limiter().in_flight() <= 3);
                    tokio::time::sleep(Duration::from_micros(k % 2_000)).await;
                    drop(permit);
                    granted += 1;
                }
                granted
            }));
        }
        let mut total = 0;
        for t in tasks {
            total += t.await.unwrap();
        }
        total
    };
    let total = tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .expect("a waiter was never woken");
    assert!(total > 100, "only {total} grants");
    assert_eq!(queue.limiter().in_flight(), 0, "every permit came back");
    let stats = queue.stats();
    assert_eq!(stats.queued_requests, 0);
    assert_eq!(stats.admitted_requests, total);
}

#[tokio::test(start_paused = true)]
async fn a_release_based_limiter_is_not_polled_while_nobody_releases() {
    // The limiter's refusals carry a 1 ms retry hint; with
    // release_on_drop the queue arms no timer at it.
    let queue = Arc::new(
        Queue::builder(InFlight::new(1))
            .release_on_drop(true)
            .build(),
    );
    let held = queue.acquire(&(), 1).await.unwrap();
    let q = queue.clone();
    let waiter = tokio::spawn(async move { q.acquire(&(), 1).await.map(|p| p.forget()) });
    let q = queue.clone();
    until(move || q.stats().queued_requests == 1).await;
    let checks = queue.limiter().checks();
    // Ten seconds with nobody releasing: ten thousand hint intervals.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(queue.limiter().checks(), checks, "polled without a release");
    drop(held);
    waiter.await.unwrap().unwrap();
    assert_eq!(
        queue.limiter().checks(),
        checks + 1,
        "one check per release"
    );
}

#[tokio::test(start_paused = true)]
async fn a_queued_concurrency_limiter_is_left_alone_while_nobody_releases() {
    // The same with tollgate's limiter itself, whose checks cannot be
    // counted: in ten seconds the waiter is neither woken nor refused, and
    // one release grants it with one wake-up.
    let queue = Arc::new(Queue::new(leaked(1)));
    let held = queue.acquire(&(), 1).await.unwrap();
    let polls = Arc::new(AtomicUsize::new(0));
    let q = queue.clone();
    let waiter = tokio::spawn(CountPolls::new(
        async move { q.acquire(&(), 1).await.map(|p| p.forget()) },
        polls.clone(),
    ));
    let q = queue.clone();
    until(move || q.stats().queued_requests == 1).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(polls.load(Ordering::SeqCst), 1, "woken without a release");
    let stats = queue.stats();
    assert_eq!((stats.queued_requests, stats.wakeups), (1, 0));
    drop(held);
    waiter.await.unwrap().unwrap();
    assert_eq!(polls.load(Ordering::SeqCst), 2, "one poll per release");
    assert_eq!(queue.stats().wakeups, 1);
    assert_eq!(
        queue.limiter().in_flight(),
        1,
        "the waiter's forgotten permit"
    );
}

#[tokio::test(start_paused = true)]
async fn recheck_serves_a_waiter_after_capacity_returned_outside_the_queue() {
    let limiter = leaked(1);
    let queue = Arc::new(Queue::new(limiter));
    // Someone else holds the only slot, outside the queue.
    let outside = limiter.try_acquire(1).expect("the slot is free");
    let q = queue.clone();
    let waiter = tokio::spawn(async move { q.acquire(&(), 1).await.map(|p| p.forget()) });
    let q = queue.clone();
    until(move || q.stats().queued_requests == 1).await;
    drop(outside); // released behind the queue's back
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(queue.stats().queued_requests, 1, "the queue cannot know");
    queue.recheck();
    waiter.await.unwrap().unwrap();
    assert_eq!(queue.stats().queued_requests, 0);
}
