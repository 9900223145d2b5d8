//! Keyed limiters side by side: tollgate's `LockFreeGcraTable` and
//! `ShardedKeyedTable`, and a partitioned limiter
//! with one per-key policy over a `ShardedKeyedTable`, against governor's
//! default keyed limiter (`DashMap`, `check_key`), on the same work in one
//! run, so the ratio is what counts.
//!
//! - The call README.md shows: `table.try_acquire(&key, clock.now())`, and for
//!   the partitioned limiter `limiter.try_acquire(&key, clock.now())` (the
//!   key is the resource; its lease dropped at once), against governor's
//!   `check_key(&key)`. Same clock on both sides: a fake clock
//!   read on every check (tollgate `ManualClock`, governor
//!   `FakeRelativeClock`), both advanced by 1 ms every 1,024 checks; quota
//!   1,000,000/s with burst 1,000, so checks are mostly admissions (the
//!   compare-and-swap path).
//! - Keys: `u64` and `IpAddr` (IPv4), 1 hot key, 10,000, 100,000 and
//!   1,000,000 keys cycled in a fixed shuffled order, every key inserted
//!   before measuring; 1 and 2 threads (thread `t` takes every other key).
//!   `LockFreeGcraTable` and `ShardedKeyedTable` (the partitioned
//!   limiter's too) are sized for 85 % occupancy. `LockFreeGcraTable` takes `WordKey`s only: no
//!   `IpAddr` entry.
//! - Bytes per tracked key: a counting global allocator measures the heap
//!   each structure holds after tracking the keys; printed as `FIGURE`
//!   lines before the timings.
//!
//! `cargo bench --bench keyed` (about 5 minutes).

use criterion::{BenchmarkGroup, Criterion, criterion_group, criterion_main};
use governor::clock::FakeRelativeClock;
use std::alloc::{GlobalAlloc, Layout, System};
use std::hash::Hash;
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};
use tollgate::keyed::{KeyedTable, LockFreeGcraTable, ShardedKeyedTable};
use tollgate::partitioned::Partitioned;
use tollgate::{Clock, Gcra, Limiter, ManualClock, Quota, Timestamp};

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

type Governor<K> = governor::RateLimiter<
    K,
    governor::state::keyed::DashMapStateStore<K>,
    FakeRelativeClock,
    governor::middleware::NoOpMiddleware<governor::nanos::Nanos>,
>;

fn quota() -> Quota {
    Quota::per_second(RATE).unwrap().with_burst(BURST).unwrap()
}

/// Capacity for 85 % occupancy.
fn sized(keys: u64) -> usize {
    (keys as usize * 100).div_ceil(85).max(64)
}

fn sharded<K: Hash + Eq + Clone>(keys: u64) -> ShardedKeyedTable<K, Gcra> {
    ShardedKeyedTable::builder(Gcra::token_bucket(quota()))
        .max_keys(sized(keys))
        .build()
        .unwrap()
}

/// A partitioned limiter as README.md shows it: one policy keyed by the
/// resource itself, over the table `sharded` builds.
fn partitioned<K: Hash + Eq + Clone + Send + Sync + 'static>(keys: u64) -> Partitioned<K, K> {
    Partitioned::builder("bench")
        .policy("per_key", |k: &K| Some(k.clone()), sharded::<K>(keys))
        .build()
}

fn lock_free(keys: u64) -> LockFreeGcraTable<u64> {
    LockFreeGcraTable::builder(Gcra::token_bucket(quota()))
        .max_keys(sized(keys))
        .build()
        .unwrap()
}

/// The start of the fake clock: 1 s after its origin.
const START: Timestamp = Timestamp::from_secs(1);

fn governor<K: Hash + Eq + Clone>(clock: FakeRelativeClock) -> Governor<K> {
    let quota = governor::Quota::per_second(NonZeroU32::new(RATE).unwrap())
        .allow_burst(NonZeroU32::new(BURST).unwrap());
    governor::RateLimiter::dashmap_with_clock(quota, clock)
}

