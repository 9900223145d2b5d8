//! Keyed (partitioned) limiters: one bucket per key in a table of fixed
//! capacity.
//!
//! A keyed limiter maps a key (client IP, API key, sensor id, CAN id, …) to
//! the state of its own limiter. Memory is fixed when the table is built and
//! never grows with traffic, so a flood of distinct keys (an attacker with an
//! IPv6 /64) cannot exhaust memory.
//!
//! | table | where | capacity | protection |
//! |---|---|---|---|
//! | [`HeaplessKeyedTable`] | `no_std`, no allocator | const generic `N` (power of two) | `critical-section` |
//! | [`LockFreeGcraTable`] | feature `std`, GCRA, keys of ≤ 64 bits ([`WordKey`]) | chosen at run time, allocated once | none on the check path: one 128-bit compare-and-swap per slot |
//! | [`ShardedKeyedTable`] | feature `std` | chosen at run time, allocated once | one `std::sync::RwLock` per shard (checks of tracked keys only read-lock) |
//!
//! They store only each key's *state* (8 bytes for a [`Gcra`](crate::Gcra)
//! bucket) and apply the key's [`Algorithm`] to it on every check, so
//! per-key quotas ([`KeyQuota`]) cost no memory.
//!
//! # One interface, one builder
//!
//! Every table is a [`Limiter<K>`](Limiter), the one limiter trait, with a
//! [`Grant`] as its permit; [`KeyedTable<K>`] adds what only a table has
//! (its size, eviction, reconfiguration). Keys are passed by reference
//! (`&K`), time as a [`Timestamp`], and each answer is a [`Grant`] or a
//! [`Refusal`] that names the [`KeyedPath`] that refused.
//! Code written against the trait takes any table; a
//! [`RateLimiter`](crate::RateLimiter) bundles a table with a
//! clock. Every table is built the same
//! way, `Table::builder(default_algorithm)` then the settings that apply
//! to it ([`TableBuilder`]):
//!
//! ```
//! use tollgate::keyed::{KeyedTable, OverflowPolicy, ShardedKeyedTable};
//! use tollgate::{Gcra, Limiter, Quota, Timestamp};
//!
//! let per_client = Gcra::token_bucket(Quota::per_second(5)?.with_burst(2)?);
//! let table = ShardedKeyedTable::builder(per_client)
//!     .max_keys(10_000)
//!     .overflow(OverflowPolicy::Deny)
//!     .build()?;
//!
//! let client: std::net::IpAddr = "192.0.2.7".parse()?;
//! let now = Timestamp::ZERO; // from your clock
//! assert!(table.try_acquire(&client, now).is_ok());
//! assert!(table.try_acquire(&client, now).is_ok());
//! assert!(table.try_acquire(&client, now).is_err());
//! assert_eq!(table.len(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Lossless eviction
//!
//! When a new key arrives and the table is full, the table first evicts
//! every key whose state is *idle* ([`Algorithm::is_idle`]: a bucket that
//! has refilled is indistinguishable from a fresh one). Dropping such a key
//! changes no future decision: if it comes back it gets a fresh state, which
//! is exactly what it had. Eviction is therefore invisible to callers.
//!
//! A key that is still throttled (its bucket not yet refilled) is **never**
//! evicted. If it were, an attacker could reset its own limit at will: send
//! requests under key `A` until refused, then send requests under fresh keys
//! `B`, `C`, … until the table has to make room, pushing `A` out; `A` comes
//! back with a full bucket. Key rotation would then defeat the limit. Keeping
//! throttled keys means a full table of busy keys refuses *new* keys through
//! the [`OverflowPolicy`] instead of forgetting old ones.
//!
//! Sweeping a full table costs one pass over it (one shard of the std
//! table); the table remembers the earliest time any tracked key can become
//! idle and skips the pass until then, so a flood of new keys against a
//! table of busy keys costs O(1) per request.
//!
//! # Overflow policy
//!
//! When a new key finds the table full of busy keys:
//!
//! - [`OverflowPolicy::SharedBucket`] (default): all such keys share one
//!   extra state running the table's default algorithm. Overflowing traffic
//!   as a whole is limited to one key's quota; a legitimate client may be
//!   refused because of an attacker's traffic, but nobody gets more than the
//!   quota through the overflow.
//! - [`OverflowPolicy::Deny`]: refuse the request (fail closed), with
//!   `retry_after` set to the earliest time a slot can free up.
//! - [`OverflowPolicy::Allow`]: treat the key as fresh and admit what a fresh
//!   key would get (fail open). Each overflowing request is judged alone, so
//!   this does not bound overflowing traffic: choose it only when refusing
//!   is worse than not limiting.
//!
//! Every refusal names the [`KeyedPath`] that produced it
//! ([`Refusal::path`]), so callers can log or count overflow refusals.
//!
//! # Choosing the capacity
//!
//! Size the table for the keys that can be **busy at once**: those seen within
//! one refill time (`burst × interval` for a token bucket, e.g. 10 s for
//! 10/s with burst 100). Keys that have refilled give their slot back on
//! demand. The sharded table spreads keys over shards by hash, each holding
//! `capacity / shards` keys (at most 4,095); size with ~15 % headroom so one
//! shard does not fill early.
//!
//! Memory (`ShardedKeyedTable`, `u64` key, GCRA state), allocated once at
//! construction: entries are stored inline in buckets of 4 (72 bytes), with
//! 10 % spare slots so probes stay short: **18 bytes per slot, 19.8 bytes per
//! key of capacity, 23.4 bytes per tracked key at 85 % occupancy** (measured by
//! a counting allocator in the bench; governor 0.10 measured in the same run:
//! 22-28 bytes per key, growing with traffic). For another key type, a slot
//! costs `size_of::<(K, GcraState)>() + 2` bytes, times 1.1. 100,000 IPv4
//! clients at 85 % ≈ 2.3 MB. `LockFreeGcraTable`: 16 bytes per slot with 25 %
//! spare slots, 20 bytes per key of capacity, 23.6 per tracked key at 85 %
//! (measured). The heapless table costs about
//! `N × (size_of::<(K, State)>() + 8)` bytes of static RAM.
//!
//! # Performance
//!
//! `cargo bench --bench keyed` measures tollgate and governor 0.10's default
//! keyed limiter (`RateLimiter::dashmap_with_clock`, a `DashMap` with SipHash)
//! on the same work in one run: a fake clock read on every check on both sides
//! (tollgate `ManualClock`, governor `FakeRelativeClock`, both advanced 1 ms
//! every 1,024 checks), quota 1,000,000/s with burst 1,000 (mostly
//! admissions), every key inserted before measuring, keys visited in a fixed
//! shuffled order (sorted order is also printed). This 2-core machine is
//! shared with other builds (load average 5-9 during the runs), so the figures
//! below are the **minimum over 41 interleaved rounds** of 200,000 checks
//! (tollgate and governor alternating), printed by the bench before the
//! criterion groups; single criterion medians on this machine swing by 2x and
//! are not quoted.
//!
//! | work | `LockFreeGcraTable` | `ShardedKeyedTable` | governor | ratio lock-free / governor | ratio sharded / governor |
//! |---|---|---|---|---|---|
//! | 1 hot key | 14.3-14.4 ns | 22.6-23.8 ns | 24.7-25.4 ns | 0.57-0.58 | 0.91-0.94 |
//! | 10,000 keys | 24.4-25.8 ns | 27.8-28.5 ns | 26.2-26.9 ns | 0.93-0.96 | 1.06 |
//! | 100,000 keys | 38.8-41.9 ns | 44.0-45.1 ns | 46.2-49.9 ns | 0.78-0.91 | 0.90-0.95 |
//! | 100,000 keys, 2 threads | 40.6-57.3 ns | 44.2-47.1 ns | 44.5-51.8 ns | 0.91-1.11 | 0.91-0.99 |
//!
//! (two runs of the 41-round summary; with keys in sorted order governor's map
//! gains locality and the 100,000-key ratios are 1.06-1.08 and 1.15-1.18.)
//!
//! | memory per tracked `u64` key (counting allocator) | 10,000 keys | 100,000 keys |
//! |---|---|---|
//! | `ShardedKeyedTable` (capacity at 85 % occupancy) | 23.5 B | 23.4 B |
//! | `LockFreeGcraTable` (capacity at 85 % occupancy) | 23.6 B | 23.6 B |
//! | governor (grows with traffic, shrinks only by `retain_recent`) | 28.0 B | 22.3 B |
//!
//! What the figures say:
//! - Memory: both std tables hold the issue's target (at most 24 bytes per
//!   tracked key), fixed up front; governor's map is about as dense once
//!   grown, but grows with every new key (an attacker's flood included).
//! - One hot key: the lock-free table's check is one hash, one 128-bit load
//!   and one 128-bit compare-and-swap, about 0.57x governor's (which takes a
//!   read lock, hashes with SipHash and swaps). The sharded table pays a read
//!   lock like governor.
//! - 10,000 and 100,000 keys: every implementation misses the cache once per
//!   check on a table of a few MB, and that latency dominates: 0.78-0.96x
//!   governor for the lock-free table, 0.90-1.06x for the sharded one. **The issue's target (at most 0.5x governor at 100,000 keys) is
//!   not met.** Reaching it would need less than one cache miss per check
//!   (a table that fits in L2, i.e. well under 10 bytes per key), which exact
//!   per-key state does not allow.
//! - The sharded table is the general one (any key, any limiter state); the
//!   lock-free table is the fast path for GCRA with word-sized keys.
//! - Under a flood of new keys against a table full of busy keys, each
//!   request is answered by the overflow policy without the write lock or any
//!   sweep: about 54 ns (sharded) and 44 ns (lock-free) per request at 100,000
//!   keys (`flood of new keys` line of the bench); memory does not move.
//!
//! # Changing quotas while running
//!
//! [`KeyedTable::reconfigure`] replaces the default algorithm of every
//! key that runs it (and of the shared overflow state), carrying what each
//! key has used over by an [`Inheritance`] rule;
//! [`KeyedTable::update_key_quota`] does the same for one key whose
//! per-key quota changes. See [`crate::live`].

