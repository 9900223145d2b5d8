//! Several threads hammering overlapping keys (real clock, tables smaller
//! than the key set, so eviction and overflow race with checks): each key
//! is admitted at most `burst + ⌊t / T⌋` times over the run.
#![cfg(feature = "std")]

use crate::keyed_support;

use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use keyed_support::{Quotas, Spec, t};
use tollgate::keyed::{KeyedPath, KeyedTable, OverflowPolicy};
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

/// The interval of [`shared_signature`]: an hour, far beyond anything
/// a key's own state can answer (`BURST × INTERVAL` = 6 ms) or a run
/// lasts.
const SHARED_INTERVAL: u64 = 3_600_000_000_000;

/// A default algorithm (the one the shared overflow state runs) whose
/// admissions tell themselves apart from [`algorithm`]'s by their answer:
/// a GCRA admission leaves its state full again at least one interval
/// after the caller's `now` (an hour here), and [`algorithm`]'s at most
/// one burst of intervals (6 ms) after the instant the table checked it
/// at (the caller's `now`, or a later sweep's for a stale caller: never
/// after the clock read once the check returned). The shared state admits
/// its burst, then nothing for the rest of the run.
fn shared_signature() -> Gcra {
    Gcra::token_bucket(
        Quota::new(1, Duration::from_nanos(SHARED_INTERVAL))
            .unwrap()
            .with_burst(BURST as u32)
            .unwrap(),
    )
}

/// Every key runs [`algorithm`] as its own quota (with
/// [`shared_signature`] as the table's default).
fn own_quota(_: &u64) -> Gcra {
    algorithm()
}

/// Admissions no longer report which path took them; how a run tells.
#[derive(Debug, Clone, Copy)]
enum Paths {
    /// Counted as the key's own: every admission of a `Deny` table (it
    /// never admits without a slot), or, for a table that may admit
    /// through its shared bucket, the key's admissions by any path.
    CountAsOwn,
    /// By when the admitting state is full again (keys on [`own_quota`],
    /// the shared state on [`shared_signature`]).
    ByFullAgain,
}

impl Paths {
    /// True if the admission checked at `now` (the clock read `after` it
    /// returned), full again at `full_at`, took from the key's own state.
    fn is_own(self, now: u64, after: u64, full_at: u64) -> bool {
        match self {
            Self::CountAsOwn => true,
            Self::ByFullAgain => {
                let own = full_at <= after + BURST * INTERVAL;
                let shared = full_at >= now + SHARED_INTERVAL;
                assert!(
                    own != shared,
                    "checked at {now} (clock {after} after), full again at {full_at}: \
                     own state {own}, shared state {shared}"
                );
                own
            }
        }
    }
}

