//! Direct (single-limiter) checks, called exactly as README.md and the crate
//! docs show them, against governor's `check()` on the same clock in the
//! same process, plus the floor (one clock read and one compare-exchange),
//! so the ratios are comparable on a noisy machine.
//!
//! `cargo bench --bench direct` (about 2 minutes). Groups:
//!
//! - `direct/<clock>/<allow|deny>`, entries:
//!   - `tollgate try_acquire`: `RateLimiter::try_acquire().is_ok()`;
//!   - `tollgate check(now)`: `bucket.check(clock.now()).is_ok()` on a
//!     `Bucket<Gcra>`;
//!   - `governor check`: `RateLimiter::check().is_ok()` (governor 0.10);
//!   - `floor`: `clock.now()`, one load and one compare-exchange.
//!
//!   Every entry reads its clock once per call. Clocks: `passed` = time
//!   passed in from a fake clock (tollgate `ManualClock`, governor
//!   `FakeRelativeClock`: both one relaxed atomic load behind a pointer);
//!   `std` = tollgate `StdClock` vs governor `MonotonicClock` (both
//!   `std::time::Instant`); `quanta` = both crates' `QuantaClock` (the same
//!   TSC read and scaling).
//!
//!   The work is what a user's limiter sees, not a best case: on `allow`,
//!   1,000,000,000 per second with a burst of 1,000,000, and time moving
//!   (the fake clocks advance by 1,024 ns every 1,024 calls, inside the
//!   timed loop, on both sides; the real clocks move by themselves), so
//!   every call is an admission that moves the bucket; on `deny`, 1 per
//!   second with a burst of 1 on a frozen fake clock (the real clocks do
//!   not reach the next second within a run). Until 2026-12-04 the
//!   `passed` clock never moved and the burst was `u32::MAX`: a different
//!   workload, which an independent measurement did not reproduce
//!   (BENCHMARKS.md says how the two compare).
//! - `threads/one_bucket`: two threads on one shared limiter (quanta
//!   clocks), tollgate `try_acquire` against governor `check`; time per
//!   call per thread.
//! - `threads/distinct_buckets`: `try_acquire` on one thread, then on two
//!   threads with a limiter each (own cache lines); scaling is `2 × (one
//!   thread) / (two threads)`.
//! - `direct/passed/<algorithm>`: the other algorithms (no governor peer)
//!   against the floor.

use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{BenchmarkGroup, Criterion, criterion_group};
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

/// Admits every call while time moves at least 1 ns per call: a 1 ns
/// interval, a burst of a million.
fn allow_quota() -> (Quota, GovQuota) {
    let t = Quota::per_second(1_000_000_000)
        .and_then(|q| q.with_burst(1_000_000))
        .expect("valid");
    let g = GovQuota::per_second(nz(1_000_000_000)).allow_burst(nz(1_000_000));
    (t, g)
}

/// Refuses after the first permit: one per second, a burst of one.
fn deny_quota() -> (Quota, GovQuota) {
    (
        Quota::per_second(1).expect("valid"),
        GovQuota::per_second(nz(1)),
    )
}

/// Calls between two advances of a fake clock, and the advance: time moves
/// exactly as fast as the allow quota's rate.
const TICK_EVERY: u64 = 1_024;
const TICK: Duration = Duration::from_nanos(1_024);

/// Times `iters` calls of `op`, calling `advance` before every
/// [`TICK_EVERY`]th one (the fake clocks' time moving).
fn timed(iters: u64, advance: &dyn Fn(), mut op: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    for i in 0..iters {
        if i % TICK_EVERY == 0 {
            advance();
        }
        black_box(op());
    }
    start.elapsed()
}

/// One clock read, one load, one compare-exchange: the least any atomic
/// limiter reading a clock can do (inlined, as the limiters are).
#[inline]
fn floor<C: Clock>(clock: &C, word: &AtomicU64) -> bool {
    let now = clock.now().as_nanos();
    let cur = word.load(Ordering::Relaxed);
    word.compare_exchange(cur, cur.max(now) + 1, Ordering::Relaxed, Ordering::Relaxed)
        .is_ok()
}

fn settings(g: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    g.sample_size(30)
        .measurement_time(Duration::from_millis(1200))
        .warm_up_time(Duration::from_millis(300));
}