use crate::limiter::{Algorithm, Grant, Inheritance, Limiter};
use crate::refusal::Refusal;
use crate::snapshot::Snapshot;
use crate::time::Timestamp;

mod builder;
mod hash;
mod heapless_table;
#[cfg(feature = "std")]
mod lock_free;
#[cfg(feature = "std")]
mod sharded;
mod sweep;

pub use builder::{DEFAULT_MAX_KEYS, TableBuilder};
pub use hash::RandomSeed;
pub use heapless_table::HeaplessKeyedTable;
#[cfg(feature = "std")]
pub use lock_free::{LockFreeGcraTable, WordKey};
#[cfg(feature = "std")]
pub use sharded::{MAX_KEYS, ShardedKeyedTable};
#[cfg(feature = "std")]
pub(crate) use sweep::AtomicSweepHint;
pub(crate) use sweep::SweepHint;

/// A table of fixed capacity with one limiter state per key: what every
/// keyed table implements beside [`Limiter<K>`](Limiter) (see the [module
/// documentation](self)). `Limiter<K>` is the hot half (acquire, refund,
/// snapshot, time until ready); this is the admin half (size, eviction,
/// reconfiguration).
///
/// Contract of the `Limiter<K>` half, per key: `n = 0` is a peek that
/// changes nothing and never inserts the key; `n` above the key's capacity
/// is refused [`never`](Refusal::is_never) and takes nothing; a refusal says
/// which [`KeyedPath`] answered; a [`Grant`]'s
/// [`full_at`](Grant::full_at) is when the state that admitted it is full
/// again.
pub trait KeyedTable<K: ?Sized>: Limiter<K, Permit = Grant> {
    /// The algorithm each key runs.
    type Algorithm: Algorithm;

