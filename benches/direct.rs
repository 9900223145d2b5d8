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

use criterion::{criterion_group, criterion_main, Criterion};
use governor::clock::{
    Clock as GovClock, FakeRelativeClock, MonotonicClock, QuantaClock as GovQuanta,
};
use governor::{Quota as GovQuota, RateLimiter as GovLimiter};
use tollgate::{
    Bucket, Clock, ConcurrencyLimiter, FixedWindow, ManualClock, QuantaClock, Quota, RateLimiter,
    SlidingWindow, StdClock,
};

fn nz(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).expect("non-zero")
}

/// Never refuses within a benchmark run: 1 ns interval, burst u32::MAX.
fn allow_quota() -> (Quota, GovQuota) {
    let t = Quota::per_second(1_000_000_000)
        .and_then(|q| q.allow_burst(u32::MAX))
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
    let now = clock.now();
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
    let clock = ManualClock::new(1);
    let word = AtomicU64::new(0);
    let window = Duration::from_secs(3600);
    let leaky =
        RateLimiter::leaky_bucket(Quota::per_hour(1).expect("valid"), &clock).expect("fits");
    let _ = leaky.try_acquire();
    let fixed_allow = RateLimiter::from_limiter(
        Bucket::new(FixedWindow::new(u32::MAX, window).expect("valid")),
        &clock,
    );
    let fixed_deny = RateLimiter::from_limiter(
        Bucket::new(FixedWindow::new(1, window).expect("valid")),
        &clock,
    );
    let _ = fixed_deny.try_acquire();
    let sliding_allow = RateLimiter::from_limiter(
        Bucket::new(SlidingWindow::<4>::new(u32::MAX, window).expect("valid")),
        &clock,
    );
    let sliding_deny = RateLimiter::from_limiter(
        Bucket::new(SlidingWindow::<4>::new(1, window).expect("valid")),
        &clock,
    );
    let _ = sliding_deny.try_acquire();
    let concurrency = ConcurrencyLimiter::new(1).expect("valid");
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
        std::sync::Arc::new(ManualClock::new(1)),
        FakeRelativeClock::default(),
    );
    clock_group(c, "std", StdClock::new(), MonotonicClock);
    clock_group(c, "quanta", QuantaClock::new(), GovQuanta::default());
    other_algorithms(c);
}

criterion_group!(benches, direct);
criterion_main!(benches);
