//! A token-bucket policy behind a [`Queue`] decides exactly as nginx's
//! `limit_req`: the same accept/reject and the same delay, for `burst` with
//! `nodelay`, without it, and with `delay=N`, on the same arrival times.
//!
//! nginx `limit_req zone=z burst=B delay=D` at rate R is a token bucket of
//! rate R and burst D+1 (a partitioned policy, one bucket per key) behind a
//! queue of B−D permits per key (`nodelay`: burst B+1 and no queue; `burst=B`
//! alone: burst 1 and a queue of B). A request the bucket admits passes at
//! once; one that fits in the queue waits there, holding nothing, until the
//! bucket admits it; one that does not fit is refused. Time is tokio's
//! paused clock: every arrival and every admission instant is exact (the
//! rates below have whole-millisecond intervals, so tokio's 1 ms timer grid
//! never moves an admission).
//!
//! The reference is nginx's own arithmetic (ngx_http_limit_req_module.c,
//! `ngx_http_limit_req_lookup` and `_account`), restated: `excess` in
//! milli-requests, time in milliseconds, the rate in milli-requests per
//! second; excess drains at the rate, each request adds 1000, a request
//! whose excess would pass `burst·1000` is refused (state unchanged), and an
//! accepted one waits `(excess − delay·1000) / rate` seconds if its excess
//! is above `delay·1000` (nginx truncates that wait to whole milliseconds).

use crate::support;

use core::time::Duration;
use std::task::Poll;

use proptest::prelude::*;
use tokio::time::Instant;
use tollgate::keyed::ShardedKeyedTable;
use tollgate::partitioned::Partitioned;
use tollgate::queue::{Queue, WaitError};
use tollgate::{Gcra, Quota};

/// nginx's limit_req state for one key.
struct Nginx {
    /// requests per second × 1000
    rate: i64,
    /// burst × 1000
    burst: i64,
    /// delay × 1000 (`nodelay` is delay = burst)
    delay: i64,
    excess: i64,
    last_ms: i64,
    seen: bool,
}

impl Nginx {
    fn new(rate: u32, burst: u32, delay: u32) -> Self {
        Self {
            rate: i64::from(rate) * 1000,
            burst: i64::from(burst) * 1000,
            delay: i64::from(delay) * 1000,
            excess: 0,
            last_ms: 0,
            seen: false,
        }
    }

    /// `None` for a refusal, else the delay in milliseconds.
    fn request(&mut self, now_ms: i64) -> Option<i64> {
        let excess = if self.seen {
            let ms = (now_ms - self.last_ms).abs();
            (self.excess - self.rate * ms / 1000 + 1000).max(0)
        } else {
            0 // a new node: ngx_http_limit_req_lookup stores excess 0
        };
        if excess > self.burst {
            return None;
        }
        self.excess = excess;
        self.last_ms = now_ms;
        self.seen = true;
        if excess <= self.delay {
            Some(0)
        } else {
            Some((excess - self.delay) * 1000 / self.rate)
        }
    }
}

/// nginx's three forms of `limit_req ... burst=B`.
#[derive(Clone, Copy, Debug)]
enum Mode {
    /// `nodelay`
    NoDelay,
    /// no `nodelay`, no `delay`: every excess request is delayed
    DelayAll,
    /// `delay=N`: the first N excess requests pass at once
    Delay(u32),
}

impl Mode {
    /// nginx's `delay` for this form.
    fn delay(self, burst: u32) -> u32 {
        match self {
            Mode::NoDelay => burst,
            Mode::DelayAll => 0,
            Mode::Delay(d) => d,
        }
    }
}

type Zone = Queue<Partitioned<u8, u8>, u8>;

/// The partitioned policy of `limit_req zone=z burst=B delay=D` at `rate`:
/// one token bucket of burst D+1 per key.
fn policy(rate: u32, burst: u32, mode: Mode) -> Partitioned<u8, u8> {
    let bucket = Gcra::token_bucket(
        Quota::per_second(rate)
            .unwrap()
            .with_burst(mode.delay(burst) + 1)
            .unwrap(),
    );
    let table = ShardedKeyedTable::<u8, _>::builder(bucket).build().unwrap();
    Partitioned::<u8, u8>::builder("nginx")
        .policy("zone", |k: &u8| Some(*k), table)
        .build()
}