    /// True if `key` currently has a slot.
    fn contains(&self, key: &K) -> bool;

    /// The number of tracked keys (a snapshot under concurrent use).
    fn len(&self) -> usize;

    /// True if no key is tracked.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most keys the table tracks.
    fn max_keys(&self) -> usize;

    /// What the table does with a new key when it is full.
    fn overflow_policy(&self) -> OverflowPolicy;

    /// The algorithm of every key without a per-key quota, and of the
    /// shared overflow state.
    fn default_algorithm(&self) -> Self::Algorithm;

    /// The overflow policy's shared state at `now`
    /// ([`OverflowPolicy::SharedBucket`]).
    fn shared_snapshot(&self, now: Timestamp) -> Snapshot;

    /// Calls `visit` with every tracked key and its snapshot at `now`
    /// (holding the table's lock for a part of it at a time: `visit` must
    /// not call into this table). Allocates nothing.
    fn for_each_snapshot(&self, now: Timestamp, visit: &mut dyn FnMut(&K, Snapshot));

    /// Evicts every key whose state is idle at `now` (lossless: no future
    /// decision changes) and returns how many were evicted.
    fn evict_refilled(&self, now: Timestamp) -> usize;

    /// Runs `next` as the default algorithm from `now` on: every tracked
    /// key that runs the default (no per-key quota) and the shared overflow
    /// state carry what they have used over by `how`. Checks during the
    /// change are decided entirely before or entirely after it.
    fn reconfigure(&self, next: Self::Algorithm, how: Inheritance, now: Timestamp);

