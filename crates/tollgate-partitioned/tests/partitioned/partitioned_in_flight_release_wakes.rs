//! Waiting on a per-key in-flight limit of a partitioned limiter (and on a
//! chain holding one): the release hands the permit to the front of that
//! key's line and wakes that waiter only, with no time passing and no
//! polling on a timer; lines are FIFO per key, bounded, and a waiter that
//! goes away never loses or duplicates a permit.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use tokio::time::Instant;
use tollgate::keyed::ShardedKeyedTable;
use tollgate::partitioned::{Lease, Partitioned};
use tollgate::queue::{Queue, WaitError};
use tollgate::{Gcra, Limiter, Quota, Refusal, Snapshot, Timestamp, TokioClock};

use support::CountPolls;

const FOREVER: Duration = Duration::from_secs(3600);
/// How long the holder keeps its permit: long (a waiter polling every
/// millisecond would be polled 10,000 times).
const HELD: Duration = Duration::from_secs(10);

/// At most one job in flight per tenant.
fn one_per_tenant() -> Partitioned<u32, u32> {
    Partitioned::<u32, u32>::builder("jobs")
        .concurrency(
            "per_tenant",
            |t: &u32| Some(*t),
            Partitioned::<u32, u32>::in_flight_table(1, 100).unwrap(),
        )
        .build()
}

/// 100 per second per tenant (bursts of 10).
fn rate_per_tenant() -> Partitioned<u32, u32> {
    let table = ShardedKeyedTable::<u32, _>::builder(Gcra::token_bucket(
        Quota::per_second(100).unwrap().with_burst(10).unwrap(),
    ))
    .build()
    .unwrap();
    Partitioned::<u32, u32>::builder("rate")
        .policy("per_tenant", |t: &u32| Some(*t), table)
        .build()
}

/// Runs `Queue::acquire` in a task counting its polls while the test
/// holds the only permit (`held`, taken through the same queue) for
/// [`HELD`] of paused time; evaluates to (polls, the instant of the
/// release, the instant the waiter was admitted).
macro_rules! wait_behind_a_long_holder {
    ($limiter:expr, |$q:ident| $held:expr) => {{
        let queue = Queue::builder(Arc::new($limiter))
            .max_wait(FOREVER)
            .clock(TokioClock::new())
            .build();
        let $q = &queue;
        let held = $held;
        let polls = Arc::new(AtomicUsize::new(0));
        let waiter = {
            let (queue, polls) = (queue.clone(), Arc::clone(&polls));
            tokio::spawn(async move {
                let tenant = 7u32;
                let lease = CountPolls::new(queue.acquire(&tenant, 1), polls)
                    .await
                    .map_err(|r| r.to_string())
                    .unwrap();
                let admitted = Instant::now();
                drop(lease);
                admitted
            })
        };
        tokio::time::sleep(HELD).await;
        let released = Instant::now();
        drop(held);
        let admitted = waiter.await.unwrap();
        (polls.load(Ordering::SeqCst), released, admitted)
    }};
}

#[tokio::test(start_paused = true)]
async fn a_per_key_in_flight_waiter_is_admitted_at_the_release_and_woken_once() {
    let (polls, released, admitted) =
        wait_behind_a_long_holder!(one_per_tenant(), |q| q.try_acquire(&7, 1).unwrap());
    assert_eq!(
        admitted,
        released,
        "admitted {:?} late",
        admitted - released
    );
    // the first poll, then one wake-up: the release (at most 2 allowed)
    assert!(polls - 1 <= 2, "{polls} polls for one admission");
}

#[tokio::test(start_paused = true)]
async fn a_chained_rate_and_in_flight_waiter_is_admitted_at_the_release_and_woken_once() {
    let (polls, released, admitted) =
        wait_behind_a_long_holder!(rate_per_tenant().and(one_per_tenant()), |q| q
            .try_acquire(&7, 1)
            .unwrap());
    assert_eq!(
        admitted,
        released,
        "admitted {:?} late",
        admitted - released
    );
    assert!(polls - 1 <= 2, "{polls} polls for one admission");
}

#[tokio::test(start_paused = true)]
async fn a_waiter_on_a_chain_whose_first_member_is_in_flight_is_admitted_at_the_release() {
    let (polls, released, admitted) =
        wait_behind_a_long_holder!(one_per_tenant().and(rate_per_tenant()), |q| q
            .try_acquire(&7, 1)
            .unwrap());
    assert_eq!(
        admitted,
        released,
        "admitted {:?} late",
        admitted - released
    );
    assert!(polls - 1 <= 2, "{polls} polls for one admission");
}

