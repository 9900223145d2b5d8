//! Async acquisition through a partitioned limiter on tokio's paused clock:
//! each key's excess requests wait their turn in arrival order (a shaped
//! policy), a flooding key never delays another key, the line is bounded by
//! the key's burst, waiters that go away from the end of the line give
//! their places back (one with waiters behind it leaves its place spent),
//! and an unshaped policy waits for capacity up to a maximum wait.
#![cfg(feature = "tokio")]

use core::time::Duration;
use std::sync::Arc;

use tokio::time::Instant;
use tollgate::keyed::ShardedKeyedTable;
use tollgate::partitioned::{Partitioned, Shaping};
use tollgate::queue::{Queue, WaitError};
use tollgate::{Gcra, Limiter, Quota, TokioClock};

/// 10 per second per client, 5 may wait (nginx `burst=5`), FIFO per client.
fn per_client(shaping: Option<Shaping>) -> Arc<Partitioned<u32, u32>> {
    let table = ShardedKeyedTable::<u32, _>::builder(Gcra::token_bucket(
        Quota::per_second(10).unwrap().with_burst(6).unwrap(),
    ))
    .build()
    .unwrap();
    let b = Partitioned::<u32, u32>::builder("http");
    Arc::new(
        match shaping {
            Some(s) => b.shaped("per_client", |c: &u32| Some(*c), table, s),
            None => b.policy("per_client", |c: &u32| Some(*c), table),
        }
        .build(),
    )
}

const FOREVER: Duration = Duration::from_secs(3600);

/// A queue of keys `u32` in front of `limiter` (shared: an `Arc`), waiting
/// at most `max_wait`, on `clock`.
fn queue_of<L>(limiter: L, clock: TokioClock, max_wait: Duration) -> Queue<L, u32>
where
    L: Limiter<u32, Permit: Send + 'static> + Send + Sync + 'static,
{
    Queue::builder(limiter)
        .max_wait(max_wait)
        .clock(clock)
        .build()
}

#[tokio::test(start_paused = true)]
async fn each_clients_excess_waits_its_turn_in_order() {
    let p = per_client(Some(Shaping::delay_all()));
    let clock = TokioClock::new();
    let queue = queue_of(Arc::clone(&p), clock, FOREVER);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..6u64 {
        let queue = queue.clone();
        tasks.push(tokio::spawn(async move {
            queue.acquire(&1, 1).await.map(drop).unwrap();
            (i, start.elapsed())
        }));
        tokio::task::yield_now().await; // arrive in order
    }
    // the 7th is beyond the line (burst 5 + 1): refused at once
    let no_wait = queue_of(Arc::clone(&p), clock, Duration::ZERO);
    let seventh = no_wait
        .acquire(&1, 1)
        .await
        .map(drop)
        .map_err(|r| r.retry_after());
    assert!(seventh.is_err(), "{seventh:?} at {:?}", start.elapsed());
    let mut done = Vec::new();
    for t in tasks {
        done.push(t.await.unwrap());
    }
    let want: Vec<(u64, Duration)> = (0..6)
        .map(|i| (i, Duration::from_millis(100 * i)))
        .collect();
    assert_eq!(done, want);
}

