//! The check path: the lock-free attempt on a tracked key, the fallback
//! under the shard's mutex (a new key, or entries being moved or
//! converted), and the overflow policies of a full shard.

use core::hash::BuildHasher;

use super::shard::{Find, Shard, Slot, pack, unpack};
use super::{LockFreeGcraTable, WordKey};
use crate::gcra::Gcra;
use crate::keyed::{KeyQuota, KeyedPath, OverflowPolicy, exceeded, reset_after, untracked_peek};
use crate::limiter::Algorithm;
use crate::refusal::Refusal;
use crate::snapshot::Snapshot;
use crate::sync::Ordering;
use crate::time::Timestamp;

/// What a lock-free attempt concluded.
enum Attempt {
    Done(Result<Timestamp, Refusal<'static>>),
    /// Take the shard's mutex and decide there.
    Locked,
}

impl<K: WordKey, S: BuildHasher, Q: KeyQuota<K, Gcra>> LockFreeGcraTable<K, S, Q> {
    #[inline]
    pub(super) fn check_until_full(
        &self,
        key: &K,
        n: u32,
        now: Timestamp,
    ) -> Result<Timestamp, Refusal<'static>> {
        let key = *key;
        let hash = self.hasher.hash_one(key);
        let shard = self.shard(hash);
        match self.check_unlocked(shard, key, hash, n, now) {
            Attempt::Done(result) => result,
            Attempt::Locked => self.check_locked(shard, key, hash, n, now),
        }
    }

