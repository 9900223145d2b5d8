//! Queued acquisition: tollgate's `Queue` against the `leaky-bucket` crate
//! on the same work, in one criterion run (this machine is noisy: compare
//! the ratios).
//!
//! - `uncontended/*`: one permit when capacity is available, versus the
//!   plain synchronous `check` (reading the same kind of clock).
//! - `paced_100_waiters/*`: 100 tasks wait on a 1000/s, burst-1 limiter and
//!   are served one per millisecond, under tokio's paused time, so the
//!   figure is the CPU cost of queueing, timers and wake-ups rather than the
//!   99 ms of pacing itself.

// `criterion_group!` generates an undocumented `pub fn`.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use tollgate::queue::Queue;
use tollgate::{Bucket, Clock, Quota, StdClock, TokioClock};

fn roomy_bucket() -> Bucket<tollgate::Gcra> {
    // 1e9 per second (T = 1 ns): never refuses at benchmark speed.
    Bucket::token_bucket(Quota::per_second(1_000_000_000).unwrap())
}

fn roomy_leaky_bucket() -> leaky_bucket::RateLimiter {
    leaky_bucket::RateLimiter::builder()
        .max(1 << 40)
        .initial(1 << 40)
        .refill(1 << 30)
        .interval(Duration::from_millis(1))
        .build()
}

fn uncontended(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut g = c.benchmark_group("uncontended");
    g.warm_up_time(Duration::from_millis(300));
    g.measurement_time(Duration::from_secs(1));

    let bucket = roomy_bucket();
    let clock = StdClock::new();
    g.bench_function("tollgate_sync_check_std_clock", |b| {
        b.to_async(&rt)
            .iter(|| async { black_box(bucket.check(clock.now())) })
    });
    let bucket = roomy_bucket();
    let tokio_clock = rt.block_on(async { TokioClock::new() });
    g.bench_function("tollgate_sync_check_tokio_clock", |b| {
        b.to_async(&rt)
            .iter(|| async { black_box(bucket.check(tokio_clock.now())) })
    });
    let queue = Queue::new(roomy_bucket());
    g.bench_function("tollgate_queue_acquire", |b| {
        b.to_async(&rt)
            .iter(|| async { queue.acquire(&(), 1).await.unwrap().forget() })
    });
    let leaky = roomy_leaky_bucket();
    g.bench_function("leaky_bucket_acquire", |b| {
        b.to_async(&rt).iter(|| async { leaky.acquire(1).await })
    });
    g.finish();
}

fn paced(c: &mut Criterion) {
    const WAITERS: usize = 100;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let mut g = c.benchmark_group("paced_100_waiters");
    g.warm_up_time(Duration::from_millis(300));
    g.measurement_time(Duration::from_secs(2));
    g.sample_size(20);

    g.bench_function("tollgate_queue", |b| {
        b.to_async(&rt).iter(|| async {
            let bucket =
                Bucket::token_bucket(Quota::per_second(1000).unwrap().with_burst(1).unwrap());
            let queue = Arc::new(Queue::new(bucket));
            let tasks: Vec<_> = (0..WAITERS)
                .map(|_| {
                    let q = queue.clone();
                    tokio::spawn(async move { q.acquire(&(), 1).await.unwrap().forget() })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
        })
    });
    g.bench_function("leaky_bucket", |b| {
        b.to_async(&rt).iter(|| async {
            let limiter = Arc::new(
                leaky_bucket::RateLimiter::builder()
                    .max(1)
                    .initial(1)
                    .refill(1)
                    .interval(Duration::from_millis(1))
                    .fair(true)
                    .build(),
            );
            let tasks: Vec<_> = (0..WAITERS)
                .map(|_| {
                    let l = limiter.clone();
                    tokio::spawn(async move { l.acquire(1).await })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
        })
    });
    g.finish();
}

criterion_group!(benches, uncontended, paced);
criterion_main!(benches);
