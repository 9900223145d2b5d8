//! Direct (single-limiter) checks: tollgate against governor on the same
//! clock in the same process, plus the floor (one clock read and one
//! compare-exchange), so the ratios are comparable on a noisy machine.
//!
//! `cargo bench --bench direct`. Groups are named `direct/<clock>/<case>`,
//! each with `tollgate`, `governor` and `floor` entries.
//!
//! Clocks: `passed` = time passed in (tollgate `ManualClock`, governor
//! `FakeRelativeClock`: both one relaxed atomic load); `std` = tollgate
//! `StdClock` vs governor `MonotonicClock` (both `std::time::Instant`);
//! `quanta` = both crates' `QuantaClock` (the same TSC read and scaling).

use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{criterion_group, Criterion};
use governor::clock::{
    Clock as GovClock, FakeRelativeClock, MonotonicClock, QuantaClock as GovQuanta,
};
use governor::{Quota as GovQuota, RateLimiter as GovLimiter};
use tollgate::{
    Bucket, Clock, ConcurrencyLimiter, FixedWindow, ManualClock, QuantaClock, Quota, RateLimiter,
    SlidingWindow, StdClock, Timestamp,
};

fn nz(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).expect("non-zero")
}

/// Never refuses within a benchmark run: 1 ns interval, burst u32::MAX.
fn allow_quota() -> (Quota, GovQuota) {
    let t = Quota::per_second(1_000_000_000)
        .and_then(|q| q.with_burst(u32::MAX))
        .expect("valid");
    let g = GovQuota::per_second(nz(1_000_000_000)).allow_burst(nz(u32::MAX));
    (t, g)
}

/// Refuses after the first permit: one per hour.
fn deny_quota() -> (Quota, GovQuota) {
    (
        Quota::per_hour(1).expect("valid"),
        GovQuota::per_hour(nz(1)),
    )
}

fn floor<C: Clock>(clock: &C, word: &AtomicU64) -> bool {
    let now = clock.now().as_nanos();
    let cur = word.load(Ordering::Relaxed);
    word.compare_exchange(cur, cur.max(now) + 1, Ordering::Relaxed, Ordering::Relaxed)
        .is_ok()
}

fn clock_group<TC, GC>(c: &mut Criterion, name: &str, tclock: TC, gclock: GC)
where
    TC: Clock + Clone,
    GC: GovClock + Clone,
{
    let word = AtomicU64::new(0);
    for (case, (tq, gq), n) in [
        ("allow", allow_quota(), 1u32),
        ("deny", deny_quota(), 1),
        ("allow_n5", allow_quota(), 5),
    ] {
        let mut g = c.benchmark_group(format!("direct/{name}/{case}"));
        g.measurement_time(Duration::from_secs(2))
            .warm_up_time(Duration::from_millis(500));
        let t = RateLimiter::token_bucket(tq, tclock.clone()).expect("quota fits clock");
        let _ = t.try_acquire();
        g.bench_function("tollgate", |b| {
            b.iter(|| black_box(t.try_acquire_n(black_box(n)).map(|d| d.is_allowed())))
        });
        let gov = GovLimiter::direct_with_clock(gq, gclock.clone());
        let _ = gov.check();
        g.bench_function("governor", |b| {
            b.iter(|| black_box(gov.check_n(black_box(nz(n))).map(|r| r.is_ok())))
        });
        g.bench_function("floor", |b| b.iter(|| black_box(floor(&tclock, &word))));
        g.finish();
    }
}

/// The other algorithms, with the time passed in, against the same floor.
/// governor has no windows or concurrency limiter, so there is no peer.
fn other_algorithms(c: &mut Criterion) {
    let clock = ManualClock::starting_at(Timestamp::from_nanos(1));
    let word = AtomicU64::new(0);
    let window = Duration::from_secs(3600);
    let leaky =
        RateLimiter::leaky_bucket(Quota::per_hour(1).expect("valid"), &clock).expect("fits");
    let _ = leaky.try_acquire();
    let fixed_allow = RateLimiter::from_limiter(
        Bucket::new(FixedWindow::new(u32::MAX, window).expect("valid")),
        &clock,
    )
    .expect("fits");
    let fixed_deny = RateLimiter::from_limiter(
        Bucket::new(FixedWindow::new(1, window).expect("valid")),
        &clock,
    )
    .expect("fits");
    let _ = fixed_deny.try_acquire();
    let sliding_allow = RateLimiter::from_limiter(
        Bucket::new(SlidingWindow::<4>::new(u32::MAX, window).expect("valid")),
        &clock,
    )
    .expect("fits");
    let sliding_deny = RateLimiter::from_limiter(
        Bucket::new(SlidingWindow::<4>::new(1, window).expect("valid")),
        &clock,
    )
    .expect("fits");
    let _ = sliding_deny.try_acquire();
    let concurrency = ConcurrencyLimiter::with_limit(1).expect("valid");
    // a macro, not a table of closures, so every case is statically dispatched
    macro_rules! case {
        ($name:literal, $op:expr) => {{
            let mut g = c.benchmark_group(concat!("direct/passed/", $name));
            g.measurement_time(Duration::from_secs(2))
                .warm_up_time(Duration::from_millis(500));
            g.bench_function("tollgate", |b| b.iter(|| black_box($op)));
            g.bench_function("floor", |b| b.iter(|| black_box(floor(&clock, &word))));
            g.finish();
        }};
    }
    case!("leaky_deny", leaky.try_acquire().is_allowed());
    case!("fixed_allow", fixed_allow.try_acquire().is_allowed());
    case!("fixed_deny", fixed_deny.try_acquire().is_allowed());
    case!("sliding4_allow", sliding_allow.try_acquire().is_allowed());
    case!("sliding4_deny", sliding_deny.try_acquire().is_allowed());
    // acquire and release one permit through the RAII guard
    case!(
        "concurrency_acquire_release",
        concurrency.try_acquire(1).is_ok()
    );
}

