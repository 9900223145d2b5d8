//! Reconfiguration racing with checks: four threads check shared and
//! distinct keys (real clock) while another thread switches the table's
//! default between two quotas, and one key's own quota between two more,
//! over and over. No panic, no deadlock, and per key the admissions stay
//! within `burst_max + elapsed / T_min`, plus the time each change spent
//! between reading its `now` and returning (a change carried over at a
//! stale `now` may hand out what that moment's refill would have; see
//! below).
//!
//! Why the bound holds: with equal bursts, used amount and used fraction
//! both keep the permits used (`lead / T`), and an admission needs room at
//! the checker's `now`, so "permits used at the true time" never exceeds
//! the burst, grows by one per admission, and falls by at most `1 / T_min`
//! per nanosecond of drain, or `staleness / T_min` at a change. With equal
//! refill times (`burst × T`), used fraction keeps the lead itself, which
//! never exceeds `burst × T`, grows by at least `T_min` per admission, and
//! falls by one per nanosecond, or by the staleness at a change. Rules
//! that do not fit these premises (used amount between different bursts,
//! reset) hand out credit by design: "more used than the new quota holds
//! is an empty bucket, no debt".
//!
//! The changer pauses between changes (about 1,500 per run) and the
//! checkers between bursts of checks, so that the CPUs are not
//! oversubscribed and a change seldom waits long between its `now` and its
//! conversion: the staleness allowance stays a few percent of the bound.
//! The bound has teeth: with `Reset` in place of the rules above, or used
//! amount between the bursts 4 and 2, hammered keys get three to ten times
//! the bound.
#![cfg(feature = "std")]

use crate::keyed_support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use keyed_support::{QuotaMap, Quotas, Spec};
use tollgate::keyed::{KeyedPath, KeyedTable};
use tollgate::{Algorithm, Clock, Gcra, Inheritance, Quota, StdClock};

const CHECKERS: u64 = 4;
/// The least time the threads race; they go on (up to the watchdog's
/// minute) until `MIN_CHANGES` changes are made and every key was admitted
/// more than its burst, so a loaded machine makes the run longer, never
/// the test fail.
const RUN: Duration = Duration::from_millis(300);
const MIN_CHANGES: u64 = 100;
/// Checks between two pauses of a checker.
const CHECK_BURST: usize = 32;
/// A checker's pause, and the changer's between two changes.
const PAUSE: Duration = Duration::from_micros(50);
/// Keys every checker walks; each checker also has one of its own.
const SHARED_KEYS: [u64; 4] = [0, 1, 2, 3];
const OWN_KEY: u64 = 100;
/// A key with its own quota, switched by `update_key_quota`.
const SWITCHED_KEY: u64 = 60;
/// A key with its own quota that never changes.
const FIXED_KEY: u64 = 50;

fn quota(per_second: u32, burst: u32) -> Gcra {
    Gcra::token_bucket(
        Quota::per_second(per_second)
            .and_then(|q| q.with_burst(burst))
            .expect("valid quota"),
    )
}

/// Two algorithms a key switches between, and the rules it switches by.
#[derive(Clone, Copy)]
struct Pair {
    a: Gcra,
    b: Gcra,
    rules: &'static [Inheritance],
}

impl Pair {
    /// `burst_max + elapsed / T_min`.
    fn bound(&self, elapsed: u64) -> u64 {
        let burst = self.a.capacity().max(self.b.capacity());
        let t_min = self.a.interval_nanos().min(self.b.interval_nanos());
        u64::from(burst) + elapsed / t_min
    }
}

/// Equal bursts, intervals 2 ms and 5 ms: used amount and used fraction.
fn equal_burst_pair() -> Pair {
    Pair {
        a: quota(500, 4),
        b: quota(200, 4),
        rules: &[Inheritance::UsedAmount, Inheritance::UsedFraction],
    }
}

/// Equal refill times (8 ms), bursts 4 and 2: used fraction.
fn equal_refill_pair() -> Pair {
    Pair {
        a: quota(500, 4),
        b: quota(250, 2),
        rules: &[Inheritance::UsedFraction],
    }
}

