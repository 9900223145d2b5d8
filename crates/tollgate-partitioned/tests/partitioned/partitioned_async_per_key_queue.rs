//! Async acquisition through a partitioned limiter on tokio's paused clock,
//! with a `Queue` in front of a plain policy (nginx `limit_req burst=5`: a
//! bucket of burst 1 and a line of 5 per key): each key's excess requests
//! wait their turn in arrival order, a flooding key never delays another
//! key, the line is bounded per key, waiters that go away give their
//! places back (those behind them move up), and a policy with a burst
//! waits for capacity up to a maximum wait.

use core::time::Duration;
use std::sync::Arc;

use tokio::time::Instant;
use tollgate::keyed::ShardedKeyedTable;
use tollgate::partitioned::Partitioned;
use tollgate::queue::{Queue, WaitError};
use tollgate::{Gcra, Limiter, Quota, TokioClock};

/// 10 per second per client, bursts of `burst`.
fn per_client(burst: u32) -> Arc<Partitioned<u32, u32>> {
    let table = ShardedKeyedTable::<u32, _>::builder(Gcra::token_bucket(
        Quota::per_second(10).unwrap().with_burst(burst).unwrap(),
    ))
    .build()
    .unwrap();
    Arc::new(
        Partitioned::<u32, u32>::builder("http")
            .policy("per_client", |c: &u32| Some(*c), table)
            .build(),
    )
}

const FOREVER: Duration = Duration::from_secs(3600);

/// A queue of clients in front of a shared partitioned limiter.
type Lines = Queue<Arc<Partitioned<u32, u32>>, u32>;

/// What nginx `limit_req burst=5` (without `nodelay`) is: a bucket of
/// burst 1 (was: of burst 6, shaped with `Shaping::delay_all`) behind a
/// line of at most 5 per client, FIFO per client.
fn nginx_burst_5(clock: TokioClock) -> (Arc<Partitioned<u32, u32>>, Lines) {
    let p = per_client(1);
    let queue = Queue::builder(Arc::clone(&p))
        .queue_limit(5)
        .max_wait(FOREVER)
        .clock(clock)
        .build();
    (p, queue)
}

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
    let clock = TokioClock::new();
    let (p, queue) = nginx_burst_5(clock);
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
    assert_eq!(queue.stats().queued_requests, 5);
    // the 7th is beyond the line (1 admitted + 5 waiting): refused at once,
    // told to retry when the head of the line has gone in
    let seventh = queue.acquire(&1, 1).await.map(drop);
    assert_eq!(
        seventh,
        Err(WaitError::QueueFull {
            retry_after: Some(Duration::from_millis(100))
        }),
        "at {:?}",
        start.elapsed()
    );
    assert_eq!(start.elapsed(), Duration::ZERO);
    // nor does a check past the queue find a turn: the bucket is spent
    assert!(p.try_acquire(&1, tollgate::Clock::now(&clock)).is_err());
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
    let (_, queue) = nginx_burst_5(TokioClock::new());
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
    assert_eq!(queue.stats().queued_requests, 5);
    let start = Instant::now();
    // client 2's first request passes at once though client 1 has five
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

/// Was: a waiter leaving from the middle left its (reserved) place spent.
/// Behind a `Queue` a waiter holds nothing until its turn, so every waiter
/// that goes away gives its place back: those behind it move up, and the
/// line has room again for newcomers.
#[tokio::test(start_paused = true)]
async fn waiters_that_go_away_from_the_end_of_the_line_give_their_places_back() {
    let clock = TokioClock::new();
    let (p, queue) = nginx_burst_5(clock);
    let start = Instant::now();
    let spawn = |queue: &Lines| {
        let queue = queue.clone();
        tokio::spawn(async move {
            queue
                .acquire(&1, 1)
                .await
                .map(drop)
                .map_err(|r| r.retry_after())?;
            Ok::<_, Option<Duration>>(start.elapsed())
        })
    };
    // fill the line: the first goes in, five wait for 100..=500 ms
    let mut waiting = Vec::new();
    for _ in 0..6 {
        waiting.push(spawn(&queue));
        tokio::task::yield_now().await; // arrive in order
    }
    assert_eq!(queue.stats().queued_requests, 5);
    assert!(p.try_acquire(&1, tollgate::Clock::now(&clock)).is_err());
    assert!(matches!(
        queue.acquire(&1, 1).await.map(drop),
        Err(WaitError::QueueFull { .. })
    ));
    // one in the middle disconnects: its place comes back
    let middle = waiting.remove(2);
    middle.abort();
    assert!(middle.await.unwrap_err().is_cancelled());
    assert_eq!(queue.stats().queued_requests, 4);
    // the last three disconnect, latest first: each place comes back
    for w in waiting.drain(2..).rev() {
        w.abort();
        assert!(w.await.unwrap_err().is_cancelled());
    }
    let stats = queue.stats();
    assert_eq!((stats.queued_requests, stats.cancelled_requests), (1, 4));
    // the bucket is still spent (nobody took a turn), and the four places
    // are free: four newcomers fit, a fifth does not
    assert!(p.try_acquire(&1, tollgate::Clock::now(&clock)).is_err());
    let mut newcomers = Vec::new();
    for _ in 0..4 {
        newcomers.push(spawn(&queue));
        tokio::task::yield_now().await;
    }
    assert_eq!(queue.stats().queued_requests, 5);
    assert!(matches!(
        queue.acquire(&1, 1).await.map(drop),
        Err(WaitError::QueueFull { .. })
    ));
    assert_eq!(start.elapsed(), Duration::ZERO);
    // no turn is lost to the ones that left: one every 100 ms
    let mut times = Vec::new();
    for w in waiting.into_iter().chain(newcomers) {
        times.push(w.await.unwrap().unwrap());
    }
    let want: Vec<Duration> = (0..6).map(|i| Duration::from_millis(100 * i)).collect();
    assert_eq!(times, want);
}

#[tokio::test(start_paused = true)]
async fn an_unshaped_policy_waits_for_capacity_up_to_max_wait() {
    let p = per_client(6);
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
