//! Keyed tables: evicting a key races checks of that key without ever
//! admitting it more than its quota.
//!
//! A full table of 2 keys (both with the same home slot, so the second is
//! displaced along the probe run): key 1 becomes idle at 1000, key 2 stays
//! busy until 2000. Then, with out-of-order `now`s, either an
//! `evict_refilled` sweep or a new key's insert (which sweeps a full
//! table) races a stale check of key 1, the key being evicted, and a check
//! of key 2, which the lock-free table moves back to its home slot while
//! the check runs. In every interleaving:
//!
//! - key 1 is admitted at most its quota over the span of the run's
//!   readings (`burst + ⌊span / T⌋`, the sweep's reading included: it
//!   proves time reached it); when only its own slot can admit it
//!   (`OverflowPolicy::Deny`), at most what the most generous sequential
//!   order of its own checks gives on one reference bucket (eviction is
//!   lossless: an evicted key re-enters judged at the sweep's time);
//! - the shared overflow bucket admits at most one quota over that span,
//!   and its final snapshot accounts for every permit it admitted (an
//!   admission does not name its path: those of keys 1 and 3 that end
//!   untracked are the ones only the shared bucket can have made);
//! - key 2, never evictable, behaves exactly like one reference bucket
//!   (outcomes, each admission's full-again instant, and final snapshot),
//!   so a move never loses or forks it;
//! - the table never holds more than its capacity, and never both key 1
//!   and the key whose insert raced it.
#![cfg(loom)]

use core::time::Duration;

use loom::sync::Arc;
use loom_tests::keyed_model::{self as km, KeyedOp, KeyedOutcome, KeyedTable};
use loom_tests::{Op, clock_bound, model};
use tollgate::keyed::{KeyedPath, OverflowPolicy};
use tollgate::{Gcra, Quota};

/// Emission interval (ns).
const T: u64 = 1_000;
const BURST: u32 = 2;

fn gcra() -> Gcra {
    Gcra::token_bucket(
        Quota::new(1, Duration::from_nanos(T))
            .and_then(|q| q.with_burst(BURST))
            .expect("valid quota"),
    )
}

/// Key 1 idle from 1000, key 2 busy until 2000 (two permits at 0).
fn full_table() -> Vec<KeyedOp> {
    vec![
        KeyedOp::check(1, 0),
        KeyedOp::check(2, 0),
        KeyedOp::check(2, 0),
    ]
}

/// Runs `threads` after [`full_table`] with `policy`; checks the bounds
/// above, then `extra(table, outcomes)`.
fn eviction_race<Tb, X>(
    build: fn(Gcra, usize, OverflowPolicy) -> Tb,
    policy: OverflowPolicy,
    threads: Vec<Vec<KeyedOp>>,
    extra: X,
) where
    Tb: KeyedTable,
    X: Fn(&Tb, &[Vec<KeyedOutcome>]) + Send + Sync + 'static,
{
    let gcra = gcra();
    let setup = full_table();
    let nows = km::all_nows(&setup, &threads);
    let latest = nows.iter().copied().max().unwrap_or(0);
    // the earliest `now` at which the shared bucket can be asked (by the
    // threads' checks of keys 1 and 3; the setup fills an empty table)
    let earliest = km::checks_of(|k| k == 1 || k == 3, &threads.concat())
        .iter()
        .map(Op::now)
        .min()
        .unwrap_or(latest);
    // The contract: over the span of every reading in the run (the
    // sweeper's included: it proves time reached it), key 1 gets at most
    // burst + ⌊span / T⌋; the setup took one.
    let bound_1 = clock_bound(BURST, T, nows.iter().copied()) - 1;
    // Own slot only (Deny): an evicted key re-enters judged at the sweep's
    // time, "exactly what the evicted state would have given" (its docs),
    // so never more than its checks get on one bucket that was never
    // evicted.
    let most_for_1 = match policy {
        OverflowPolicy::Deny => km::most_admitted_alone(&gcra, 1, &setup, &threads),
        _ => bound_1,
    }
    .min(bound_1);
    let asked_for_1: u64 = km::checks_of(|k| k == 1, &threads.concat())
        .iter()
        .map(|op| match *op {
            Op::Check { n, .. } => u64::from(n),
            _ => 0,
        })
        .sum();
    assert!(
        asked_for_1 > most_for_1,
        "the scenario must ask more of key 1 than it may get"
    );
    let shared_bound = clock_bound(BURST, T, nows.iter().copied());
    let runs_2 = km::one_state_runs(&gcra, |k| k == 2, &setup, &threads, latest);
    model::check(move || {
        let table = Arc::new(build(gcra, 2, policy));
        let outcomes = km::run_keyed(&table, &setup, &threads);
        // key 1: through its own slot or any overflow path
        let got_1 = km::admitted_to(1, &threads, &outcomes);
        assert!(
            got_1 <= most_for_1,
            "key 1 admitted {got_1} > {most_for_1}: {outcomes:?}"
        );
        // The shared bucket: an admission no longer names its path, so
        // the permits it admitted are counted as those admitted to keys 1
        // and 3 that end without a slot. In these scenarios that is exact:
        // a key admitted by its own slot is busy past every sweep (so it
        // keeps the slot), and a key that went to the shared bucket found
        // the table full of busy keys, which stay, so it never got a slot
        // later (`extra` asserts that keys 1 and 3 do not both end tracked).
        let shared: u64 = [1, 3]
            .iter()
            .filter(|&&k| !table.contains(k))
            .map(|&k| km::admitted_to(k, &threads, &outcomes))
            .sum();
        assert!(
            shared <= shared_bound,
            "overflow admitted {shared}: {outcomes:?}"
        );
        // and the shared bucket was charged for them: from a fresh state,
        // each admission moves its TAT at least n·T past the earliest
        // `now`, and the TAT is at most `latest + reset_after`
        let shared_reset = table.shared_snapshot(latest).reset_after_nanos();
        assert!(
            shared * T <= latest + shared_reset - earliest,
            "overflow admitted {shared}, the shared bucket accounts for less \
             (full {shared_reset} ns after {latest}): {outcomes:?}"
        );
        // key 2: refusals name its own slot; an admission names no path,
        // but each one's full-again instant (and the final snapshot) must
        // be what its own bucket gives
        let own_2 = km::outcomes_via(|k| k == 2, KeyedPath::Own, &threads, &outcomes)
            .unwrap_or_else(|| panic!("key 2 left its slot: {outcomes:?}"));
        let reset_2 = table.snapshot(2, latest).reset_after_nanos();
        assert!(
            runs_2.contains(&(own_2.clone(), reset_2)),
            "key 2: no sequential order gives {own_2:?} ending {reset_2} ns from full: \
             {outcomes:?}; allowed: {runs_2:?}"
        );
        assert!(table.contains(2), "key 2 evicted while busy");
        assert!(table.len() <= 2, "over capacity: {}", table.len());
        extra(&table, &outcomes);
    });
}

