//! Per-key quotas: a function of the key picks each key's algorithm; the
//! table stores only state, and the default runs the shared overflow bucket.
#![cfg(feature = "std")]

use crate::keyed_support;

use std::time::Duration;

use keyed_support::{Quotas, SECOND, Spec, per_second, t};
use tollgate::keyed::{HeaplessKeyedTable, KeyedPath, KeyedTable, ShardedKeyedTable};
use tollgate::{Gcra, Limiter, Quota, valid};

/// API keys starting with "premium-" get burst 10, others burst 2.
#[allow(clippy::ptr_arg)] // a per-key quota receives &K, here &String
fn plan(key: &String) -> Gcra {
    if key.starts_with("premium-") {
        per_second(10, 10)
    } else {
        per_second(1, 2)
    }
}

fn burst_of(check: impl Fn() -> bool) -> usize {
    (0..20).take_while(|_| check()).count()
}

#[test]
fn sharded_closure_gives_each_key_its_quota() {
    let table = ShardedKeyedTable::<String, _>::builder(per_second(1, 2))
        .max_keys(100)
        .per_key(plan)
        .build()
        .unwrap();
    let premium = "premium-7".to_string();
    let free = "free-7".to_string();
    assert_eq!(burst_of(|| table.try_acquire(&premium, t(0)).is_ok()), 10);
    assert_eq!(burst_of(|| table.try_acquire(&free, t(0)).is_ok()), 2);
    assert_eq!(table.snapshot(&premium, t(0)).limit(), 10);
    assert_eq!(table.snapshot(&free, t(0)).limit(), 2);
    assert_eq!(table.capacity(&premium), 10);
    assert_eq!(table.capacity(&free), 2);
    // premium refills at 10/s: 100 ms for one permit; free at 1/s
    assert_eq!(
        table.time_until_ready(&premium, 1, t(0)).unwrap(),
        Duration::from_millis(100)
    );
    assert_eq!(
        table.time_until_ready(&free, 1, t(0)).unwrap(),
        Duration::from_secs(1)
    );
    // the can-never-succeed error follows the key's own quota
    assert!(
        table
            .try_acquire_n(&free, 5, t(SECOND))
            .unwrap_err()
            .is_never()
    );
    assert!(table.try_acquire_n(&premium, 5, t(SECOND)).is_ok());
    assert!(
        table
            .time_until_ready(&free, 5, t(SECOND))
            .unwrap_err()
            .is_never()
    );
}

#[test]
fn heapless_fn_pointer_gives_each_key_its_quota() {
    fn by_priority(id: &u8) -> Gcra {
        if *id < 0x10 {
            per_second(100, 8)
        } else {
            per_second(1, 1)
        }
    }
    let table = HeaplessKeyedTable::<u8, Gcra, 8>::builder(per_second(1, 1))
        .per_key(by_priority as fn(&u8) -> Gcra)
        .build();
    assert_eq!(burst_of(|| table.try_acquire(&0x01, t(0)).is_ok()), 8);
    assert_eq!(burst_of(|| table.try_acquire(&0x20, t(0)).is_ok()), 1);
    assert_eq!(
        table.time_until_ready(&0x01, 1, t(0)).unwrap(),
        Duration::from_millis(10)
    );
}

