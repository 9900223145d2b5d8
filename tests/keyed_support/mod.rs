//! Helpers of the keyed-table suite: every behaviour is written once,
//! generic over [`KeyedTable<u64>`], and run on all three tables through
//! the makers here ([`sharded`], [`lock_free`], [`heapless`]) and the
//! [`every_table!`] macro. Nothing here forwards to a table: the tables'
//! own trait implementation is what is tested.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::RwLock;

use tollgate::keyed::{
    HeaplessKeyedTable, KeyQuota, KeyedTable, LockFreeGcraTable, OverflowPolicy, RandomSeed,
    ShardedKeyedTable,
};
use tollgate::{Gcra, Quota, Snapshot, Timestamp};

pub const MS: u64 = 1_000_000;
pub const SECOND: u64 = 1_000_000_000;

/// `ns` nanoseconds after the origin.
pub fn t(ns: u64) -> Timestamp {
    Timestamp::from_nanos(ns)
}

/// A token bucket of `permits` per second with `burst`.
pub fn per_second(permits: u32, burst: u32) -> Gcra {
    Gcra::token_bucket(
        Quota::per_second(permits)
            .and_then(|q| q.with_burst(burst))
            .expect("valid quota"),
    )
}

/// Per-key quotas that can change while a table runs: what a per-key
/// quota function reads. `None` for a key: it runs the table's default.
#[derive(Debug, Default)]
pub struct QuotaMap(RwLock<HashMap<u64, Gcra>>);

impl QuotaMap {
    /// A map for one table. Leaked (a few bytes per test): the heapless
    /// table's per-key function must be `Copy`, so it holds a `&'static`.
    pub fn leak(entries: impl IntoIterator<Item = (u64, Gcra)>) -> &'static Self {
        Box::leak(Box::new(Self(RwLock::new(entries.into_iter().collect()))))
    }

    pub fn get(&self, key: u64) -> Option<Gcra> {
        self.0.read().expect("quota map").get(&key).copied()
    }

    /// Gives `key` its own quota (`Some`) or the table's default (`None`).
    pub fn set(&self, key: u64, quota: Option<Gcra>) {
        let mut map = self.0.write().expect("quota map");
        match quota {
            Some(gcra) => map.insert(key, gcra),
            None => map.remove(&key),
        };
    }
}

/// The per-key quota function of every table of the suite (`Copy`, as
/// the heapless table needs).
#[derive(Debug, Clone, Copy, Default)]
pub enum Quotas {
    /// Every key runs the table's default.
    #[default]
    Default,
    /// Even keys run `even`, odd keys `odd` (every key has its own).
    Parity { even: Gcra, odd: Gcra },
    /// A function of the key (every key has its own).
    Fn(fn(&u64) -> Gcra),
    /// The keys in the map run their entry, the others the default.
    Map(&'static QuotaMap),
}

impl KeyQuota<u64, Gcra> for Quotas {
    fn algorithm_for(&self, key: &u64) -> Option<Gcra> {
        match *self {
            Self::Default => None,
            Self::Parity { even, odd } => Some(if key.is_multiple_of(2) { even } else { odd }),
            Self::Fn(f) => Some(f(key)),
            Self::Map(map) => map.get(*key),
        }
    }
}

/// What a behaviour asks of the table it runs on.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    pub default: Gcra,
    /// The number of keys; a heapless table takes the largest power of two
    /// not above it (its `N`, checked by [`heapless`]).
    pub max_keys: usize,
    /// Shards of a `std` table (`None`: its default). Default 1, so that
    /// `max_keys` is exact.
    pub shards: Option<usize>,
    pub overflow: OverflowPolicy,
    pub quotas: Quotas,
}

impl Spec {
    pub fn new(default: Gcra, max_keys: usize) -> Self {
        Self {
            default,
            max_keys,
            shards: Some(1),
            overflow: OverflowPolicy::SharedBucket,
            quotas: Quotas::Default,
        }
    }

    pub fn shards(self, shards: Option<usize>) -> Self {
        Self { shards, ..self }
    }

    pub fn overflow(self, overflow: OverflowPolicy) -> Self {
        Self { overflow, ..self }
    }

    pub fn quotas(self, quotas: Quotas) -> Self {
        Self { quotas, ..self }
    }
}

pub type Sharded = ShardedKeyedTable<u64, Gcra, RandomSeed, Quotas>;
pub type LockFree = LockFreeGcraTable<u64, RandomSeed, Quotas>;
pub type Heapless<const N: usize> = HeaplessKeyedTable<u64, Gcra, N, Quotas>;

/// The `std` sharded table for `spec`.
pub fn sharded(spec: Spec) -> Sharded {
    let mut builder = ShardedKeyedTable::builder(spec.default)
        .max_keys(spec.max_keys)
        .per_key(spec.quotas)
        .overflow(spec.overflow);
    if let Some(shards) = spec.shards {
        builder = builder.shards(shards);
    }
    builder.build().expect("valid sharded table")
}

/// The lock-free GCRA table for `spec`.
pub fn lock_free(spec: Spec) -> LockFree {
    let mut builder = LockFreeGcraTable::builder(spec.default)
        .max_keys(spec.max_keys)
        .per_key(spec.quotas)
        .overflow(spec.overflow);
    if let Some(shards) = spec.shards {
        builder = builder.shards(shards);
    }
    builder.build().expect("valid lock-free table")
}

/// The `no_std` heapless table for `spec`: `N` must be `spec.max_keys`
/// rounded down to a power of two.
pub fn heapless<const N: usize>(spec: Spec) -> Heapless<N> {
    assert!(
        N.is_power_of_two() && N <= spec.max_keys && spec.max_keys < 2 * N,
        "heapless::<{N}> for max_keys {}",
        spec.max_keys
    );
    HeaplessKeyedTable::builder(spec.default)
        .per_key(spec.quotas)
        .overflow(spec.overflow)
        .build()
}

/// Every tracked key's snapshot at `now`, sorted by key.
pub fn snapshots<T: KeyedTable<u64> + ?Sized>(table: &T, now: Timestamp) -> Vec<(u64, Snapshot)> {
    let mut out = Vec::new();
    table.for_each_snapshot(now, &mut |key, snapshot| out.push((*key, snapshot)));
    out.sort_by_key(|(key, _)| *key);
    out
}

/// Runs generic behaviours on every table: for each
/// `name: heapless N`, the tests `sharded::name`, `lock_free::name` and
/// `heapless::name` call `name(maker)`, with `heapless::<N>` as the
/// heapless maker.
#[allow(unused_macros)] // not every test file uses it
macro_rules! every_table {
    ($($name:ident: heapless $n:literal),* $(,)?) => {
        mod sharded {
            $(
                #[test]
                fn $name() {
                    super::$name($crate::keyed_support::sharded);
                }
            )*
        }
        mod lock_free {
            $(
                #[test]
                fn $name() {
                    super::$name($crate::keyed_support::lock_free);
                }
            )*
        }
        mod heapless {
            $(
                #[test]
                fn $name() {
                    super::$name($crate::keyed_support::heapless::<$n>);
                }
            )*
        }
    };
}
#[allow(unused_imports)]
pub(crate) use every_table;
