//! Eviction: the sweep that empties a shard's idle slots, and closing the
//! holes it leaves so that every probe run stays unbroken.

use core::hash::BuildHasher;

use super::shard::{Shard, Slot, freeze, unpack};
use super::{LockFreeGcraTable, WordKey};
use crate::gcra::Gcra;
use crate::keyed::{KeyQuota, SweepHint};
use crate::sync::Ordering;

impl<K: WordKey, S: BuildHasher, Q: KeyQuota<K, Gcra>> LockFreeGcraTable<K, S, Q> {
    /// Evicts the shard's idle keys and closes the holes (caller holds the
    /// shard's mutex). Returns how many were evicted.
    pub(super) fn sweep(&self, shard: &Shard, now: u64) -> usize {
        // The new hint is built here and published when the sweep ends:
        // lock-free readers consult the shard's hint at any time, and one
        // that met a half-built hint ("nothing idle before u64::MAX")
        // refused with a retry_after of centuries. Checks racing the sweep
        // only lower the hint to a TAT the sweep sees too, so publishing
        // over them loses nothing.
        let mut hint = shard.hint.resume();
        hint.start(now);
        // A slot empty before any eviction: no probe run crosses it (the
        // spare slots guarantee one exists).
        let Some(start) =
            (0..shard.slots.len()).find(|&i| matches!(unpack(shard.load(i)), Slot::Empty))
        else {
            shard.hint.publish(&hint);
            return 0;
        };
        // odd: lock-free "absent" answers are not trusted until it is even
        shard.sweeps.fetch_add(1, Ordering::AcqRel);
        // The per-key quota (the caller's code) runs for every live key and
        // may panic after some keys were evicted: the guard closes the
        // holes, fixes `len` and makes `sweeps` even again however the loop
        // ends, so no key behind a hole is lost.
        let mut end = SweepEnd {
            table: self,
            shard,
            start,
            evicted: 0,
            hint,
            finished: false,
        };
        for i in 0..shard.slots.len() {
            let mut word = shard.load(i);
            while let Slot::Live(key, tat) = unpack(word) {
                // GCRA: idle (indistinguishable from fresh) iff TAT ≤ now,
                // in the units of the key's configuration
                let alg = self.algorithm(shard, K::from_word(key));
                if !alg.is_idle_at(tat, now) {
                    end.hint
                        .lower(now, alg.snapshot_of(tat, now).reset_after_nanos());
                    break;
                }
                // fails if a reader used the key since the load
                match shard.slots[i].compare_exchange(word, 0, Ordering::AcqRel, Ordering::Acquire)
                {
                    Ok(_) => {
                        end.evicted += 1;
                        break;
                    }
                    Err(current) => word = current,
                }
            }
        }
        end.finished = true;
        end.evicted
        // `end` drops here: holes closed, hint published, `sweeps` even
    }

    /// Moves every entry to the first free slot of its probe run, scanning
    /// once from `start`, a slot that was free before the sweep: no run
    /// crosses it, so an entry processed earlier never gets a hole behind
    /// it from a later move.
    fn close_holes(&self, shard: &Shard, start: usize) {
        let len = shard.slots.len();
        let mut i = start;
        for _ in 0..len {
            i = shard.next(i);
            let Slot::Live(key, _) = unpack(shard.load(i)) else {
                continue;
            };
            let home = shard.home(self.hasher.hash_one(K::from_word(key)));
            // the first empty slot from home, if it comes before i
            let mut j = home;
            while j != i && !matches!(unpack(shard.load(j)), Slot::Empty) {
                j = shard.next(j);
            }
            if j == i {
                continue;
            }
            // freeze i (readers fall back to the mutex), copy, free i
            let word = freeze(shard, i);
            shard.slots[j].store(word, Ordering::Release);
            shard.slots[i].store(0, Ordering::Release);
        }
    }
}

/// The end of a sweep, run when it returns or unwinds (a panicking per-key
/// quota): frees the evicted keys' count, closes the holes they left, and
/// makes the shard's `sweeps` counter even again. After a panic the hint
/// learnt so far is incomplete, so it is published reset ("worth sweeping
/// now"), keeping only the sweep's time.
struct SweepEnd<'a, K: WordKey, S: BuildHasher, Q: KeyQuota<K, Gcra>> {
    table: &'a LockFreeGcraTable<K, S, Q>,
    shard: &'a Shard,
    /// A slot free before any eviction (see `close_holes`).
    start: usize,
    evicted: usize,
    hint: SweepHint,
    /// The scan completed: the hint covers every key.
    finished: bool,
}

impl<K: WordKey, S: BuildHasher, Q: KeyQuota<K, Gcra>> Drop for SweepEnd<'_, K, S, Q> {
    fn drop(&mut self) {
        let shard = self.shard;
        if self.evicted > 0 {
            shard.len.fetch_sub(self.evicted as u64, Ordering::Relaxed);
            // runs no per-key quota: only the table's hasher, which
            // already hashed every key here when it was inserted
            self.table.close_holes(shard, self.start);
        }
        if !self.finished {
            self.hint.reset();
        }
        shard.hint.publish(&self.hint);
        shard.sweeps.fetch_add(1, Ordering::Release);
    }
}