    /// The answer for a key that found the shard full of busy keys.
    fn overflow(
        &self,
        alg: &Gcra,
        n: u32,
        now: Timestamp,
        wait: u64,
    ) -> Result<Timestamp, Refusal<'static>> {
        match self.policy {
            OverflowPolicy::SharedBucket => match self.shared.check_until_full(n, now) {
                Ok(full_at) => Ok(full_at),
                Err(refusal) if !refusal.is_never() => {
                    Err(refusal.on_path(KeyedPath::SharedOverflow))
                }
                // the key's own quota allows `n`, the default does not
                Err(_) => Err(Refusal::from_nanos(wait, self.shared.snapshot(now))
                    .on_path(KeyedPath::SharedOverflow)),
            },
            OverflowPolicy::Deny => Err(Refusal::from_nanos(
                wait,
                Snapshot::from_nanos(alg.capacity(), 0, wait),
            )
            .on_path(KeyedPath::OverflowDenied)),
            OverflowPolicy::Allow => alg
                .step(0, n, now.as_nanos())
                .0
                .map_err(|r| r.on_path(KeyedPath::OverflowAllowed)),
        }
    }

    /// Applies GCRA to `key`'s slot at `i` (loaded as `word`) until it is
    /// decided. `locked`: the caller holds the shard's mutex, so no
    /// reconfiguration can overlap. `None` if the slot stopped holding
    /// `key` (moved, evicted, frozen).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn apply(
        &self,
        shard: &Shard,
        seq: u64,
        key: K,
        mut i_word: (usize, u128),
        n: u32,
        now: u64,
        locked: bool,
    ) -> Option<Attempt> {
        let word_key = key.to_word();
        loop {
            let (i, word) = i_word;
            let Slot::Live(k, tat) = unpack(word) else {
                return None;
            };
            if k != word_key {
                return None;
            }
            // the configuration after the slot (see the `lock_free` module
            // docs), and only if no reconfiguration began since `seq`: a
            // half-written configuration is never stepped with
            let alg = self.algorithm(shard, key);
            let unmoved = || locked || shard.reconfig.load(Ordering::Acquire) == seq;
            if !unmoved() {
                return Some(Attempt::Locked);
            }
            let (decision, store) = alg.step(tat, n, now);
            match store {
                // one more look just before the swap: a conversion that
                // wrote the slot since would make it fail anyway; one that
                // only began is left to run after us
                Some(_) if !unmoved() => return Some(Attempt::Locked),
                Some(new_tat) => {
                    if let Err(current) = shard.slots[i].compare_exchange_weak(
                        word,
                        pack(word_key, new_tat),
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    ) {
                        i_word = (i, current);
                        continue;
                    }
                }
                None => {}
            }
            shard
                .hint
                .lower(now, reset_after(&decision, Timestamp::from_nanos(now)));
            return Some(Attempt::Done(decision));
        }
    }

    /// The lock-free path: `Locked` when it cannot decide alone.
    #[inline]
    fn check_unlocked(&self, shard: &Shard, key: K, hash: u64, n: u32, now: Timestamp) -> Attempt {
        let seq = shard.reconfig.load(Ordering::Acquire);
        if seq % 2 == 1 {
            return Attempt::Locked;
        }
        let now_ns = now.as_nanos();
        match shard.find_unlocked(key.to_word(), hash) {
            Find::Found(i, w) => self
                .apply(shard, seq, key, (i, w), n, now_ns, false)
                .unwrap_or(Attempt::Locked),
            Find::Absent(_) => {
                let alg = self.algorithm(shard, key);
                if shard.reconfig.load(Ordering::Acquire) != seq {
                    return Attempt::Locked;
                }
                if n > alg.capacity() || n == 0 {
                    if shard.reconfig.load(Ordering::Acquire) != seq {
                        return Attempt::Locked;
                    }
                    if n == 0 {
                        return Attempt::Done(untracked_peek(&alg, now));
                    }
                    return Attempt::Done(Err(exceeded(&alg, n)));
                }
                if shard.len() >= shard.capacity && !shard.hint.worth_sweeping(now_ns) {
                    let wait = shard.hint.wait_from(now_ns);
                    return Attempt::Done(self.overflow(&alg, n, now, wait));
                }
                Attempt::Locked
            }
            Find::Busy => Attempt::Locked,
        }
    }

    /// Under the shard's mutex: a new key, or a writer was moving or
    /// converting entries.
    fn check_locked(
        &self,
        shard: &Shard,
        key: K,
        hash: u64,
        n: u32,
        now: Timestamp,
    ) -> Result<Timestamp, Refusal<'static>> {
        let now_ns = now.as_nanos();
        let word = key.to_word();
        let _writer = shard.lock();
        let alg = self.algorithm(shard, key);
        if n > alg.capacity() {
            return Err(exceeded(&alg, n));
        }
        let seq = shard.reconfig.load(Ordering::Acquire);
        // Under the mutex nothing moves or leaves, so one pass decides; the
        // bound only guards against looping on a broken invariant.
        for _ in 0..4 {
            match shard.find(word, hash) {
                Find::Found(i, w) => {
                    if let Some(Attempt::Done(result)) =
                        self.apply(shard, seq, key, (i, w), n, now_ns, true)
                    {
                        return result;
                    }
                    // only writers move or evict, and we are the writer
                }
                Find::Absent(_) if n == 0 => return untracked_peek(&alg, now),
                Find::Absent(mut free) => {
                    if shard.len() >= shard.capacity {
                        if !shard.hint.worth_sweeping(now_ns) || self.sweep(shard, now_ns) == 0 {
                            let wait = shard.hint.wait_from(now_ns);
                            return self.overflow(&alg, n, now, wait);
                        }
                        // the sweep moved entries: find the free slot again
                        match shard.find(word, hash) {
                            Find::Absent(i) => free = i,
                            _ => continue,
                        }
                    }
                    let at = shard.hint.insert_time(now_ns);
                    let (decision, store) = alg.step(0, n, at);
                    if let Some(tat) = store {
                        shard.slots[free].store(pack(word, tat), Ordering::Release);
                        shard.len.fetch_add(1, Ordering::Relaxed);
                    }
                    shard
                        .hint
                        .lower(at, reset_after(&decision, Timestamp::from_nanos(at)));
                    return decision;
                }
                // frozen slots exist only inside a writer, and we are it
                Find::Busy => break,
            }
        }
        self.overflow(&alg, n, now, 1)
    }
}
