//! Several threads hammering overlapping keys (real clock, tables smaller
//! than the key set, so eviction and overflow race with checks): each key
//! is admitted at most `burst + ⌊t / T⌋` times over the run.
#![cfg(feature = "std")]

mod keyed_support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use keyed_support::{t, Quotas, Spec};
use tollgate::keyed::{KeyedLimiter, KeyedPath, OverflowPolicy};
use tollgate::{Clock, Gcra, Quota, StdClock};

const THREADS: usize = 4;
const KEYS: u64 = 16;
const BURST: u64 = 3;
const INTERVAL: u64 = 2_000_000; // 500 per second
/// The least time the threads run; they go on (up to [`CAP`]) until the
/// keys were busy enough to be limited, so a loaded machine makes a run
/// longer, never the liveness check fail.
const RUN: Duration = Duration::from_millis(300);
const CAP: Duration = Duration::from_secs(60);

fn algorithm() -> Gcra {
    Gcra::token_bucket(
        Quota::per_second(500)
            .unwrap()
            .with_burst(BURST as u32)
            .unwrap(),
    )
}

/// Runs the threads on `table`. Returns the admissions per key (own and
/// overflow separately) and the elapsed time in nanoseconds.
fn hammer<T: KeyedLimiter<u64> + Sync>(table: &T) -> ([u64; KEYS as usize], u64, u64) {
    let clock = StdClock::new();
    let own: Vec<AtomicU64> = (0..KEYS).map(|_| AtomicU64::new(0)).collect();
    let overflow = AtomicU64::new(0);
    let barrier = Barrier::new(THREADS);
    let first = AtomicU64::new(u64::MAX);
    let last = AtomicU64::new(0);
    std::thread::scope(|s| {
        for th in 0..THREADS {
            let (clock, own, overflow, barrier, first, last) =
                (&clock, &own, &overflow, &barrier, &first, &last);
            s.spawn(move || {
                barrier.wait();
                let start = Instant::now();
                let mut i = th as u64;
                let busy_enough = || {
                    own.iter().map(|c| c.load(Ordering::Relaxed)).sum::<u64>()
                        + overflow.load(Ordering::Relaxed)
                        > KEYS * BURST
                };
                while start.elapsed() < RUN || (!busy_enough() && start.elapsed() < CAP) {
                    // overlapping: every thread walks every key, offset
                    let key = (i * 7 + th as u64) % KEYS;
                    let now = clock.now();
                    first.fetch_min(now.as_nanos(), Ordering::Relaxed);
                    let d = table.check(&key, now);
                    last.fetch_max(clock.now().as_nanos(), Ordering::Relaxed);
                    if d.is_allowed() {
                        match d.path() {
                            KeyedPath::Own => own[key as usize].fetch_add(1, Ordering::Relaxed),
                            _ => overflow.fetch_add(1, Ordering::Relaxed),
                        };
                    }
                    i += 1;
                }
            });
        }
    });
    let mut per_key = [0; KEYS as usize];
    for (k, c) in own.iter().enumerate() {
        per_key[k] = c.load(Ordering::Relaxed);
    }
    let elapsed = last.load(Ordering::Relaxed) - first.load(Ordering::Relaxed);
    (per_key, overflow.load(Ordering::Relaxed), elapsed)
}

fn assert_bound(per_key: &[u64; KEYS as usize], overflow: u64, elapsed: u64) {
    let bound = BURST + elapsed / INTERVAL;
    for (key, &admitted) in per_key.iter().enumerate() {
        assert!(admitted <= bound, "key {key}: {admitted} > {bound}");
    }
    // the shared overflow bucket is one more key's worth
    assert!(overflow <= bound, "overflow: {overflow} > {bound}");
    // and the run did real work: the keys were busy enough to be limited
    assert!(per_key.iter().sum::<u64>() + overflow > KEYS * BURST);
}

/// 8 keys (two shards for the std tables) for 16 hammered keys: evictions,
/// moves and overflow race with the checks, under both bounded policies.
fn smaller_than_the_key_set<T: KeyedLimiter<u64> + Sync>(make: impl Fn(Spec) -> T) {
    for policy in [OverflowPolicy::SharedBucket, OverflowPolicy::Deny] {
        let table = make(Spec::new(algorithm(), 8).shards(Some(2)).overflow(policy));
        let (per_key, overflow, elapsed) = hammer(&table);
        assert_bound(&per_key, overflow, elapsed);
    }
}

fn with_room_for_every_key<T: KeyedLimiter<u64> + Sync>(make: impl Fn(Spec) -> T) {
    let table = make(Spec::new(algorithm(), 64).shards(None));
    let (per_key, overflow, elapsed) = hammer(&table);
    assert_eq!(overflow, 0);
    assert_bound(&per_key, overflow, elapsed);
}

const HUGE: u32 = 1_000_000;

/// Key 0: one per second, burst `HUGE`; every other key 1 per ns.
fn hot_or_churn(key: &u64) -> Gcra {
    if *key == 0 {
        Gcra::token_bucket(Quota::per_second(1).unwrap().with_burst(HUGE).unwrap())
    } else {
        churn()
    }
}

fn churn() -> Gcra {
    Gcra::token_bucket(Quota::new(1, Duration::from_nanos(1)).unwrap())
}

/// Key 0 has a huge burst and is hammered by two threads at a fixed `now`,
/// while a third thread churns short-lived keys through a tiny table:
/// sweeps evict them (and, in the lock-free table, close holes, moving key
/// 0's slot around under the checkers). Every admission must land in key
/// 0's bucket exactly once: its TAT ends at admitted × T.
fn moves_lose_no_admission<T: KeyedLimiter<u64> + Sync>(make: impl Fn(Spec) -> T) {
    const CHECKS: u64 = 200_000;
    let table = make(
        Spec::new(churn(), 2)
            .overflow(OverflowPolicy::Deny)
            .quotas(Quotas::Fn(hot_or_churn)),
    );
    assert!(table.check(&0, t(0)).is_allowed());
    let admitted = AtomicU64::new(1);
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..CHECKS {
                    let d = table.check(&0, t(0));
                    assert_eq!(d.path(), KeyedPath::Own);
                    if d.is_allowed() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
        s.spawn(|| {
            let mut now = 1;
            while !done.load(Ordering::Relaxed) || now < 10_000 {
                let _ = table.check(&(1 + now % 50), t(now));
                now += 1;
                if now > 10_000_000 {
                    break;
                }
            }
        });
        // let the checkers finish, then stop the churn
        while admitted.load(Ordering::Relaxed) < 2 * CHECKS + 1 {
            std::thread::yield_now();
        }
        done.store(true, Ordering::Relaxed);
    });
    let admitted = admitted.load(Ordering::Relaxed);
    assert_eq!(admitted, 2 * CHECKS + 1);
    let remaining = table.snapshot(&0, t(0)).remaining();
    assert_eq!(u64::from(remaining), u64::from(HUGE) - admitted);
}

keyed_support::every_table! {
    smaller_than_the_key_set: heapless 8,
    with_room_for_every_key: heapless 64,
    moves_lose_no_admission: heapless 2,
}