    /// Changes one key's quota: `update` is called while the key's slot is
    /// locked against checks, and must make the table's per-key quota
    /// function return the key's new algorithm (for example by writing the
    /// shared map that function reads). The key's state, if tracked, then
    /// carries over from its old algorithm to its new one by `how`.
    /// `update` must not call into this table, and should change the answer
    /// for this key only (other tracked keys would switch algorithm without
    /// a carry-over).
    fn update_key_quota(&self, key: &K, how: Inheritance, now: Timestamp, update: &mut dyn FnMut());
}

/// The two `Limiter<K>` methods every table writes the same way, over its
/// own `check_until_full` (its check, answering the instant the key's state
/// is full again) and `refund`.
macro_rules! grant_methods {
    () => {
        #[inline(always)]
        fn try_acquire_n(
            &self,
            key: &K,
            n: u32,
            now: Timestamp,
        ) -> Result<Grant, Refusal<'static>> {
            self.check_until_full(key, n, now)
                .map(|full_at| Grant::new(n, full_at))
        }

        #[inline]
        fn cancel(&self, key: &K, grant: Grant, now: Timestamp) {
            self.refund(key, grant.permits(), now);
        }

        /// The default algorithm's finest step (a per-key quota function
        /// cannot be checked ahead of time).
        fn required_resolution(&self) -> core::time::Duration {
            crate::limiter::Algorithm::required_resolution(
                &<Self as KeyedTable<K>>::default_algorithm(self),
            )
        }
    };
}
use grant_methods;

/// A table behind a reference or an `Arc` is the same table: share one
/// `Arc<ShardedKeyedTable<..>>` between a partitioned limiter's policy and
/// direct use (introspection, a sweep task, a check of your own), and both
/// see the same keys.
macro_rules! forward_table {
    ($($ptr:ty),*) => {$(
        impl<K: ?Sized, T: KeyedTable<K> + ?Sized> KeyedTable<K> for $ptr {
            type Algorithm = T::Algorithm;
            fn contains(&self, key: &K) -> bool {
                (**self).contains(key)
            }
            fn len(&self) -> usize {
                (**self).len()
            }
            fn is_empty(&self) -> bool {
                (**self).is_empty()
            }
            fn max_keys(&self) -> usize {
                (**self).max_keys()
            }
            fn overflow_policy(&self) -> OverflowPolicy {
                (**self).overflow_policy()
            }
            fn default_algorithm(&self) -> Self::Algorithm {
                (**self).default_algorithm()
            }
            fn shared_snapshot(&self, now: Timestamp) -> Snapshot {
                (**self).shared_snapshot(now)
            }
            fn for_each_snapshot(&self, now: Timestamp, visit: &mut dyn FnMut(&K, Snapshot)) {
                (**self).for_each_snapshot(now, visit);
            }
            fn evict_refilled(&self, now: Timestamp) -> usize {
                (**self).evict_refilled(now)
            }
            fn reconfigure(&self, next: Self::Algorithm, how: Inheritance, now: Timestamp) {
                (**self).reconfigure(next, how, now);
            }
            fn update_key_quota(&self, key: &K, how: Inheritance, now: Timestamp, update: &mut dyn FnMut()) {
                (**self).update_key_quota(key, how, now, update);
            }
        }
    )*};
}

forward_table!(&T);
#[cfg(feature = "std")]
forward_table!(std::sync::Arc<T>);

/// What a keyed table does with a new key when it is full and no tracked key
/// can be evicted losslessly. See the [module docs](self) for the reasoning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum OverflowPolicy {
    /// Keys without a slot share one state running the default algorithm.
    #[default]
    SharedBucket,
    /// Refuse keys without a slot (fail closed).
    Deny,
    /// Admit keys without a slot as if they were fresh (fail open).
    Allow,
}

/// Which state answered: defined beside the [`Refusal`]
/// that reports it.
pub use crate::refusal::KeyedPath;

/// Gives each key its algorithm (its quota): the per-key quota function.
///
/// Implemented by `()` (no per-key quota: every key uses the table's
/// default; the tables' default `Q`) and by
/// every closure or `fn` `Fn(&K) -> A`. The function is called on every
/// check of the key and must be deterministic (the same key always gets the
/// same algorithm), cheap, and must not call into the same table.
pub trait KeyQuota<K: ?Sized, A> {
    /// The algorithm for `key`, or `None` for the table's default.
    fn algorithm_for(&self, key: &K) -> Option<A>;
}

