//! Waiters (`Queue::acquire` futures) in front of a partitioned limiter,
//! dropped while they wait, in waves, on tokio's paused clock: most of each
//! wave goes away, a few stay. Whatever the order of the drops, the
//! admissions never exceed `burst + ⌊t / T⌋` in any window of length `t`,
//! no turn is lost to a waiter that went away (a waiter holds nothing while
//! it waits: the ones that stay are admitted at consecutive turns), and the
//! waiters that stay are served in the order they arrived — for one key's
//! line, for the one bucket of a global policy (`PolicyStore::single`), and
//! for a chain of both. A permit granted to a waiter that goes away before
//! it takes it goes to the next waiter, never to two.

use crate::support;

use core::time::Duration;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;

use tokio::time::Instant;
use tollgate::keyed::ShardedKeyedTable;
use tollgate::partitioned::{Partitioned, PolicyStore};
use tollgate::queue::Queue;
use tollgate::{Clock, Gcra, Limiter, LiveBucket, Quota, TokioClock};

/// 10 per second, burst 1, up to 100 waiting per key (nginx `limit_req
/// burst=100` without `nodelay`: a bucket of burst 1 behind a queue of 100).
const T: Duration = Duration::from_millis(100);
const BURST: usize = 1;
const QUEUE_LIMIT: u64 = 100;

fn gcra() -> Gcra {
    Gcra::token_bucket(
        Quota::per_second(10)
            .unwrap()
            .with_burst(BURST as u32)
            .unwrap(),
    )
}

/// Requests per wave.
const WAVE: usize = 10;
/// The one request of each wave that stays; the rest go away: waiters
/// ahead of it and behind it, the head of the line among them.
const STAYS: [usize; 4] = [5, 4, 3, 1];

const FOREVER: Duration = Duration::from_secs(3600);

/// An admission: arrival number, queue key, when (since the start).
type Admitted = (usize, u32, Duration);
type Waiter = Pin<Box<dyn Future<Output = ()>>>;

/// Whether the waiters of a wave go away latest first (each then the last
/// one in its line) or earliest first (each the head of its line, with
/// later ones behind it).
#[derive(Clone, Copy, Debug)]
enum Drops {
    LatestFirst,
    EarliestFirst,
}

