//! When a table is full of busy keys, the overflow policy decides, and the
//! decision reports which path it took.

mod keyed_support;

use keyed_support::Table;
use tollgate::keyed::{
    HeaplessKeyedTable, KeyedPath, LockFreeGcraTable, OverflowPolicy, RandomSeed, SameQuota,
    ShardedKeyedTable,
};
use tollgate::{Gcra, Quota};

const SECOND: u64 = 1_000_000_000;

/// 1 per second, burst 2.
fn algorithm() -> Gcra {
    Gcra::token_bucket(Quota::per_second(1).unwrap().allow_burst(2).unwrap())
}

fn sharded(policy: OverflowPolicy) -> ShardedKeyedTable<u64, Gcra> {
    ShardedKeyedTable::builder(algorithm())
        .capacity(2)
        .shards(1)
        .overflow(policy)
        .build()
        .unwrap()
}

fn heapless(policy: OverflowPolicy) -> HeaplessKeyedTable<u64, Gcra, 2> {
    HeaplessKeyedTable::new(algorithm()).with_overflow(policy)
}

fn lock_free(policy: OverflowPolicy) -> LockFreeGcraTable<u64> {
    LockFreeGcraTable::with_options(
        2,
        algorithm(),
        policy,
        RandomSeed::new(),
        SameQuota,
        Some(1),
    )
    .unwrap()
}

/// Fills the table with keys 1 and 2: key 1 idle again at 2 s, key 2 at 1 s.
fn fill(table: &dyn Table) {
    assert!(table.check(1, 0).is_allowed());
    assert!(table.check(1, 0).is_allowed());
    assert!(table.check(2, 0).is_allowed());
    assert_eq!(table.len(), 2);
}

fn shared_bucket_is_one_quota_for_all_overflowing_keys(table: &dyn Table) {
    fill(table);
    let a = table.check(10, 0);
    let b = table.check(11, 0);
    let c = table.check(12, 0);
    for d in [a, b, c] {
        assert_eq!(d.path(), KeyedPath::SharedOverflow);
    }
    // burst 2 shared by keys 10, 11 and 12
    assert!(a.is_allowed() && b.is_allowed() && c.is_denied());
    assert_eq!(c.decision().retry_after().as_nanos(), u128::from(SECOND));
    assert_eq!(table.shared_snapshot(0).remaining(), 0);
    // a refund for an untracked key goes back to the shared bucket
    table.refund(11, 1, 0);
    assert_eq!(table.shared_snapshot(0).remaining(), 1);
    assert!(table.check(13, 0).is_allowed());
    // the tracked keys were not touched
    assert_eq!(table.snapshot(1, 0).remaining(), 0);
    assert_eq!(table.snapshot(2, 0).remaining(), 1);
    // at 1 s key 2 has refilled: the next new key takes its slot
    let d = table.check(14, SECOND);
    assert_eq!(d.path(), KeyedPath::Own);
    assert!(d.is_allowed());
    assert!(!table.contains(2) && table.contains(1) && table.contains(14));
}

fn deny_refuses_until_a_slot_can_free(table: &dyn Table) {
    fill(table);
    let d = table.check(10, 0);
    assert_eq!(d.path(), KeyedPath::OverflowDenied);
    assert!(d.is_denied());
    // key 2 refills first, at 1 s
    assert_eq!(d.decision().retry_after().as_nanos(), u128::from(SECOND));
    assert_eq!(d.decision().snapshot().remaining(), 0);
    let half = table.check(10, SECOND / 2);
    assert_eq!(
        half.decision().retry_after().as_nanos(),
        u128::from(SECOND / 2)
    );
    // denying takes nothing from anyone
    assert_eq!(table.snapshot(2, SECOND / 2).remaining(), 1);
    let later = table.check(10, SECOND);
    assert_eq!(later.path(), KeyedPath::Own);
    assert!(later.is_allowed());
}

fn allow_admits_as_a_fresh_key(table: &dyn Table) {
    fill(table);
    for _ in 0..5 {
        let d = table.check(10, 0);
        assert_eq!(d.path(), KeyedPath::OverflowAllowed);
        assert!(d.is_allowed());
        // what a fresh key would have left after one permit
        assert_eq!(d.decision().snapshot().remaining(), 1);
    }
    assert!(!table.contains(10));
    assert_eq!(table.len(), 2);
    // the can-never-succeed error still applies
    assert!(table.check_n(10, 3, 0).is_err());
}

#[test]
fn sharded_shared_bucket() {
    shared_bucket_is_one_quota_for_all_overflowing_keys(&sharded(OverflowPolicy::SharedBucket));
}

#[test]
fn heapless_shared_bucket() {
    shared_bucket_is_one_quota_for_all_overflowing_keys(&heapless(OverflowPolicy::SharedBucket));
}

#[test]
fn shared_bucket_is_the_default_policy() {
    assert_eq!(OverflowPolicy::default(), OverflowPolicy::SharedBucket);
    let table = ShardedKeyedTable::<u64, Gcra>::new(2, algorithm()).unwrap();
    assert_eq!(table.overflow_policy(), OverflowPolicy::SharedBucket);
    let table = HeaplessKeyedTable::<u64, Gcra, 2>::new(algorithm());
    assert_eq!(table.overflow_policy(), OverflowPolicy::SharedBucket);
}

#[test]
fn sharded_deny() {
    deny_refuses_until_a_slot_can_free(&sharded(OverflowPolicy::Deny));
}

#[test]
fn heapless_deny() {
    deny_refuses_until_a_slot_can_free(&heapless(OverflowPolicy::Deny));
}

#[test]
fn sharded_allow() {
    allow_admits_as_a_fresh_key(&sharded(OverflowPolicy::Allow));
}

#[test]
fn heapless_allow() {
    allow_admits_as_a_fresh_key(&heapless(OverflowPolicy::Allow));
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

#[test]
fn lock_free_shared_bucket() {
    shared_bucket_is_one_quota_for_all_overflowing_keys(&lock_free(OverflowPolicy::SharedBucket));
}

#[test]
fn lock_free_deny() {
    deny_refuses_until_a_slot_can_free(&lock_free(OverflowPolicy::Deny));
}

#[test]
fn lock_free_allow() {
    allow_admits_as_a_fresh_key(&lock_free(OverflowPolicy::Allow));
}
