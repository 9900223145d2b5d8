//! When a table is full of busy keys, the overflow policy decides, and the
//! decision reports which path it took.
#![cfg(feature = "std")]

use crate::keyed_support;

use std::time::Duration;

use keyed_support::{SECOND, Spec, per_second, t};
use tollgate::Gcra;
use tollgate::keyed::{
    HeaplessKeyedTable, KeyedPath, KeyedTable, LockFreeGcraTable, OverflowPolicy, ShardedKeyedTable,
};

/// 1 per second, burst 2.
fn algorithm() -> Gcra {
    per_second(1, 2)
}

/// Two keys, one shard, `policy`.
fn spec(policy: OverflowPolicy) -> Spec {
    Spec::new(algorithm(), 2).overflow(policy)
}

/// Fills the table with keys 1 and 2: key 1 idle again at 2 s, key 2 at 1 s.
fn fill<T: KeyedTable<u64>>(table: &T) {
    assert_eq!(table.max_keys(), 2);
    assert!(table.try_acquire(&1, t(0)).is_ok());
    assert!(table.try_acquire(&1, t(0)).is_ok());
    assert!(table.try_acquire(&2, t(0)).is_ok());
    assert_eq!(table.len(), 2);
}

fn shared_bucket_is_one_quota_for_all_overflowing_keys<T: KeyedTable<u64>>(
    make: impl Fn(Spec) -> T,
) {
    let table = make(spec(OverflowPolicy::SharedBucket));
    assert_eq!(table.overflow_policy(), OverflowPolicy::SharedBucket);
    fill(&table);
    assert_eq!(table.shared_snapshot(t(0)).remaining(), 2);
    // Admissions no longer report their path: that keys 10 and 11 went
    // through the shared overflow state shows in the shared state's
    // consumption (2 -> 1 -> 0), in the instant the admitting state is full
    // again (a fresh own state admitting one permit at 0 would be full at
    // 1 s; the shared state, after its second permit, at 2 s) and in the
    // table, which tracks no new key.
    let a = table.try_acquire(&10, t(0));
    assert_eq!(a.map(|g| g.full_at()), Ok(t(SECOND)));
    assert_eq!(table.shared_snapshot(t(0)).remaining(), 1);
    let b = table.try_acquire(&11, t(0));
    assert_eq!(b.map(|g| g.full_at()), Ok(t(2 * SECOND)));
    assert_eq!(table.shared_snapshot(t(0)).remaining(), 0);
    let c = table.try_acquire(&12, t(0));
    // burst 2 shared by keys 10, 11 and 12: key 12 is refused although a
    // fresh key of its own would be admitted
    assert!(a.is_ok() && b.is_ok() && c.is_err());
    let c = c.unwrap_err();
    assert_eq!(c.path(), KeyedPath::SharedOverflow);
    assert_eq!(c.retry_after(), Duration::from_secs(1));
    assert_eq!(table.len(), 2);
    assert!(!table.contains(&10) && !table.contains(&11) && !table.contains(&12));
    assert_eq!(table.shared_snapshot(t(0)).remaining(), 0);
    // a refund for an untracked key goes back to the shared bucket
    table.refund(&11, 1, t(0));
    assert_eq!(table.shared_snapshot(t(0)).remaining(), 1);
    assert!(table.try_acquire(&13, t(0)).is_ok());
    // ... and key 13 took it (the shared overflow path again)
    assert_eq!(table.shared_snapshot(t(0)).remaining(), 0);
    assert!(!table.contains(&13));
    // the tracked keys were not touched
    assert_eq!(table.snapshot(&1, t(0)).remaining(), 0);
    assert_eq!(table.snapshot(&2, t(0)).remaining(), 1);
    // at 1 s key 2 has refilled: the next new key takes its slot (its own
    // path: full again at 2 s as a fresh key, where the shared state would
    // be full at 3 s; the shared state is not touched)
    assert_eq!(table.shared_snapshot(t(SECOND)).remaining(), 1);
    let d = table.try_acquire(&14, t(SECOND));
    assert_eq!(d.map(|g| g.full_at()), Ok(t(2 * SECOND)));
    assert!(d.is_ok());
    assert_eq!(table.shared_snapshot(t(SECOND)).remaining(), 1);
    assert_eq!(table.len(), 2);
    assert!(!table.contains(&2) && table.contains(&1) && table.contains(&14));
    assert_eq!(table.snapshot(&14, t(SECOND)).remaining(), 1);
}

