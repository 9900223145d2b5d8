//! Keyed tables: callers that see a key for the first time at the same
//! moment create exactly one state for it. Three threads check the same
//! untracked key with out-of-order `now`s within one interval (three
//! asked, a burst of two allowed): in every interleaving the table ends
//! with that one key tracked once, and what the callers saw (outcomes,
//! each admission's full-again instant, and the key's final snapshot) is
//! what some sequential order gives on one reference bucket, so no caller
//! was answered by a second, fresh state.
//! Two keys inserted concurrently into a table with room for both each get
//! one state too.
#![cfg(loom)]

use core::time::Duration;

use loom::sync::Arc;
use loom_tests::keyed_model::{self as km, KeyedOp, KeyedTable};
use loom_tests::{clock_bound, model};
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

/// `threads` check keys no thread has seen before, on an empty table of 2
/// keys; `keys` are all the keys they use. Each key must end tracked once,
/// answered by its own state only, linearizable against one reference
/// bucket per key, within the clock bound.
///
/// An admission does not name its path: with `OverflowPolicy::Deny` and
/// room for every key, only a key's own state can admit it, and each
/// admission's full-again instant must be the one its own bucket gives;
/// refusals must name the key's own slot; the shared overflow bucket stays
/// untouched.
fn each_key_gets_one_state<Tb: KeyedTable>(
    build: fn(Gcra, usize, OverflowPolicy) -> Tb,
    keys: &'static [u64],
    threads: Vec<Vec<KeyedOp>>,
) {
    let gcra = gcra();
    let latest = km::all_nows(&[], &threads).into_iter().max().unwrap_or(0);
    let allowed: Vec<_> = keys
        .iter()
        .map(|&key| km::one_state_runs(&gcra, move |k| k == key, &[], &threads, latest))
        .collect();
    let asked: usize = threads.iter().map(Vec::len).sum();
    assert!(
        asked > keys.len() * BURST as usize,
        "the scenario must ask for more than the burst of some key"
    );
    model::check(move || {
        let table = Arc::new(build(gcra, 2, OverflowPolicy::Deny));
        let outcomes = km::run_keyed(&table, &[], &threads);
        for (&key, allowed) in keys.iter().zip(&allowed) {
            let own = km::outcomes_via(|k| k == key, KeyedPath::Own, &threads, &outcomes)
                .unwrap_or_else(|| panic!("key {key} not answered by its own state: {outcomes:?}"));
            let reset = table.snapshot(key, latest).reset_after_nanos();
            assert!(
                allowed.contains(&(own.clone(), reset)),
                "key {key}: no sequential order gives {own:?} ending {reset} ns from full; \
                 allowed: {allowed:?}"
            );
            assert!(table.contains(key), "key {key} lost");
            let nows = threads
                .iter()
                .flatten()
                .filter(|op| matches!(op, KeyedOp::Check { key: k, .. } if *k == key))
                .map(KeyedOp::now);
            let admitted = km::admitted_to(key, &threads, &outcomes);
            assert!(
                admitted <= clock_bound(BURST, T, nows),
                "key {key} over-admitted"
            );
        }
        assert_eq!(table.len(), keys.len(), "one entry per key: {outcomes:?}");
        let shared = table.shared_snapshot(latest);
        assert_eq!(
            (shared.remaining(), shared.reset_after_nanos()),
            (BURST, 0),
            "the shared bucket was used: {outcomes:?}"
        );
    });
}

fn three_first_checks_of_one_key<Tb: KeyedTable>(build: fn(Gcra, usize, OverflowPolicy) -> Tb) {
    each_key_gets_one_state(
        build,
        &[7],
        vec![
            vec![KeyedOp::check(7, 400)],
            vec![KeyedOp::check(7, 0)],
            vec![KeyedOp::check(7, 100)],
        ],
    );
}

fn two_keys_inserted_at_once<Tb: KeyedTable>(build: fn(Gcra, usize, OverflowPolicy) -> Tb) {
    // both keys have the same home slot: the second goes one further
    each_key_gets_one_state(
        build,
        &[7, 8],
        vec![
            vec![KeyedOp::check(7, 300), KeyedOp::check(8, 0)],
            vec![KeyedOp::check(8, 200), KeyedOp::check(7, 100)],
            vec![KeyedOp::Check {
                key: 8,
                n: 2,
                now: 50,
            }],
        ],
    );
}

#[test]
fn sharded_three_first_checks_of_one_key() {
    three_first_checks_of_one_key(km::sharded);
}

#[test]
fn lock_free_three_first_checks_of_one_key() {
    three_first_checks_of_one_key(km::lock_free);
}

#[test]
fn heapless_three_first_checks_of_one_key() {
    three_first_checks_of_one_key(km::heapless);
}

#[test]
fn sharded_two_keys_inserted_at_once() {
    two_keys_inserted_at_once(km::sharded);
}

#[test]
fn lock_free_two_keys_inserted_at_once() {
    two_keys_inserted_at_once(km::lock_free);
}

#[test]
fn heapless_two_keys_inserted_at_once() {
    two_keys_inserted_at_once(km::heapless);
}
