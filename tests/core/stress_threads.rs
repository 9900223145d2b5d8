//! Many threads on one bucket with the real clock: the safety invariant
//! holds under contention.
//!
//! Each admission (`Algorithm::check_n`) answers the bucket's new
//! theoretical arrival time (the instant it is full again, `now +
//! reset_after`), which strictly increases from one admission
//! to the next, so sorting by it recovers the order in which the atomic
//! updates happened. In that order, for admissions i ≤ j, GCRA promises
//! `Σ n · T ≤ (now_j − now_i) + capacity · T`: checked for every pair in
//! linear time with a running minimum.
//!
//! The liveness checks ("it admitted at a real rate") discount the time no
//! thread was checking at all (every thread descheduled: a loaded machine),
//! measured by the threads themselves: capacity nobody asked for is lost
//! by design, and says nothing about the bucket.
#![cfg(feature = "std")]

use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use tollgate::{Algorithm, Bucket, Clock, Gcra, Limiter, Quota, StdClock};

struct Admission {
    now: u64,
    tat: u64,
    n: u32,
}

/// A thread's stretches of more than [`PAUSE`] between two of its checks
/// (ns, from the clock the checks read).
type Pauses = Vec<(u64, u64)>;

const PAUSE: u64 = 1_000_000;

/// The total time during which every thread was in one of its pauses: no
/// check reached the bucket.
fn nobody_checking(pauses: &[Pauses]) -> u64 {
    // walk the intersection of the threads' pause sets, interval by interval
    let mut common: Pauses = match pauses.first() {
        Some(p) => p.clone(),
        None => return 0,
    };
    for other in &pauses[1..] {
        let mut next = Vec::new();
        for &(a0, a1) in &common {
            for &(b0, b1) in other {
                let (lo, hi) = (a0.max(b0), a1.min(b1));
                if lo < hi {
                    next.push((lo, hi));
                }
            }
        }
        common = next;
    }
    common.iter().map(|(lo, hi)| hi - lo).sum()
}

/// The admissions, in the order they happened, the nanoseconds from the
/// bucket's first possible admission to the end of the run, and the
/// nanoseconds during which no thread was checking.
fn hammer(bucket: Arc<Bucket<Gcra>>, threads: usize, run: Duration) -> (Vec<Admission>, u64, u64) {
    // One run at a time: the two tests' threads competing for the same
    // cores would only starve each other (the liveness check below counts
    // on the threads running for most of `run`).
    static ONE_RUN_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _serial = ONE_RUN_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let clock = StdClock::new();
    // StdClocks share one process-wide origin (possibly set long before this
    // test started): measure the run from here, where the bucket is full.
    let start = clock.now();
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let bucket = Arc::clone(&bucket);
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                barrier.wait();
                let start = Instant::now();
                let mut mine = Vec::new();
                let mut pauses = Pauses::new();
                let mut last = clock.now().as_nanos();
                let mut k = 0u32;
                while start.elapsed() < run {
                    let n = 1 + (k + i as u32) % bucket.capacity(&()).min(3);
                    k = k.wrapping_add(1);
                    let now = clock.now();
                    if now.as_nanos() - last > PAUSE {
                        pauses.push((last, now.as_nanos()));
                    }
                    last = now.as_nanos();
                    // the bucket's own check, answering the new TAT (full again)
                    if let Ok(full) = bucket.algorithm().check_n(bucket.state(), n, now) {
                        mine.push(Admission {
                            now: now.as_nanos(),
                            tat: full.as_nanos(),
                            n,
                        });
                    }
                }
                // the stretch after the last check, to the end of the run
                pauses.push((last, u64::MAX));
                (mine, pauses)
            })
        })
        .collect();
    let mut all: Vec<Admission> = Vec::new();
    let mut pauses = Vec::new();
    for h in handles {
        let (mine, p) = h.join().expect("thread panicked");
        all.extend(mine);
        pauses.push(p);
    }
    all.sort_by_key(|a| a.tat);
    let end = clock.now();
    // a pause at the start (before a thread's first check) counts too
    for p in &mut pauses {
        for pause in p.iter_mut() {
            pause.1 = pause.1.min(end.as_nanos());
        }
    }
    let idle = nobody_checking(&pauses);
    (all, (end - start).as_nanos() as u64, idle)
}

fn assert_safety(all: &[Admission], capacity: u32, interval: u64) {
    let (cap, t) = (i128::from(capacity), i128::from(interval));
    // TATs strictly increase: each admission moved the bucket forward.
    for w in all.windows(2) {
        assert!(w[0].tat < w[1].tat, "two admissions produced the same TAT");
    }
    // max over i ≤ j of (S_j − S_{i−1})·T − (now_j − now_i) must be ≤ cap·T
    let mut prefix = 0i128; // S_{i-1}
    let mut best = i128::MAX; // min over i of S_{i-1}·T − now_i
    for a in all {
        best = best.min(prefix * t - i128::from(a.now));
        prefix += i128::from(a.n);
        let excess = prefix * t - i128::from(a.now) - best;
        assert!(
            excess <= cap * t,
            "over-admission: {excess} ns of work beyond the bound"
        );
    }
}

#[test]
fn token_bucket_safety_under_contention() {
    let q = Quota::per_second(20_000).unwrap().with_burst(50).unwrap();
    let bucket = Arc::new(Bucket::token_bucket(q));
    let run = Duration::from_millis(400);
    let (all, elapsed, idle) = hammer(Arc::clone(&bucket), 4, run);
    assert_safety(&all, 50, q.interval_nanos());
    let permits: u64 = all.iter().map(|a| u64::from(a.n)).sum();
    let bound = 50 + elapsed / q.interval_nanos();
    assert!(permits <= bound, "{permits} > {bound}");
    // and it did admit at a real rate (not just refuse everything) while
    // anyone was asking: the time nobody checked is not the bucket's fault
    let asked = 50 + elapsed.saturating_sub(idle) / q.interval_nanos();
    assert!(
        permits >= asked / 2,
        "only {permits} of up to {asked} admitted ({bound} in {elapsed} ns, {idle} ns with no thread checking)"
    );
}

#[test]
fn leaky_bucket_safety_under_contention() {
    // a leaky bucket's largest request is the quota's burst
    let q = Quota::per_second(10_000).unwrap().with_burst(3).unwrap();
    let bucket = Arc::new(Bucket::leaky_bucket(q));
    let run = Duration::from_millis(400);
    let (all, elapsed, _) = hammer(Arc::clone(&bucket), 4, run);
    assert_safety(&all, 3, q.interval_nanos());
    // strict pacing: consecutive admissions are at least (weight × T) apart
    for w in all.windows(2) {
        assert!(w[1].tat - w[0].tat >= u64::from(w[1].n) * q.interval_nanos());
    }
    let permits: u64 = all.iter().map(|a| u64::from(a.n)).sum();
    assert!(permits <= 3 + elapsed / q.interval_nanos());
    assert!(permits > 100, "only {permits} admitted");
}