/// One clock's allow and deny groups. `advance` moves both fake clocks by
/// [`TICK`] (a no-op for real clocks); it runs every [`TICK_EVERY`] calls
/// of every entry on `allow`, never on `deny`.
fn clock_group<TC, GC>(c: &mut Criterion, name: &str, tclock: TC, gclock: GC, advance: &dyn Fn())
where
    TC: Clock + Clone,
    GC: GovClock + Clone,
{
    let word = AtomicU64::new(0);
    let frozen = || {};
    for (case, (tq, gq)) in [("allow", allow_quota()), ("deny", deny_quota())] {
        let advance: &dyn Fn() = if case == "allow" { advance } else { &frozen };
        let mut g = c.benchmark_group(format!("direct/{name}/{case}"));
        settings(&mut g);
        // README: `limiter.try_acquire()`
        let limiter = RateLimiter::token_bucket(tq, tclock.clone()).expect("quota fits clock");
        let _ = limiter.try_acquire();
        g.bench_function("tollgate try_acquire", |b| {
            b.iter_custom(|iters| {
                timed(iters, advance, || black_box(&limiter).try_acquire().is_ok())
            })
        });
        // crate docs: `bucket.check(now)` with `now` from the caller's clock
        let bucket = Bucket::token_bucket(tq);
        let _ = bucket.check(tclock.now());
        g.bench_function("tollgate check(now)", |b| {
            b.iter_custom(|iters| {
                timed(iters, advance, || {
                    black_box(&bucket).check(tclock.now()).is_ok()
                })
            })
        });
        let gov = GovLimiter::direct_with_clock(gq, gclock.clone());
        let _ = gov.check();
        g.bench_function("governor check", |b| {
            b.iter_custom(|iters| timed(iters, advance, || black_box(&gov).check().is_ok()))
        });
        g.bench_function("floor", |b| {
            b.iter_custom(|iters| timed(iters, advance, || floor(&tclock, black_box(&word))))
        });
        g.finish();
    }
}

/// Keeps each limiter on its own cache lines.
#[repr(align(128))]
struct Padded<T>(T);

/// Runs `op(thread)` `iters` times on each of `threads` threads, started
/// together; returns the longest thread's time.
fn on_threads(iters: u64, threads: usize, op: &(dyn Fn(usize) -> bool + Sync)) -> Duration {
    let barrier = Barrier::new(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    for _ in 0..iters {
                        black_box(op(black_box(t)));
                    }
                    start.elapsed()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .max()
            .unwrap_or_default()
    })
}

fn threads(c: &mut Criterion) {
    let (tq, gq) = allow_quota();
    let mut g = c.benchmark_group("threads/one_bucket");
    settings(&mut g);
    let shared = RateLimiter::token_bucket(tq, QuantaClock::new()).expect("fits");
    let gov = GovLimiter::direct_with_clock(gq, GovQuanta::default());
    g.bench_function("tollgate try_acquire", |b| {
        b.iter_custom(|iters| on_threads(iters, 2, &|_| shared.try_acquire().is_ok()))
    });
    g.bench_function("governor check", |b| {
        b.iter_custom(|iters| on_threads(iters, 2, &|_| gov.check().is_ok()))
    });
    g.finish();

    let mut g = c.benchmark_group("threads/distinct_buckets");
    settings(&mut g);
    let own = [
        Padded(RateLimiter::token_bucket(tq, QuantaClock::new()).expect("fits")),
        Padded(RateLimiter::token_bucket(tq, QuantaClock::new()).expect("fits")),
    ];
    g.bench_function("tollgate 1 thread", |b| {
        b.iter_custom(|iters| on_threads(iters, 1, &|t| own[t].0.try_acquire().is_ok()))
    });
    g.bench_function("tollgate 2 threads", |b| {
        b.iter_custom(|iters| on_threads(iters, 2, &|t| own[t].0.try_acquire().is_ok()))
    });
    g.finish();
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
            settings(&mut g);
            g.bench_function("tollgate", |b| b.iter(|| black_box($op)));
            g.bench_function("floor", |b| b.iter(|| floor(&clock, black_box(&word))));
            g.finish();
        }};
    }
    case!("leaky_deny", leaky.try_acquire().is_ok());
    case!("fixed_allow", fixed_allow.try_acquire().is_ok());
    case!("fixed_deny", fixed_deny.try_acquire().is_ok());
    case!("sliding4_allow", sliding_allow.try_acquire().is_ok());
    case!("sliding4_deny", sliding_deny.try_acquire().is_ok());
    // acquire and release one permit through the RAII guard
    case!(
        "concurrency_acquire_release",
        concurrency.try_acquire(1).is_ok()
    );
}

fn direct(c: &mut Criterion) {
    let manual = ManualClock::starting_at(Timestamp::from_nanos(1));
    let fake = FakeRelativeClock::default();
    let advance = || {
        manual.advance(TICK);
        fake.advance(TICK);
    };
    clock_group(c, "passed", &manual, fake.clone(), &advance);
    clock_group(c, "std", StdClock::new(), MonotonicClock, &|| {});
    clock_group(
        c,
        "quanta",
        QuantaClock::new(),
        GovQuanta::default(),
        &|| {},
    );
    threads(c);
    other_algorithms(c);
}

criterion_group!(benches, direct);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