/// `evict_refilled` at 1000 (key 1 idle) races two stale checks of key 1
/// at 900 and a check of key 2.
fn sweep_racing_stale_checks_of_the_evicted_key<Tb: KeyedTable>(
    build: fn(Gcra, usize, OverflowPolicy) -> Tb,
) {
    eviction_race(
        build,
        OverflowPolicy::Deny,
        vec![
            vec![KeyedOp::Evict { now: 1_000 }],
            vec![KeyedOp::check(2, 1_000)],
            vec![KeyedOp::check(1, 900), KeyedOp::check(1, 900)],
        ],
        |table, outcomes| {
            // an evicted key 1 re-enters (there is room after the sweep)
            assert!(table.len() == 2 || !table.contains(1), "{outcomes:?}");
        },
    );
}

/// A new key 3 at 1000 sweeps the full table (evicting idle key 1) and
/// races a stale check of key 1 at 900 and a check of key 2: only one of
/// keys 1 and 3 can hold the second slot.
fn insert_evicting_races_a_stale_check<Tb: KeyedTable>(
    build: fn(Gcra, usize, OverflowPolicy) -> Tb,
) {
    eviction_race(
        build,
        OverflowPolicy::Deny,
        vec![
            vec![KeyedOp::check(3, 1_000)],
            vec![KeyedOp::check(2, 1_000)],
            vec![KeyedOp::check(1, 900), KeyedOp::check(1, 900)],
        ],
        |table, outcomes| {
            assert!(
                table.contains(1) != table.contains(3),
                "keys 1 and 3 both or neither tracked: {outcomes:?}"
            );
            assert_eq!(table.len(), 2, "{outcomes:?}");
        },
    );
}

/// The same, with the shared overflow bucket: key 1 refused a slot is
/// answered by the shared bucket. Judged at its stale `now`, the shared
/// bucket may give key 1 a full burst where its own (evicted, idle) slot
/// would have given one permit at that `now`; over the span of the run's
/// readings (the sweep's included) key 1 still stays within its quota,
/// which is what this asks three permits of.
fn insert_evicting_with_shared_overflow<Tb: KeyedTable>(
    build: fn(Gcra, usize, OverflowPolicy) -> Tb,
) {
    eviction_race(
        build,
        OverflowPolicy::SharedBucket,
        vec![
            vec![KeyedOp::check(3, 1_000)],
            vec![
                KeyedOp::Check {
                    key: 1,
                    n: 2,
                    now: 900,
                },
                KeyedOp::check(1, 900),
            ],
        ],
        |table, outcomes| {
            assert!(
                table.contains(1) != table.contains(3),
                "keys 1 and 3 both or neither tracked: {outcomes:?}"
            );
        },
    );
}

#[test]
fn sharded_sweep_racing_stale_checks_of_the_evicted_key() {
    sweep_racing_stale_checks_of_the_evicted_key(km::sharded);
}

#[test]
fn lock_free_sweep_racing_stale_checks_of_the_evicted_key() {
    sweep_racing_stale_checks_of_the_evicted_key(km::lock_free);
}

#[test]
fn heapless_sweep_racing_stale_checks_of_the_evicted_key() {
    sweep_racing_stale_checks_of_the_evicted_key(km::heapless);
}

#[test]
fn sharded_insert_evicting_races_a_stale_check() {
    insert_evicting_races_a_stale_check(km::sharded);
}

#[test]
fn lock_free_insert_evicting_races_a_stale_check() {
    insert_evicting_races_a_stale_check(km::lock_free);
}

#[test]
fn heapless_insert_evicting_races_a_stale_check() {
    insert_evicting_races_a_stale_check(km::heapless);
}

#[test]
fn sharded_insert_evicting_with_shared_overflow() {
    insert_evicting_with_shared_overflow(km::sharded);
}

#[test]
fn lock_free_insert_evicting_with_shared_overflow() {
    insert_evicting_with_shared_overflow(km::lock_free);
}

#[test]
fn heapless_insert_evicting_with_shared_overflow() {
    insert_evicting_with_shared_overflow(km::heapless);
}
