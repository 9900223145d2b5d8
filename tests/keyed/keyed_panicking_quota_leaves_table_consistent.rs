//! A per-key quota function that panics (a bug in the caller's code, run
//! by the table while it holds a shard's lock) must not leave the table
//! inconsistent: std's locks are poisoned by the panic, and the table
//! repairs the shard on its next use. After the panic every key keeps
//! exactly its state (no key is lost, duplicated, or handed a fresh
//! bucket), `len` agrees with the entries, and the table works on: checks,
//! inserts, sweeps.
//!
//! The panic is raised where it hurts most: inside a sweep, after some idle
//! keys were evicted and before the entries behind them were moved back
//! (every key has the same home slot, so they form one probe run), and
//! while inserting a new key, and in the middle of a reconfiguration
//! (after some keys were frozen for conversion). Both tables must pass all
//! three: the sharded table repairs the poisoned shard; the lock-free
//! table's sweep and conversion finish (close the holes, unfreeze the
//! slots, make their sequence counters even) on unwind.
#![cfg(feature = "std")]

use std::hash::{BuildHasher, Hasher};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};

use tollgate::keyed::{KeyQuota, KeyedPath, KeyedTable, LockFreeGcraTable, ShardedKeyedTable};
use tollgate::{Bucket, Gcra, Inheritance, Quota, Timestamp};

const SECOND: u64 = 1_000_000_000;

fn t(ns: u64) -> Timestamp {
    Timestamp::from_nanos(ns)
}

/// One per second, burst 2.
fn quota() -> Gcra {
    Gcra::token_bucket(Quota::per_second(1).unwrap().with_burst(2).unwrap())
}

/// Every key hashes to itself: small keys share home slot 0.
#[derive(Clone, Copy, Default)]
struct IdentityHash;

#[derive(Default)]
struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, word: u64) {
        self.0 = word;
    }
}

impl BuildHasher for IdentityHash {
    type Hasher = IdentityHasher;
    fn build_hasher(&self) -> IdentityHasher {
        IdentityHasher::default()
    }
}

