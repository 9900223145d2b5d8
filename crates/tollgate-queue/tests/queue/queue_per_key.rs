//! One `Queue` in front of any limiter, a line per key: keys wait apart,
//! each line is bounded on its own, a rate's waiter is woken by its line's
//! timer and an in-flight waiter by the release (no time passing, one
//! wake-up), for tollgate's limiters and for one written here.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::time::Instant;
use tollgate::keyed::ShardedKeyedTable;
use tollgate::queue::{Queue, WaitError};
use tollgate::{Bucket, ConcurrencyLimiter, Gcra, Limiter, Quota, Refusal, Snapshot, Timestamp};

use support::{CountPolls, poll_once};

fn leak(limit: u32) -> &'static ConcurrencyLimiter {
    Box::leak(Box::new(support::concurrency(limit)))
}

/// 10 per second per key, no burst.
fn ten_per_second_per_key() -> ShardedKeyedTable<u32, Gcra> {
    let quota = Quota::per_second(10).unwrap().with_burst(1).unwrap();
    ShardedKeyedTable::<u32, _>::builder(Gcra::token_bucket(quota))
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_key_waits_in_its_own_line_and_other_keys_pass() {
    let queue = Queue::new(ten_per_second_per_key());
    let start = Instant::now();
    queue.acquire(&1, 1).await.unwrap();
    // key 1 waits 100 ms for its turn; key 2, behind it in time, does not
    let (late, other) = tokio::join!(
        async {
            queue.acquire(&1, 1).await.unwrap();
            start.elapsed()
        },
        async {
            tokio::task::yield_now().await;
            queue.acquire(&2, 1).await.unwrap();
            start.elapsed()
        }
    );
    assert_eq!(late, Duration::from_millis(100));
    assert_eq!(other, Duration::ZERO);
    assert_eq!(queue.stats().queued_requests, 0);
}

#[tokio::test(start_paused = true)]
async fn each_key_is_served_in_arrival_order() {
    let queue = Queue::new(ten_per_second_per_key());
    let order = std::sync::Mutex::new(Vec::new());
    let start = Instant::now();
    let waiter = |key: u32, tag: u32| {
        let (queue, order) = (&queue, &order);
        async move {
            queue.acquire(&key, 1).await.unwrap();
            order
                .lock()
                .unwrap()
                .push((tag, start.elapsed().as_millis()));
        }
    };
    tokio::join!(waiter(1, 0), waiter(1, 1), waiter(1, 2), waiter(3, 9));
    let order = order.into_inner().unwrap();
    assert_eq!(order, vec![(0, 0), (9, 0), (1, 100), (2, 200)]);
}

#[tokio::test(start_paused = true)]
async fn queue_limit_bounds_each_key_separately() {
    let queue = Queue::builder(ten_per_second_per_key())
        .queue_limit(1)
        .build();
    queue.acquire(&1, 1).await.unwrap();
    queue.acquire(&2, 1).await.unwrap();
    let one = queue.acquire(&1, 1); // waits: key 1's line is full
    let two = queue.acquire(&2, 1); // waits: key 2 has a line of its own
    let mut one = Box::pin(one);
    let mut two = Box::pin(two);
    assert!(poll_once(&mut one).await.is_pending());
    assert!(poll_once(&mut two).await.is_pending());
    assert_eq!(queue.stats().queued_requests, 2);
    let full = queue.acquire(&1, 1).await.unwrap_err();
    assert!(
        matches!(
            full,
            WaitError::QueueFull {
                retry_after: Some(_)
            }
        ),
        "{full:?}"
    );
    assert!(one.await.is_ok());
    assert!(two.await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_chain_of_a_rate_and_an_in_flight_limit_wakes_its_waiter_at_the_release() {
    let slots = leak(1);
    let queue = Arc::new(Queue::new(
        Bucket::token_bucket(Quota::per_second(1000).unwrap()).and(slots),
    ));
    let held = queue.try_acquire(&(), 1).unwrap();
    let polls = Arc::new(AtomicUsize::new(0));
    let waiter = {
        let (queue, polls) = (Arc::clone(&queue), Arc::clone(&polls));
        tokio::spawn(async move {
            let permit = CountPolls::new(queue.acquire(&(), 1), polls).await.unwrap();
            let admitted = Instant::now();
            assert_eq!(slots.in_flight(), 1);
            drop(permit);
            admitted
        })
    };
    tokio::time::sleep(Duration::from_secs(10)).await;
    let released = Instant::now();
    drop(held);
    let admitted = waiter.await.unwrap();
    assert_eq!(
        admitted, released,
        "admitted at the release, no time passing"
    );
    let polls = polls.load(Ordering::SeqCst);
    assert!(polls <= 2, "woken at most twice: polled {polls} times");
    assert_eq!(queue.stats().wakeups, 1);
    assert_eq!(slots.in_flight(), 0);
}

/// An in-flight limit written outside tollgate: `free` slots, a guard
/// that returns its slot when dropped, and a refusal that says capacity
/// comes back by a release.
#[derive(Clone)]
struct Slots {
    free: Arc<AtomicU32>,
    limit: u32,
    checks: Arc<AtomicUsize>,
}

struct Slot {
    free: Arc<AtomicU32>,
    n: u32,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.free.fetch_add(self.n, Ordering::SeqCst);
    }
}

impl Limiter for Slots {
    type Permit = Slot;
    fn capacity(&self, _: &()) -> u32 {
        self.limit
    }
    fn try_acquire_n(&self, _: &(), n: u32, _: Timestamp) -> Result<Slot, Refusal<'static>> {
        self.checks.fetch_add(1, Ordering::SeqCst);
        let taken = self
            .free
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |f| f.checked_sub(n));
        match taken {
            Ok(_) => Ok(Slot {
                free: Arc::clone(&self.free),
                n,
            }),
            Err(free) => Err(Refusal::new(
                Duration::from_millis(1), // a hint: a timer at it would poll
                Snapshot::new(self.limit, free, Duration::ZERO),
            )
            .until_release()),
        }
    }
    fn cancel(&self, _: &(), slot: Slot, _: Timestamp) {
        drop(slot);
    }
    fn refund(&self, _: &(), _: u32, _: Timestamp) {}
    fn snapshot(&self, _: &(), _: Timestamp) -> Snapshot {
        Snapshot::new(self.limit, self.free.load(Ordering::SeqCst), Duration::ZERO)
    }
    fn time_until_ready(&self, _: &(), _: u32, _: Timestamp) -> Result<Duration, Refusal<'static>> {
        Ok(Duration::ZERO)
    }
}