#[tokio::test(start_paused = true)]
async fn an_in_flight_waiter_is_refused_when_its_max_wait_passes() {
    let p = Arc::new(one_per_tenant());
    let queue = Queue::builder(Arc::clone(&p))
        .max_wait(Duration::from_millis(250))
        .clock(TokioClock::new())
        .build();
    let _held = p.try_acquire(&7, Timestamp::ZERO).unwrap();
    let start = Instant::now();
    let refused = queue.acquire(&7, 1).await.map(drop).unwrap_err();
    assert_eq!(start.elapsed(), Duration::from_millis(250));
    // waited `max_wait`, then refused (no estimate: an in-flight limit)
    assert_eq!(
        refused,
        WaitError::MaxWaitExceeded {
            estimated_wait: None,
            max_wait: Duration::from_millis(250),
        }
    );
    // what kept it waiting: the per-tenant policy (was `refused.policy()`)
    assert_eq!(
        p.try_acquire(&7, Timestamp::ZERO).unwrap_err().policy(),
        "per_tenant"
    );
    assert_eq!(queue.stats().queued_requests, 0);
    // it left the line: the key's next release is nobody's
    drop(_held);
    assert!(p.try_acquire(&7, Timestamp::ZERO).is_ok());
}

/// Counts the wake-ups of one waiter polled by hand.
#[derive(Default)]
struct Wakes(AtomicUsize);

impl Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counting_waker() -> (Arc<Wakes>, Waker) {
    let wakes = Arc::new(Wakes::default());
    (Arc::clone(&wakes), Waker::from(wakes))
}

fn poll<F: std::future::Future + Unpin>(f: &mut F, waker: &Waker) -> Poll<F::Output> {
    std::pin::Pin::new(f).poll(&mut Context::from_waker(waker))
}

/// A queue of at most `line` permits per tenant in front of `p` (the
/// queue's own tokio clock: the in-flight limit ignores time).
fn queue_of(p: Partitioned<u32, u32>, line: u64) -> Queue<Partitioned<u32, u32>, u32> {
    Queue::builder(p).queue_limit(line).build()
}

/// The partitioned limiter's own answer for `tenant` now, bypassing the
/// queue's lines (only asked where it must refuse: an admission here
/// would hold a permit outside the queue).
fn direct(queue: &Queue<Partitioned<u32, u32>, u32>, tenant: u32) -> bool {
    queue
        .limiter()
        .try_acquire(&tenant, tollgate::Clock::now(queue.clock()))
        .is_ok()
}

