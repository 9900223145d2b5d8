//! Driving the keyed tables in loom models (only under `cfg(loom)`).
//!
//! The keyed models run one vocabulary of operations ([`KeyedOp`]) against
//! any table behind the [`KeyedTable`] trait, with keys hashed by
//! [`IdentityHash`] so that every small key has the same home slot: probe
//! runs, displaced entries and the moves that close holes after an
//! eviction all happen with two or three keys.
//!
//! What a key may get is decided by the GCRA reference model
//! ([`SpecBucket`]) run over that key's checks alone: eviction is lossless
//! (an idle bucket is indistinguishable from a fresh one), so a table must
//! never admit a key more than some sequential order of its own checks on
//! one bucket admits ([`most_admitted_alone`]), and a key that is never
//! evicted must behave exactly like such a bucket ([`one_state_runs`]).

use std::collections::HashSet;
use std::hash::{BuildHasher, Hasher};

use loom::sync::Arc;
use tollgate::keyed::{
    self, HeaplessKeyedTable, KeyedPath, LockFreeGcraTable, OverflowPolicy, ShardedKeyedTable,
};
use tollgate::live::Inheritance;
use tollgate::{Gcra, Limiter, Refusal, Snapshot, Timestamp};

use crate::ops::{Op, Outcome};
use crate::orders::{interleavings, sequential_outcomes};
use crate::spec::SpecBucket;
use crate::t;

/// Hashes a `u64` key to itself. A table's home slot comes from the low
/// 32 bits scaled by the slot count, so every key below `2^32 / slots`
/// has home 0 and each new key is placed one further along the probe run.
#[derive(Debug, Clone, Copy, Default)]
pub struct IdentityHash;

/// The hasher of [`IdentityHash`].
#[derive(Debug, Clone, Copy, Default)]
pub struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }

    fn write_u64(&mut self, word: u64) {
        self.0 = word;
    }
}

impl BuildHasher for IdentityHash {
    type Hasher = IdentityHasher;

    fn build_hasher(&self) -> IdentityHasher {
        IdentityHasher(0)
    }
}

/// The operations of a keyed table the models race, with `u64` keys and
/// clock readings in nanoseconds: every table through its
/// [`Limiter`] (checks, snapshots) and [`keyed::KeyedTable`] (admin)
/// implementations.
pub trait KeyedTable: Send + Sync + 'static {
    /// `check_n(key, n, now)`: on an admission, the instant the state that
    /// admitted it is full again.
    ///
    /// # Errors
    /// The [`Refusal`], naming the [`KeyedPath`] that refused (one that
    /// [`is_never`](Refusal::is_never) if `n` can never be granted).
    fn check_n(&self, key: u64, n: u32, now: u64) -> Result<Timestamp, Refusal<'static>>;
    /// `evict_refilled(now)`: how many keys were evicted.
    fn evict_refilled(&self, now: u64) -> usize;
    /// The number of tracked keys.
    fn len(&self) -> usize;
    /// True if no key is tracked.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// True if `key` has a slot.
    fn contains(&self, key: u64) -> bool;
    /// `key`'s snapshot at `now`.
    fn snapshot(&self, key: u64, now: u64) -> Snapshot;
    /// The shared overflow bucket's snapshot at `now`.
    fn shared_snapshot(&self, now: u64) -> Snapshot;
    /// `reconfigure(next, how, now)`: every key on the default algorithm
    /// (and the shared overflow state) switches to `next`.
    fn reconfigure(&self, next: Gcra, how: Inheritance, now: u64);
}

impl<T> KeyedTable for T
where
    T: keyed::KeyedTable<u64, Algorithm = Gcra> + Send + Sync + 'static,
{
    fn check_n(&self, key: u64, n: u32, now: u64) -> Result<Timestamp, Refusal<'static>> {
        Limiter::try_acquire_n(self, &key, n, t(now)).map(|grant| grant.full_at())
    }
    fn evict_refilled(&self, now: u64) -> usize {
        keyed::KeyedTable::evict_refilled(self, t(now))
    }
    fn len(&self) -> usize {
        keyed::KeyedTable::len(self)
    }
    fn contains(&self, key: u64) -> bool {
        keyed::KeyedTable::contains(self, &key)
    }
    fn snapshot(&self, key: u64, now: u64) -> Snapshot {
        Limiter::snapshot(self, &key, t(now))
    }
    fn shared_snapshot(&self, now: u64) -> Snapshot {
        keyed::KeyedTable::shared_snapshot(self, t(now))
    }
    fn reconfigure(&self, next: Gcra, how: Inheritance, now: u64) {
        keyed::KeyedTable::reconfigure(self, next, how, t(now));
    }
}

