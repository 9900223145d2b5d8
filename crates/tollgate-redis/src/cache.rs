//! The local refusal cache: load shedding in front of the store.
//!
//! Once the store refuses a key with `retry_after = R`, the same request
//! cannot succeed before `R` has passed (other requests only push the
//! bucket further; only a refund could bring it back earlier). The cache
//! remembers that and refuses the key locally until then, so a client
//! hammering one key costs one store round trip per `R`, not one per
//! request.
//!
//! Memory is fixed at construction: a direct-mapped array of `capacity`
//! slots (rounded up to a power of two), each holding a 64-bit keyed hash
//! of the key, the refused weight and the deadline. A new refusal
//! overwrites whatever shared its slot (losing an entry only costs a round
//! trip). The hash is SipHash with a per-process random key, so a client
//! cannot craft keys that collide with another client's on purpose; an
//! accidental 64-bit collision would refuse an unrelated key for at most
//! one `retry_after`.

use std::boxed::Box;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Mutex, PoisonError};
use std::vec::Vec;

use tollgate_core::refusal::Refusal;

#[derive(Clone, Copy)]
struct Slot {
    hash: u64,
    /// The smallest weight refused; lighter requests still ask the store.
    weight: u32,
    /// Local monotonic nanoseconds until which the refusal holds; 0 = empty.
    until: u64,
    denied: Refusal<'static>,
}

/// A bounded map from key to "refused until".
pub(crate) struct RefusalCache {
    slots: Box<[Mutex<Option<Slot>>]>,
    mask: u64,
    hasher: RandomState,
}

impl core::fmt::Debug for RefusalCache {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RefusalCache")
            .field("capacity", &self.slots.len())
            .finish_non_exhaustive()
    }
}

impl RefusalCache {
    /// A cache of `capacity` slots, rounded up to a power of two (at least 1,
    /// at most 2^20).
    pub(crate) fn new(capacity: usize) -> Self {
        let capacity = capacity.clamp(1, 1 << 20).next_power_of_two();
        let slots: Vec<Mutex<Option<Slot>>> = (0..capacity).map(|_| Mutex::new(None)).collect();
        Self {
            slots: slots.into_boxed_slice(),
            mask: (capacity as u64) - 1,
            hasher: RandomState::new(),
        }
    }

    /// The number of slots.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }

    fn slot(&self, hash: u64) -> &Mutex<Option<Slot>> {
        // mask < slots.len(), so the index is in range; `get` keeps it panic-free
        let index = usize::try_from(hash & self.mask).unwrap_or(0);
        &self.slots[index.min(self.slots.len() - 1)]
    }

    /// A refusal for `n` permits of `key` at local time `now`, if one is
    /// cached and still holds; its `retry_after` is the time left.
    pub(crate) fn lookup(&self, key: &[u8], n: u32, now: u64) -> Option<Refusal<'static>> {
        let hash = self.hasher.hash_one(key);
        let mut guard = self
            .slot(hash)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let slot = (*guard)?;
        if slot.hash != hash {
            return None;
        }
        if now >= slot.until {
            *guard = None; // expired: free the slot
            return None;
        }
        if n < slot.weight {
            return None;
        }
        Some(Refusal::from_nanos(
            slot.until - now,
            *slot.denied.snapshot(),
        ))
    }

    /// Remembers that `n` permits of `key` were refused at local time `now`.
    pub(crate) fn insert(&self, key: &[u8], n: u32, denied: Refusal<'static>, now: u64) {
        let until = now.saturating_add(denied.retry_after_nanos());
        if until <= now {
            return;
        }
        let hash = self.hasher.hash_one(key);
        let mut guard = self
            .slot(hash)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *guard = Some(Slot {
            hash,
            weight: n,
            until,
            denied,
        });
    }

    /// Forgets `key` (after a refund, which can make it admissible early).
    pub(crate) fn forget(&self, key: &[u8]) {
        let hash = self.hasher.hash_one(key);
        let mut guard = self
            .slot(hash)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if guard.is_some_and(|s| s.hash == hash) {
            *guard = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tollgate_core::snapshot::Snapshot;

    fn denied(retry: u64) -> Refusal<'static> {
        Refusal::from_nanos(retry, Snapshot::from_nanos(5, 0, retry))
    }

    #[test]
    fn refusal_holds_until_retry_after_then_expires() {
        let cache = RefusalCache::new(8);
        cache.insert(b"k", 1, denied(100), 1_000);
        let hit = cache.lookup(b"k", 1, 1_040).expect("cached refusal");
        assert_eq!(hit.retry_after_nanos(), 60);
        assert_eq!(hit.limit(), 5);
        assert!(cache.lookup(b"k", 1, 1_100).is_none());
        assert!(cache.lookup(b"other", 1, 1_040).is_none());
    }

    #[test]
    fn lighter_requests_and_forgotten_keys_pass_through() {
        let cache = RefusalCache::new(8);
        cache.insert(b"k", 3, denied(100), 0);
        assert!(cache.lookup(b"k", 2, 10).is_none());
        assert!(cache.lookup(b"k", 3, 10).is_some());
        assert!(cache.lookup(b"k", 4, 10).is_some());
        cache.forget(b"k");
        assert!(cache.lookup(b"k", 3, 10).is_none());
    }

    #[test]
    fn capacity_is_fixed_however_many_keys_are_refused() {
        let cache = RefusalCache::new(100);
        assert_eq!(cache.capacity(), 128);
        for i in 0u32..10_000 {
            cache.insert(&i.to_le_bytes(), 1, denied(1_000_000), 0);
        }
        assert_eq!(cache.capacity(), 128);
        let held = (0u32..10_000)
            .filter(|i| cache.lookup(&i.to_le_bytes(), 1, 1).is_some())
            .count();
        assert!(held <= 128 && held > 0, "held {held}");
    }
}