#[tokio::test(start_paused = true)]
async fn a_release_wakes_only_the_front_waiter_of_its_own_key_in_arrival_order() {
    let queue = queue_of(one_per_tenant(), 10);
    let held_7 = queue.try_acquire(&7, 1).unwrap();
    let held_8 = queue.try_acquire(&8, 1).unwrap();
    let (first_wakes, first_waker) = counting_waker();
    let (second_wakes, second_waker) = counting_waker();
    let (other_wakes, other_waker) = counting_waker();
    let mut first = Box::pin(queue.acquire(&7, 1));
    let mut second = Box::pin(queue.acquire(&7, 1));
    let mut other = Box::pin(queue.acquire(&8, 1));
    assert!(poll(&mut first, &first_waker).is_pending());
    assert!(poll(&mut second, &second_waker).is_pending());
    assert!(poll(&mut other, &other_waker).is_pending());
    assert_eq!(queue.stats().queued_requests, 3);
    // a newcomer does not overtake the line
    assert_eq!(
        queue.try_acquire(&7, 1).map(drop),
        Err(WaitError::WouldWait { retry_after: None })
    );
    assert!(!direct(&queue, 7));

    let start = Instant::now();
    drop(held_7);
    let wakes = |w: &Wakes| w.0.load(Ordering::SeqCst);
    assert_eq!(
        (
            wakes(&first_wakes),
            wakes(&second_wakes),
            wakes(&other_wakes)
        ),
        (1, 0, 0)
    );
    assert_eq!(queue.stats().wakeups, 1);
    // the released permit went to the front waiter, not back to the
    // limiter: a newcomer (or a direct check) finds none
    assert!(!direct(&queue, 7));
    assert!(queue.try_acquire(&7, 1).is_err());
    let Poll::Ready(Ok(first_admission)) = poll(&mut first, &first_waker) else {
        panic!("the front waiter holds the released permit")
    };
    assert!(first_admission.inner().is_some_and(|l| l.holds_in_flight()));
    assert!(poll(&mut second, &second_waker).is_pending());

    drop(first_admission);
    assert_eq!(
        (
            wakes(&first_wakes),
            wakes(&second_wakes),
            wakes(&other_wakes)
        ),
        (1, 1, 0)
    );
    assert_eq!(queue.stats().wakeups, 2);
    assert!(matches!(
        poll(&mut second, &second_waker),
        Poll::Ready(Ok(_))
    ));
    // tenant 7's last release does not wake tenant 8's waiter
    assert_eq!(wakes(&other_wakes), 0);
    drop(held_8);
    assert_eq!(wakes(&other_wakes), 1);
    assert!(matches!(poll(&mut other, &other_waker), Poll::Ready(Ok(_))));
    // one wake-up per admission, all with no time passing
    assert_eq!(
        (
            wakes(&first_wakes),
            wakes(&second_wakes),
            wakes(&other_wakes)
        ),
        (1, 1, 1)
    );
    let stats = queue.stats();
    assert_eq!((stats.wakeups, stats.queued_requests), (3, 0));
    assert_eq!(stats.time_in_queue, Duration::ZERO);
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn a_waiter_dropped_after_it_was_granted_hands_the_permit_to_the_next() {
    let queue = queue_of(one_per_tenant(), 10);
    let held = queue.try_acquire(&7, 1).unwrap();
    let (gone_wakes, gone_waker) = counting_waker();
    let (next_wakes, next_waker) = counting_waker();
    let (last_wakes, last_waker) = counting_waker();
    let mut gone = Box::pin(queue.acquire(&7, 1));
    let mut next = Box::pin(queue.acquire(&7, 1));
    let mut last = Box::pin(queue.acquire(&7, 1));
    assert!(poll(&mut gone, &gone_waker).is_pending());
    assert!(poll(&mut next, &next_waker).is_pending());
    assert!(poll(&mut last, &last_waker).is_pending());
    drop(held); // granted to `gone`, which never looks
    let wakes = |w: &Wakes| w.0.load(Ordering::SeqCst);
    assert_eq!(
        (wakes(&gone_wakes), wakes(&next_wakes), wakes(&last_wakes)),
        (1, 0, 0)
    );
    drop(gone);
    // its permit went on to the next waiter, which alone is woken
    assert_eq!(
        (wakes(&gone_wakes), wakes(&next_wakes), wakes(&last_wakes)),
        (1, 1, 0)
    );
    let Poll::Ready(Ok(admission)) = poll(&mut next, &next_waker) else {
        panic!("the permit went on to the next waiter")
    };
    assert!(poll(&mut last, &last_waker).is_pending()); // not given twice
    assert!(!direct(&queue, 7)); // nor left free in the limiter
    drop(last); // a queued waiter leaves its line
    let stats = queue.stats();
    assert_eq!(
        (
            stats.queued_requests,
            stats.cancelled_requests,
            stats.wakeups
        ),
        (0, 2, 2)
    );
    drop(admission);
    assert_eq!(wakes(&last_wakes), 0);
    // the one permit is free again, and nobody waits
    let again = queue.try_acquire(&7, 1).unwrap();
    assert_eq!(
        queue.try_acquire(&7, 1).map(drop),
        Err(WaitError::WouldWait { retry_after: None })
    );
    assert!(!direct(&queue, 7));
    drop(again);
}

#[tokio::test(start_paused = true)]
async fn a_full_line_refuses_at_once() {
    let queue = queue_of(one_per_tenant(), 1);
    let _held = queue.try_acquire(&7, 1).unwrap();
    let (_, waker) = counting_waker();
    let mut queued = Box::pin(queue.acquire(&7, 1));
    assert!(poll(&mut queued, &waker).is_pending());
    let mut over = Box::pin(queue.acquire(&7, 1));
    let Poll::Ready(Err(refusal)) = poll(&mut over, &waker) else {
        panic!("a second waiter does not fit a line of 1")
    };
    // no estimate: an in-flight limit cannot say when a release comes
    // (was: the policy's refusal, `retry_after` its 1 ms hint)
    assert_eq!(refusal, WaitError::QueueFull { retry_after: None });
    assert_eq!(refusal.retry_after(), None);
    // what it waits for: the per-tenant policy (was `refusal.policy()`)
    let direct_refusal = queue
        .limiter()
        .try_acquire(&7, tollgate::Clock::now(queue.clock()))
        .unwrap_err();
    assert_eq!(direct_refusal.policy(), "per_tenant");
    assert_eq!(direct_refusal.retry_after(), Duration::from_millis(1));
    // refused, not queued: one waiter in the line
    let stats = queue.stats();
    assert_eq!((stats.queued_requests, stats.refused_requests), (1, 1));
    // the bound is per key: another tenant is admitted at once
    let Poll::Ready(Ok(_other)) = poll(&mut Box::pin(queue.acquire(&8, 1)), &waker) else {
        panic!("tenant 8 has its own line and slot")
    };
}

/// The partitioned limiter behind the `Limiter` trait, counting its
/// checks: a queue that polled it on a timer would check it again and
/// again while nothing changes.
struct Checked {
    inner: Partitioned<u32, u32>,
    checks: AtomicUsize,
}

impl Checked {
    fn checks(&self) -> usize {
        self.checks.load(Ordering::SeqCst)
    }
}

impl Limiter<u32> for Checked {
    type Permit = Lease<u32>;

    fn capacity(&self, key: &u32) -> u32 {
        self.inner.capacity(key)
    }

    fn try_acquire_n(
        &self,
        key: &u32,
        n: u32,
        now: Timestamp,
    ) -> Result<Lease<u32>, Refusal<'static>> {
        self.checks.fetch_add(1, Ordering::SeqCst);
        self.inner.try_acquire_n(key, n, now)
    }

    fn cancel(&self, key: &u32, lease: Lease<u32>, now: Timestamp) {
        self.inner.cancel(key, lease, now);
    }

    fn refund(&self, key: &u32, n: u32, now: Timestamp) {
        self.inner.refund(key, n, now);
    }

    fn snapshot(&self, key: &u32, now: Timestamp) -> Snapshot {
        self.inner.snapshot(key, now)
    }

    fn time_until_ready(
        &self,
        key: &u32,
        n: u32,
        now: Timestamp,
    ) -> Result<Duration, Refusal<'static>> {
        self.inner.time_until_ready(key, n, now)
    }

    fn time_until_ready_after(
        &self,
        key: &u32,
        ahead: u64,
        n: u32,
        now: Timestamp,
    ) -> Option<Duration> {
        self.inner.time_until_ready_after(key, ahead, n, now)
    }

    fn required_resolution(&self) -> Duration {
        self.inner.required_resolution()
    }
}