/// The sharded table as the models build it.
pub type Sharded = ShardedKeyedTable<u64, Gcra, IdentityHash>;
/// The lock-free table as the models build it.
pub type LockFree = LockFreeGcraTable<u64, IdentityHash>;
/// The `no_std` table as the models build it (2 keys).
pub type Heapless = HeaplessKeyedTable<u64, Gcra, 2>;

/// A sharded table of `capacity` keys in one shard.
///
/// # Panics
/// If the table cannot be built.
#[must_use]
pub fn sharded(gcra: Gcra, capacity: usize, policy: OverflowPolicy) -> Sharded {
    ShardedKeyedTable::builder(gcra)
        .max_keys(capacity)
        .shards(1)
        .overflow(policy)
        .hasher(IdentityHash)
        .build()
        .expect("valid sharded table")
}

/// A lock-free table of `capacity` keys in one shard (`capacity` + 25 %
/// slots, at least 2).
///
/// # Panics
/// If the table cannot be built.
#[must_use]
pub fn lock_free(gcra: Gcra, capacity: usize, policy: OverflowPolicy) -> LockFree {
    LockFreeGcraTable::builder(gcra)
        .max_keys(capacity)
        .shards(1)
        .overflow(policy)
        .hasher(IdentityHash)
        .build()
        .expect("valid lock-free table")
}

/// A `no_std` table of 2 keys (its capacity is the const `N`).
#[must_use]
pub fn heapless(gcra: Gcra, _capacity: usize, policy: OverflowPolicy) -> Heapless {
    HeaplessKeyedTable::builder(gcra).overflow(policy).build()
}

/// One operation of a thread on a keyed table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyedOp {
    /// `check_n(key, n, now)`.
    Check {
        /// The key.
        key: u64,
        /// Permits requested.
        n: u32,
        /// The caller's clock reading.
        now: u64,
    },
    /// `evict_refilled(now)`.
    Evict {
        /// The caller's clock reading.
        now: u64,
    },
    /// `reconfigure(next, how, now)`.
    Reconfigure {
        /// The new default algorithm.
        next: Gcra,
        /// What every key carries over.
        how: Inheritance,
        /// The caller's clock reading.
        now: u64,
    },
}

impl KeyedOp {
    /// One permit for `key` at `now`.
    #[must_use]
    pub const fn check(key: u64, now: u64) -> Self {
        Self::Check { key, n: 1, now }
    }

    /// The operation's `now`.
    #[must_use]
    pub const fn now(&self) -> u64 {
        match *self {
            Self::Check { now, .. } | Self::Evict { now } | Self::Reconfigure { now, .. } => now,
        }
    }
}

/// What a [`KeyedOp`] returned.
///
/// A table reports the [`KeyedPath`] of a refusal only: an admission does
/// not say which state admitted it (the key's own slot, the shared overflow
/// bucket, or a fresh state under [`OverflowPolicy::Allow`]). What it does
/// say is when that state is full again (`full_at`); the models check the
/// path of admissions through what is observable afterwards (whether the
/// key is tracked, the table's length, the shared overflow state's
/// snapshot) and through `full_at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyedOutcome {
    /// A check was admitted; the state that admitted it is full again at
    /// `full_at` (ns).
    Admitted {
        /// When the admitting state is full again, in nanoseconds.
        full_at: u64,
    },
    /// A check was refused by `path`; the same request would succeed
    /// after `retry_after` ns.
    Refused {
        /// Which state (or overflow policy) refused.
        path: KeyedPath,
        /// The refusal's exact wait in nanoseconds.
        retry_after: u64,
    },
    /// A check whose `n` can never be granted.
    Exceeded,
    /// `evict_refilled` evicted this many keys.
    Evicted(usize),
    /// `reconfigure` was made.
    Reconfigured,
}

/// What one check observed, as the models compare it with the reference
/// model: its [`Outcome`] and, for an admission, when the admitting state
/// is full again (ns; `None` for a refusal, or where it is not compared).
pub type Seen = (Outcome, Option<u64>);

impl KeyedOutcome {
    /// True if a check was admitted (through any path).
    #[must_use]
    pub const fn is_allowed(&self) -> bool {
        matches!(self, Self::Admitted { .. })
    }

    /// The path that refused a check (`None` for an admission, which does
    /// not report its path, and for any other operation).
    #[must_use]
    pub const fn refused_by(&self) -> Option<KeyedPath> {
        match self {
            Self::Refused { path, .. } => Some(*path),
            _ => None,
        }
    }

    /// A check's [`Outcome`] (`None` for an eviction or reconfiguration).
    #[must_use]
    pub const fn outcome(&self) -> Option<Outcome> {
        match *self {
            Self::Admitted { .. } => Some(Outcome::Allowed),
            Self::Refused { retry_after, .. } => Some(Outcome::Denied { retry_after }),
            Self::Exceeded => Some(Outcome::Exceeded),
            Self::Evicted(_) | Self::Reconfigured => None,
        }
    }

