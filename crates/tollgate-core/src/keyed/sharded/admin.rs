//! The admin half of [`ShardedKeyedTable`] ([`KeyedTable`]): size,
//! snapshots of every key, eviction on request, reconfiguration and
//! per-key quota changes.

use core::hash::{BuildHasher, Hash};
use std::vec::Vec;

use super::ShardedKeyedTable;
use crate::keyed::{KeyQuota, KeyedTable, OverflowPolicy};
use crate::limiter::{Algorithm, Inheritance};
use crate::snapshot::Snapshot;
use crate::time::Timestamp;

impl<K, A, S, Q> KeyedTable<K> for ShardedKeyedTable<K, A, S, Q>
where
    K: Hash + Eq + Clone,
    A: Algorithm + Clone,
    S: BuildHasher,
    Q: KeyQuota<K, A>,
{
    type Algorithm = A;

    fn contains(&self, key: &K) -> bool {
        let hash = self.hasher.hash_one(key);
        self.read(self.shard(hash)).get(key, hash).is_some()
    }

    fn len(&self) -> usize {
        self.shards.iter().map(|s| self.read(&s.0).len).sum()
    }

    /// The requested capacity rounded up to a multiple of the shard count.
    fn max_keys(&self) -> usize {
        self.per_shard * self.shards.len()
    }

    fn overflow_policy(&self) -> OverflowPolicy {
        self.policy
    }

    fn default_algorithm(&self) -> A {
        self.read(&self.shards[0].0).default.clone()
    }

    fn shared_snapshot(&self, now: Timestamp) -> Snapshot {
        self.read(&self.shards[0].0)
            .default
            .snapshot(&self.shared, now)
    }

    fn for_each_snapshot(&self, now: Timestamp, visit: &mut dyn FnMut(&K, Snapshot)) {
        for shard in &self.shards {
            let shard = self.read(&shard.0);
            for (key, state) in shard.entries() {
                let snapshot = self.algorithm_of(&shard, key).snapshot(state, now);
                visit(key, snapshot);
            }
        }
    }

    fn evict_refilled(&self, now: Timestamp) -> usize {
        self.shards
            .iter()
            .map(|s| self.sweep_always(&mut self.write(&s.0), now))
            .sum()
    }

    fn reconfigure(&self, next: A, how: Inheritance, now: Timestamp) {
        let mut shards = self.write_all();
        // The per-key quota (the caller's code, which may panic) is asked
        // about every key before any state changes: a panic then leaves
        // the whole table on the old configuration, not some keys carried
        // into the new units under the old default.
        let on_default: Vec<Vec<bool>> = shards
            .iter()
            .map(|shard| {
                shard
                    .entries()
                    .map(|(key, _)| self.quota.algorithm_for(key).is_none())
                    .collect()
            })
            .collect();
        for (shard, on_default) in shards.iter_mut().zip(on_default) {
            let shard = &mut **shard;
            for ((_, state), on_default) in shard.entries().zip(on_default) {
                if on_default {
                    shard.default.carry_over(&next, state, how, now);
                }
            }
            shard.hint.reset();
        }
        if let Some(first) = shards.first() {
            first.default.carry_over(&next, &self.shared, how, now);
        }
        for shard in &mut shards {
            shard.default = next.clone();
        }
    }

    fn update_key_quota(
        &self,
        key: &K,
        how: Inheritance,
        now: Timestamp,
        update: &mut dyn FnMut(),
    ) {
        let hash = self.hasher.hash_one(key);
        let shard = self.write(self.shard(hash));
        let old = self.algorithm_of(&shard, key);
        update();
        let new = self.algorithm_of(&shard, key);
        if let Some(state) = shard.get(key, hash) {
            old.carry_over(&new, state, how, now);
        }
        shard.hint.reset();
    }
}