#[tokio::test(start_paused = true)]
async fn a_user_written_in_flight_limit_is_checked_only_at_releases() {
    let slots = Slots {
        free: Arc::new(AtomicU32::new(2)),
        limit: 2,
        checks: Arc::new(AtomicUsize::new(0)),
    };
    let queue = Arc::new(Queue::new(slots.clone()));
    let a = queue.try_acquire(&(), 1).unwrap();
    let b = queue.try_acquire(&(), 1).unwrap();
    let before = slots.checks.load(Ordering::SeqCst);
    let waiters: Vec<_> = (0..3)
        .map(|i| {
            let queue = Arc::clone(&queue);
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(i)).await; // arrival order
                let permit = queue.acquire(&(), 1).await.unwrap();
                let at = Instant::now();
                tokio::time::sleep(Duration::from_secs(1)).await; // holds it 1 s
                drop(permit);
                (i, at)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(60)).await;
    // a minute of waiting checked the limiter a few times, not every 1 ms
    let waiting_checks = slots.checks.load(Ordering::SeqCst) - before;
    assert!(
        waiting_checks <= 6,
        "{waiting_checks} checks while nothing was released"
    );
    let released = Instant::now();
    drop(a);
    drop(b);
    let mut served = Vec::new();
    for w in waiters {
        served.push(w.await.unwrap());
    }
    // the first two at the releases, the third when the first of them ends
    assert_eq!(served[0], (0, released));
    assert_eq!(served[1], (1, released));
    assert_eq!(served[2], (2, released + Duration::from_secs(1)));
    assert_eq!(slots.free.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn a_waiter_granted_at_a_release_but_gone_passes_its_slot_on() {
    let slots = leak(1);
    let queue = Queue::new(slots);
    let held = queue.try_acquire(&(), 1).unwrap();
    let mut gone = Box::pin(queue.acquire(&(), 1));
    let mut next = Box::pin(queue.acquire(&(), 1));
    assert!(poll_once(&mut gone).await.is_pending());
    assert!(poll_once(&mut next).await.is_pending());
    drop(held); // the slot is granted to `gone`, which is never polled again
    assert_eq!(slots.in_flight(), 1);
    drop(gone); // its slot goes to `next`, not back to anyone else
    let std::task::Poll::Ready(next) = poll_once(&mut next).await else {
        panic!("not granted at the cancellation");
    };
    assert!(next.is_ok());
    assert_eq!(slots.in_flight(), 1);
    assert!(
        queue.try_acquire(&(), 1).is_err(),
        "no two holders of one slot"
    );
    drop(next);
    assert_eq!(slots.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn behind_a_waiter_a_partitioned_limiter_still_refuses_at_once_what_would_wait_too_long() {
    use tollgate::partitioned::Partitioned;
    // 10 per second per tenant, no burst; waits of at most 150 ms
    let limiter = Partitioned::<u32, u32>::builder("jobs")
        .policy("per_tenant", |t: &u32| Some(*t), ten_per_second_per_key())
        .build();
    let queue = Queue::builder(limiter)
        .max_wait(Duration::from_millis(150))
        .build();
    queue.acquire(&7, 1).await.unwrap();
    let mut second = Box::pin(queue.acquire(&7, 1)); // waits 100 ms
    assert!(poll_once(&mut second).await.is_pending());
    let start = Instant::now();
    // behind it, a third would wait 200 ms: refused now, with that estimate
    let third = queue.acquire(&7, 1).await.unwrap_err();
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(
        third,
        WaitError::MaxWaitExceeded {
            estimated_wait: Some(Duration::from_millis(200)),
            max_wait: Duration::from_millis(150),
        }
    );
    assert!(second.await.is_ok());
    assert_eq!(start.elapsed(), Duration::from_millis(100));
}

#[tokio::test(start_paused = true)]
async fn a_wait_and_its_permit_borrow_nothing_and_move_into_tasks() {
    let jobs = leak(1);
    let queue = Queue::new(jobs);
    let first = queue.try_acquire(&(), 1).unwrap();
    // the future is made from a temporary key and a clone of the handle
    // that is dropped at once, then spawned: it borrows neither
    let waiting = {
        let handle = queue.clone();
        let wait = handle.acquire(&(), 1);
        drop(handle);
        tokio::spawn(wait)
    };
    tokio::task::yield_now().await;
    assert_eq!(queue.stats().queued_requests, 1);
    // the held permit moves into a task of its own, which drops it
    let start = Instant::now();
    tokio::spawn(async move { drop(first) }).await.unwrap();
    let second = waiting.await.unwrap().unwrap();
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(second.permits(), 1);
    assert_eq!(jobs.available(), 0);
    drop(second);
    assert_eq!(jobs.available(), 1);
}
