//! When a table is full of busy keys, the overflow policy decides, and the
//! decision reports which path it took.
#![cfg(feature = "std")]

mod keyed_support;

use std::time::Duration;

use keyed_support::{per_second, t, Spec, SECOND};
use tollgate::keyed::{
    HeaplessKeyedTable, KeyedLimiter, KeyedPath, LockFreeGcraTable, OverflowPolicy,
    ShardedKeyedTable,
};
use tollgate::Gcra;

/// 1 per second, burst 2.
fn algorithm() -> Gcra {
    per_second(1, 2)
}

/// Two keys, one shard, `policy`.
fn spec(policy: OverflowPolicy) -> Spec {
    Spec::new(algorithm(), 2).overflow(policy)
}

/// Fills the table with keys 1 and 2: key 1 idle again at 2 s, key 2 at 1 s.
fn fill<T: KeyedLimiter<u64>>(table: &T) {
    assert_eq!(table.max_keys(), 2);
    assert!(table.check(&1, t(0)).is_allowed());
    assert!(table.check(&1, t(0)).is_allowed());
    assert!(table.check(&2, t(0)).is_allowed());
    assert_eq!(table.len(), 2);
}

fn shared_bucket_is_one_quota_for_all_overflowing_keys<T: KeyedLimiter<u64>>(
    make: impl Fn(Spec) -> T,
) {
    let table = make(spec(OverflowPolicy::SharedBucket));
    assert_eq!(table.overflow_policy(), OverflowPolicy::SharedBucket);
    fill(&table);
    let a = table.check(&10, t(0));
    let b = table.check(&11, t(0));
    let c = table.check(&12, t(0));
    for d in [a, b, c] {
        assert_eq!(d.path(), KeyedPath::SharedOverflow);
    }
    // burst 2 shared by keys 10, 11 and 12
    assert!(a.is_allowed() && b.is_allowed() && c.is_denied());
    assert_eq!(c.decision().retry_after(), Duration::from_secs(1));
    assert_eq!(table.shared_snapshot(t(0)).remaining(), 0);
    // a refund for an untracked key goes back to the shared bucket
    table.refund(&11, 1, t(0));
    assert_eq!(table.shared_snapshot(t(0)).remaining(), 1);
    assert!(table.check(&13, t(0)).is_allowed());
    // the tracked keys were not touched
    assert_eq!(table.snapshot(&1, t(0)).remaining(), 0);
    assert_eq!(table.snapshot(&2, t(0)).remaining(), 1);
    // at 1 s key 2 has refilled: the next new key takes its slot
    let d = table.check(&14, t(SECOND));
    assert_eq!(d.path(), KeyedPath::Own);
    assert!(d.is_allowed());
    assert!(!table.contains(&2) && table.contains(&1) && table.contains(&14));
}

fn deny_refuses_until_a_slot_can_free<T: KeyedLimiter<u64>>(make: impl Fn(Spec) -> T) {
    let table = make(spec(OverflowPolicy::Deny));
    assert_eq!(table.overflow_policy(), OverflowPolicy::Deny);
    fill(&table);
    let d = table.check(&10, t(0));
    assert_eq!(d.path(), KeyedPath::OverflowDenied);
    assert!(d.is_denied());
    // key 2 refills first, at 1 s
    assert_eq!(d.decision().retry_after(), Duration::from_secs(1));
    assert_eq!(d.decision().snapshot().remaining(), 0);
    let half = table.check(&10, t(SECOND / 2));
    assert_eq!(half.decision().retry_after(), Duration::from_millis(500));
    // denying takes nothing from anyone
    assert_eq!(table.snapshot(&2, t(SECOND / 2)).remaining(), 1);
    let later = table.check(&10, t(SECOND));
    assert_eq!(later.path(), KeyedPath::Own);
    assert!(later.is_allowed());
}

fn allow_admits_as_a_fresh_key<T: KeyedLimiter<u64>>(make: impl Fn(Spec) -> T) {
    let table = make(spec(OverflowPolicy::Allow));
    assert_eq!(table.overflow_policy(), OverflowPolicy::Allow);
    fill(&table);
    for _ in 0..5 {
        let d = table.check(&10, t(0));
        assert_eq!(d.path(), KeyedPath::OverflowAllowed);
        assert!(d.is_allowed());
        // what a fresh key would have left after one permit
        assert_eq!(d.decision().snapshot().remaining(), 1);
    }
    assert!(!table.contains(&10));
    assert_eq!(table.len(), 2);
    // the can-never-succeed error still applies
    assert!(table.check_n(&10, 3, t(0)).is_err());
}

keyed_support::every_table! {
    shared_bucket_is_one_quota_for_all_overflowing_keys: heapless 2,
    deny_refuses_until_a_slot_can_free: heapless 2,
    allow_admits_as_a_fresh_key: heapless 2,
}

#[test]
fn shared_bucket_is_the_default_policy() {
    assert_eq!(OverflowPolicy::default(), OverflowPolicy::SharedBucket);
    // every builder, nothing but the algorithm (and size) given
    let table = ShardedKeyedTable::<u64, _>::builder(algorithm())
        .max_keys(2)
        .build()
        .unwrap();
    assert_eq!(table.overflow_policy(), OverflowPolicy::SharedBucket);
    let table = LockFreeGcraTable::<u64>::builder(algorithm())
        .max_keys(2)
        .build()
        .unwrap();
    assert_eq!(table.overflow_policy(), OverflowPolicy::SharedBucket);
    let table = HeaplessKeyedTable::<u64, Gcra, 2>::builder(algorithm()).build();
    assert_eq!(table.overflow_policy(), OverflowPolicy::SharedBucket);
}

#[test]
fn overflow_path_is_the_only_non_own_path() {
    assert!(!KeyedPath::Own.is_overflow());
    for path in [
        KeyedPath::SharedOverflow,
        KeyedPath::OverflowDenied,
        KeyedPath::OverflowAllowed,
    ] {
        assert!(path.is_overflow());
    }
}
