//! Eviction: sweeping a shard of its idle keys (lossless: no future
//! decision changes), when a new key finds it full or on request.

use core::hash::{BuildHasher, Hash};

use super::{Shard, ShardedKeyedTable};
use crate::keyed::{KeyQuota, with_algorithm};
use crate::limiter::Algorithm;
use crate::time::Timestamp;

impl<K, A, S, Q> ShardedKeyedTable<K, A, S, Q>
where
    K: Hash + Eq + Clone,
    A: Algorithm + Clone,
    S: BuildHasher,
    Q: KeyQuota<K, A>,
{
    /// Evicts every idle key of a full shard (if the hint says one may be
    /// idle); true if a slot is free afterwards.
    pub(super) fn sweep(&self, shard: &mut Shard<K, A>, now: Timestamp) -> bool {
        if !shard.hint.worth_sweeping(now.as_nanos()) {
            return false;
        }
        self.sweep_always(shard, now);
        shard.len < shard.capacity
    }

    pub(super) fn sweep_always(&self, shard: &mut Shard<K, A>, now: Timestamp) -> usize {
        let now_ns = now.as_nanos();
        let before = shard.len;
        let hint = &shard.hint;
        hint.start(now_ns);
        let (default, quota) = (&shard.default, &self.quota);
        let mut after = 0;
        for bucket in &mut shard.buckets {
            bucket.retain(|(key, state)| {
                with_algorithm(quota, default, key, |alg| {
                    if alg.is_idle(state, now) {
                        false
                    } else {
                        hint.lower(now_ns, alg.snapshot(state, now).reset_after_nanos());
                        true
                    }
                })
            });
            after += bucket.len();
        }
        let evicted = before.saturating_sub(after);
        if evicted > 0 {
            shard.reindex(|k| self.hasher.hash_one(k));
        }
        evicted
    }
}