/// Runs the threads on `table`. Returns the admissions per key (own and
/// overflow separately) and the elapsed time in nanoseconds.
fn hammer<T: KeyedTable<u64> + Sync>(table: &T, paths: Paths) -> ([u64; KEYS as usize], u64, u64) {
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
                    let d = table.try_acquire(&key, now);
                    let after = clock.now().as_nanos();
                    last.fetch_max(after, Ordering::Relaxed);
                    if let Ok(grant) = d {
                        if paths.is_own(now.as_nanos(), after, grant.full_at().as_nanos()) {
                            own[key as usize].fetch_add(1, Ordering::Relaxed);
                        } else {
                            overflow.fetch_add(1, Ordering::Relaxed);
                        }
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

/// `shared_interval`: the interval of the shared overflow state's
/// algorithm.
fn assert_bound(per_key: &[u64; KEYS as usize], overflow: u64, elapsed: u64, shared_interval: u64) {
    let bound = BURST + elapsed / INTERVAL;
    for (key, &admitted) in per_key.iter().enumerate() {
        assert!(admitted <= bound, "key {key}: {admitted} > {bound}");
    }
    // the shared overflow bucket is one more key's worth
    let shared_bound = BURST + elapsed / shared_interval;
    assert!(
        overflow <= shared_bound,
        "overflow: {overflow} > {shared_bound}"
    );
    // and the run did real work: the keys were busy enough to be limited
    assert!(per_key.iter().sum::<u64>() + overflow > KEYS * BURST);
}

/// The bound when the admissions of a key may have come from its own state
/// or from the shared overflow state (which runs the same algorithm) and
/// the run cannot tell which: each key's own state admits at most `bound`,
/// so whatever a key got beyond it came from the shared state, which
/// admits at most `bound` in all.
fn assert_bound_any_path(admitted: &[u64; KEYS as usize], elapsed: u64) {
    let bound = BURST + elapsed / INTERVAL;
    let beyond: u64 = admitted.iter().map(|&a| a.saturating_sub(bound)).sum();
    assert!(
        beyond <= bound,
        "{beyond} admitted beyond the per-key bound {bound}, more than the shared state's: {admitted:?}"
    );
    assert!(admitted.iter().sum::<u64>() > KEYS * BURST);
}

/// 8 keys (two shards for the std tables) for 16 hammered keys: evictions,
/// moves and overflow race with the checks, under both bounded policies.
fn smaller_than_the_key_set<T: KeyedTable<u64> + Sync>(make: impl Fn(Spec) -> T) {
    for policy in [OverflowPolicy::SharedBucket, OverflowPolicy::Deny] {
        let table = make(Spec::new(algorithm(), 8).shards(Some(2)).overflow(policy));
        let (admitted, overflow, elapsed) = hammer(&table, Paths::CountAsOwn);
        assert_eq!(overflow, 0);
        if policy == OverflowPolicy::Deny {
            // every admission is the key's own: the bound per key
            assert_bound(&admitted, 0, elapsed, INTERVAL);
        } else {
            assert_bound_any_path(&admitted, elapsed);
        }
    }
    // The shared bucket again, with each admission's path told apart by
    // its answer: the keys' own states and the shared state each keep
    // their bound.
    let table = make(
        Spec::new(shared_signature(), 8)
            .shards(Some(2))
            .overflow(OverflowPolicy::SharedBucket)
            .quotas(Quotas::Fn(own_quota)),
    );
    let (per_key, overflow, elapsed) = hammer(&table, Paths::ByFullAgain);
    assert_bound(&per_key, overflow, elapsed, SHARED_INTERVAL);
}

fn with_room_for_every_key<T: KeyedTable<u64> + Sync>(make: impl Fn(Spec) -> T) {
    // every key's admissions, by any path, within the per-key bound
    let table = make(Spec::new(algorithm(), 64).shards(None));
    let (admitted, overflow, elapsed) = hammer(&table, Paths::CountAsOwn);
    assert_eq!(overflow, 0);
    assert_bound(&admitted, overflow, elapsed, INTERVAL);
    // and none of them through the shared overflow state (told apart by
    // the answer, as above)
    let table = make(
        Spec::new(shared_signature(), 64)
            .shards(None)
            .quotas(Quotas::Fn(own_quota)),
    );
    let (per_key, overflow, elapsed) = hammer(&table, Paths::ByFullAgain);
    assert_eq!(overflow, 0);
    assert_bound(&per_key, overflow, elapsed, SHARED_INTERVAL);
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
fn moves_lose_no_admission<T: KeyedTable<u64> + Sync>(make: impl Fn(Spec) -> T) {
    const CHECKS: u64 = 200_000;
    let table = make(
        Spec::new(churn(), 2)
            .overflow(OverflowPolicy::Deny)
            .quotas(Quotas::Fn(hot_or_churn)),
    );
    assert!(table.try_acquire(&0, t(0)).is_ok());
    let admitted = AtomicU64::new(1);
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..CHECKS {
                    let d = table.try_acquire(&0, t(0));
                    // a refusal would say its path: the key's own; an
                    // admission no longer does, but overflow is denied,
                    // so only key 0's own state admits (and its TAT,
                    // checked below, counts every admission)
                    if let Err(refusal) = &d {
                        assert_eq!(refusal.path(), KeyedPath::Own);
                    }
                    if d.is_ok() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
        s.spawn(|| {
            let mut now = 1;
            while !done.load(Ordering::Relaxed) || now < 10_000 {
                let _ = table.try_acquire(&(1 + now % 50), t(now));
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