    /// A check's [`Seen`]: its outcome and an admission's `full_at`.
    #[must_use]
    pub const fn seen(&self) -> Option<Seen> {
        match *self {
            Self::Admitted { full_at } => Some((Outcome::Allowed, Some(full_at))),
            Self::Refused { retry_after, .. } => Some((Outcome::Denied { retry_after }, None)),
            Self::Exceeded => Some((Outcome::Exceeded, None)),
            Self::Evicted(_) | Self::Reconfigured => None,
        }
    }
}

/// Runs `op` on `table`.
pub fn apply<T: KeyedTable + ?Sized>(table: &T, op: KeyedOp) -> KeyedOutcome {
    match op {
        KeyedOp::Check { key, n, now } => match table.check_n(key, n, now) {
            Ok(full_at) => KeyedOutcome::Admitted {
                full_at: full_at.as_nanos(),
            },
            Err(refusal) if refusal.is_never() => KeyedOutcome::Exceeded,
            Err(refusal) => KeyedOutcome::Refused {
                path: refusal.path(),
                retry_after: refusal.retry_after_nanos(),
            },
        },
        KeyedOp::Evict { now } => KeyedOutcome::Evicted(table.evict_refilled(now)),
        KeyedOp::Reconfigure { next, how, now } => {
            table.reconfigure(next, how, now);
            KeyedOutcome::Reconfigured
        }
    }
}

/// Inside a model: runs `setup` sequentially on `table` (every check must
/// be admitted), then `threads` concurrently (all but the last on spawned
/// loom threads, the last on the model's main thread). Returns each
/// thread's outcomes.
///
/// # Panics
/// If a setup check is refused or a model thread panics.
pub fn run_keyed<T: KeyedTable>(
    table: &Arc<T>,
    setup: &[KeyedOp],
    threads: &[Vec<KeyedOp>],
) -> Vec<Vec<KeyedOutcome>> {
    for &op in setup {
        let outcome = apply(&**table, op);
        if let KeyedOp::Check { .. } = op {
            assert!(outcome.is_allowed(), "setup {op:?} gave {outcome:?}");
        }
    }
    let mut outcomes = Vec::with_capacity(threads.len());
    if let Some((last, spawned)) = threads.split_last() {
        let handles: Vec<_> = spawned
            .iter()
            .map(|ops| {
                let table = Arc::clone(table);
                let ops = ops.clone();
                loom::thread::spawn(move || ops.iter().map(|&op| apply(&*table, op)).collect())
            })
            .collect();
        let mine: Vec<KeyedOutcome> = last.iter().map(|&op| apply(&**table, op)).collect();
        outcomes.extend(
            handles
                .into_iter()
                .map(|h| h.join().expect("model thread panicked")),
        );
        outcomes.push(mine);
    }
    outcomes
}

/// Permits admitted to `key` by `threads` (with their `outcomes`), through
/// any path (an admission does not report its path).
#[must_use]
pub fn admitted_to(key: u64, threads: &[Vec<KeyedOp>], outcomes: &[Vec<KeyedOutcome>]) -> u64 {
    threads
        .iter()
        .zip(outcomes)
        .flat_map(|(ops, outs)| ops.iter().zip(outs))
        .map(|(op, out)| match (*op, *out) {
            (KeyedOp::Check { key: k, n, .. }, KeyedOutcome::Admitted { .. }) if k == key => {
                u64::from(n)
            }
            _ => 0,
        })
        .sum()
}

/// The checks in `ops` of the keys `which` selects, as reference-model
/// operations (on one bucket).
#[must_use]
pub fn checks_of(which: impl Fn(u64) -> bool, ops: &[KeyedOp]) -> Vec<Op> {
    ops.iter()
        .filter_map(|op| match *op {
            KeyedOp::Check { key, n, now } if which(key) => Some(Op::Check { n, now }),
            _ => None,
        })
        .collect()
}

/// One reference bucket after the setup's checks of the keys `which`
/// selects.
#[must_use]
pub fn spec_after(gcra: &Gcra, which: impl Fn(u64) -> bool, setup: &[KeyedOp]) -> SpecBucket {
    let mut bucket = SpecBucket::like(gcra);
    for op in checks_of(which, setup) {
        let _ = bucket.apply(op, None);
    }
    bucket
}

