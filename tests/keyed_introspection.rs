//! Introspection: len, capacity, every tracked key's snapshot, an explicit
//! sweep of refilled keys; peeks never insert; bad configurations are
//! typed errors.

mod keyed_support;

use keyed_support::Table;
use tollgate::keyed::{HeaplessKeyedTable, KeyedTableError, LockFreeGcraTable, ShardedKeyedTable};
use tollgate::{Gcra, Quota};

const MS: u64 = 1_000_000;

/// 10 per second (T = 100 ms), burst 3.
fn algorithm() -> Gcra {
    Gcra::token_bucket(Quota::per_second(10).unwrap().allow_burst(3).unwrap())
}

fn introspection(table: &dyn Table) {
    assert_eq!(table.len(), 0);
    // a peek of an unknown key answers "fresh" and inserts nothing
    let peek = table.check_n(7, 0, 0).unwrap();
    assert!(peek.is_allowed());
    assert_eq!(peek.decision().snapshot().remaining(), 3);
    assert_eq!(table.len(), 0);
    // an impossible request inserts nothing either
    assert!(table.check_n(7, 4, 0).is_err());
    assert_eq!(table.len(), 0);

    for (key, permits) in [(1, 1), (2, 2), (3, 3)] {
        assert!(table.check_n(key, permits, 0).unwrap().is_allowed());
    }
    assert_eq!(table.len(), 3);
    let all = table.snapshots(0);
    let remaining: Vec<_> = all.iter().map(|(k, s)| (*k, s.remaining())).collect();
    assert_eq!(remaining, [(1, 2), (2, 1), (3, 0)]);
    let reset: Vec<_> = all
        .iter()
        .map(|(k, s)| (*k, s.reset_after_nanos()))
        .collect();
    assert_eq!(reset, [(1, 100 * MS), (2, 200 * MS), (3, 300 * MS)]);

    // at 150 ms key 1 has refilled: the sweep evicts it and only it
    assert_eq!(table.evict_refilled(150 * MS), 1);
    assert_eq!(table.len(), 2);
    assert!(!table.contains(1) && table.contains(2) && table.contains(3));
    // an evicted key comes back exactly as a refilled one
    assert_eq!(table.snapshot(1, 150 * MS).remaining(), 3);
    assert_eq!(table.evict_refilled(150 * MS), 0);
    assert_eq!(table.evict_refilled(300 * MS), 2);
    assert_eq!(table.len(), 0);
    assert!(table.snapshots(300 * MS).is_empty());
}

#[test]
fn sharded_introspection() {
    let table = ShardedKeyedTable::<u64, Gcra>::new(64, algorithm()).unwrap();
    assert!(table.capacity() >= 64);
    introspection(&table);
}

#[test]
fn heapless_introspection() {
    let table = HeaplessKeyedTable::<u64, Gcra, 64>::new(algorithm());
    assert_eq!(table.capacity(), 64);
    introspection(&table);
}

#[test]
fn lock_free_introspection() {
    let table = LockFreeGcraTable::<u64>::new(64, algorithm()).unwrap();
    assert!(table.capacity() >= 64);
    introspection(&table);
}

#[test]
fn a_static_table_needs_no_allocator() {
    const QUOTA: Quota = match Quota::per_second(10) {
        Ok(q) => q,
        Err(_) => panic!(),
    };
    static TABLE: HeaplessKeyedTable<u32, Gcra, 4> =
        HeaplessKeyedTable::gcra(Gcra::leaky_bucket(QUOTA));
    assert!(TABLE.check(&1, 0).is_allowed());
    assert!(TABLE.check(&1, 0).is_denied()); // strict pacing
    assert!(TABLE.check(&1, 100 * MS).is_allowed());
    assert_eq!(TABLE.len(), 1);
}

#[test]
fn capacity_rounds_up_to_whole_shards() {
    let table = ShardedKeyedTable::builder(algorithm())
        .capacity(1_001)
        .shards(4)
        .build::<u64>()
        .unwrap();
    assert_eq!((table.shards(), table.capacity()), (4, 1_004));
    let big = ShardedKeyedTable::<u64, Gcra>::new(1_000_000, algorithm()).unwrap();
    assert!(big.capacity() >= 1_000_000 && big.capacity() < 1_000_000 + big.shards());
    assert!(big.capacity() / big.shards() <= 4_095);
}

#[test]
fn bad_configurations_are_typed_errors() {
    let zero = ShardedKeyedTable::<u64, Gcra>::new(0, algorithm()).unwrap_err();
    assert_eq!(zero, KeyedTableError::ZeroCapacity);
    for shards in [0, 3, 1 << 17] {
        let err = ShardedKeyedTable::builder(algorithm())
            .shards(shards)
            .build::<u64>()
            .unwrap_err();
        assert!(
            matches!(err, KeyedTableError::InvalidShards { requested, .. } if requested == shards)
        );
    }
    let err = ShardedKeyedTable::builder(algorithm())
        .capacity(10_000)
        .shards(2)
        .build::<u64>()
        .unwrap_err();
    assert_eq!(
        err,
        KeyedTableError::CapacityTooLarge {
            requested: 10_000,
            max: 8_190
        }
    );
    assert_eq!(
        err.to_string(),
        "keyed table capacity 10000 exceeds the maximum 8190"
    );
}
