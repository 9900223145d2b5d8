//! Eviction is lossless: a fixed-capacity table that evicts refilled keys
//! makes exactly the decisions of an unbounded map that keeps every key's
//! state forever, for every request sequence (monotonic time) whose live
//! (non-refilled) keys never exceed the capacity.
#![cfg(feature = "std")] // every table, the std ones included (keyed_support)

use crate::keyed_support;

use std::collections::HashMap;
use std::time::Duration;

use keyed_support::{Quotas, Spec, t};
use proptest::prelude::*;
use tollgate::keyed::{KeyedPath, KeyedTable, OverflowPolicy};
use tollgate::{Algorithm, Gcra, GcraState, Quota, Refusal, Snapshot, Timestamp};

const CAPACITY: usize = 4;
const KEYS: u64 = 10;

/// The reference: every key ever seen keeps its own state, nothing is ever
/// evicted, and an unseen key is a fresh state.
struct Unbounded<F> {
    states: HashMap<u64, GcraState>,
    algorithm_for: F,
}

impl<F: Fn(u64) -> Gcra> Unbounded<F> {
    fn state(&mut self, key: u64) -> &GcraState {
        self.states.entry(key).or_default()
    }
    fn check_n(&mut self, key: u64, n: u32, now: u64) -> Result<Timestamp, Refusal<'static>> {
        let alg = (self.algorithm_for)(key);
        alg.check_n(self.state(key), n, t(now))
    }
    fn refund(&mut self, key: u64, n: u32, now: u64) {
        let alg = (self.algorithm_for)(key);
        alg.refund(self.state(key), n, t(now));
    }
    fn snapshot(&mut self, key: u64, now: u64) -> Snapshot {
        let alg = (self.algorithm_for)(key);
        alg.snapshot(self.state(key), t(now))
    }
    fn live_keys(&self, now: u64) -> Vec<u64> {
        self.states
            .iter()
            .filter(|(k, s)| !(self.algorithm_for)(**k).is_idle(s, t(now)))
            .map(|(k, _)| *k)
            .collect()
    }
}

#[derive(Debug, Clone)]
enum Op {
    Check { key: u64, n: u32 },
    Refund { key: u64, n: u32 },
    Sweep,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..KEYS, 0u32..=3).prop_map(|(key, n)| Op::Check { key, n }),
        1 => (0..KEYS, 1u32..=3).prop_map(|(key, n)| Op::Refund { key, n }),
        1 => Just(Op::Sweep),
    ]
}

/// `permits` per `period_ms`; `burst` is the token bucket's burst and the
/// leaky bucket's largest request alike.
fn quota(permits: u32, period_ms: u64, burst: u32) -> Quota {
    Quota::new(permits, Duration::from_millis(period_ms))
        .and_then(|q| q.with_burst(burst))
        .unwrap()
}

/// Two algorithms, picked by key parity: exercises per-key quotas too.
fn algorithms() -> impl Strategy<Value = (Gcra, Gcra)> {
    let one = (1u32..=4, 1u64..=50, 1u32..=4, any::<bool>()).prop_map(|(p, ms, b, leaky)| {
        let q = quota(p, ms, b);
        if leaky {
            Gcra::leaky_bucket(q)
        } else {
            Gcra::token_bucket(q)
        }
    });
    (one.clone(), one)
}

