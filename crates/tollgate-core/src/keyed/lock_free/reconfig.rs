//! Reconfiguration of a shard's slots: freezing the slots of the keys whose
//! configuration changes, and storing each one's carried-over TAT.

use core::hash::BuildHasher;
use std::vec::Vec;

use super::shard::{Shard, Slot, freeze, pack, unpack};
use super::{LockFreeGcraTable, WordKey};
use crate::gcra::Gcra;
use crate::keyed::KeyQuota;
use crate::sync::Ordering;

impl<K: WordKey, S: BuildHasher, Q: KeyQuota<K, Gcra>> LockFreeGcraTable<K, S, Q> {
    /// Converts the slots whose key `select` picks (caller holds the
    /// shard's mutex): with the shard's `reconfig` counter odd, freezes
    /// them, runs `change` (the configuration or per-key quota changes),
    /// then stores each slot's carried-over TAT, `carry(key, tat)`.
    pub(super) fn convert(
        &self,
        shard: &Shard,
        select: impl Fn(K) -> bool,
        change: impl FnOnce(),
        carry: impl Fn(K, u64) -> u64,
    ) {
        shard.reconfig.fetch_add(1, Ordering::AcqRel); // odd
        // `select`, `change` and `carry` may run the caller's code (per-key
        // quotas, the update): if one panics, the guard unfreezes the slots
        // not yet converted (with the TAT they had) and makes the counter
        // even again, so no key stays frozen out of the lock-free path.
        let mut end = ConvertEnd {
            shard,
            frozen: Vec::new(),
            stored: 0,
        };
        for i in 0..shard.slots.len() {
            if let Slot::Live(key, _) = unpack(shard.load(i))
                && select(K::from_word(key))
            {
                // the TAT as it is when frozen (readers may move it
                // until then)
                let word = freeze(shard, i);
                if let Slot::Live(key, tat) = unpack(word) {
                    end.frozen.push((i, key, tat));
                }
            }
        }
        change();
        while let Some(&(i, key, tat)) = end.frozen.get(end.stored) {
            let carried = carry(K::from_word(key), tat);
            shard.slots[i].store(pack(key, carried), Ordering::Release);
            end.stored += 1;
        }
        // `end` drops here: the counter is even again
    }
}

/// The end of a conversion, run when it returns or unwinds: slots frozen
/// but not yet stored get the word they had back (after a panic; the
/// shard's hint is reset too, the configuration may have changed), then
/// the shard's `reconfig` counter is made even.
struct ConvertEnd<'a> {
    shard: &'a Shard,
    /// The frozen slots: index, key word, TAT when frozen.
    frozen: Vec<(usize, u64, u64)>,
    /// How many of `frozen` hold their converted TAT.
    stored: usize,
}

impl Drop for ConvertEnd<'_> {
    fn drop(&mut self) {
        let rest = self.frozen.get(self.stored..).unwrap_or_default();
        for &(i, key, tat) in rest {
            self.shard.slots[i].store(pack(key, tat), Ordering::Release);
        }
        if std::thread::panicking() {
            self.shard.hint.reset();
        }
        self.shard.reconfig.fetch_add(1, Ordering::Release); // even
    }
}
