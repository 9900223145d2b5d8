//! Several threads hammering overlapping keys (real clock, tables smaller
//! than the key set, so eviction and overflow race with checks): each key
//! is admitted at most `burst + ⌊t / T⌋` times over the run.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::Instant;
use tollgate::keyed::{
    HeaplessKeyedTable, KeyedPath, LockFreeGcraTable, OverflowPolicy, RandomSeed, SameQuota,
    ShardedKeyedTable,
};
use tollgate::{Clock, Gcra, Quota, StdClock};

const THREADS: usize = 4;
const KEYS: u64 = 16;
const BURST: u64 = 3;
const INTERVAL: u64 = 2_000_000; // 500 per second
const RUN: std::time::Duration = std::time::Duration::from_millis(300);

fn algorithm() -> Gcra {
    Gcra::token_bucket(
        Quota::per_second(500)
            .unwrap()
            .allow_burst(BURST as u32)
            .unwrap(),
    )
}

/// Runs the threads; `check(key, now)` returns (allowed, path). Returns the
/// admissions per key (own and overflow separately) and the elapsed time.
fn hammer(check: &(dyn Fn(u64, u64) -> (bool, KeyedPath) + Sync)) -> ([u64; 16], u64, u64) {
    let clock = StdClock::new();
    let own: Vec<AtomicU64> = (0..KEYS).map(|_| AtomicU64::new(0)).collect();
    let overflow = AtomicU64::new(0);
    let barrier = Barrier::new(THREADS);
    let first = AtomicU64::new(u64::MAX);
    let last = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (clock, own, overflow, barrier, first, last) =
                (&clock, &own, &overflow, &barrier, &first, &last);
            s.spawn(move || {
                barrier.wait();
                let start = Instant::now();
                let mut i = t as u64;
                while start.elapsed() < RUN {
                    // overlapping: every thread walks every key, offset
                    let key = (i * 7 + t as u64) % KEYS;
                    let now = clock.now();
                    first.fetch_min(now, Ordering::Relaxed);
                    let (allowed, path) = check(key, now);
                    last.fetch_max(clock.now(), Ordering::Relaxed);
                    if allowed {
                        match path {
                            KeyedPath::Own => own[key as usize].fetch_add(1, Ordering::Relaxed),
                            _ => overflow.fetch_add(1, Ordering::Relaxed),
                        };
                    }
                    i += 1;
                }
            });
        }
    });
    let mut per_key = [0; 16];
    for (k, c) in own.iter().enumerate() {
        per_key[k] = c.load(Ordering::Relaxed);
    }
    let elapsed = last.load(Ordering::Relaxed) - first.load(Ordering::Relaxed);
    (per_key, overflow.load(Ordering::Relaxed), elapsed)
}

fn assert_bound(per_key: &[u64; 16], overflow: u64, elapsed: u64) {
    let bound = BURST + elapsed / INTERVAL;
    for (key, &admitted) in per_key.iter().enumerate() {
        assert!(admitted <= bound, "key {key}: {admitted} > {bound}");
    }
    // the shared overflow bucket is one more key's worth
    assert!(overflow <= bound, "overflow: {overflow} > {bound}");
    // and the run did real work: the keys were busy enough to be limited
    assert!(per_key.iter().sum::<u64>() + overflow > KEYS * BURST);
}

#[test]
fn sharded_table_smaller_than_the_key_set() {
    for policy in [OverflowPolicy::SharedBucket, OverflowPolicy::Deny] {
        let table = ShardedKeyedTable::builder(algorithm())
            .capacity(8)
            .shards(2)
            .overflow(policy)
            .build::<u64>()
            .unwrap();
        let (per_key, overflow, elapsed) = hammer(&|key, now| {
            let d = table.check(&key, now);
            (d.is_allowed(), d.path())
        });
        assert_bound(&per_key, overflow, elapsed);
    }
}

#[test]
fn sharded_table_with_room_for_every_key() {
    let table = ShardedKeyedTable::<u64, Gcra>::new(64, algorithm()).unwrap();
    let (per_key, overflow, elapsed) = hammer(&|key, now| {
        let d = table.check(&key, now);
        (d.is_allowed(), d.path())
    });
    assert_eq!(overflow, 0);
    assert_bound(&per_key, overflow, elapsed);
}

#[test]
fn heapless_table_smaller_than_the_key_set() {
    let table = HeaplessKeyedTable::<u64, Gcra, 8>::new(algorithm());
    let (per_key, overflow, elapsed) = hammer(&|key, now| {
        let d = table.check(&key, now);
        (d.is_allowed(), d.path())
    });
    assert_bound(&per_key, overflow, elapsed);
}

#[test]
fn lock_free_table_smaller_than_the_key_set() {
    // evictions, hole closing (moves) and lock-free checks race here
    for policy in [OverflowPolicy::SharedBucket, OverflowPolicy::Deny] {
        let table = LockFreeGcraTable::<u64>::with_options(
            8,
            algorithm(),
            policy,
            RandomSeed::new(),
            SameQuota,
            Some(2),
        )
        .unwrap();
        let (per_key, overflow, elapsed) = hammer(&|key, now| {
            let d = table.check(key, now);
            (d.is_allowed(), d.path())
        });
        assert_bound(&per_key, overflow, elapsed);
    }
}

#[test]
fn lock_free_table_with_room_for_every_key() {
    let table = LockFreeGcraTable::<u64>::new(64, algorithm()).unwrap();
    let (per_key, overflow, elapsed) = hammer(&|key, now| {
        let d = table.check(key, now);
        (d.is_allowed(), d.path())
    });
    assert_eq!(overflow, 0);
    assert_bound(&per_key, overflow, elapsed);
}

#[test]
fn lock_free_moves_lose_no_admission() {
    // Key 0 has a huge burst and is hammered by two threads at a fixed
    // `now`, while a third thread churns short-lived keys through a tiny
    // table: sweeps evict them and close holes, moving key 0's slot around
    // under the checkers. Every admission must land in key 0's bucket
    // exactly once: its TAT ends at admitted × T.
    const CHECKS: u64 = 200_000;
    const HUGE: u32 = 1_000_000;
    let hot = Gcra::token_bucket(Quota::per_second(1).unwrap().allow_burst(HUGE).unwrap());
    let churn = Gcra::token_bucket(Quota::from_nanos(1, 1).unwrap());
    let table = LockFreeGcraTable::<u64, _, _>::with_options(
        2,
        churn,
        OverflowPolicy::Deny,
        RandomSeed::new(),
        move |k: &u64| if *k == 0 { hot } else { churn },
        Some(1),
    )
    .unwrap();
    assert!(table.check(0, 0).is_allowed());
    let admitted = AtomicU64::new(1);
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..CHECKS {
                    let d = table.check(0, 0);
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
                let _ = table.check(1 + now % 50, now);
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
    let remaining = table.snapshot(0, 0).remaining();
    assert_eq!(u64::from(remaining), u64::from(HUGE) - admitted);
}
