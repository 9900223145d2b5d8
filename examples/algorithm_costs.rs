//! Rough single-thread cost of one check for each algorithm, uncontended:
//! `cargo run --release --example algorithm_costs`. The machine is noisy;
//! compare the figures with each other (the token bucket is the baseline),
//! not with other machines. Criterion benches side by side with peer
//! crates belong in `benches/`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use tollgate::{
    Bucket, Chain, ConcurrencyLimiter, FixedWindow, Limiter, Quota, SlidingWindow, Timestamp,
    WithStats,
};

const CHECKS: u64 = 5_000_000;

/// Nanoseconds per check over `CHECKS` checks, time advancing 7 ns per check
/// so that windows roll and buckets refill (about half the checks admit).
fn per_check(limiter: &impl Limiter) -> f64 {
    let start = Instant::now();
    let mut admitted = 0u64;
    for i in 0..CHECKS {
        if limiter
            .try_acquire(&(), black_box(Timestamp::from_nanos(i * 7)))
            .is_ok()
        {
            admitted += 1;
        }
    }
    black_box(admitted);
    start.elapsed().as_nanos() as f64 / CHECKS as f64
}

/// The same for the concurrency limiter, which has no `check`: a
/// guardless take (`try_acquire` then `into_raw`), never released.
fn per_acquire(limiter: &ConcurrencyLimiter) -> f64 {
    let start = Instant::now();
    let mut admitted = 0u64;
    for _ in 0..CHECKS {
        if let Ok(permit) = black_box(limiter).try_acquire(black_box(1)) {
            admitted += u64::from(permit.into_raw());
        }
    }
    black_box(admitted);
    start.elapsed().as_nanos() as f64 / CHECKS as f64
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 1 permit per 14 ns everywhere, so every limiter refuses about half.
    let quota = Quota::new(100, Duration::from_nanos(1_400))?;
    let token = Bucket::token_bucket(quota);
    let leaky = Bucket::leaky_bucket(quota);
    let fixed = Bucket::new(FixedWindow::from_quota(quota)?);
    let sliding4 = Bucket::new(SlidingWindow::<4>::from_quota(quota)?);
    let sliding20 = Bucket::new(SlidingWindow::<20>::from_quota(quota)?);
    let concurrency = ConcurrencyLimiter::with_limit(100)?;
    let stats = WithStats::new(Bucket::token_bucket(quota));
    let chain = Chain::new(
        Bucket::token_bucket(quota),
        Bucket::new(FixedWindow::from_quota(quota)?),
    );

    let rows: [(&str, f64); 8] = [
        ("token bucket (GCRA)", per_check(&token)),
        ("leaky bucket (GCRA)", per_check(&leaky)),
        ("fixed window", per_check(&fixed)),
        ("sliding window, 4 segments", per_check(&sliding4)),
        ("sliding window, 20 segments", per_check(&sliding20)),
        ("concurrency (take, no release)", per_acquire(&concurrency)),
        ("token bucket + WithStats", per_check(&stats)),
        ("chain: token bucket + fixed window", per_check(&chain)),
    ];
    let base = rows[0].1;
    println!("{:<36} {:>9} {:>7}", "algorithm", "ns/check", "ratio");
    for (name, ns) in rows {
        println!("{name:<36} {ns:>9.2} {:>7.2}", ns / base);
    }
    Ok(())
}