/// Was `..._is_refused_not_queued`: the per-key lines of the removed
/// `acquire_key_in_line` were served only by a release of their own key,
/// so a key without a slot was refused. A `Queue` re-examines every line
/// waiting for a release on any release, so such a key now waits for the
/// release that frees a slot: admitted at it, not polled meanwhile.
#[tokio::test(start_paused = true)]
async fn a_key_without_a_slot_in_a_full_table_is_admitted_at_the_release_that_frees_one() {
    // one key tracked: while tenant 7 is busy, tenant 8 has no slot
    let p = Partitioned::<u32, u32>::builder("jobs")
        .concurrency(
            "per_tenant",
            |t: &u32| Some(*t),
            Partitioned::<u32, u32>::in_flight_table(1, 1).unwrap(),
        )
        .build();
    let queue = Queue::builder(Checked {
        inner: p,
        checks: AtomicUsize::new(0),
    })
    .queue_limit(10)
    .max_wait(FOREVER)
    .build();
    let busy = queue.try_acquire(&7, 1).unwrap();
    // what tenant 8 waits for: a slot of the table, not its own limit
    let refusal = queue
        .limiter()
        .inner
        .try_acquire(&8, tollgate::Clock::now(queue.clock()))
        .unwrap_err();
    assert!(refusal.path().is_overflow());
    assert_eq!(refusal.policy(), "per_tenant");

    let polls = Arc::new(AtomicUsize::new(0));
    let waiter = {
        let (queue, polls) = (queue.clone(), Arc::clone(&polls));
        tokio::spawn(async move {
            let permit = CountPolls::new(queue.acquire(&8, 1), polls)
                .await
                .map_err(|r| r.to_string())
                .unwrap();
            let admitted = Instant::now();
            drop(permit);
            admitted
        })
    };
    // queued, not refused
    support::until(|| queue.stats().queued_requests == 1).await;
    assert_eq!(queue.stats().refused_requests, 0);
    let checks_queued = queue.limiter().checks();
    tokio::time::sleep(HELD).await;
    assert_eq!(
        queue.limiter().checks() - checks_queued,
        0,
        "checked on a timer while no slot could free up"
    );
    assert_eq!(queue.stats().queued_requests, 1);
    let released = Instant::now();
    drop(busy);
    let admitted = waiter.await.unwrap();
    assert_eq!(
        admitted,
        released,
        "admitted {:?} late",
        admitted - released
    );
    let polls = polls.load(Ordering::SeqCst);
    assert!(polls - 1 <= 2, "{polls} polls for one admission");
}