/// The most permits any sequential order of `key`'s checks in `threads`
/// admits on one reference bucket (after `setup`): what a table may admit
/// to `key` at most, whatever it evicts.
#[must_use]
pub fn most_admitted_alone(
    gcra: &Gcra,
    key: u64,
    setup: &[KeyedOp],
    threads: &[Vec<KeyedOp>],
) -> u64 {
    let is_key = |k: u64| k == key;
    let per_thread: Vec<Vec<Op>> = threads.iter().map(|ops| checks_of(is_key, ops)).collect();
    sequential_outcomes(spec_after(gcra, is_key, setup), &per_thread)
        .iter()
        .map(|observed| {
            per_thread
                .iter()
                .zip(&observed.outcomes)
                .flat_map(|(ops, outs)| ops.iter().zip(outs))
                .map(|(op, out)| match (*op, *out) {
                    (Op::Check { n, .. }, Outcome::Allowed) => u64::from(n),
                    _ => 0,
                })
                .sum::<u64>()
        })
        .max()
        .unwrap_or(0)
}

/// What the checks of the keys `which` selects may observe if one state
/// answers all of them (a key that keeps its slot, or the shared overflow
/// bucket): for each sequential order of those checks on one reference
/// bucket, what each check saw per thread (its outcome and, for an
/// admission, the bucket's theoretical arrival time after it: when it is
/// full again) and the bucket's `reset_after` at `probe`.
#[must_use]
pub fn one_state_runs(
    gcra: &Gcra,
    which: impl Fn(u64) -> bool + Copy,
    setup: &[KeyedOp],
    threads: &[Vec<KeyedOp>],
    probe: u64,
) -> HashSet<(Vec<Vec<Seen>>, u64)> {
    let per_thread: Vec<Vec<Op>> = threads.iter().map(|ops| checks_of(which, ops)).collect();
    let start = spec_after(gcra, which, setup);
    interleavings(&per_thread)
        .into_iter()
        .map(|order| {
            let mut bucket = start;
            let mut seen: Vec<Vec<Seen>> = per_thread
                .iter()
                .map(|ops| vec![(Outcome::Refunded, None); ops.len()])
                .collect();
            for (th, i) in order {
                let op = per_thread[th][i];
                let outcome = bucket.apply(op, None);
                let full_at = (outcome == Outcome::Allowed).then(|| {
                    let full = bucket.tat().max(u128::from(op.now()));
                    u64::try_from(full).unwrap_or(u64::MAX)
                });
                seen[th][i] = (outcome, full_at);
            }
            let reset_after = bucket.tat().saturating_sub(u128::from(probe));
            (seen, u64::try_from(reset_after).unwrap_or(u64::MAX))
        })
        .collect()
}

/// The same runs without the admissions' `full_at`: for a state whose
/// admissions report it as read after the fact (the lock-free table's
/// shared overflow bucket reads its snapshot after the check, so a racing
/// admission may show in it).
#[must_use]
pub fn without_full_at(runs: &HashSet<(Vec<Vec<Seen>>, u64)>) -> HashSet<(Vec<Vec<Seen>>, u64)> {
    runs.iter()
        .map(|(seen, reset)| (forget_full_at(seen), *reset))
        .collect()
}

/// `seen` with every `full_at` dropped.
#[must_use]
pub fn forget_full_at(seen: &[Vec<Seen>]) -> Vec<Vec<Seen>> {
    seen.iter()
        .map(|thread| thread.iter().map(|&(outcome, _)| (outcome, None)).collect())
        .collect()
}

/// What the checks of the keys `which` selects saw per thread, in program
/// order (as [`one_state_runs`] lists them). `None` if any of them was
/// refused by another path than `path`, or could never be granted. (An
/// admission does not report its path: the caller checks it through what
/// is observable, e.g. whether the key is tracked afterwards, and through
/// `full_at`.)
#[must_use]
pub fn outcomes_via(
    which: impl Fn(u64) -> bool,
    path: KeyedPath,
    threads: &[Vec<KeyedOp>],
    outcomes: &[Vec<KeyedOutcome>],
) -> Option<Vec<Vec<Seen>>> {
    threads
        .iter()
        .zip(outcomes)
        .map(|(ops, outs)| {
            ops.iter()
                .zip(outs)
                .filter(|(op, _)| matches!(op, KeyedOp::Check { key, .. } if which(*key)))
                .map(|(_, out)| match *out {
                    KeyedOutcome::Admitted { .. } => out.seen(),
                    KeyedOutcome::Refused { path: p, .. } if p == path => out.seen(),
                    _ => None,
                })
                .collect::<Option<Vec<Seen>>>()
        })
        .collect()
}

/// Every `now` in `setup` and `threads`.
#[must_use]
pub fn all_nows(setup: &[KeyedOp], threads: &[Vec<KeyedOp>]) -> Vec<u64> {
    setup
        .iter()
        .chain(threads.iter().flatten())
        .map(KeyedOp::now)
        .collect()
}