/// The policy behind a queue of B−D permits per key.
fn zone(rate: u32, burst: u32, mode: Mode) -> Zone {
    Queue::builder(policy(rate, burst, mode))
        .queue_limit(u64::from(burst - mode.delay(burst)))
        .build()
}

/// Sends a request of key 1 at each arrival (ms after the start, on
/// tokio's paused clock, in order; several at one instant arrive in turn,
/// each polled once, i.e. queued or answered, before the next). Returns
/// for each its wait, from its arrival to its admission (exact: the
/// clock is paused), or the error it was refused with at once. A request
/// that was queued must be admitted: a later refusal fails the test.
async fn run(queue: &Zone, arrivals_ms: &[u64]) -> Vec<Result<Duration, WaitError>> {
    let start = Instant::now();
    let mut answers = Vec::new();
    let mut waiting = Vec::new();
    for (i, &ms) in arrivals_ms.iter().enumerate() {
        let arrival = start + Duration::from_millis(ms);
        tokio::time::sleep_until(arrival).await;
        assert_eq!(Instant::now(), arrival, "request {i}: arrives at {ms} ms");
        let mut acquire = Box::pin(queue.acquire(&1, 1));
        match support::poll_once(&mut acquire).await {
            Poll::Ready(Ok(_)) => answers.push(Ok(Duration::ZERO)),
            Poll::Ready(Err(e)) => answers.push(Err(e)),
            Poll::Pending => {
                // waits in the queue; its admission instant, when woken
                let admitted = tokio::spawn(async move {
                    let permit = acquire.await;
                    (permit.map(drop), Instant::now())
                });
                waiting.push((i, arrival, admitted));
                answers.push(Ok(Duration::MAX)); // filled in below
            }
        }
    }
    for (i, arrival, admitted) in waiting {
        let (permit, at) = admitted.await.unwrap();
        assert!(
            permit.is_ok(),
            "request {i} was queued, then refused: {permit:?}"
        );
        answers[i] = Ok(at - arrival);
    }
    answers
}

/// Runs the same arrivals through both; compares every answer: refused
/// (nginx's 503) where nginx refuses, else admitted exactly nginx's delay
/// after its arrival.
async fn compare(rate: u32, burst: u32, mode: Mode, arrivals_ms: &[u64]) {
    let mut nginx = Nginx::new(rate, burst, mode.delay(burst));
    let want: Vec<Option<Duration>> = arrivals_ms
        .iter()
        .map(|&ms| {
            nginx
                .request(ms as i64)
                .map(|d| Duration::from_millis(d as u64))
        })
        .collect();
    let queue = zone(rate, burst, mode);
    let answers = run(&queue, arrivals_ms).await;
    let got: Vec<Option<Duration>> = answers
        .iter()
        .enumerate()
        .map(|(i, a)| match a {
            Ok(wait) => Some(*wait),
            Err(WaitError::QueueFull { .. }) => None,
            Err(e) => panic!("request {i}: refused by {e:?}, not by a full queue"),
        })
        .collect();
    for (i, (got, want)) in got.iter().zip(&want).enumerate() {
        assert_eq!(
            got, want,
            "rate {rate}/s burst {burst} {mode:?}: request {i} at {} ms \
             (arrivals {arrivals_ms:?}; got {got:?}, want {want:?})",
            arrivals_ms[i]
        );
    }
}

fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

#[tokio::test(start_paused = true)]
async fn burst_with_nodelay_admits_the_burst_at_once() {
    // limit_req zone=z burst=5 nodelay, rate=2r/s; 10 requests at t=0
    compare(2, 5, Mode::NoDelay, &[0; 10]).await;
    let ours = zone(2, 5, Mode::NoDelay);
    let start = Instant::now();
    let answers = run(&ours, &[0; 10]).await;
    let admitted = answers.iter().filter(|a| a.is_ok()).count();
    assert_eq!(admitted, 6); // 1 + burst
    // all at once, the rest refused at once: none waited
    assert!(answers[..6].iter().all(|a| *a == Ok(Duration::ZERO)));
    assert!(
        answers[6..]
            .iter()
            .all(|a| matches!(a, Err(WaitError::QueueFull { .. })))
    );
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(ours.stats().queued_requests, 0);
}