#[test]
fn static_heapless_table_built_const_gives_each_key_its_quota_and_overflows_to_the_default() {
    const FAST: Quota = valid!(valid!(Quota::per_second(100)).with_burst(8));
    const DEFAULT: Quota = valid!(valid!(Quota::per_second(1)).with_burst(3));
    fn by_id(_: &u8) -> Gcra {
        Gcra::token_bucket(FAST)
    }
    // built in a const context: the per-key quota lives in the static
    static TABLE: HeaplessKeyedTable<u8, Gcra, 2, fn(&u8) -> Gcra> =
        HeaplessKeyedTable::builder(Gcra::token_bucket(DEFAULT))
            .per_key(by_id as fn(&u8) -> Gcra)
            .build();
    // both slots: each key gets its own burst of 8
    assert_eq!(burst_of(|| TABLE.try_acquire(&1, t(0)).is_ok()), 8);
    assert_eq!(burst_of(|| TABLE.try_acquire(&2, t(0)).is_ok()), 8);
    assert_eq!(
        TABLE.time_until_ready(&1, 1, t(0)).unwrap(),
        Duration::from_millis(10)
    );
    // full of throttled keys: a third key takes the shared bucket, which
    // runs the default quota (burst 3), not the key's (burst 8)
    assert_eq!(TABLE.shared_snapshot(t(0)).remaining(), 3);
    let third: Vec<_> = (0..5).map(|_| TABLE.try_acquire(&3, t(0))).collect();
    // refusals report the shared path; admissions no longer report one:
    // they took from the shared state (full again 1, 2, 3 s later at the
    // default's 1 per second, where the key's own 100 per second would
    // give 10, 20, 30 ms), which is spent
    assert!(
        third
            .iter()
            .filter_map(|d| d.err())
            .all(|r| r.path() == KeyedPath::SharedOverflow)
    );
    assert_eq!(third.iter().filter(|d| d.is_ok()).count(), 3);
    assert_eq!(
        third[..3]
            .iter()
            .map(|d| d.map(|g| g.full_at()))
            .collect::<Vec<_>>(),
        [Ok(t(SECOND)), Ok(t(2 * SECOND)), Ok(t(3 * SECOND))]
    );
    assert_eq!(TABLE.shared_snapshot(t(0)).remaining(), 0);
    assert!(TABLE.contains(&1) && TABLE.contains(&2) && !TABLE.contains(&3));
}

/// Even keys 1 per second burst 1, odd keys 10 per second burst 10.
fn by_parity(key: &u64) -> Gcra {
    if key.is_multiple_of(2) {
        per_second(1, 1)
    } else {
        per_second(10, 10)
    }
}

/// Fills a table of `max_keys` with even keys, then an odd key overflows
/// into the shared bucket, which runs the default quota (burst 3), not the
/// key's (burst 10).
fn overflow_of_a_per_key_table_uses_the_default_quota<T: KeyedTable<u64, Algorithm = Gcra>>(
    make: impl Fn(Spec) -> T,
    max_keys: usize,
) {
    let table = make(Spec::new(per_second(1, 3), max_keys).quotas(Quotas::Fn(by_parity)));
    assert_eq!(table.max_keys(), max_keys);
    for key in 0..max_keys as u64 {
        assert!(table.try_acquire(&(2 * key), t(0)).is_ok());
    }
    assert_eq!(table.capacity(&1), 10);
    assert_eq!(table.shared_snapshot(t(0)).remaining(), 3);
    let overflowing: Vec<_> = (0..5).map(|_| table.try_acquire(&1, t(0))).collect();
    // refusals report the shared path; admissions no longer report one:
    // they took from the shared state (full again 1, 2, 3 s later at the
    // default's 1 per second, where the key's own 10 per second would
    // give 100, 200, 300 ms), which is spent, and key 1 has no slot
    assert!(
        overflowing
            .iter()
            .filter_map(|d| d.err())
            .all(|r| r.path() == KeyedPath::SharedOverflow)
    );
    assert_eq!(overflowing.iter().filter(|d| d.is_ok()).count(), 3);
    assert_eq!(
        overflowing[..3]
            .iter()
            .map(|d| d.map(|g| g.full_at()))
            .collect::<Vec<_>>(),
        [Ok(t(SECOND)), Ok(t(2 * SECOND)), Ok(t(3 * SECOND))]
    );
    assert_eq!(table.shared_snapshot(t(0)).remaining(), 0);
    assert!(!table.contains(&1));
    // a weight the key allows but the default cannot ever grant: refused
    // with a wait for a slot, not an error the key could never overcome
    let heavy = table.try_acquire_n(&1, 5, t(0));
    assert!(heavy.is_err());
    let heavy = heavy.unwrap_err();
    assert!(!heavy.is_never());
    assert_eq!(heavy.path(), KeyedPath::SharedOverflow);
    assert_eq!(heavy.retry_after(), Duration::from_secs(1));
}

#[test]
fn sharded_overflow_of_a_per_key_table_uses_the_default_quota() {
    overflow_of_a_per_key_table_uses_the_default_quota(keyed_support::sharded, 1);
}

#[test]
fn lock_free_overflow_of_a_per_key_table_uses_the_default_quota() {
    overflow_of_a_per_key_table_uses_the_default_quota(keyed_support::lock_free, 1);
}

#[test]
fn heapless_overflow_of_a_per_key_table_uses_the_default_quota() {
    // a heapless table holds at least 2 keys
    overflow_of_a_per_key_table_uses_the_default_quota(keyed_support::heapless::<2>, 2);
}