fn run<T: KeyedTable<u64>>(
    table: &T,
    algorithm_for: impl Fn(u64) -> Gcra,
    ops: &[(Op, u64)],
) -> Result<(), TestCaseError> {
    let mut reference = Unbounded {
        states: HashMap::new(),
        algorithm_for,
    };
    let mut now = 1_000;
    for (op, dt) in ops {
        now += dt;
        match *op {
            Op::Check { key, n } => {
                let mut live = reference.live_keys(now);
                if !live.contains(&key) {
                    live.push(key);
                }
                if n > 0 && live.len() > CAPACITY {
                    // outside the property's premise: the table would
                    // have to overflow
                    continue;
                }
                let expected = reference.check_n(key, n, now);
                let got = table.try_acquire_n(&key, n, t(now));
                // Only the key's own state answers: a refusal says so; an
                // admission (which no longer reports its path) shows it by
                // the key holding a slot afterwards (overflow is denied,
                // so no other path admits).
                match &got {
                    Err(refusal) => prop_assert_eq!(refusal.path(), KeyedPath::Own),
                    Ok(_) if n > 0 => prop_assert!(table.contains(&key)),
                    Ok(_) => {}
                }
                // the whole answer: the permits granted and when full
                // again, or the whole refusal (wait, snapshot, never with
                // the permits asked)
                prop_assert_eq!(
                    got.map(|g| (g.permits(), g.full_at())),
                    expected.map(|full_at| (n, full_at)),
                    "key {} n {} at {}",
                    key,
                    n,
                    now
                );
            }
            Op::Refund { key, n } => {
                reference.refund(key, n, now);
                table.refund(&key, n, t(now));
            }
            Op::Sweep => {
                table.evict_refilled(t(now));
                // only refilled keys went: every live key is still tracked
                for key in reference.live_keys(now) {
                    prop_assert!(table.contains(&key));
                }
            }
        }
        prop_assert!(table.len() <= table.max_keys());
        for key in 0..KEYS {
            prop_assert_eq!(table.snapshot(&key, t(now)), reference.snapshot(key, now));
        }
    }
    Ok(())
}

/// The property on one table: even keys run `even` (also the default),
/// odd keys `odd`; overflow is refused, so a key never leaves its slot
/// except by eviction.
fn table_matches_unbounded_map<T: KeyedTable<u64>>(
    make: impl Fn(Spec) -> T,
    (even, odd): (Gcra, Gcra),
    ops: &[(Op, u64)],
) -> Result<(), TestCaseError> {
    let table = make(
        Spec::new(even, CAPACITY)
            .overflow(OverflowPolicy::Deny)
            .quotas(Quotas::Parity { even, odd }),
    );
    prop_assert_eq!(table.max_keys(), CAPACITY);
    let pick = move |k: u64| if k.is_multiple_of(2) { even } else { odd };
    run(&table, pick, ops)
}

