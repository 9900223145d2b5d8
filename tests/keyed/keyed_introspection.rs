//! Introspection: len, max_keys, every tracked key's snapshot, an explicit
//! sweep of refilled keys; peeks never insert; bad configurations are
//! typed errors.
#![cfg(feature = "std")]

use crate::keyed_support;

use keyed_support::{MS, Spec, per_second, snapshots, t};
use tollgate::keyed::{
    DEFAULT_MAX_KEYS, HeaplessKeyedTable, KeyedTable, LockFreeGcraTable, ShardedKeyedTable,
};
use tollgate::{ConfigError, Gcra, Limiter, Quota, valid};

/// 10 per second (T = 100 ms), burst 3.
fn algorithm() -> Gcra {
    per_second(10, 3)
}

fn introspection<T: KeyedTable<u64, Algorithm = Gcra>>(make: impl Fn(Spec) -> T) {
    // default shards: a std table may round 64 up to whole shards
    let table = make(Spec::new(algorithm(), 64).shards(None));
    assert!(table.max_keys() >= 64);
    assert_eq!(table.default_algorithm(), algorithm());
    assert_eq!(table.len(), 0);
    assert!(table.is_empty());
    // a peek of an unknown key answers "fresh" and inserts nothing
    let peek = table.try_acquire_n(&7, 0, t(0));
    assert!(peek.is_ok());
    // full now (all 3 remaining): a fresh state's answer
    assert_eq!(peek.map(|g| g.full_at()), Ok(t(0)));
    assert_eq!(table.snapshot(&7, t(0)).remaining(), 3);
    assert_eq!(table.len(), 0);
    // an impossible request inserts nothing either
    assert!(table.try_acquire_n(&7, 4, t(0)).unwrap_err().is_never());
    assert_eq!(table.len(), 0);
    assert_eq!(table.capacity(&7), 3);

    for (key, permits) in [(1, 1), (2, 2), (3, 3)] {
        assert!(table.try_acquire_n(&key, permits, t(0)).is_ok());
    }
    assert_eq!(table.len(), 3);
    assert!(!table.is_empty());
    let all = snapshots(&table, t(0));
    let remaining: Vec<_> = all.iter().map(|(k, s)| (*k, s.remaining())).collect();
    assert_eq!(remaining, [(1, 2), (2, 1), (3, 0)]);
    let reset: Vec<_> = all
        .iter()
        .map(|(k, s)| (*k, s.reset_after_nanos()))
        .collect();
    assert_eq!(reset, [(1, 100 * MS), (2, 200 * MS), (3, 300 * MS)]);

    // at 150 ms key 1 has refilled: the sweep evicts it and only it
    assert_eq!(table.evict_refilled(t(150 * MS)), 1);
    assert_eq!(table.len(), 2);
    assert!(!table.contains(&1) && table.contains(&2) && table.contains(&3));
    // an evicted key comes back exactly as a refilled one
    assert_eq!(table.snapshot(&1, t(150 * MS)).remaining(), 3);
    assert_eq!(table.evict_refilled(t(150 * MS)), 0);
    assert_eq!(table.evict_refilled(t(300 * MS)), 2);
    assert_eq!(table.len(), 0);
    assert!(snapshots(&table, t(300 * MS)).is_empty());
}

keyed_support::every_table! {
    introspection: heapless 64,
}

#[test]
fn heapless_max_keys_is_its_n() {
    let table = HeaplessKeyedTable::<u64, Gcra, 64>::builder(algorithm()).build();
    assert_eq!(table.max_keys(), 64);
}

#[test]
fn a_static_table_needs_no_allocator() {
    const QUOTA: Quota = valid!(Quota::per_second(10));
    static TABLE: HeaplessKeyedTable<u32, Gcra, 4> =
        HeaplessKeyedTable::builder(Gcra::leaky_bucket(QUOTA)).build();
    assert!(TABLE.try_acquire(&1, t(0)).is_ok());
    assert!(TABLE.try_acquire(&1, t(0)).is_err()); // strict pacing
    assert!(TABLE.try_acquire(&1, t(100 * MS)).is_ok());
    assert_eq!(TABLE.len(), 1);
}

#[test]
fn capacity_rounds_up_to_whole_shards() {
    let table = ShardedKeyedTable::<u64, _>::builder(algorithm())
        .max_keys(1_001)
        .shards(4)
        .build()
        .unwrap();
    assert_eq!((table.shards(), table.max_keys()), (4, 1_004));
    let big = ShardedKeyedTable::<u64, _>::builder(algorithm())
        .max_keys(1_000_000)
        .build()
        .unwrap();
    assert!(big.max_keys() >= 1_000_000 && big.max_keys() < 1_000_000 + big.shards());
    assert!(big.max_keys() / big.shards() <= 4_095);
    // the lock-free table lays out its shards the same way
    let lock_free = LockFreeGcraTable::<u64>::builder(algorithm())
        .max_keys(1_001)
        .shards(4)
        .build()
        .unwrap();
    assert_eq!((lock_free.shards(), lock_free.max_keys()), (4, 1_004));
}

#[test]
fn the_default_size_is_ten_thousand_keys() {
    assert_eq!(DEFAULT_MAX_KEYS, 10_000);
    let table = ShardedKeyedTable::<u64, _>::builder(algorithm())
        .build()
        .unwrap();
    assert!(table.max_keys() >= DEFAULT_MAX_KEYS);
    assert!(table.max_keys() < DEFAULT_MAX_KEYS + table.shards());
}

#[test]
fn bad_configurations_are_typed_errors() {
    let zero = ShardedKeyedTable::<u64, _>::builder(algorithm())
        .max_keys(0)
        .build()
        .unwrap_err();
    assert_eq!(zero, ConfigError::ZeroKeys);
    let zero = LockFreeGcraTable::<u64>::builder(algorithm())
        .max_keys(0)
        .build()
        .unwrap_err();
    assert_eq!(zero, ConfigError::ZeroKeys);
    for shards in [0, 3, 1 << 17] {
        let err = ShardedKeyedTable::<u64, _>::builder(algorithm())
            .shards(shards)
            .build()
            .unwrap_err();
        assert!(matches!(err, ConfigError::InvalidShards { requested, .. } if requested == shards));
    }
    let err = ShardedKeyedTable::<u64, _>::builder(algorithm())
        .max_keys(10_000)
        .shards(2)
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        ConfigError::TooManyKeys {
            requested: 10_000,
            max: 8_190
        }
    );
    assert_eq!(
        err.to_string(),
        "keyed table of 10000 keys exceeds the maximum 8190"
    );
}
