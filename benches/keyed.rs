//! Keyed limiters side by side: tollgate's `LockFreeGcraTable` and
//! `ShardedKeyedTable` against
//! governor's default keyed limiter (`DashMap`, `check_key`), on the same
//! work in one run, so the ratio is what counts.
//!
//! - Same clock on both sides: a fake clock read on every check (tollgate
//!   `ManualClock`, governor `FakeRelativeClock`), both advanced by 1 ms
//!   every 1,024 checks; quota 1,000,000/s with burst 1,000, so checks are
//!   mostly admissions (the compare-and-swap path).
//! - Key sets: 1 hot key, 10,000 and 100,000 keys cycled in a fixed
//!   shuffled order (the interleaved summary also shows keys in sorted
//!   order, which flatters governor's map), every key inserted before
//!   measuring. tollgate's capacity is sized for 85 %
//!   occupancy.
//! - Bytes per tracked key: a counting global allocator measures the heap
//!   each structure holds after tracking the keys; printed before the
//!   timings.
//!
//! `cargo bench --bench keyed` (about a minute).

use criterion::{criterion_group, criterion_main, Criterion};
use governor::clock::FakeRelativeClock;
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};
use tollgate::keyed::{KeyedLimiter, LockFreeGcraTable, ShardedKeyedTable};
use tollgate::{Clock, Gcra, ManualClock, Quota, Timestamp};

/// Net heap bytes held (allocations minus frees), process-wide.
struct CountingAlloc;
static HELD: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        HELD.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        HELD.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        HELD.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

fn held() -> isize {
    HELD.load(Ordering::Relaxed)
}

const RATE: u32 = 1_000_000;
const BURST: u32 = 1_000;
const TICK_EVERY: u64 = 1_024;
const TICK: Duration = Duration::from_millis(1);

type Governor = governor::RateLimiter<
    u64,
    governor::state::keyed::DashMapStateStore<u64>,
    FakeRelativeClock,
    governor::middleware::NoOpMiddleware<governor::nanos::Nanos>,
>;
type Tollgate = ShardedKeyedTable<u64, Gcra>;

fn tollgate_table(keys: u64) -> Tollgate {
    let alg = Gcra::token_bucket(Quota::per_second(RATE).unwrap().with_burst(BURST).unwrap());
    // sized for 85 % occupancy
    let capacity = (keys as usize * 100).div_ceil(85).max(64);
    ShardedKeyedTable::builder(alg)
        .max_keys(capacity)
        .build()
        .unwrap()
}

fn lock_free_table(keys: u64) -> LockFreeGcraTable<u64> {
    let alg = Gcra::token_bucket(Quota::per_second(RATE).unwrap().with_burst(BURST).unwrap());
    let capacity = (keys as usize * 100).div_ceil(85).max(64);
    LockFreeGcraTable::builder(alg)
        .max_keys(capacity)
        .build()
        .unwrap()
}

/// The start of the fake clock: 1 s after its origin.
const START: Timestamp = Timestamp::from_secs(1);

fn governor_limiter(clock: FakeRelativeClock) -> Governor {
    let quota = governor::Quota::per_second(NonZeroU32::new(RATE).unwrap())
        .allow_burst(NonZeroU32::new(BURST).unwrap());
    governor::RateLimiter::dashmap_with_clock(quota, clock)
}

/// The order in which a run visits the keys: every key once per cycle.
/// Real traffic does not arrive sorted by key, and sorted order flatters
/// tables whose layout follows insertion order, so the main figures use a
/// fixed shuffle (the same for every contender).
fn visit_order(keys: u64, shuffled: bool) -> Vec<u64> {
    let mut order: Vec<u64> = (0..keys).collect();
    if shuffled {
        // Fisher-Yates with a fixed xorshift: reproducible
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        for i in (1..order.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            order.swap(i, (x % (i as u64 + 1)) as usize);
        }
    }
    order
}

/// Runs `iters` checks cycling through `order` on `threads` threads
/// (thread `t` takes `order[t], order[t + threads], …`), thread 0 advancing
/// the clock.
fn run(
    iters: u64,
    order: &[u64],
    threads: u64,
    check: &(dyn Fn(u64) -> bool + Sync),
    tick: &(dyn Fn() + Sync),
) -> Duration {
    let len = order.len();
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                let step = threads as usize;
                let mut at = t as usize % len;
                let mut allowed = 0u64;
                for i in 0..iters / threads {
                    if t == 0 && i % TICK_EVERY == 0 {
                        tick();
                    }
                    allowed += u64::from(check(black_box(order[at])));
                    at += step;
                    if at >= len {
                        at -= len; // len is a multiple of threads
                    }
                }
                black_box(allowed);
            });
        }
    });
    start.elapsed()
}