#[tokio::test(start_paused = true)]
async fn burst_without_nodelay_paces_the_excess() {
    // limit_req zone=z burst=5 (no nodelay), rate=2r/s: 0, 500, 1000, ... ms
    compare(2, 5, Mode::DelayAll, &[0; 10]).await;
    let ours = zone(2, 5, Mode::DelayAll);
    let delays = run(&ours, &[0; 6]).await;
    let want: Vec<Result<Duration, WaitError>> = (0..6).map(|i| Ok(ms(500 * i))).collect();
    assert_eq!(delays, want);
}

#[tokio::test(start_paused = true)]
async fn delay_n_passes_the_first_n_excess_requests_at_once() {
    // limit_req zone=z burst=12 delay=8, rate=5r/s (nginx's documentation
    // example: 8 excess at once, 4 more delayed, the rest refused)
    compare(5, 12, Mode::Delay(8), &[0; 20]).await;
    let ours = zone(5, 12, Mode::Delay(8));
    let answers = run(&ours, &[0; 14]).await;
    let delays: Vec<u128> = answers[..13]
        .iter()
        .map(|a| a.unwrap().as_millis())
        .collect();
    assert_eq!(delays, [0, 0, 0, 0, 0, 0, 0, 0, 0, 200, 400, 600, 800]);
    // the 14th would be the 5th to wait: refused at once
    assert!(matches!(answers[13], Err(WaitError::QueueFull { .. })));
}

#[tokio::test(start_paused = true)]
async fn max_wait_refuses_what_would_wait_too_long_and_gives_the_place_back() {
    // rate 2r/s, burst=5 without nodelay, waiting at most 1 s
    let ours = Queue::builder(policy(2, 5, Mode::DelayAll))
        .queue_limit(5)
        .max_wait(ms(1_000))
        .build();
    // at 0 ms: three pass (at 0, 500 and 1000 ms), the fourth would wait
    // 1.5 s; at 499 ms a request would still wait 1001 ms; at 500 ms (the
    // first waiter admitted) one waits exactly 1 s: the turn the refused
    // fourth would have had, which it did not keep
    let answers = run(&ours, &[0, 0, 0, 0, 499, 500]).await;
    assert_eq!(answers[..3], [Ok(ms(0)), Ok(ms(500)), Ok(ms(1_000))]);
    assert_eq!(
        answers[3],
        Err(WaitError::MaxWaitExceeded {
            estimated_wait: Some(ms(1_500)),
            max_wait: ms(1_000),
        })
    );
    assert_eq!(
        answers[4],
        Err(WaitError::MaxWaitExceeded {
            estimated_wait: Some(ms(1_001)),
            max_wait: ms(1_000),
        })
    );
    // the refused requests reserved nothing: at 500 ms its turn is 1 s away
    assert_eq!(answers[5], Ok(ms(1_000)));
    let stats = ours.stats();
    assert_eq!((stats.admitted_requests, stats.refused_requests), (4, 2));
}

fn any_rate() -> impl Strategy<Value = u32> {
    // rates whose interval and per-millisecond drain are whole numbers in
    // both arithmetics
    prop_oneof![
        Just(1u32),
        Just(2),
        Just(4),
        Just(5),
        Just(10),
        Just(20),
        Just(50),
        Just(100)
    ]
}

/// A runtime on tokio's paused clock, as `#[tokio::test(start_paused =
/// true)]` builds one: a fresh one per case, so each starts at tick 0.
fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn random_arrivals_match_nginx(
        rate in any_rate(),
        burst in 0u32..20,
        delay_pick in 0u32..3,
        gaps in prop::collection::vec(prop_oneof![Just(0u64), 0u64..50, 0u64..2_000], 1..80),
    ) {
        let mode = match delay_pick {
            0 => Mode::NoDelay,
            1 => Mode::DelayAll,
            _ => Mode::Delay(burst / 2),
        };
        let mut t = 0;
        let arrivals: Vec<u64> = gaps.iter().map(|g| { t += g; t }).collect();
        paused_runtime().block_on(compare(rate, burst, mode, &arrivals));
    }
}