impl<K: ?Sized, A> KeyQuota<K, A> for () {
    #[inline(always)]
    fn algorithm_for(&self, _key: &K) -> Option<A> {
        None
    }
}

impl<K: ?Sized, A, F: Fn(&K) -> A> KeyQuota<K, A> for F {
    #[inline]
    fn algorithm_for(&self, key: &K) -> Option<A> {
        Some(self(key))
    }
}

/// Runs `f` with the key's algorithm (per-key or the default).
#[inline(always)]
pub(crate) fn with_algorithm<K: ?Sized, A, Q: KeyQuota<K, A>, R>(
    quota: &Q,
    default: &A,
    key: &K,
    f: impl FnOnce(&A) -> R,
) -> R {
    match quota.algorithm_for(key) {
        Some(alg) => f(&alg),
        None => f(default),
    }
}

/// Checks a state and records when it will be idle.
#[inline(always)]
pub(crate) fn check_tracked<A: Algorithm>(
    alg: &A,
    state: &A::State,
    n: u32,
    now: Timestamp,
    hint: &mut SweepHint,
) -> Result<Timestamp, Refusal<'static>> {
    let verdict = alg.check_n(state, n, now);
    hint.lower(now.as_nanos(), reset_after(&verdict, now));
    verdict
}

/// The time from `now` until the state a verdict came from is full again.
#[inline(always)]
pub(crate) fn reset_after(verdict: &Result<Timestamp, Refusal<'_>>, now: Timestamp) -> u64 {
    match verdict {
        Ok(full_at) => full_at.as_nanos().saturating_sub(now.as_nanos()),
        Err(refusal) => refusal.snapshot().reset_after_nanos(),
    }
}

/// The refusal a table gives when it cannot answer (a per-key quota
/// function that called into its own table).
#[cold]
#[inline(never)]
pub(crate) fn refusal() -> Result<Timestamp, Refusal<'static>> {
    Err(Refusal::from_nanos(
        u64::MAX,
        Snapshot::from_nanos(0, 0, u64::MAX),
    ))
}

/// The answer for a key that found the table full of busy keys.
/// `wait` is the time until a slot may free up.
pub(crate) fn overflow<A: Algorithm>(
    policy: OverflowPolicy,
    alg: &A,
    default: &A,
    shared: &A::State,
    n: u32,
    now: Timestamp,
    wait: u64,
) -> Result<Timestamp, Refusal<'static>> {
    // a slot frees up with time, or (an in-flight table) at a release
    let until_slot = |refusal: Refusal<'static>| {
        if alg.frees_on_release() {
            refusal.until_release()
        } else {
            refusal
        }
    };
    match policy {
        OverflowPolicy::SharedBucket => match default.check_n(shared, n, now) {
            Ok(full_at) => Ok(full_at),
            Err(refusal) if !refusal.is_never() => Err(refusal.on_path(KeyedPath::SharedOverflow)),
            // The key's own quota allows `n` but the default does not:
            // the shared bucket can never grant it, a slot might.
            Err(_) => Err(until_slot(
                Refusal::from_nanos(wait, default.snapshot(shared, now))
                    .on_path(KeyedPath::SharedOverflow),
            )),
        },
        OverflowPolicy::Deny => {
            let snapshot = Snapshot::from_nanos(alg.capacity(), 0, wait);
            Err(until_slot(
                Refusal::from_nanos(wait, snapshot).on_path(KeyedPath::OverflowDenied),
            ))
        }
        OverflowPolicy::Allow => alg
            .check_n(&alg.new_state(), n, now)
            .map_err(|r| r.on_path(KeyedPath::OverflowAllowed)),
    }
}

/// The refusal of `n` permits that `alg` can never grant.
#[cold]
#[inline(never)]
pub(crate) fn exceeded<A: Algorithm>(alg: &A, n: u32) -> Refusal<'static> {
    Refusal::above(n, alg.capacity())
}

/// The answer for a peek (`n = 0`) or capacity check of an untracked key.
pub(crate) fn untracked_peek<A: Algorithm>(
    alg: &A,
    now: Timestamp,
) -> Result<Timestamp, Refusal<'static>> {
    alg.check_n(&alg.new_state(), 0, now)
}