#[tokio::test(start_paused = true)]
async fn a_flooding_client_never_delays_another() {
    let p = per_client(Some(Shaping::delay_all()));
    let clock = TokioClock::new();
    let queue = queue_of(Arc::clone(&p), clock, FOREVER);
    let mut flood = Vec::new();
    for _ in 0..6 {
        let queue = queue.clone();
        flood.push(tokio::spawn(async move {
            queue
                .acquire(&1, 1)
                .await
                .map(drop)
                .map_err(|r| r.retry_after())
        }));
    }
    tokio::task::yield_now().await;
    let start = Instant::now();
    // client 2's first request passes at once though client 1 has six
    // waiting; its next ones follow its own rate only
    let mut times = Vec::new();
    for _ in 0..6 {
        queue.acquire(&2, 1).await.map(drop).unwrap();
        times.push(start.elapsed());
    }
    // exactly the pacing client 2 would get alone (nginx without nodelay
    // delays every request beyond the rate, from the first excess one)
    let alone: Vec<Duration> = (0..6).map(|i| Duration::from_millis(100 * i)).collect();
    assert_eq!(times, alone);
    for f in flood {
        f.await.unwrap().unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn waiters_that_go_away_from_the_end_of_the_line_give_their_places_back() {
    let p = per_client(Some(Shaping::delay_all()));
    let clock = TokioClock::new();
    let queue = queue_of(Arc::clone(&p), clock, FOREVER);
    // fill the line: delays 0..=500 ms
    let mut waiting = Vec::new();
    for _ in 0..6 {
        let queue = queue.clone();
        waiting.push(tokio::spawn(async move {
            queue
                .acquire(&1, 1)
                .await
                .map(drop)
                .map_err(|r| r.retry_after())
        }));
    }
    tokio::task::yield_now().await;
    assert!(p.try_acquire(&1, tollgate::Clock::now(&clock)).is_err());
    // one in the middle disconnects: the waiters behind it keep their
    // turns, so its place stays spent (giving it to a newcomer would put
    // two requests on one turn)
    let middle = waiting.remove(2);
    middle.abort();
    let _ = middle.await;
    assert!(p.try_acquire(&1, tollgate::Clock::now(&clock)).is_err());
    // the last three disconnect, latest first: each is then the last
    // place booked, and comes back
    for w in waiting.drain(2..).rev() {
        w.abort();
        let _ = w.await;
    }
    for _ in 0..3 {
        assert!(p.try_acquire(&1, tollgate::Clock::now(&clock)).is_ok());
    }
    assert!(p.try_acquire(&1, tollgate::Clock::now(&clock)).is_err());
    for w in waiting {
        w.await.unwrap().unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn an_unshaped_policy_waits_for_capacity_up_to_max_wait() {
    let p = per_client(None);
    let clock = TokioClock::new();
    let no_wait = queue_of(Arc::clone(&p), clock, Duration::ZERO);
    for _ in 0..6 {
        no_wait.acquire(&1, 1).await.map(drop).unwrap();
    }
    let start = Instant::now();
    // the next permit is 100 ms away: within a 250 ms maximum wait
    let within = queue_of(Arc::clone(&p), clock, Duration::from_millis(250));
    within.acquire(&1, 1).await.map(drop).unwrap();
    assert_eq!(start.elapsed(), Duration::from_millis(100));
    // 100 ms away again: more than a 50 ms maximum wait, refused at once
    let short = queue_of(Arc::clone(&p), clock, Duration::from_millis(50));
    let r = short.acquire(&1, 1).await.map(drop).unwrap_err();
    assert_eq!(
        r,
        WaitError::MaxWaitExceeded {
            estimated_wait: Some(Duration::from_millis(100)),
            max_wait: Duration::from_millis(50),
        }
    );
    assert_eq!(r.retry_after(), Some(Duration::from_millis(100)));
    assert_eq!(start.elapsed(), Duration::from_millis(100));
}

/// A `Queue` waits on a plain keyed table too (a limiter per
/// client, no partitioned limiter): a key's excess waits for its turn, the
/// others are not delayed, and a wait longer than `max_wait` is refused.
#[tokio::test(start_paused = true)]
async fn a_keyed_table_waits_per_key() {
    let table =
        ShardedKeyedTable::<u32, _>::builder(Gcra::token_bucket(Quota::per_second(10).unwrap()))
            .build()
            .unwrap();
    let table = Arc::new(table);
    let clock = TokioClock::new();
    let queue = queue_of(Arc::clone(&table), clock, FOREVER);
    let start = Instant::now();
    for _ in 0..10 {
        queue.acquire(&1, 1).await.map(drop).unwrap();
    }
    assert_eq!(start.elapsed(), Duration::ZERO, "the burst passes at once");
    // the 11th waits one interval for its turn
    let grant = queue.acquire(&1, 1).await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_millis(100));
    assert_eq!(grant.permits(), 1);
    // another client was never delayed: its whole burst is there
    let other = Instant::now();
    for _ in 0..10 {
        queue.acquire(&2, 1).await.map(drop).unwrap();
    }
    assert_eq!(other.elapsed(), Duration::ZERO);
    // client 1 is empty again: a wait of 100 ms is refused under a 50 ms bound
    let short = queue_of(Arc::clone(&table), clock, Duration::from_millis(50));
    let refused = short.acquire(&1, 1).await.map(drop).unwrap_err();
    assert_eq!(
        refused,
        WaitError::MaxWaitExceeded {
            estimated_wait: Some(Duration::from_millis(100)),
            max_wait: Duration::from_millis(50),
        }
    );
    assert_eq!(refused.retry_after(), Some(Duration::from_millis(100)));
    assert_eq!(
        other.elapsed(),
        Duration::ZERO,
        "refused at once, not after a wait"
    );
}