fn deny_refuses_until_a_slot_can_free<T: KeyedTable<u64>>(make: impl Fn(Spec) -> T) {
    let table = make(spec(OverflowPolicy::Deny));
    assert_eq!(table.overflow_policy(), OverflowPolicy::Deny);
    fill(&table);
    let d = table.try_acquire(&10, t(0));
    assert!(d.is_err());
    let d = d.unwrap_err();
    assert_eq!(d.path(), KeyedPath::OverflowDenied);
    // key 2 refills first, at 1 s
    assert_eq!(d.retry_after(), Duration::from_secs(1));
    assert_eq!(d.snapshot().remaining(), 0);
    let half = table.try_acquire(&10, t(SECOND / 2)).unwrap_err();
    assert_eq!(half.path(), KeyedPath::OverflowDenied);
    assert_eq!(half.retry_after(), Duration::from_millis(500));
    // denying takes nothing from anyone
    assert_eq!(table.snapshot(&2, t(SECOND / 2)).remaining(), 1);
    // at 1 s key 2 has refilled: key 10 gets its slot (its own path: it is
    // tracked now, in key 2's place, with a fresh state's first permit taken)
    let later = table.try_acquire(&10, t(SECOND));
    assert!(later.is_ok());
    assert_eq!(later.map(|g| g.full_at()), Ok(t(2 * SECOND)));
    assert_eq!(table.len(), 2);
    assert!(table.contains(&10) && !table.contains(&2));
    assert_eq!(table.snapshot(&10, t(SECOND)).remaining(), 1);
}

fn allow_admits_as_a_fresh_key<T: KeyedTable<u64>>(make: impl Fn(Spec) -> T) {
    let table = make(spec(OverflowPolicy::Allow));
    assert_eq!(table.overflow_policy(), OverflowPolicy::Allow);
    fill(&table);
    for _ in 0..5 {
        let d = table.try_acquire(&10, t(0));
        // Admissions no longer report their path: that each one was judged
        // alone as a fresh key (overflow allowed) shows in its answer,
        // which never changes (an own state would refuse the third), in
        // what it left (a fresh state after one permit: full again at 1 s,
        // i.e. 1 of the burst of 2 remaining), and in the table, which
        // tracks no new key and leaves the shared state alone.
        assert!(d.is_ok());
        assert_eq!(d.map(|g| g.full_at()), Ok(t(SECOND)));
        assert!(!table.contains(&10));
        assert_eq!(table.len(), 2);
        assert_eq!(table.shared_snapshot(t(0)).remaining(), 2);
    }
    assert!(!table.contains(&10));
    assert_eq!(table.len(), 2);
    // the can-never-succeed error still applies
    assert!(table.try_acquire_n(&10, 3, t(0)).unwrap_err().is_never());
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
fn only_the_three_overflow_paths_are_overflow() {
    // a remote table's cache and failure policy answer for a key that has
    // its state elsewhere: not an overflow
    for path in [KeyedPath::Own, KeyedPath::Cached, KeyedPath::Fallback] {
        assert!(!path.is_overflow(), "{path:?}");
    }
    for path in [
        KeyedPath::SharedOverflow,
        KeyedPath::OverflowDenied,
        KeyedPath::OverflowAllowed,
    ] {
        assert!(path.is_overflow());
    }
}