fn direct(c: &mut Criterion) {
    clock_group(
        c,
        "passed",
        std::sync::Arc::new(ManualClock::starting_at(Timestamp::from_nanos(1))),
        FakeRelativeClock::default(),
    );
    clock_group(c, "std", StdClock::new(), MonotonicClock);
    clock_group(c, "quanta", QuantaClock::new(), GovQuanta::default());
    other_algorithms(c);
}

criterion_group!(benches, direct);

fn main() {
    throughput::print();
    benches();
    Criterion::default().configure_from_args().final_summary();
}

/// Throughput with two threads, printed as `FIGURE` lines (collected into
/// BENCHMARKS.md by scripts/benchmarks.py): checks per second on one shared
/// bucket (tollgate and governor) and on two distinct buckets on separate
/// cache lines, against the same work on one thread.
mod throughput {
    use std::hint::black_box;
    use std::num::NonZeroU32;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Barrier;
    use std::time::{Duration, Instant};

    use governor::clock::FakeRelativeClock;
    use governor::{Quota as GovQuota, RateLimiter as GovLimiter};
    use tollgate::{Bucket, Gcra, Limiter, Quota, Timestamp};

    const RUN: Duration = Duration::from_millis(700);

    /// Keeps each bucket on its own cache lines.
    #[repr(align(128))]
    struct Padded(Bucket<Gcra>);

    fn quota() -> Quota {
        Quota::per_second(1_000_000_000)
            .and_then(|q| q.with_burst(u32::MAX))
            .expect("valid")
    }

    /// Total calls per second of `op(thread)` over `threads` threads.
    fn rate(threads: usize, op: &(dyn Fn(usize) -> bool + Sync)) -> f64 {
        let stop = AtomicBool::new(false);
        let barrier = Barrier::new(threads + 1);
        let total: u64 = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let (stop, barrier) = (&stop, &barrier);
                    s.spawn(move || {
                        barrier.wait();
                        let mut n = 0u64;
                        while !stop.load(Ordering::Relaxed) {
                            for _ in 0..256 {
                                black_box(op(t));
                            }
                            n += 256;
                        }
                        n
                    })
                })
                .collect();
            barrier.wait();
            let start = Instant::now();
            std::thread::sleep(RUN);
            stop.store(true, Ordering::Relaxed);
            let n: u64 = handles.into_iter().map(|h| h.join().expect("thread")).sum();
            let secs = start.elapsed().as_secs_f64();
            (n as f64 / secs) as u64
        });
        total as f64
    }

    pub fn print() {
        // the time is passed in (a fixed instant): this measures the check
        let now = Timestamp::from_nanos(1);
        let shared = Bucket::token_bucket(quota());
        let distinct = [
            Padded(Bucket::token_bucket(quota())),
            Padded(Bucket::token_bucket(quota())),
        ];
        let gclock = FakeRelativeClock::default();
        let gq = GovQuota::per_second(NonZeroU32::new(1_000_000_000).expect("nz"))
            .allow_burst(NonZeroU32::MAX);
        let governor = GovLimiter::direct_with_clock(gq, gclock);

        let one_key_1 = rate(1, &|_| shared.check(now).is_allowed());
        let one_key_2 = rate(2, &|_| shared.check(now).is_allowed());
        let gov_1 = rate(1, &|_| governor.check().is_ok());
        let gov_2 = rate(2, &|_| governor.check().is_ok());
        let distinct_1 = rate(1, &|t| distinct[t].0.check(now).is_allowed());
        let distinct_2 = rate(2, &|t| distinct[t].0.check(now).is_allowed());
        let m = |x: f64| format!("{:.1}", x / 1e6);
        println!(
            "FIGURE throughput_one_key_1_thread_tollgate {} Mchecks/s shared bucket",
            m(one_key_1)
        );
        println!(
            "FIGURE throughput_one_key_2_threads_tollgate {} Mchecks/s shared bucket, total",
            m(one_key_2)
        );
        println!(
            "FIGURE throughput_one_key_1_thread_governor {} Mchecks/s direct limiter",
            m(gov_1)
        );
        println!(
            "FIGURE throughput_one_key_2_threads_governor {} Mchecks/s direct limiter, total",
            m(gov_2)
        );
        println!(
            "FIGURE one_key_2_threads_tollgate_vs_governor {:.2} ratio target >= 1.0",
            one_key_2 / gov_2
        );
        println!(
            "FIGURE throughput_distinct_keys_1_thread {} Mchecks/s own bucket",
            m(distinct_1)
        );
        println!(
            "FIGURE throughput_distinct_keys_2_threads {} Mchecks/s own buckets, total",
            m(distinct_2)
        );
        println!(
            "FIGURE distinct_keys_2_threads_scaling {:.2} ratio target >= 1.8 (2 threads / 1 thread)",
            distinct_2 / distinct_1
        );
    }
}
