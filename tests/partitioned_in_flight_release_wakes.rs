//! Waiting on a per-key in-flight limit of a partitioned limiter (and on a
//! chain holding one): the release hands the permit to the front of that
//! key's line and wakes that waiter only, with no time passing and no
//! polling on a timer; lines are FIFO per key, bounded, and a waiter that
//! goes away never loses or duplicates a permit.
#![cfg(feature = "tokio")]

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use tokio::time::Instant;
use tollgate::keyed::ShardedKeyedTable;
use tollgate::partitioned::Partitioned;
use tollgate::queue::{Queue, WaitError};
use tollgate::{Gcra, Limiter, Quota, Timestamp, TokioClock};

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

#[test]
fn a_release_wakes_only_the_front_waiter_of_its_own_key_in_arrival_order() {
    let p = one_per_tenant();
    let now = Timestamp::ZERO;
    let held_7 = p.try_acquire(&7, now).unwrap();
    let held_8 = p.try_acquire(&8, now).unwrap();
    let (first_wakes, first_waker) = counting_waker();
    let (second_wakes, second_waker) = counting_waker();
    let (other_wakes, other_waker) = counting_waker();
    let mut first = Box::pin(p.acquire_key_in_line(0, 7, 1, 10, now));
    let mut second = Box::pin(p.acquire_key_in_line(0, 7, 1, 10, now));
    let mut other = Box::pin(p.acquire_key_in_line(0, 8, 1, 10, now));
    assert!(poll(&mut first, &first_waker).is_pending());
    assert!(poll(&mut second, &second_waker).is_pending());
    assert!(poll(&mut other, &other_waker).is_pending());
    // a newcomer does not overtake the line
    assert!(p.try_acquire(&7, now).is_err());

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
    let Poll::Ready(Ok(first_admission)) = poll(&mut first, &first_waker) else {
        panic!("the front waiter holds the released permit")
    };
    assert!(poll(&mut second, &second_waker).is_pending());

    drop(first_admission);
    assert_eq!((wakes(&second_wakes), wakes(&other_wakes)), (1, 0));
    assert!(matches!(
        poll(&mut second, &second_waker),
        Poll::Ready(Ok(_))
    ));
    drop(held_8);
    assert_eq!(wakes(&other_wakes), 1);
    assert!(matches!(poll(&mut other, &other_waker), Poll::Ready(Ok(_))));
}

#[test]
fn a_waiter_dropped_after_it_was_granted_hands_the_permit_to_the_next() {
    let p = one_per_tenant();
    let now = Timestamp::ZERO;
    let held = p.try_acquire(&7, now).unwrap();
    let (_, waker) = counting_waker();
    let mut gone = Box::pin(p.acquire_key_in_line(0, 7, 1, 10, now));
    let mut next = Box::pin(p.acquire_key_in_line(0, 7, 1, 10, now));
    let mut last = Box::pin(p.acquire_key_in_line(0, 7, 1, 10, now));
    assert!(poll(&mut gone, &waker).is_pending());
    assert!(poll(&mut next, &waker).is_pending());
    assert!(poll(&mut last, &waker).is_pending());
    drop(held); // granted to `gone`, which never looks
    drop(gone);
    let Poll::Ready(Ok(admission)) = poll(&mut next, &waker) else {
        panic!("the permit went on to the next waiter")
    };
    assert!(poll(&mut last, &waker).is_pending()); // not given twice
    drop(last); // a queued waiter leaves its line
    drop(admission);
    // the one permit is free again, and nobody waits
    let again = p.try_acquire(&7, now).unwrap();
    assert!(p.try_acquire(&7, now).is_err());
    drop(again);
}

#[test]
fn a_full_line_refuses_at_once() {
    let p = one_per_tenant();
    let now = Timestamp::ZERO;
    let _held = p.try_acquire(&7, now).unwrap();
    let (_, waker) = counting_waker();
    let mut queued = Box::pin(p.acquire_key_in_line(0, 7, 1, 1, now));
    assert!(poll(&mut queued, &waker).is_pending());
    let mut over = Box::pin(p.acquire_key_in_line(0, 7, 1, 1, now));
    let Poll::Ready(Err(refusal)) = poll(&mut over, &waker) else {
        panic!("a second waiter does not fit a line of 1")
    };
    assert_eq!(refusal.policy(), "per_tenant");
    assert_eq!(refusal.retry_after(), Duration::from_millis(1));
}

#[test]
fn a_key_without_a_slot_in_a_full_table_is_refused_not_queued() {
    // one key tracked: while tenant 7 is busy, tenant 8 has no slot, and no
    // release of its own would ever serve a line
    let p = Partitioned::<u32, u32>::builder("jobs")
        .concurrency(
            "per_tenant",
            |t: &u32| Some(*t),
            Partitioned::<u32, u32>::in_flight_table(1, 1).unwrap(),
        )
        .build();
    let now = Timestamp::ZERO;
    let _busy = p.try_acquire(&7, now).unwrap();
    let (_, waker) = counting_waker();
    let mut no_slot = Box::pin(p.acquire_key_in_line(0, 8, 1, 10, now));
    let Poll::Ready(Err(refusal)) = poll(&mut no_slot, &waker) else {
        panic!("a key without a slot must not wait for its own release")
    };
    assert!(refusal.path().is_overflow());
}
