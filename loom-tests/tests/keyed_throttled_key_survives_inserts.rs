//! Keyed tables: a throttled key is never evicted to make room for
//! another key, whatever races it.
//!
//! A full table of 2 keys, both busy until 1000 (one permit each at 0).
//! With out-of-order `now`s all before 1000, new keys arrive (each insert
//! into the full table tries a sweep), an `evict_refilled` sweep runs, and
//! key 1 is checked. In every interleaving keys 1 and 2 keep their slots,
//! no new key gets one, nothing is evicted, key 1 behaves exactly like one
//! reference bucket (outcomes, each admission's full-again instant, and
//! final snapshot), and the new keys are answered by the overflow policy:
//! their refusals name the shared path, and all their answers (and the
//! shared bucket's final snapshot) are what some sequential order gives
//! on one reference bucket. (An admission does not name its path; a new
//! key that stays untracked can only have been admitted by the shared
//! bucket, which must have been charged for it.)
#![cfg(loom)]

use core::time::Duration;

use loom::sync::Arc;
use loom_tests::keyed_model::{self as km, KeyedOp, KeyedOutcome, KeyedTable};
use loom_tests::model;
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

/// Keys above 2 are new.
fn is_new(key: u64) -> bool {
    key > 2
}

fn throttled_keys_stay<Tb: KeyedTable>(
    build: fn(Gcra, usize, OverflowPolicy) -> Tb,
    threads: Vec<Vec<KeyedOp>>,
) {
    let gcra = gcra();
    let setup = vec![KeyedOp::check(1, 0), KeyedOp::check(2, 0)];
    let latest = km::all_nows(&setup, &threads)
        .into_iter()
        .max()
        .unwrap_or(0);
    assert!(latest < T, "both keys must stay busy throughout");
    let runs_1 = km::one_state_runs(&gcra, |k| k == 1, &setup, &threads, latest);
    // the lock-free table's shared bucket reports `full_at` as read after
    // the check (a racing admission may show in it): not compared
    let shared_runs =
        km::without_full_at(&km::one_state_runs(&gcra, is_new, &[], &threads, latest));
    model::check(move || {
        let table = Arc::new(build(gcra, 2, OverflowPolicy::SharedBucket));
        let outcomes = km::run_keyed(&table, &setup, &threads);
        assert!(
            table.contains(1) && table.contains(2),
            "a busy key was evicted: {outcomes:?}"
        );
        assert_eq!(table.len(), 2, "{outcomes:?}");
        for (ops, outs) in threads.iter().zip(&outcomes) {
            for (op, out) in ops.iter().zip(outs) {
                match (*op, *out) {
                    (KeyedOp::Evict { .. }, KeyedOutcome::Evicted(n)) => {
                        assert_eq!(n, 0, "evicted a busy key: {outcomes:?}");
                    }
                    (KeyedOp::Check { key, .. }, out) if is_new(key) => {
                        assert!(!table.contains(key), "new key {key} got a slot");
                        // a refusal names its path; an admission does not
                        // (checked through the shared bucket below)
                        assert!(
                            out.is_allowed() || out.refused_by() == Some(KeyedPath::SharedOverflow),
                            "{outcomes:?}"
                        );
                    }
                    _ => {}
                }
            }
        }
        let seen = km::outcomes_via(is_new, KeyedPath::SharedOverflow, &threads, &outcomes)
            .unwrap_or_else(|| panic!("a new key missed the shared bucket: {outcomes:?}"));
        let seen = km::forget_full_at(&seen);
        let reset = table.shared_snapshot(latest).reset_after_nanos();
        assert!(
            shared_runs.contains(&(seen.clone(), reset)),
            "shared bucket: no sequential order gives {seen:?} ending {reset} ns from \
             full: {outcomes:?}; allowed: {shared_runs:?}"
        );
        // key 1: refusals name its own slot; an admission names no path,
        // but its full-again instant (and the final snapshot) must be what
        // key 1's own bucket gives
        let own_1 = km::outcomes_via(|k| k == 1, KeyedPath::Own, &threads, &outcomes)
            .unwrap_or_else(|| panic!("key 1 left its slot: {outcomes:?}"));
        let reset_1 = table.snapshot(1, latest).reset_after_nanos();
        assert!(
            runs_1.contains(&(own_1.clone(), reset_1)),
            "key 1: no sequential order gives {own_1:?} ending {reset_1} ns from full: \
             {outcomes:?}; allowed: {runs_1:?}"
        );
    });
}

/// Two new keys race a check of busy key 1.
fn new_keys_race_a_throttled_key<Tb: KeyedTable>(build: fn(Gcra, usize, OverflowPolicy) -> Tb) {
    throttled_keys_stay(
        build,
        vec![
            vec![KeyedOp::check(3, 500)],
            vec![KeyedOp::check(4, 300)],
            vec![KeyedOp::check(1, 600), KeyedOp::check(1, 400)],
        ],
    );
}

/// A new key and a sweep race checks of busy key 1.
fn new_key_and_sweep_race_a_throttled_key<Tb: KeyedTable>(
    build: fn(Gcra, usize, OverflowPolicy) -> Tb,
) {
    throttled_keys_stay(
        build,
        vec![
            vec![KeyedOp::check(3, 500)],
            vec![KeyedOp::Evict { now: 700 }],
            vec![KeyedOp::check(1, 600), KeyedOp::check(1, 400)],
        ],
    );
}

#[test]
fn sharded_new_keys_race_a_throttled_key() {
    new_keys_race_a_throttled_key(km::sharded);
}

#[test]
fn lock_free_new_keys_race_a_throttled_key() {
    new_keys_race_a_throttled_key(km::lock_free);
}

#[test]
fn heapless_new_keys_race_a_throttled_key() {
    new_keys_race_a_throttled_key(km::heapless);
}

#[test]
fn sharded_new_key_and_sweep_race_a_throttled_key() {
    new_key_and_sweep_race_a_throttled_key(km::sharded);
}

#[test]
fn lock_free_new_key_and_sweep_race_a_throttled_key() {
    new_key_and_sweep_race_a_throttled_key(km::lock_free);
}

#[test]
fn heapless_new_key_and_sweep_race_a_throttled_key() {
    new_key_and_sweep_race_a_throttled_key(km::heapless);
}
