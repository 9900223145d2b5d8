//! Reaching a shard: choosing it by hash, locking it (repairing it after a
//! caller's callback panicked under the lock), and the algorithm a key
//! runs in it.

use core::hash::{BuildHasher, Hash};
use std::vec::Vec;

use super::{Shard, ShardedKeyedTable};
use crate::keyed::KeyQuota;
use crate::limiter::Algorithm;
use crate::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

impl<K, A, S, Q> ShardedKeyedTable<K, A, S, Q>
where
    K: Hash + Eq + Clone,
    A: Algorithm + Clone,
    S: BuildHasher,
    Q: KeyQuota<K, A>,
{
    #[inline]
    pub(super) fn shard(&self, hash: u64) -> &RwLock<Shard<K, A>> {
        // shard_shift is 64 for one shard: checked_shr gives None → shard 0
        let i = hash.checked_shr(self.shard_shift).unwrap_or(0) as usize;
        &self.shards[i & (self.shards.len() - 1)].0
    }

    /// Read-locks a shard. If a caller's callback (per-key quota, visitor)
    /// panicked while holding the write lock, a sweep may have stopped
    /// between removing entries and recomputing the overflow bits: repair
    /// them first.
    #[inline]
    pub(super) fn read<'a>(
        &'a self,
        lock: &'a RwLock<Shard<K, A>>,
    ) -> RwLockReadGuard<'a, Shard<K, A>> {
        match lock.read() {
            Ok(guard) => guard,
            Err(poisoned) => {
                drop(poisoned);
                drop(self.write(lock));
                lock.read()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
            }
        }
    }

    /// Write-locks a shard, repairing it after a panic (see [`Self::read`]).
    pub(super) fn write<'a>(
        &'a self,
        lock: &'a RwLock<Shard<K, A>>,
    ) -> RwLockWriteGuard<'a, Shard<K, A>> {
        lock.write().unwrap_or_else(|poisoned| {
            let mut shard = poisoned.into_inner();
            shard.reindex(|k| self.hasher.hash_one(k));
            crate::sync::clear_poison(lock);
            shard
        })
    }

    /// `key`'s algorithm: its per-key quota, or the shard's default.
    #[inline]
    pub(super) fn algorithm_of(&self, shard: &Shard<K, A>, key: &K) -> A {
        self.quota
            .algorithm_for(key)
            .unwrap_or_else(|| shard.default.clone())
    }

    /// Every shard write-locked, in order (a reconfiguration).
    pub(super) fn write_all(&self) -> Vec<RwLockWriteGuard<'_, Shard<K, A>>> {
        self.shards.iter().map(|s| self.write(&s.0)).collect()
    }
}