fn bytes_per_key() {
    println!("bytes of heap per tracked u64 key (counting allocator):");
    for keys in [10_000u64, 100_000] {
        let before = held();
        let table = tollgate_table(keys);
        for k in 0..keys {
            let _ = table.check(&k, Timestamp::ZERO);
        }
        let tollgate_bytes = held() - before;
        assert_eq!(table.len() as u64, keys);
        let occupancy = keys as f64 / table.max_keys() as f64;
        drop(table);

        let before = held();
        let table = lock_free_table(keys);
        for k in 0..keys {
            let _ = table.check(&k, Timestamp::ZERO);
        }
        let lock_free_bytes = held() - before;
        assert_eq!(table.len() as u64, keys);
        drop(table);

        let before = held();
        let limiter = governor_limiter(FakeRelativeClock::default());
        for k in 0..keys {
            let _ = limiter.check_key(&k);
        }
        let governor_bytes = held() - before;
        drop(limiter);
        println!(
            "  {keys:>7} keys: tollgate sharded {:.1} B/key, lock-free {:.1} B/key (capacity at {:.0} % occupancy), governor {:.1} B/key",
            tollgate_bytes as f64 / keys as f64,
            lock_free_bytes as f64 / keys as f64,
            occupancy * 100.0,
            governor_bytes as f64 / keys as f64
        );
        println!(
            "FIGURE keyed_bytes_per_key_{keys}_sharded {:.1} B/key capacity at {:.0} % occupancy (target <= 24)",
            tollgate_bytes as f64 / keys as f64,
            occupancy * 100.0
        );
        println!(
            "FIGURE keyed_bytes_per_key_{keys}_lock_free {:.1} B/key (target <= 24)",
            lock_free_bytes as f64 / keys as f64
        );
        println!(
            "FIGURE keyed_bytes_per_key_{keys}_governor {:.1} B/key grows with traffic",
            governor_bytes as f64 / keys as f64
        );
    }
}

/// Interleaved rounds, tollgate and governor alternating, minimum per side:
/// on a shared, noisy machine the minimum of many short alternating rounds
/// is the most stable estimate of each side's cost.
fn interleaved_minimum() {
    const ROUNDS: usize = 41;
    const CHECKS: u64 = 200_000;
    println!("interleaved minimum of {ROUNDS} rounds x {CHECKS} checks (ns per check):");
    for (keys, threads, shuffled) in [
        (1u64, 1u64, false),
        (10_000, 1, true),
        (100_000, 1, true),
        (100_000, 2, true),
        (10_000, 1, false),
        (100_000, 1, false),
    ] {
        let order = visit_order(keys, shuffled);
        let clock = ManualClock::starting_at(START);
        let table = tollgate_table(keys);
        let fake = FakeRelativeClock::default();
        fake.advance(Duration::from_secs(1));
        let limiter = governor_limiter(fake.clone());
        let lock_free = lock_free_table(keys);
        for k in 0..keys {
            let _ = table.check(&k, clock.now());
            let _ = lock_free.check(&k, clock.now());
            let _ = limiter.check_key(&k);
        }
        let (mut best_t, mut best_l, mut best_g) = (f64::MAX, f64::MAX, f64::MAX);
        for _ in 0..ROUNDS {
            let t = run(
                CHECKS,
                &order,
                threads,
                &|k| table.check(&k, clock.now()).is_allowed(),
                &|| clock.advance(TICK),
            );
            let l = run(
                CHECKS,
                &order,
                threads,
                &|k| lock_free.check(&k, clock.now()).is_allowed(),
                &|| clock.advance(TICK),
            );
            let g = run(
                CHECKS,
                &order,
                threads,
                &|k| limiter.check_key(&k).is_ok(),
                &|| fake.advance(TICK),
            );
            best_l = best_l.min(l.as_nanos() as f64 / CHECKS as f64);
            best_t = best_t.min(t.as_nanos() as f64 / CHECKS as f64);
            best_g = best_g.min(g.as_nanos() as f64 / CHECKS as f64);
        }
        println!(
            "  {keys:>7} keys {}, {threads} thread(s): lock-free {best_l:6.1} (ratio {:.2}), sharded {best_t:6.1} (ratio {:.2}), governor {best_g:6.1}",
            if shuffled { "shuffled" } else { "in order" },
            best_l / best_g,
            best_t / best_g
        );
        let case = format!(
            "{keys}_keys_{}_{threads}_threads",
            if shuffled { "shuffled" } else { "in_order" }
        );
        println!(
            "FIGURE keyed_{case}_lock_free_vs_governor {:.2} ratio interleaved minimum of {ROUNDS} rounds (target <= 0.5 at 10k/100k keys)",
            best_l / best_g
        );
        println!(
            "FIGURE keyed_{case}_sharded_vs_governor {:.2} ratio interleaved minimum of {ROUNDS} rounds",
            best_t / best_g
        );
    }
}

