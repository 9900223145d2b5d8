//! One interface over both keyed tables, so every behaviour is pinned on
//! the `no_std` heapless table and on the `std` sharded table alike.
#![allow(dead_code)]

use core::hash::BuildHasher;
use tollgate::keyed::{HeaplessKeyedTable, KeyQuota, KeyedDecision, ShardedKeyedTable};
use tollgate::{CapacityExceeded, Gcra, Snapshot};

pub trait Table: Sync {
    fn check_n(&self, key: u64, n: u32, now: u64) -> Result<KeyedDecision, CapacityExceeded>;
    fn check(&self, key: u64, now: u64) -> KeyedDecision {
        self.check_n(key, 1, now)
            .expect("n = 1 fits every test quota")
    }
    fn refund(&self, key: u64, n: u32, now: u64);
    fn snapshot(&self, key: u64, now: u64) -> Snapshot;
    fn len(&self) -> usize;
    fn capacity(&self) -> usize;
    fn contains(&self, key: u64) -> bool;
    fn evict_refilled(&self, now: u64) -> usize;
    fn snapshots(&self, now: u64) -> Vec<(u64, Snapshot)>;
    fn shared_snapshot(&self, now: u64) -> Snapshot;
}

impl<const N: usize, Q: KeyQuota<u64, Gcra> + Sync> Table for HeaplessKeyedTable<u64, Gcra, N, Q> {
    fn check_n(&self, key: u64, n: u32, now: u64) -> Result<KeyedDecision, CapacityExceeded> {
        HeaplessKeyedTable::check_n(self, &key, n, now)
    }
    fn refund(&self, key: u64, n: u32, now: u64) {
        HeaplessKeyedTable::refund(self, &key, n, now);
    }
    fn snapshot(&self, key: u64, now: u64) -> Snapshot {
        HeaplessKeyedTable::snapshot(self, &key, now)
    }
    fn len(&self) -> usize {
        HeaplessKeyedTable::len(self)
    }
    fn capacity(&self) -> usize {
        HeaplessKeyedTable::capacity(self)
    }
    fn contains(&self, key: u64) -> bool {
        HeaplessKeyedTable::contains(self, &key)
    }
    fn evict_refilled(&self, now: u64) -> usize {
        HeaplessKeyedTable::evict_refilled(self, now)
    }
    fn snapshots(&self, now: u64) -> Vec<(u64, Snapshot)> {
        let mut out = Vec::new();
        self.for_each_snapshot(now, |k, s| out.push((*k, s)));
        out.sort_by_key(|(k, _)| *k);
        out
    }
    fn shared_snapshot(&self, now: u64) -> Snapshot {
        HeaplessKeyedTable::shared_snapshot(self, now)
    }
}

impl<S: BuildHasher + Sync, Q: KeyQuota<u64, Gcra> + Sync> Table
    for ShardedKeyedTable<u64, Gcra, S, Q>
{
    fn check_n(&self, key: u64, n: u32, now: u64) -> Result<KeyedDecision, CapacityExceeded> {
        ShardedKeyedTable::check_n(self, &key, n, now)
    }
    fn refund(&self, key: u64, n: u32, now: u64) {
        ShardedKeyedTable::refund(self, &key, n, now);
    }
    fn snapshot(&self, key: u64, now: u64) -> Snapshot {
        ShardedKeyedTable::snapshot(self, &key, now)
    }
    fn len(&self) -> usize {
        ShardedKeyedTable::len(self)
    }
    fn capacity(&self) -> usize {
        ShardedKeyedTable::capacity(self)
    }
    fn contains(&self, key: u64) -> bool {
        ShardedKeyedTable::contains(self, &key)
    }
    fn evict_refilled(&self, now: u64) -> usize {
        ShardedKeyedTable::evict_refilled(self, now)
    }
    fn snapshots(&self, now: u64) -> Vec<(u64, Snapshot)> {
        let mut out = Vec::new();
        self.for_each_snapshot(now, |k, s| out.push((*k, s)));
        out.sort_by_key(|(k, _)| *k);
        out
    }
    fn shared_snapshot(&self, now: u64) -> Snapshot {
        ShardedKeyedTable::shared_snapshot(self, now)
    }
}

impl<S: BuildHasher + Sync, Q: KeyQuota<u64, Gcra> + Sync> Table
    for tollgate::keyed::LockFreeGcraTable<u64, S, Q>
{
    fn check_n(&self, key: u64, n: u32, now: u64) -> Result<KeyedDecision, CapacityExceeded> {
        tollgate::keyed::LockFreeGcraTable::check_n(self, key, n, now)
    }
    fn refund(&self, key: u64, n: u32, now: u64) {
        tollgate::keyed::LockFreeGcraTable::refund(self, key, n, now);
    }
    fn snapshot(&self, key: u64, now: u64) -> Snapshot {
        tollgate::keyed::LockFreeGcraTable::snapshot(self, key, now)
    }
    fn len(&self) -> usize {
        tollgate::keyed::LockFreeGcraTable::len(self)
    }
    fn capacity(&self) -> usize {
        tollgate::keyed::LockFreeGcraTable::capacity(self)
    }
    fn contains(&self, key: u64) -> bool {
        tollgate::keyed::LockFreeGcraTable::contains(self, key)
    }
    fn evict_refilled(&self, now: u64) -> usize {
        tollgate::keyed::LockFreeGcraTable::evict_refilled(self, now)
    }
    fn snapshots(&self, now: u64) -> Vec<(u64, Snapshot)> {
        let mut out = Vec::new();
        self.for_each_snapshot(now, |k, s| out.push((k, s)));
        out.sort_by_key(|(k, _)| *k);
        out
    }
    fn shared_snapshot(&self, now: u64) -> Snapshot {
        tollgate::keyed::LockFreeGcraTable::shared_snapshot(self, now)
    }
}
