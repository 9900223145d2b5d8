//! [`TableBuilder`]: the one way every keyed table is configured.

use core::fmt;
use core::hash::BuildHasher;
use core::marker::PhantomData;

use super::OverflowPolicy;

/// Configures a keyed table: `Table::builder(default_algorithm)`, then the
/// settings, then `build()`. The same shape for every table; the settings
/// that do not apply to a table are not offered on it:
///
/// | setting | [`ShardedKeyedTable`](super::ShardedKeyedTable) | [`LockFreeGcraTable`](super::LockFreeGcraTable) | [`HeaplessKeyedTable`](super::HeaplessKeyedTable) |
/// |---|---|---|---|
/// | [`overflow`](Self::overflow) | yes | yes | yes |
/// | [`per_key`](Self::per_key) | yes | yes | yes |
/// | [`max_keys`](Self::max_keys) | yes (default 10,000) | yes (default 10,000) | the type's `N` |
/// | [`shards`](Self::shards) | yes | yes | — |
/// | [`hasher`](Self::hasher) | yes (default [`RandomSeed`](super::RandomSeed)) | yes | — (heapless' built-in FNV: the builder's `S` is `()`) |
/// | `build()` | `Result` (allocates once) | `Result` (allocates once) | `const`, infallible (a `static`) |
///
/// A heapless table's settings are `const` (for a `static` table), so its
/// algorithm and per-key quota function must be `Copy` (a `fn` pointer, or
/// a closure that captures only `Copy` values).
///
/// ```
/// use tollgate::keyed::{HeaplessKeyedTable, OverflowPolicy};
/// use tollgate::{valid, Gcra, Limiter, Quota, Timestamp};
///
/// // A `static` table of 64 CAN ids, refusing ids beyond the 64th.
/// static PER_ID: HeaplessKeyedTable<u16, Gcra, 64> =
///     HeaplessKeyedTable::builder(Gcra::token_bucket(valid!(Quota::per_second(10))))
///         .overflow(OverflowPolicy::Deny)
///         .build();
/// assert!(PER_ID.try_acquire(&0x101, Timestamp::ZERO).is_ok());
/// ```
#[must_use]
pub struct TableBuilder<T, A, S, Q = ()> {
    pub(super) default: A,
    pub(super) max_keys: usize,
    pub(super) shards: Option<usize>,
    pub(super) overflow: OverflowPolicy,
    pub(super) hasher: S,
    pub(super) per_key: Q,
    pub(super) table: PhantomData<fn() -> T>,
}

impl<T, A: fmt::Debug, S, Q> fmt::Debug for TableBuilder<T, A, S, Q> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TableBuilder")
            .field("table", &core::any::type_name::<T>())
            .field("default", &self.default)
            .field("max_keys", &self.max_keys)
            .field("shards", &self.shards)
            .field("overflow", &self.overflow)
            .finish_non_exhaustive()
    }
}

/// Default number of keys of a table whose capacity is chosen at run time.
pub const DEFAULT_MAX_KEYS: usize = 10_000;

impl<T, A, S> TableBuilder<T, A, S, ()> {
    pub(super) const fn new(default: A, max_keys: usize, hasher: S) -> Self {
        Self {
            default,
            max_keys,
            shards: None,
            overflow: OverflowPolicy::SharedBucket,
            hasher,
            per_key: (),
            table: PhantomData,
        }
    }
}

impl<T: RuntimeSized, A, S: BuildHasher> TableBuilder<T, A, S, ()> {
    /// A per-key quota: each key's algorithm (see [`KeyQuota`](super::KeyQuota)),
    /// for example a closure `|key: &K| -> Option<A>`-like function. The
    /// default algorithm still runs the keys it returns nothing for, and
    /// the shared overflow state.
    pub fn per_key<Q>(self, quota: Q) -> TableBuilder<T, A, S, Q> {
        TableBuilder {
            default: self.default,
            max_keys: self.max_keys,
            shards: self.shards,
            overflow: self.overflow,
            hasher: self.hasher,
            per_key: quota,
            table: PhantomData,
        }
    }
}

impl<T: RuntimeSized, A, S: BuildHasher, Q> TableBuilder<T, A, S, Q> {
    /// What to do with a new key when the table is full of busy keys
    /// (default [`OverflowPolicy::SharedBucket`]).
    pub fn overflow(mut self, policy: OverflowPolicy) -> Self {
        self.overflow = policy;
        self
    }
}

/// Tables whose capacity, shards and hasher are chosen at run time.
pub trait RuntimeSized {}

impl<T: RuntimeSized, A, S, Q> TableBuilder<T, A, S, Q> {
    /// How many keys to track at most (default [`DEFAULT_MAX_KEYS`]). The
    /// table may round it up to a multiple of the shard count.
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// The number of shards (a power of two). The default is four per CPU,
    /// fewer for small tables, more if needed to keep shards at most 4,095
    /// keys.
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = Some(shards);
        self
    }

    /// The hasher (default [`RandomSeed::new`](super::RandomSeed::new), a
    /// fresh random seed per table). Keep a seeded hasher for keys an
    /// attacker can choose.
    pub fn hasher<S2: BuildHasher>(self, hasher: S2) -> TableBuilder<T, A, S2, Q> {
        TableBuilder {
            default: self.default,
            max_keys: self.max_keys,
            shards: self.shards,
            overflow: self.overflow,
            hasher,
            per_key: self.per_key,
            table: PhantomData,
        }
    }
}