/// The cost of an attack: a flood of new keys against a table full of busy
/// keys (each answered by the overflow policy, here `Deny`). governor has
/// no equivalent: it inserts every new key.
fn flood_cost() {
    use tollgate::keyed::OverflowPolicy;
    const FLOOD: u64 = 400_000;
    let alg = Gcra::token_bucket(Quota::per_hour(60).unwrap());
    let sharded = ShardedKeyedTable::<u64, _>::builder(alg)
        .max_keys(100_000)
        .overflow(OverflowPolicy::Deny)
        .build()
        .unwrap();
    let lock_free = LockFreeGcraTable::<u64>::builder(alg)
        .max_keys(100_000)
        .overflow(OverflowPolicy::Deny)
        .build()
        .unwrap();
    // fill both with busy keys (some shards fill before others)
    for k in 0..400_000u64 {
        let _ = sharded.check(&k, Timestamp::ZERO);
        let _ = lock_free.check(&k, Timestamp::ZERO);
    }
    let (mut best_s, mut best_l) = (f64::MAX, f64::MAX);
    for round in 0..5u64 {
        let base = 1_000_000 + round * FLOOD;
        let start = Instant::now();
        for k in base..base + FLOOD {
            black_box(sharded.check(&k, Timestamp::from_nanos(1)).is_allowed());
        }
        best_s = best_s.min(start.elapsed().as_nanos() as f64 / FLOOD as f64);
        let start = Instant::now();
        for k in base..base + FLOOD {
            black_box(lock_free.check(&k, Timestamp::from_nanos(1)).is_allowed());
        }
        best_l = best_l.min(start.elapsed().as_nanos() as f64 / FLOOD as f64);
    }
    println!(
        "flood of new keys into a full 100,000-key table (Deny), ns per request: sharded {best_s:.1}, lock-free {best_l:.1}"
    );
    println!(
        "FIGURE keyed_flood_ns_per_request_sharded {best_s:.1} ns new key into a full table (Deny)"
    );
    println!("FIGURE keyed_flood_ns_per_request_lock_free {best_l:.1} ns new key into a full table (Deny)");
}

fn keyed(c: &mut Criterion) {
    bytes_per_key();
    flood_cost();
    interleaved_minimum();
    for (keys, threads) in [(1u64, 1u64), (10_000, 1), (100_000, 1), (100_000, 2)] {
        let order = visit_order(keys, true);
        let mut group = c.benchmark_group(format!(
            "keyed check/{keys} keys shuffled/{threads} threads"
        ));
        group.sample_size(10);
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(2));

        let clock = ManualClock::starting_at(START);
        let table = tollgate_table(keys);
        for k in 0..keys {
            let _ = table.check(&k, clock.now());
        }
        let lock_free = lock_free_table(keys);
        for k in 0..keys {
            let _ = lock_free.check(&k, clock.now());
        }
        group.bench_function("tollgate LockFreeGcraTable", |b| {
            b.iter_custom(|iters| {
                run(
                    iters,
                    &order,
                    threads,
                    &|k| lock_free.check(&k, clock.now()).is_allowed(),
                    &|| clock.advance(TICK),
                )
            });
        });
        group.bench_function("tollgate ShardedKeyedTable", |b| {
            b.iter_custom(|iters| {
                run(
                    iters,
                    &order,
                    threads,
                    &|k| table.check(&k, clock.now()).is_allowed(),
                    &|| clock.advance(TICK),
                )
            });
        });

        let fake = FakeRelativeClock::default();
        fake.advance(Duration::from_secs(1));
        let limiter = governor_limiter(fake.clone());
        for k in 0..keys {
            let _ = limiter.check_key(&k);
        }
        group.bench_function("governor keyed (DashMap)", |b| {
            b.iter_custom(|iters| {
                run(
                    iters,
                    &order,
                    threads,
                    &|k| limiter.check_key(&k).is_ok(),
                    &|| fake.advance(TICK),
                )
            });
        });
        group.finish();
    }
}

criterion_group!(benches, keyed);
criterion_main!(benches);