/// One request admitted at once, then the waves: each request arrives
/// after the previous one has joined its line (its future polled once:
/// the explicit signal), the ones not in `STAYS` are dropped, and the
/// next wave arrives at once. Then the waiters that stayed are run to
/// their turn. `key_of` gives the queue key (the line) of each arrival.
/// Returns the admissions in the order the limiter let them through.
async fn waves<L>(limiter: L, key_of: fn(usize) -> u32, drops: Drops) -> Vec<Admitted>
where
    L: Limiter<u32, Permit: Send + 'static> + Send + Sync + 'static,
{
    let clock = TokioClock::new();
    let queue = Queue::builder(limiter)
        .queue_limit(QUEUE_LIMIT)
        .max_wait(FOREVER)
        .clock(clock)
        .build();
    let start = Instant::now();
    let log: Arc<Mutex<Vec<Admitted>>> = Arc::default();
    let mut arrival = 0;
    let mut arrive = || {
        let (queue, log, id) = (queue.clone(), Arc::clone(&log), arrival);
        arrival += 1;
        let waiter: Waiter = Box::pin(async move {
            let key = key_of(id);
            let lease = queue.acquire(&key, 1).await;
            if let Err(e) = lease {
                panic!("request {id} refused: {e:?}");
            }
            log.lock().unwrap().push((id, key, start.elapsed()));
        });
        waiter
    };
    let mut first = arrive();
    assert!(
        support::poll_once(&mut first).await.is_ready(),
        "the first request passes at once"
    );
    let mut stayed = Vec::new();
    for (w, stays) in STAYS.into_iter().enumerate() {
        let mut wave = Vec::new();
        for _ in 0..WAVE {
            let mut waiter = arrive();
            // in its line on its first poll: the bucket is spent, so it waits
            assert!(matches!(
                support::poll_once(&mut waiter).await,
                Poll::Pending
            ));
            wave.push(waiter);
        }
        assert_eq!(
            queue.stats().queued_requests,
            (stayed.len() + WAVE) as u64,
            "wave {w}: every request of it waits"
        );
        stayed.push(wave.remove(stays));
        match drops {
            Drops::LatestFirst => wave.into_iter().rev().for_each(drop),
            Drops::EarliestFirst => wave.into_iter().for_each(drop),
        }
        // the dropped ones left their lines at once
        let stats = queue.stats();
        assert_eq!(stats.queued_requests, stayed.len() as u64, "wave {w}");
        assert_eq!(
            stats.cancelled_requests,
            ((w + 1) * (WAVE - 1)) as u64,
            "wave {w}"
        );
        assert_eq!(stats.admitted_requests, 1, "wave {w}: only the first");
    }
    // all of them at once, each polled when woken (paused time advances
    // to the next turn whenever none can run)
    std::future::poll_fn(|cx| {
        stayed.retain_mut(|w| w.as_mut().poll(cx).is_pending());
        if stayed.is_empty() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    let log = log.lock().unwrap().clone();
    assert_eq!(
        log.len(),
        1 + STAYS.len(),
        "every waiter that stayed: {log:?}"
    );
    let stats = queue.stats();
    assert_eq!(
        (stats.queued_requests, stats.admitted_requests),
        (0, log.len() as u64)
    );
    log
}

/// At most `BURST + ⌊t / T⌋` admissions in every window of length `t`
/// (paused time: the instants are exact).
fn assert_within_rate(admitted: &[Admitted], what: &str) {
    let mut at: Vec<Duration> = admitted.iter().map(|a| a.2).collect();
    at.sort();
    for i in 0..at.len() {
        for j in i..at.len() {
            let window = at[j] - at[i];
            let allowed = BURST + (window.as_nanos() / T.as_nanos()) as usize;
            assert!(
                j - i < allowed,
                "{what}: {} admissions within {window:?} (at most {allowed}): {admitted:?}",
                j - i + 1
            );
        }
    }
}

/// No turn lost to the waiters that went away: the first at once, the
/// ones that stayed at the next turns, one each, exactly (paused time),
/// and in the order the limiter let them through.
fn assert_consecutive_turns(admitted: &[Admitted], what: &str) {
    let at: Vec<Duration> = admitted.iter().map(|a| a.2).collect();
    let turns: Vec<Duration> = (0..admitted.len() as u32).map(|k| k * T).collect();
    assert_eq!(at, turns, "{what}: {admitted:?}");
}

/// Served in arrival order (per key when `per_key`).
fn assert_in_arrival_order(admitted: &[Admitted], per_key: bool, what: &str) {
    for (i, a) in admitted.iter().enumerate() {
        for b in &admitted[i + 1..] {
            if !per_key || a.1 == b.1 {
                assert!(
                    a.0 < b.0,
                    "{what}: request {} served before request {}, which arrived first: {admitted:?}",
                    a.0,
                    b.0
                );
            }
        }
    }
}

fn per_key_line() -> Partitioned<u32, u32> {
    let table = ShardedKeyedTable::<u32, _>::builder(gcra())
        .build()
        .unwrap();
    Partitioned::builder("per_key")
        .policy("client", |c: &u32| Some(*c), table)
        .build()
}

fn global_store() -> PolicyStore<u32> {
    PolicyStore::single(LiveBucket::new(gcra()))
}

fn global_line() -> Partitioned<u32, u32> {
    Partitioned::builder("global")
        .store("all", |c: &u32| Some(*c), global_store())
        .build()
}

#[tokio::test(start_paused = true)]
async fn dropped_waiters_of_one_key_never_let_two_requests_share_a_turn() {
    for drops in [Drops::LatestFirst, Drops::EarliestFirst] {
        let what = format!("one key, {drops:?}");
        let admitted = waves(Arc::new(per_key_line()), |_| 7, drops).await;
        assert_within_rate(&admitted, &what);
        assert_consecutive_turns(&admitted, &what);
        assert_in_arrival_order(&admitted, false, &what);
    }
}

#[tokio::test(start_paused = true)]
async fn dropped_waiters_of_a_global_bucket_never_let_two_requests_share_a_turn() {
    for drops in [Drops::LatestFirst, Drops::EarliestFirst] {
        // every client in the global policy's one line: the caller charges
        // the policy's store for the policy's one key (as the HTTP layer
        // does), so the clients' requests wait in one line, in arrival order
        let what = format!("global bucket, one line for all clients, {drops:?}");
        let admitted = waves(global_store(), |_| 0, drops).await;
        assert_within_rate(&admitted, &what);
        assert_consecutive_turns(&admitted, &what);
        assert_in_arrival_order(&admitted, false, &what);

        // a line per client in front of the partitioned limiter, all on
        // the one bucket: lines of different keys are not ordered among
        // themselves (the queue's documented semantics), but the bucket
        // still never lets two requests share a turn, and no turn is lost
        let what = format!("global bucket, a line per client, {drops:?}");
        let admitted = waves(Arc::new(global_line()), |id| id as u32, drops).await;
        assert_within_rate(&admitted, &what);
        assert_consecutive_turns(&admitted, &what);
        assert_in_arrival_order(&admitted, true, &what);
    }
}

#[tokio::test(start_paused = true)]
async fn dropped_waiters_of_a_chain_never_let_two_requests_share_a_turn() {
    for drops in [Drops::LatestFirst, Drops::EarliestFirst] {
        let what = format!("per key then global, {drops:?}");
        let chain = per_key_line().and(global_line());
        // two clients: each its own line, both on the global bucket
        let admitted = waves(Arc::new(chain), |id| (id % 2) as u32, drops).await;
        assert_within_rate(&admitted, &what);
        assert_consecutive_turns(&admitted, &what);
        for key in 0..2 {
            let of_key: Vec<Admitted> = admitted.iter().filter(|a| a.1 == key).copied().collect();
            assert_within_rate(&of_key, &format!("{what}, client {key}"));
        }
        assert_in_arrival_order(&admitted, true, &what);
    }
}

/// A waiter granted its permit by the line's timer but dropped before it
/// took it: the permit goes back to the bucket and to the next waiter at
/// that same instant, not to the next and to a later one too.
#[tokio::test(start_paused = true)]
async fn a_grant_dropped_before_it_is_taken_goes_to_the_next_waiter_only() {
    let queue = Queue::builder(Arc::new(per_key_line()))
        .queue_limit(QUEUE_LIMIT)
        .max_wait(FOREVER)
        .build();
    let start = Instant::now();
    let mut waiters: Vec<_> = (0..4).map(|_| Box::pin(queue.acquire(&7, 1))).collect();
    let mut polled = Vec::new();
    for w in &mut waiters {
        polled.push(support::poll_once(w).await.map(|r| r.is_ok()));
    }
    assert_eq!(
        polled,
        [
            Poll::Ready(true),
            Poll::Pending,
            Poll::Pending,
            Poll::Pending
        ]
    );
    let mut waiters = waiters.into_iter().skip(1);
    let (granted, mut next, mut last) = (
        waiters.next().unwrap(),
        waiters.next().unwrap(),
        waiters.next().unwrap(),
    );
    // at T the line's timer grants the head (before this task resumes at
    // that instant): it has left the line, its permit not yet taken
    tokio::time::sleep_until(start + T).await;
    let stats = queue.stats();
    assert_eq!((stats.queued_requests, stats.admitted_requests), (2, 1));
    drop(granted);
    // its permit went to the next waiter, now
    assert!(matches!(
        support::poll_once(&mut next).await,
        Poll::Ready(Ok(_))
    ));
    assert!(matches!(support::poll_once(&mut last).await, Poll::Pending));
    assert_eq!(start.elapsed(), T);
    // taken once: the bucket's next turn is a whole interval away (not
    // now: the permit was not left in it as well; not later: not lost)
    let now = queue.clock().now();
    assert_eq!(queue.limiter().time_until_ready(&7, 1, now), Ok(T));
    // and only to it: the last waits for the next turn
    assert!(last.await.is_ok());
    assert_eq!(start.elapsed(), 2 * T);
    let stats = queue.stats();
    assert_eq!(
        (
            stats.queued_requests,
            stats.admitted_requests,
            stats.cancelled_requests
        ),
        (0, 3, 1)
    );
}