/// Aborts the test binary if the test is not done in time: a deadlock
/// fails loudly instead of hanging the run.
fn watchdog(done: &Arc<AtomicBool>, limit: Duration) {
    let done = Arc::clone(done);
    std::thread::spawn(move || {
        let start = Instant::now();
        while !done.load(Ordering::Relaxed) {
            if start.elapsed() > limit {
                eprintln!("deadlock: the reconfiguration test did not finish in {limit:?}");
                std::process::abort();
            }
            std::thread::sleep(Duration::from_millis(10)); // polls a condition
        }
    });
}

struct Run {
    /// Admissions per key, in key order of `keys()`.
    admitted: Vec<u64>,
    /// From the earliest `now` used to the latest time read after an
    /// operation, in ns.
    elapsed: u64,
    /// Total time the changes spent between reading `now` and returning.
    stale: u64,
    changes: u64,
}

fn keys() -> Vec<u64> {
    let mut keys = SHARED_KEYS.to_vec();
    keys.extend((0..CHECKERS).map(|c| OWN_KEY + c));
    keys.extend([SWITCHED_KEY, FIXED_KEY]);
    keys
}

/// The checkers and the changer on `table`: the default switches within
/// `default`, key `SWITCHED_KEY` within `switched`.
fn race<T: KeyedTable<u64, Algorithm = Gcra> + Sync>(
    table: &T,
    quotas: &QuotaMap,
    default: Pair,
    switched: Pair,
) -> Run {
    let clock = StdClock::new();
    let keys = keys();
    let admitted: Vec<AtomicU64> = keys.iter().map(|_| AtomicU64::new(0)).collect();
    let first = AtomicU64::new(u64::MAX);
    let last = AtomicU64::new(0);
    let barrier = Barrier::new(CHECKERS as usize + 1);
    let stop = AtomicBool::new(false);
    let (stale, changes) = std::thread::scope(|s| {
        for checker in 0..CHECKERS {
            let (clock, keys, admitted, first, last, barrier, stop) =
                (&clock, &keys, &admitted, &first, &last, &barrier, &stop);
            s.spawn(move || {
                let mine: Vec<usize> = (0..keys.len())
                    .filter(|&i| keys[i] < OWN_KEY || keys[i] == OWN_KEY + checker)
                    .collect();
                barrier.wait();
                let mut i = checker as usize;
                while !stop.load(Ordering::Relaxed) {
                    let slot = mine[i % mine.len()];
                    let now = clock.now();
                    first.fetch_min(now.as_nanos(), Ordering::Relaxed);
                    let d = table.try_acquire(&keys[slot], now);
                    last.fetch_max(clock.now().as_nanos(), Ordering::Relaxed);
                    // room for every key: a refusal says it is the key's
                    // own; an admission no longer says, but the key holds
                    // a slot (with room, no key is ever evicted: an
                    // overflow admission would leave it without one)
                    match &d {
                        Err(refusal) => {
                            assert_eq!(refusal.path(), KeyedPath::Own, "room for every key");
                        }
                        Ok(_) => assert!(table.contains(&keys[slot]), "room for every key"),
                    }
                    if d.is_ok() {
                        admitted[slot].fetch_add(1, Ordering::Relaxed);
                    }
                    i += 1;
                    // bursts of checks, each key many times per interval;
                    // the pauses keep the CPUs from being oversubscribed,
                    // so a change is rarely preempted between its `now`
                    // and its conversion (which would loosen the bound).
                    // Kept real sleep: pacing, not synchronisation; the
                    // bound counts each change's measured staleness, so
                    // how long a pause lasts cannot make the test fail.
                    if i.is_multiple_of(CHECK_BURST) {
                        std::thread::sleep(PAUSE);
                    }
                }
            });
        }
        let changer = s.spawn(|| {
            barrier.wait();
            let (mut stale, mut changes) = (0, 0u64);
            let start = Instant::now();
            // at least RUN, and until enough happened to prove something
            // (however slowly a loaded machine lets the threads run)
            let enough = |changes: u64| {
                start.elapsed() >= RUN
                    && changes >= MIN_CHANGES
                    && admitted.iter().all(|a| a.load(Ordering::Relaxed) > 4)
            };
            while !enough(changes) {
                let k = changes as usize;
                let now = clock.now();
                first.fetch_min(now.as_nanos(), Ordering::Relaxed);
                if k.is_multiple_of(2) {
                    let next = if k.is_multiple_of(4) {
                        default.b
                    } else {
                        default.a
                    };
                    let how = default.rules[k / 4 % default.rules.len()];
                    table.reconfigure(next, how, now);
                } else {
                    let next = if k % 4 == 1 { switched.b } else { switched.a };
                    let how = switched.rules[k / 4 % switched.rules.len()];
                    table.update_key_quota(&SWITCHED_KEY, how, now, &mut || {
                        quotas.set(SWITCHED_KEY, Some(next));
                    });
                }
                let after = clock.now().as_nanos();
                last.fetch_max(after, Ordering::Relaxed);
                stale += after - now.as_nanos();
                changes += 1;
                std::thread::sleep(PAUSE); // pacing (see the checkers)
            }
            stop.store(true, Ordering::Relaxed);
            (stale, changes)
        });
        changer.join().expect("the changer panicked")
    });
    Run {
        admitted: admitted.iter().map(|a| a.load(Ordering::Relaxed)).collect(),
        elapsed: last.load(Ordering::Relaxed) - first.load(Ordering::Relaxed),
        stale,
        changes,
    }
}

