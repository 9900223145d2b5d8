//! OldestFirst against a plain reference scheduler: random arrivals (time,
//! size, patience) on a paused clock; every request is granted or gives up
//! at exactly the instant a simple FIFO-over-a-credit-counter model says.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use tokio::time::Instant;
use tollgate::queue::Queue;
use tollgate::{Bucket, Quota};

use support::{CountPolls, until};

#[derive(Debug, Clone, Copy)]
struct Arrival {
    at_ms: u64,
    n: u32,
    patience_ms: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Granted(u64),
    GaveUp(u64),
}

/// The reference: requests in arrival order; each waits for the one ahead
/// of it to leave (granted, or given up), then for the credit counter to
/// hold `n` intervals of refill. Units: ms; T ms per permit, burst b.
fn model(arrivals: &[Arrival], t: u64, burst: u64) -> Vec<Fate> {
    let full = burst * t;
    let (mut credit, mut credit_at) = (full, 0u64);
    let mut blocked_until = 0u64;
    let mut fates = Vec::new();
    for a in arrivals {
        let start = a.at_ms.max(blocked_until);
        // credit at `start`
        let c = (credit + (start - credit_at)).min(full);
        let need = u64::from(a.n) * t;
        let ready = if c >= need { start } else { start + (need - c) };
        match a.patience_ms {
            Some(p) if ready > a.at_ms + p => {
                let gave_up = a.at_ms + p;
                fates.push(Fate::GaveUp(gave_up));
                blocked_until = blocked_until.max(gave_up);
            }
            _ => {
                credit = (credit + (ready - credit_at)).min(full) - need;
                credit_at = ready;
                fates.push(Fate::Granted(ready));
                blocked_until = ready;
            }
        }
    }
    fates
}

fn run_queue(arrivals: &[Arrival], per_second: u32, burst: u32) -> Vec<Fate> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        let bucket = Bucket::token_bucket(
            Quota::per_second(per_second)
                .unwrap()
                .with_burst(burst)
                .unwrap(),
        );
        let queue = Arc::new(Queue::new(bucket));
        let start = Instant::now();
        let ms = move |i: Instant| (i - start).as_millis() as u64;
        let mut tasks = Vec::new();
        for a in arrivals.iter().copied() {
            tokio::time::sleep_until(start + Duration::from_millis(a.at_ms)).await;
            let q = queue.clone();
            let polled = Arc::new(AtomicUsize::new(0));
            let task = async move {
                let acquire = q.acquire(&(), a.n);
                let outcome = match a.patience_ms {
                    Some(p) => tokio::time::timeout(Duration::from_millis(p), acquire)
                        .await
                        .ok(),
                    None => Some(acquire.await),
                };
                match outcome {
                    Some(Ok(permit)) => {
                        permit.forget();
                        Fate::Granted(ms(Instant::now()))
                    }
                    Some(Err(e)) => panic!("refused: {e}"),
                    None => Fate::GaveUp(ms(Instant::now())),
                }
            };
            tasks.push(tokio::spawn(CountPolls::new(task, polled.clone())));
            // Arrival order is the order of first polls.
            until(move || polled.load(Ordering::SeqCst) > 0).await;
        }
        let mut fates = Vec::new();
        for t in tasks {
            fates.push(t.await.unwrap());
        }
        assert_eq!(queue.stats().queued_requests, 0);
        fates
    })
}

fn arrivals() -> impl Strategy<Value = Vec<Arrival>> {
    prop::collection::vec(
        (0u64..60, 1u32..=4, prop::option::weighted(0.3, 0u64..120)),
        1..25,
    )
    .prop_map(|mut v| {
        v.sort_by_key(|&(at, _, _)| at);
        v.into_iter()
            .map(|(at_ms, n, patience_ms)| Arrival {
                at_ms,
                n,
                patience_ms,
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn oldest_first_grants_and_gives_up_exactly_when_the_model_says(
        arrivals in arrivals(),
        t in prop::sample::select(vec![5u64, 10, 20, 25]),
        burst in 4u32..=6,
    ) {
        let per_second = (1000 / t) as u32;
        let expected = model(&arrivals, t, u64::from(burst));
        let actual = run_queue(&arrivals, per_second, burst);
        prop_assert_eq!(actual, expected);
    }
}
