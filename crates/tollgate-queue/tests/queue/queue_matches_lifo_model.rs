//! NewestFirst against a plain reference scheduler: random arrivals on a
//! paused clock; every request is granted, displaced or refused at exactly
//! the instant a simple LIFO-over-a-credit-counter model (with .NET's
//! "refuse the oldest to fit the newest" rule) says.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use tokio::time::Instant;
use tollgate::queue::{Queue, QueueOrder, WaitError};
use tollgate::{Bucket, Quota};

use support::{CountPolls, until};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Granted(u64),
    Displaced(u64),
    QueueFull(u64),
}

struct Credit {
    full: u64,
    credit: u64,
    at: u64,
}

impl Credit {
    fn at(&self, now: u64) -> u64 {
        (self.credit + (now - self.at)).min(self.full)
    }
    fn take(&mut self, need: u64, now: u64) {
        self.credit = self.at(now) - need;
        self.at = now;
    }
}

/// Units: ms; T ms per permit, burst b, at most `limit` permits waiting.
fn model(arrivals: &[(u64, u32)], t: u64, burst: u64, limit: u64) -> Vec<Fate> {
    let mut credit = Credit {
        full: burst * t,
        credit: burst * t,
        at: 0,
    };
    let mut fates = vec![None; arrivals.len()];
    let mut line: Vec<(usize, u64)> = Vec::new(); // oldest first
    let mut now = 0u64;
    let serve_until = |limit_t: u64,
                       now: &mut u64,
                       line: &mut Vec<(usize, u64)>,
                       credit: &mut Credit,
                       fates: &mut Vec<Option<Fate>>| {
        while let Some(&(i, n)) = line.last() {
            let need = n * t;
            let c = credit.at(*now);
            let ready = if c >= need { *now } else { *now + (need - c) };
            if ready > limit_t {
                break;
            }
            credit.take(need, ready);
            *now = ready;
            fates[i] = Some(Fate::Granted(ready));
            line.pop();
        }
    };
    for (i, &(at, n)) in arrivals.iter().enumerate() {
        serve_until(at, &mut now, &mut line, &mut credit, &mut fates);
        now = at;
        let need = u64::from(n) * t;
        if credit.at(now) >= need {
            credit.take(need, now);
            fates[i] = Some(Fate::Granted(now));
            continue;
        }
        let n = u64::from(n);
        let mut queued: u64 = line.iter().map(|&(_, k)| k).sum();
        if queued + n > limit {
            if n > limit {
                fates[i] = Some(Fate::QueueFull(now));
                continue;
            }
            while queued + n > limit {
                let (j, k) = line.remove(0);
                fates[j] = Some(Fate::Displaced(now));
                queued -= k;
            }
        }
        line.push((i, n));
    }
    serve_until(u64::MAX, &mut now, &mut line, &mut credit, &mut fates);
    fates.into_iter().map(Option::unwrap).collect()
}

fn run_queue(arrivals: &[(u64, u32)], per_second: u32, burst: u32, limit: u64) -> Vec<Fate> {
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
        let queue = Arc::new(
            Queue::builder(bucket)
                .order(QueueOrder::NewestFirst)
                .queue_limit(limit)
                .build(),
        );
        let start = Instant::now();
        let ms = move || (Instant::now() - start).as_millis() as u64;
        let mut tasks = Vec::new();
        for &(at, n) in arrivals {
            tokio::time::sleep_until(start + Duration::from_millis(at)).await;
            let q = queue.clone();
            let polled = Arc::new(AtomicUsize::new(0));
            let task = async move {
                match q.acquire(&(), n).await {
                    Ok(p) => {
                        p.forget();
                        Fate::Granted(ms())
                    }
                    Err(WaitError::Displaced) => Fate::Displaced(ms()),
                    Err(WaitError::QueueFull { .. }) => Fate::QueueFull(ms()),
                    Err(e) => panic!("unexpected: {e}"),
                }
            };
            tasks.push(tokio::spawn(CountPolls::new(task, polled.clone())));
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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn newest_first_matches_the_model(
        mut arrivals in prop::collection::vec((0u64..80, 1u32..=3), 1..25),
        t in prop::sample::select(vec![5u64, 10, 20]),
        burst in 3u32..=4,
        limit in 2u64..=6,
    ) {
        arrivals.sort_by_key(|&(at, _)| at);
        let expected = model(&arrivals, t, u64::from(burst), limit);
        let actual = run_queue(&arrivals, (1000 / t) as u32, burst, limit);
        prop_assert_eq!(actual, expected);
    }
}
