//! The check path: checking a key (tracked, new, or overflowing) and the
//! rest of the [`Limiter`] half of [`ShardedKeyedTable`].

use core::hash::{BuildHasher, Hash};
use core::time::Duration;

use super::ShardedKeyedTable;
use crate::keyed::{
    AtomicSweepHint, KeyQuota, KeyedTable, OverflowPolicy, exceeded, overflow, untracked_peek,
};
use crate::limiter::{Algorithm, Grant, Limiter};
use crate::refusal::Refusal;
use crate::snapshot::Snapshot;
use crate::time::Timestamp;

/// Checks a tracked state and lowers the hint to its idle time.
#[inline(always)]
fn check_own<A: Algorithm>(
    alg: &A,
    state: &A::State,
    n: u32,
    now: Timestamp,
    hint: &AtomicSweepHint,
) -> Result<Timestamp, Refusal<'static>> {
    let verdict = alg.check_n(state, n, now);
    hint.lower(now.as_nanos(), crate::keyed::reset_after(&verdict, now));
    verdict
}

impl<K, A, S, Q> ShardedKeyedTable<K, A, S, Q>
where
    K: Hash + Eq + Clone,
    A: Algorithm + Clone,
    S: BuildHasher,
    Q: KeyQuota<K, A>,
{
    #[inline]
    fn check_until_full(
        &self,
        key: &K,
        n: u32,
        now: Timestamp,
    ) -> Result<Timestamp, Refusal<'static>> {
        let hash = self.hasher.hash_one(key);
        let lock = self.shard(hash);
        {
            let shard = self.read(lock);
            let alg = self.algorithm_of(&shard, key);
            if n > alg.capacity() {
                return Err(exceeded(&alg, n));
            }
            if let Some(state) = shard.get(key, hash) {
                return check_own(&alg, state, n, now, &shard.hint);
            }
            if n == 0 {
                return untracked_peek(&alg, now);
            }
            // Full of busy keys: answer without the write lock, so a
            // flood of new keys never blocks the tracked keys' checks.
            if shard.len >= shard.capacity && !shard.hint.worth_sweeping(now.as_nanos()) {
                let wait = shard.hint.wait_from(now.as_nanos());
                return overflow(
                    self.policy,
                    &alg,
                    &shard.default,
                    &self.shared,
                    n,
                    now,
                    wait,
                );
            }
        }
        // a new key: insert under the write lock
        let mut guard = self.write(lock);
        let shard = &mut *guard;
        let alg = self.algorithm_of(shard, key);
        if let Some(state) = shard.get(key, hash) {
            // inserted by another thread meanwhile
            return check_own(&alg, state, n, now, &shard.hint);
        }
        if shard.len >= shard.capacity && !self.sweep(shard, now) {
            let wait = shard.hint.wait_from(now.as_nanos());
            return overflow(
                self.policy,
                &alg,
                &shard.default,
                &self.shared,
                n,
                now,
                wait,
            );
        }
        let at = Timestamp::from_nanos(shard.hint.insert_time(now.as_nanos()));
        match shard.insert(key.clone(), alg.new_state(), hash) {
            Some((bucket, i)) => match shard.buckets[bucket].get(i) {
                Some((_, state)) => check_own(&alg, state, n, at, &shard.hint),
                None => crate::keyed::refusal(), // unreachable: just inserted
            },
            None => {
                let wait = shard.hint.wait_from(now.as_nanos());
                overflow(
                    self.policy,
                    &alg,
                    &shard.default,
                    &self.shared,
                    n,
                    now,
                    wait,
                )
            }
        }
    }
}

impl<K, A, S, Q> Limiter<K> for ShardedKeyedTable<K, A, S, Q>
where
    K: Hash + Eq + Clone,
    A: Algorithm + Clone,
    S: BuildHasher,
    Q: KeyQuota<K, A>,
{
    type Permit = Grant;

    crate::keyed::grant_methods!();

    fn refund(&self, key: &K, n: u32, now: Timestamp) {
        let hash = self.hasher.hash_one(key);
        let shard = self.read(self.shard(hash));
        match shard.get(key, hash) {
            Some(state) => {
                self.algorithm_of(&shard, key).refund(state, n, now);
                shard.hint.reset();
            }
            None if self.policy == OverflowPolicy::SharedBucket => {
                shard.default.refund(&self.shared, n, now);
            }
            None => {}
        }
    }

    fn snapshot(&self, key: &K, now: Timestamp) -> Snapshot {
        let hash = self.hasher.hash_one(key);
        let shard = self.read(self.shard(hash));
        let alg = self.algorithm_of(&shard, key);
        match shard.get(key, hash) {
            Some(state) => alg.snapshot(state, now),
            None => alg.snapshot(&alg.new_state(), now),
        }
    }

    fn time_until_ready(
        &self,
        key: &K,
        n: u32,
        now: Timestamp,
    ) -> Result<Duration, Refusal<'static>> {
        let hash = self.hasher.hash_one(key);
        let shard = self.read(self.shard(hash));
        let alg = self.algorithm_of(&shard, key);
        match shard.get(key, hash) {
            Some(state) => alg.time_until_ready(state, n, now),
            None => alg.time_until_ready(&alg.new_state(), n, now),
        }
    }

    fn time_until_ready_after(
        &self,
        key: &K,
        ahead: u64,
        n: u32,
        now: Timestamp,
    ) -> Option<Duration> {
        let hash = self.hasher.hash_one(key);
        let shard = self.read(self.shard(hash));
        let alg = self.algorithm_of(&shard, key);
        match shard.get(key, hash) {
            Some(state) => alg.time_until_ready_after(state, ahead, n, now),
            None => alg.time_until_ready_after(&alg.new_state(), ahead, n, now),
        }
    }

    fn capacity(&self, key: &K) -> u32 {
        let hash = self.hasher.hash_one(key);
        let shard = self.read(self.shard(hash));
        self.algorithm_of(&shard, key).capacity()
    }
}