fn ops() -> impl Strategy<Value = Vec<(Op, u64)>> {
    // steps up to 30 ms: keys refill between bursts of activity
    prop::collection::vec(
        (op(), prop_oneof![3 => Just(0u64), 5 => 0u64..30_000_000]),
        0..200,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn heapless_table_matches_unbounded_map(algs in algorithms(), ops in ops()) {
        table_matches_unbounded_map(keyed_support::heapless::<CAPACITY>, algs, &ops)?;
    }

    #[test]
    fn sharded_table_matches_unbounded_map(algs in algorithms(), ops in ops()) {
        table_matches_unbounded_map(keyed_support::sharded, algs, &ops)?;
    }

    #[test]
    fn lock_free_table_matches_unbounded_map(algs in algorithms(), ops in ops()) {
        table_matches_unbounded_map(keyed_support::lock_free, algs, &ops)?;
    }
}

/// The premise's boundary: one live key too many is refused, and the live
/// keys keep their state.
fn full_table_of_live_keys_overflows_instead_of_evicting<T: KeyedTable<u64>>(
    make: impl Fn(Spec) -> T,
) {
    let alg = Gcra::token_bucket(quota(1, 1_000, 1));
    let table = make(Spec::new(alg, CAPACITY).overflow(OverflowPolicy::Deny));
    for key in 0..CAPACITY as u64 {
        assert!(table.try_acquire(&key, t(0)).is_ok());
    }
    let extra = table.try_acquire(&99, t(0)).unwrap_err();
    assert_eq!(extra.path(), KeyedPath::OverflowDenied);
    // retry when the first slot can free: key 0 refills at T = 1 s
    assert_eq!(extra.retry_after().as_millis(), 1_000);
    for key in 0..CAPACITY as u64 {
        assert!(table.try_acquire(&key, t(0)).is_err());
    }
    // at 1 s the keys have refilled: key 99 gets a slot of its own (an
    // admission reports no path: it is tracked now, and its fresh state
    // took its one permit, full again at 2 s)
    assert_eq!(
        table
            .try_acquire(&99, t(1_000_000_000))
            .map(|g| g.full_at()),
        Ok(t(2_000_000_000))
    );
    assert!(table.contains(&99));
    assert!(table.len() <= CAPACITY);
}

/// A thread reads `now`, is preempted, and a sweep at a later time evicts
/// the key it is about to check. The re-inserted key must not hand out the
/// credit between the stale `now` and the sweep.
fn a_stale_caller_gains_nothing_from_an_eviction<T: KeyedTable<u64>>(
    make: impl Fn(Spec) -> T,
    max_keys: usize,
) {
    const T: u64 = 10_000_000; // 100 per second, burst 1
    let alg = Gcra::token_bucket(quota(100, 1_000, 1));
    let table = make(Spec::new(alg, max_keys));
    assert!(table.try_acquire(&1, t(0)).is_ok()); // TAT = T
    assert_eq!(table.evict_refilled(t(10 * T)), 1);
    // the stale caller: `now` from before the sweep
    assert!(table.try_acquire(&1, t(T / 2)).is_ok());
    // a fresh caller at the sweep's time: the key has no credit left,
    // exactly as if it had never been evicted
    let fresh = table.try_acquire(&1, t(10 * T));
    assert!(fresh.is_err());
    assert_eq!(fresh.unwrap_err().retry_after(), Duration::from_nanos(T));
}

/// As above, but a second sweep runs between the eviction and the stale
/// caller, itself on a stale `now` (its caller was preempted too). It must
/// not make the table forget the first sweep's later time: the stale
/// caller's re-inserted key still gets no credit for the gap.
fn a_stale_sweep_keeps_the_latest_sweep_time<T: KeyedTable<u64>>(
    make: impl Fn(Spec) -> T,
    max_keys: usize,
) {
    const T: u64 = 10_000_000; // 100 per second, burst 1
    let alg = Gcra::token_bucket(quota(100, 1_000, 1));
    let table = make(Spec::new(alg, max_keys));
    assert!(table.try_acquire(&1, t(0)).is_ok()); // TAT = T
    assert_eq!(table.evict_refilled(t(10 * T)), 1);
    // the stale sweep: evicts nothing, but runs at an earlier `now`
    assert_eq!(table.evict_refilled(t(T / 4)), 0);
    assert!(table.try_acquire(&1, t(T / 2)).is_ok());
    let fresh = table.try_acquire(&1, t(10 * T));
    assert!(fresh.is_err());
    assert_eq!(fresh.unwrap_err().retry_after(), Duration::from_nanos(T));
}

keyed_support::every_table! {
    full_table_of_live_keys_overflows_instead_of_evicting: heapless 4,
}

#[test]
fn sharded_a_stale_sweep_keeps_the_latest_sweep_time() {
    a_stale_sweep_keeps_the_latest_sweep_time(keyed_support::sharded, 1);
}

#[test]
fn lock_free_a_stale_sweep_keeps_the_latest_sweep_time() {
    a_stale_sweep_keeps_the_latest_sweep_time(keyed_support::lock_free, 1);
}

#[test]
fn heapless_a_stale_sweep_keeps_the_latest_sweep_time() {
    a_stale_sweep_keeps_the_latest_sweep_time(keyed_support::heapless::<2>, 2);
}

#[test]
fn sharded_a_stale_caller_gains_nothing_from_an_eviction() {
    a_stale_caller_gains_nothing_from_an_eviction(keyed_support::sharded, 1);
}

#[test]
fn lock_free_a_stale_caller_gains_nothing_from_an_eviction() {
    a_stale_caller_gains_nothing_from_an_eviction(keyed_support::lock_free, 1);
}

#[test]
fn heapless_a_stale_caller_gains_nothing_from_an_eviction() {
    // a heapless table holds at least 2 keys
    a_stale_caller_gains_nothing_from_an_eviction(keyed_support::heapless::<2>, 2);
}
