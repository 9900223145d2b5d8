//! Shaped waiters (`Queue::acquire` futures) dropped while
//! they wait, in waves, on tokio's paused clock: most of each wave goes
//! away, a few stay. Whatever the order of the drops, the admissions never
//! exceed `burst + ⌊t / T⌋` in any window of length `t`, and the waiters
//! that stay are served in the order they arrived — for one key's line,
//! for the one bucket of a global policy (`PolicyStore::single`), and for
//! a chain of both.
#![cfg(feature = "tokio")]

mod support;

use core::time::Duration;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;

use tokio::time::Instant;
use tollgate::keyed::ShardedKeyedTable;
use tollgate::partitioned::{Partitioned, PolicyStore, Shaping};
use tollgate::queue::Queue;
use tollgate::{Gcra, Limiter, LiveBucket, Quota, TokioClock};

/// 10 per second, burst 1, up to 100 waiting (`queue = { limit = 100 }`).
const T: Duration = Duration::from_millis(100);
const BURST: usize = 1;

fn gcra() -> Gcra {
    Gcra::token_bucket(Quota::per_second(10).unwrap().with_burst(101).unwrap())
}

/// Requests per wave.
const WAVE: usize = 10;
/// The one request of each wave that stays; the rest go away. Chosen so
/// that a give-back from the end of the bucket puts later arrivals on the
/// turns of earlier waiters, and one of them before an earlier waiter.
const STAYS: [usize; 4] = [5, 4, 3, 1];

const FOREVER: Duration = Duration::from_secs(3600);

/// An admission: arrival number, key, when (since the start).
type Admitted = (usize, u32, Duration);
type Waiter = Pin<Box<dyn Future<Output = ()>>>;

/// Whether the waiters of a wave go away latest first (each then the last
/// one booked) or earliest first (each with later ones booked on top).
#[derive(Clone, Copy, Debug)]
enum Drops {
    LatestFirst,
    EarliestFirst,
}

/// One request admitted at once, then the waves: each request arrives
/// after the previous one has booked its turn (its future polled once:
/// the explicit signal), the ones not in `STAYS` are dropped, and the
/// next wave arrives at once. Then the waiters that stayed are run to
/// their turn. Returns the admissions in the order the limiter let them
/// through.
async fn waves<P>(limiter: Arc<P>, key_of: fn(usize) -> u32, drops: Drops) -> Vec<Admitted>
where
    P: Limiter<u32, Permit: Send + 'static> + Send + Sync + 'static,
{
    let clock = TokioClock::new();
    let queue = Queue::builder(limiter)
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
            assert!(lease.is_ok(), "request {id} refused");
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
    for stays in STAYS {
        let mut wave = Vec::new();
        for _ in 0..WAVE {
            let mut waiter = arrive();
            // booked on its first poll: the bucket is spent, so it waits
            assert!(matches!(
                support::poll_once(&mut waiter).await,
                Poll::Pending
            ));
            wave.push(waiter);
        }
        stayed.push(wave.remove(stays));
        match drops {
            Drops::LatestFirst => wave.into_iter().rev().for_each(drop),
            Drops::EarliestFirst => wave.into_iter().for_each(drop),
        }
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
        .shaped("client", |c: &u32| Some(*c), table, Shaping::delay_all())
        .build()
}

fn global_line() -> Partitioned<u32, u32> {
    let bucket = PolicyStore::single(LiveBucket::new(gcra()))
        .with_shaping(Shaping::delay_all())
        .unwrap();
    Partitioned::builder("global")
        .store("all", |c: &u32| Some(*c), bucket)
        .build()
}

#[tokio::test(start_paused = true)]
async fn dropped_waiters_of_one_key_never_let_two_requests_share_a_turn() {
    for drops in [Drops::LatestFirst, Drops::EarliestFirst] {
        let what = format!("one key, {drops:?}");
        let admitted = waves(Arc::new(per_key_line()), |_| 7, drops).await;
        assert_within_rate(&admitted, &what);
        assert_in_arrival_order(&admitted, false, &what);
    }
}

#[tokio::test(start_paused = true)]
async fn dropped_waiters_of_a_global_bucket_never_let_two_requests_share_a_turn() {
    for drops in [Drops::LatestFirst, Drops::EarliestFirst] {
        let what = format!("global bucket, many keys, {drops:?}");
        let admitted = waves(Arc::new(global_line()), |id| id as u32, drops).await;
        assert_within_rate(&admitted, &what);
        assert_in_arrival_order(&admitted, false, &what);
    }
}

#[tokio::test(start_paused = true)]
async fn dropped_waiters_of_a_chain_never_let_two_requests_share_a_turn() {
    for drops in [Drops::LatestFirst, Drops::EarliestFirst] {
        let what = format!("per key then global, {drops:?}");
        let chain = per_key_line().and(global_line());
        // two clients: each its own line, both in the global one
        let admitted = waves(Arc::new(chain), |id| (id % 2) as u32, drops).await;
        assert_within_rate(&admitted, &what);
        for key in 0..2 {
            let of_key: Vec<Admitted> = admitted.iter().filter(|a| a.1 == key).copied().collect();
            assert_within_rate(&of_key, &format!("{what}, client {key}"));
        }
        assert_in_arrival_order(&admitted, true, &what);
    }
}