/// The order in which a run visits the keys: every key once per cycle, in
/// a fixed shuffle (the same for every contender). Real traffic does not
/// arrive sorted by key, and sorted order flatters maps whose layout
/// follows insertion order.
fn visit_order(keys: u64) -> Vec<u64> {
    let mut order: Vec<u64> = (0..keys).collect();
    // Fisher-Yates with a fixed xorshift: reproducible
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    for i in (1..order.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    order
}

fn ip(k: u64) -> IpAddr {
    // spread over the address space, as clients are
    IpAddr::V4(Ipv4Addr::from(
        (k as u32).wrapping_mul(0x9e37_79b9) ^ 0x0a00_0000,
    ))
}

/// Runs `iters` checks per thread cycling through `order` on `threads`
/// threads (thread `t` takes `order[t], order[t + threads], …`), thread 0
/// advancing the clock; the longest thread's time per its checks.
fn run<K: Sync>(
    iters: u64,
    order: &[K],
    threads: u64,
    check: &(impl Fn(&K) -> bool + Sync),
    tick: &(impl Fn() + Sync),
) -> Duration {
    let len = order.len();
    let barrier = std::sync::Barrier::new(threads as usize);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                s.spawn(move || {
                    let step = threads as usize;
                    let mut at = t as usize % len;
                    let mut allowed = 0u64;
                    barrier.wait();
                    let start = Instant::now();
                    for i in 0..iters {
                        if t == 0 && i % TICK_EVERY == 0 {
                            tick();
                        }
                        allowed += u64::from(check(black_box(&order[at])));
                        at += step;
                        if at >= len {
                            at -= len;
                            if at >= len {
                                at %= len; // one key, two threads
                            }
                        }
                    }
                    black_box(allowed);
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

fn bytes_per_key() {
    println!("bytes of heap per tracked u64 key (counting allocator):");
    for keys in [10_000u64, 100_000, 1_000_000] {
        let measure = |fill: &dyn Fn() -> Box<dyn std::any::Any>| {
            let before = held();
            let table = fill();
            let bytes = held() - before;
            drop(table);
            bytes as f64 / keys as f64
        };
        let sharded_b = measure(&|| {
            let t = sharded::<u64>(keys);
            for k in 0..keys {
                let _ = t.try_acquire(&k, Timestamp::ZERO);
            }
            assert_eq!(t.len() as u64, keys);
            Box::new(t)
        });
        let lock_free_b = measure(&|| {
            let t = lock_free(keys);
            for k in 0..keys {
                let _ = t.try_acquire(&k, Timestamp::ZERO);
            }
            assert_eq!(t.len() as u64, keys);
            Box::new(t)
        });
        let governor_b = measure(&|| {
            let l = governor::<u64>(FakeRelativeClock::default());
            for k in 0..keys {
                let _ = l.check_key(&k);
            }
            Box::new(l)
        });
        println!(
            "FIGURE keyed_bytes_per_key_{keys}_lock_free {lock_free_b:.1} B/key capacity at 85 % occupancy"
        );
        println!(
            "FIGURE keyed_bytes_per_key_{keys}_sharded {sharded_b:.1} B/key capacity at 85 % occupancy"
        );
        println!(
            "FIGURE keyed_bytes_per_key_{keys}_governor {governor_b:.1} B/key grows with traffic"
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
    // fill them with busy keys (some shards fill before others)
    for k in 0..400_000u64 {
        let _ = sharded.try_acquire(&k, Timestamp::ZERO);
        let _ = lock_free.try_acquire(&k, Timestamp::ZERO);
    }
    let time = |f: &dyn Fn(u64) -> bool| {
        let mut best = f64::MAX;
        for round in 0..3u64 {
            let base = 1_000_000 + round * FLOOD;
            let start = Instant::now();
            for k in base..base + FLOOD {
                black_box(f(k));
            }
            best = best.min(start.elapsed().as_nanos() as f64 / FLOOD as f64);
        }
        best
    };
    let now = Timestamp::from_nanos(1);
    let s = time(&|k| sharded.try_acquire(&k, now).is_ok());
    let l = time(&|k| lock_free.try_acquire(&k, now).is_ok());
    for (name, v) in [("sharded", s), ("lock_free", l)] {
        println!(
            "FIGURE keyed_flood_ns_per_request_{name} {v:.1} ns new key into a full table (Deny), best of 3 timed loops"
        );
    }
}

fn settings(g: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(1500));
}

/// Benches `call(&key, clock.now())` as one entry of `g`, after one call
/// per key (every key inserted before measuring).
fn bench_calls<K: Sync>(
    g: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>,
    label: &str,
    call: &(impl Fn(&K, Timestamp) -> bool + Sync),
    order: &[K],
    threads: u64,
    clock: &ManualClock,
) {
    for k in order {
        call(k, clock.now());
    }
    g.bench_function(label, |b| {
        b.iter_custom(|iters| {
            run(iters, order, threads, &|k| call(k, clock.now()), &|| {
                clock.advance(TICK)
            })
        })
    });
}

/// Benches `table.try_acquire(&key, clock.now())` as one entry of `g`.
fn bench_table<K: Sync, T: KeyedTable<K> + Sync>(
    g: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>,
    label: &str,
    table: &T,
    order: &[K],
    threads: u64,
    clock: &ManualClock,
) {
    let call = |k: &K, now| table.try_acquire(k, now).is_ok();
    bench_calls(g, label, &call, order, threads, clock);
}

/// Benches `limiter.try_acquire(&key, clock.now())` as one entry of `g`,
/// the lease dropped at once (a rate admission holds nothing).
fn bench_partitioned<K: Sync, P: Limiter<K> + Sync>(
    g: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>,
    label: &str,
    limiter: &P,
    order: &[K],
    threads: u64,
    clock: &ManualClock,
) {
    let call = |k: &K, now| limiter.try_acquire(k, now).is_ok();
    bench_calls(g, label, &call, order, threads, clock);
}

type Group<'a> = BenchmarkGroup<'a, criterion::measurement::WallTime>;

/// One group: every table and governor on the same keys and threads;
/// `extra` adds the tables that take only some key types.
fn group<K: Hash + Eq + Clone + Send + Sync + 'static>(
    c: &mut Criterion,
    name: &str,
    keys: u64,
    threads: u64,
    key: impl Fn(u64) -> K,
    extra: impl FnOnce(&mut Group<'_>, &[K], &ManualClock),
) {
    let order: Vec<K> = visit_order(keys).into_iter().map(&key).collect();
    let mut g = c.benchmark_group(format!("keyed/{name}/{keys} keys/{threads} threads"));
    settings(&mut g);
    let clock = ManualClock::starting_at(START);
    extra(&mut g, &order, &clock);
    bench_table(
        &mut g,
        "tollgate ShardedKeyedTable",
        &sharded::<K>(keys),
        &order,
        threads,
        &clock,
    );
    bench_partitioned(
        &mut g,
        "tollgate partitioned (sharded)",
        &partitioned::<K>(keys),
        &order,
        threads,
        &clock,
    );
    let fake = FakeRelativeClock::default();
    fake.advance(Duration::from_secs(1));
    let limiter = governor::<K>(fake.clone());
    for k in &order {
        let _ = limiter.check_key(k);
    }
    g.bench_function("governor keyed (DashMap)", |b| {
        b.iter_custom(|iters| {
            run(
                iters,
                &order,
                threads,
                &|k| limiter.check_key(k).is_ok(),
                &|| fake.advance(TICK),
            )
        })
    });
    g.finish();
}

fn keyed(c: &mut Criterion) {
    bytes_per_key();
    flood_cost();
    for keys in [1u64, 10_000, 100_000, 1_000_000] {
        for threads in [1u64, 2] {
            group(
                c,
                "u64",
                keys,
                threads,
                |k| k,
                |g, order, clock| {
                    let table = lock_free(keys);
                    bench_table(
                        g,
                        "tollgate LockFreeGcraTable",
                        &table,
                        order,
                        threads,
                        clock,
                    );
                },
            );
            group(c, "IpAddr", keys, threads, ip, |_, _, _| {});
        }
    }
}

criterion_group!(benches, keyed);
criterion_main!(benches);