/// The table's default quota for every key, except that asking for the
/// key in `armed` panics.
#[derive(Clone, Copy)]
struct Panicky(&'static AtomicU64);

const NOBODY: u64 = u64::MAX;

impl KeyQuota<u64, Gcra> for Panicky {
    fn algorithm_for(&self, key: &u64) -> Option<Gcra> {
        if *key == self.0.load(Ordering::SeqCst) {
            panic!("the per-key quota function failed for key {key}");
        }
        None
    }
}

fn panicky() -> (Panicky, &'static AtomicU64) {
    let armed: &'static AtomicU64 = Box::leak(Box::new(AtomicU64::new(NOBODY)));
    (Panicky(armed), armed)
}

/// Runs `f`, which must panic (quietly: the panic is the test's own).
fn panics(f: impl FnOnce()) {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = catch_unwind(AssertUnwindSafe(f));
    std::panic::set_hook(hook);
    assert!(result.is_err(), "expected the quota function to panic");
}

/// Keys 1–3 idle at 1.5 s (one check at 0), keys 4–6 busy (two checks at
/// 0: empty until 1 s, full at 2 s); a sweep at 1.5 s panics on key 5,
/// after evicting 1–3 and before moving 4–6 back. Then every key must be
/// what its own bucket says, and the table must go on working.
fn panic_in_a_sweep<T: KeyedTable<u64, Algorithm = Gcra>>(table: &T, armed: &AtomicU64) {
    let gcra = quota();
    // one reference bucket per key, fed the same checks
    let reference: Vec<Bucket<Gcra>> = (0..=7).map(|_| Bucket::new(gcra)).collect();
    let check = |key: u64, now: Timestamp| {
        let got = table.try_acquire(&key, now);
        let expected = reference[key as usize].check(now);
        assert_eq!(
            got.is_ok(),
            expected.is_ok(),
            "key {key} at {now:?}: the table and its own bucket disagree"
        );
    };
    for key in 1..=6 {
        check(key, t(0));
    }
    for key in 4..=6 {
        check(key, t(0));
    }
    assert_eq!(table.len(), 6);

    armed.store(5, Ordering::SeqCst);
    panics(|| {
        table.evict_refilled(t(SECOND * 3 / 2));
    });
    armed.store(NOBODY, Ordering::SeqCst);

    // consistency: len agrees with the entries, each key at most once
    let mut seen = Vec::new();
    table.for_each_snapshot(t(SECOND * 3 / 2), &mut |k, _| seen.push(*k));
    seen.sort_unstable();
    let mut unique = seen.clone();
    unique.dedup();
    assert_eq!(seen, unique, "a key appears twice");
    assert_eq!(table.len(), seen.len(), "len disagrees with the entries");
    // the busy keys were not evicted, and kept their state exactly
    for key in 4..=6 {
        assert!(table.contains(&key), "busy key {key} was lost");
        assert_eq!(
            table.snapshot(&key, t(SECOND * 3 / 2)),
            reference[key as usize].snapshot(t(SECOND * 3 / 2)),
            "key {key}'s state changed"
        );
    }
    // a busy key still limited exactly as its own bucket (1 permit back at
    // 1.5 s, not a fresh bucket's 2)
    check(4, t(SECOND * 3 / 2));
    check(4, t(SECOND * 3 / 2));
    // and the table goes on: a clean sweep, new keys
    table.evict_refilled(t(SECOND * 3 / 2));
    for key in 1..=3 {
        assert!(!table.contains(&key), "idle key {key} not evicted");
    }
    assert_eq!(table.len(), 3);
    check(7, t(SECOND * 3 / 2));
    assert!(table.contains(&7));
    assert_eq!(table.len(), 4);
}

/// A new key whose per-key quota panics while it is being inserted (under
/// the shard's write lock): nothing is inserted, and the table works on.
fn panic_while_inserting<T: KeyedTable<u64, Algorithm = Gcra>>(table: &T, armed: &AtomicU64) {
    assert!(table.try_acquire(&1, t(0)).is_ok());
    armed.store(2, Ordering::SeqCst);
    panics(|| {
        let _ = table.try_acquire(&2, t(0));
    });
    armed.store(NOBODY, Ordering::SeqCst);
    assert!(!table.contains(&2));
    assert_eq!(table.len(), 1);
    assert!(table.try_acquire(&2, t(0)).is_ok());
    assert!(table.try_acquire(&1, t(0)).is_ok());
    assert!(table.try_acquire(&1, t(0)).is_err(), "key 1 kept its state");
    assert_eq!(table.len(), 2);
}

fn sharded() -> (
    ShardedKeyedTable<u64, Gcra, IdentityHash, Panicky>,
    &'static AtomicU64,
) {
    let (quota_fn, armed) = panicky();
    let table = ShardedKeyedTable::<u64, _>::builder(quota())
        .max_keys(16)
        .shards(1)
        .hasher(IdentityHash)
        .per_key(quota_fn)
        .build()
        .unwrap();
    (table, armed)
}

fn lock_free() -> (
    LockFreeGcraTable<u64, IdentityHash, Panicky>,
    &'static AtomicU64,
) {
    let (quota_fn, armed) = panicky();
    let table = LockFreeGcraTable::<u64>::builder(quota())
        .max_keys(16)
        .shards(1)
        .hasher(IdentityHash)
        .per_key(quota_fn)
        .build()
        .unwrap();
    (table, armed)
}

#[test]
fn sharded_table_repairs_a_shard_after_a_panic_in_a_sweep() {
    let (table, armed) = sharded();
    panic_in_a_sweep(&table, armed);
}

#[test]
fn sharded_table_survives_a_panic_while_inserting() {
    let (table, armed) = sharded();
    panic_while_inserting(&table, armed);
}

/// Without the sweep's unwind guard (`SweepEnd` in
/// `crates/tollgate-core/src/keyed/lock_free/sweep.rs`) this fails: the panic left the evicted slots
/// as holes in front of keys 4–6 (never moved back), `len` counting the
/// evicted keys and the `sweeps` counter odd, so keys 4–6 were no longer
/// found and a check handed key 4 a fresh bucket.
#[test]
fn lock_free_table_after_a_panic_in_a_sweep() {
    let (table, armed) = lock_free();
    panic_in_a_sweep(&table, armed);
}

#[test]
fn lock_free_table_survives_a_panic_while_inserting() {
    let (table, armed) = lock_free();
    panic_while_inserting(&table, armed);
}

/// Keys 1–6 busy (two checks at 0); a reconfiguration at 0.5 s asks the
/// per-key quota of every key (to pick those on the default) and panics on
/// key 4, after keys 1–3 were frozen. Every key must keep its state (the
/// default did not change) and be checked as its own bucket says, through
/// the lock-free path again; the next reconfiguration works.
fn panic_in_a_reconfiguration<T: KeyedTable<u64, Algorithm = Gcra>>(table: &T, armed: &AtomicU64) {
    let gcra = quota();
    let reference: Vec<Bucket<Gcra>> = (0..=6).map(|_| Bucket::new(gcra)).collect();
    let check = |key: u64, now: Timestamp| {
        let got = table.try_acquire(&key, now);
        let expected = reference[key as usize].check(now);
        assert_eq!(
            got.is_ok(),
            expected.is_ok(),
            "key {key} at {now:?}: the table and its own bucket disagree"
        );
        got
    };
    for key in 1..=6 {
        let _ = check(key, t(0));
        let _ = check(key, t(0));
    }
    let half = t(SECOND / 2);
    armed.store(4, Ordering::SeqCst);
    panics(|| {
        table.reconfigure(
            Gcra::token_bucket(Quota::per_second(10).unwrap().with_burst(20).unwrap()),
            Inheritance::UsedAmount,
            half,
        );
    });
    armed.store(NOBODY, Ordering::SeqCst);
    assert_eq!(table.len(), 6);
    for key in 1..=6 {
        assert!(table.contains(&key), "key {key} was lost");
        assert_eq!(
            table.snapshot(&key, half),
            reference[key as usize].snapshot(half),
            "key {key}'s state changed"
        );
        // still limited as its own bucket: nothing back at 0.5 s (a
        // refusal, which says which path refused)
        let decision = check(key, half);
        assert_eq!(
            decision.expect_err("nothing back at 0.5 s").path(),
            KeyedPath::Own,
            "key {key} not on its own bucket"
        );
    }
    // the table goes on: a clean reconfiguration, then new keys
    table.reconfigure(gcra, Inheritance::UsedAmount, half);
    assert!(check(1, t(SECOND * 3 / 2)).is_ok());
    assert!(table.try_acquire(&0, half).is_ok());
    assert_eq!(table.len(), 7);
}

#[test]
fn sharded_table_survives_a_panic_in_a_reconfiguration() {
    let (table, armed) = sharded();
    panic_in_a_reconfiguration(&table, armed);
}

#[test]
fn lock_free_table_survives_a_panic_in_a_reconfiguration() {
    let (table, armed) = lock_free();
    panic_in_a_reconfiguration(&table, armed);
}
