//! Each std table hashes with its own random seed, so keys cannot be
//! crafted offline to collide in every deployment.
#![cfg(feature = "std")]

use core::hash::BuildHasher;
use std::collections::hash_map::RandomState;
use tollgate::keyed::{KeyedTable, LockFreeGcraTable, RandomSeed, ShardedKeyedTable};
use tollgate::{Gcra, Limiter, Quota, Timestamp};

fn algorithm() -> Gcra {
    Gcra::token_bucket(Quota::per_second(10).unwrap())
}

#[test]
fn two_tables_get_different_seeds() {
    let a = ShardedKeyedTable::<u64, _>::builder(algorithm())
        .max_keys(100)
        .build()
        .unwrap();
    let b = ShardedKeyedTable::<u64, _>::builder(algorithm())
        .max_keys(100)
        .build()
        .unwrap();
    let differing = (0u64..1_000)
        .filter(|k| a.hasher().hash_one(k) != b.hasher().hash_one(k))
        .count();
    assert_eq!(differing, 1_000);
    assert!(a.hasher() != b.hasher());
}

#[test]
fn two_lock_free_tables_get_different_seeds() {
    let a = LockFreeGcraTable::<u64>::builder(algorithm())
        .build()
        .unwrap();
    let b = LockFreeGcraTable::<u64>::builder(algorithm())
        .build()
        .unwrap();
    assert!(a.hasher() != b.hasher());
    let differing = (0u64..1_000)
        .filter(|k| a.hasher().hash_one(k) != b.hasher().hash_one(k))
        .count();
    assert_eq!(differing, 1_000);
}

#[test]
fn seeds_differ_across_threads_too() {
    let here = RandomSeed::new();
    let there = std::thread::spawn(RandomSeed::new).join().unwrap();
    assert!(here != there);
    assert_ne!(here.hash_one(1u64), there.hash_one(1u64));
}

#[test]
fn the_seed_is_not_printed() {
    let seed = RandomSeed::with_seed(0x1234_5678, 0x9abc_def0);
    let shown = format!("{seed:?}");
    assert_eq!(shown, "RandomSeed { .. }");
}

#[test]
fn a_siphash_table_works_the_same() {
    let table = ShardedKeyedTable::<&str, _>::builder(algorithm())
        .max_keys(100)
        .hasher(RandomState::new())
        .build()
        .unwrap();
    let allowed = (0..20)
        .filter(|_| table.try_acquire(&"client", Timestamp::ZERO).is_ok())
        .count();
    assert_eq!(allowed, 10);
    assert!(table.contains(&"client"));
}