/// Checks every key's admissions against its bound.
fn reconfiguration_keeps_per_key_bound<T: KeyedTable<u64, Algorithm = Gcra> + Sync>(
    make: impl Fn(Spec) -> T,
    default: Pair,
) {
    let done = Arc::new(AtomicBool::new(false));
    watchdog(&done, Duration::from_secs(60));
    // the key with a fixed quota: 100 per second, burst 2
    let fixed = quota(100, 2);
    let switched = equal_burst_pair();
    let quotas = QuotaMap::leak([(SWITCHED_KEY, switched.a), (FIXED_KEY, fixed)]);
    let table = make(
        Spec::new(default.a, 64)
            .shards(Some(4))
            .quotas(Quotas::Map(quotas)),
    );
    let run = race(&table, quotas, default, switched);
    done.store(true, Ordering::Relaxed);

    assert!(run.changes >= MIN_CHANGES, "only {} changes", run.changes);
    let with_changes = run.elapsed + run.stale;
    for (key, &admitted) in keys().iter().zip(&run.admitted) {
        let bound = match *key {
            FIXED_KEY => u64::from(fixed.capacity()) + run.elapsed / fixed.interval_nanos(),
            SWITCHED_KEY => switched.bound(with_changes),
            _ => default.bound(with_changes),
        };
        assert!(
            admitted <= bound,
            "key {key}: {admitted} admitted > {bound} ({} ns, {} ns stale over {} changes)",
            run.elapsed,
            run.stale,
            run.changes
        );
        // and the key was busy enough to be limited
        assert!(admitted > 4, "key {key}: only {admitted} admitted");
    }
    // the table ends running the last default and no key was lost
    let last = table.default_algorithm();
    assert!(last == default.a || last == default.b);
    assert_eq!(table.len(), keys().len());
}

fn equal_bursts<T: KeyedTable<u64, Algorithm = Gcra> + Sync>(make: impl Fn(Spec) -> T) {
    reconfiguration_keeps_per_key_bound(make, equal_burst_pair());
}

fn equal_refill_times<T: KeyedTable<u64, Algorithm = Gcra> + Sync>(make: impl Fn(Spec) -> T) {
    reconfiguration_keeps_per_key_bound(make, equal_refill_pair());
}

keyed_support::every_table! {
    equal_bursts: heapless 64,
    equal_refill_times: heapless 64,
}
