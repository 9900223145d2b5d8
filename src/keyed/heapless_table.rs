//! The `no_std` keyed table: a `heapless` index map behind a critical
//! section.

use super::{
    check_tracked, overflow, untracked_peek, with_algorithm, KeyQuota, KeyedDecision,
    OverflowPolicy, SameQuota, SweepHint,
};
use crate::decision::{CapacityExceeded, Snapshot};
use crate::gcra::{Gcra, GcraState};
use crate::limiter::Algorithm;
use core::cell::RefCell;
use core::hash::Hash;
use critical_section::Mutex;
use heapless::index_map::FnvIndexMap;

struct Slots<K, S, const N: usize> {
    map: FnvIndexMap<K, S, N>,
    hint: SweepHint,
}

/// A keyed limiter for `no_std`: up to `N` keys (`N` a power of two, at
/// least 2), each with its own limiter state, in a fixed-size
/// [`heapless`](::heapless) index map protected by a
/// [`critical_section`] (so it can be shared with interrupt handlers).
///
/// No allocation ever; the whole table can be a `static`. Eviction,
/// overflow and per-key quotas work as described in the
/// [module docs](super). Each operation runs in one critical section; an
/// insert into a full table sweeps it once (O(`N`)), at most once per
/// time a key can have become idle.
///
/// The hash is heapless' FNV, which is not seeded: keys chosen by an
/// attacker can collide. Probing is bounded by `N`, so the cost is bounded
/// too; for keys from the network prefer the `std`
/// [`ShardedKeyedTable`](super::ShardedKeyedTable) with its seeded hash.
///
/// On a host (`std`) the final binary must still provide a critical-section
/// implementation, e.g. the `critical-section` crate's `std` feature.
///
/// ```
/// use tollgate::keyed::{HeaplessKeyedTable, KeyedPath};
/// use tollgate::{Gcra, Quota};
///
/// const QUOTA: Quota = match Quota::per_second(10) { Ok(q) => q, Err(_) => panic!() };
/// // one bucket per CAN id, 64 ids tracked at most
/// static PER_ID: HeaplessKeyedTable<u16, Gcra, 64> =
///     HeaplessKeyedTable::gcra(Gcra::token_bucket(QUOTA));
///
/// let now = 0;
/// let first = PER_ID.check(&0x101, now);
/// assert!(first.is_allowed());
/// assert_eq!(first.path(), KeyedPath::Own);
/// assert_eq!(PER_ID.len(), 1);
/// ```
pub struct HeaplessKeyedTable<K, A: Algorithm, const N: usize, Q = SameQuota> {
    slots: Mutex<RefCell<Slots<K, A::State, N>>>,
    default: A,
    shared: A::State,
    policy: OverflowPolicy,
    quota: Q,
}

impl<K, A: Algorithm, const N: usize> HeaplessKeyedTable<K, A, N, SameQuota> {
    /// An empty table whose keys all run `default`, with the shared
    /// overflow bucket.
    #[must_use]
    pub fn new(default: A) -> Self {
        let shared = default.new_state();
        Self::from_parts(default, shared)
    }

    /// An empty table from the default algorithm and the shared overflow
    /// state (a fresh `default.new_state()`); `const`, for `static` tables.
    #[must_use]
    pub const fn from_parts(default: A, shared: A::State) -> Self {
        Self {
            slots: Mutex::new(RefCell::new(Slots {
                map: FnvIndexMap::new(),
                hint: SweepHint::new(),
            })),
            default,
            shared,
            policy: OverflowPolicy::SharedBucket,
            quota: SameQuota,
        }
    }
}

impl<K, const N: usize> HeaplessKeyedTable<K, Gcra, N, SameQuota> {
    crate::sync::const_fn_unless_loom! {
        /// An empty table of GCRA buckets (`const`, for `static` tables).
        #[must_use]
        pub fn gcra(default: Gcra) -> Self {
            Self::from_parts(default, GcraState::new())
        }
    }
}

impl<K, A: Algorithm, const N: usize, Q> HeaplessKeyedTable<K, A, N, Q> {
    /// An empty table with a per-key quota (see
    /// [`with_per_key`](Self::with_per_key)) from the default algorithm and
    /// the shared overflow state (a fresh `default.new_state()`); `const`,
    /// so a `static` table can have per-key quotas, e.g. with a
    /// `fn(&K) -> A` pointer.
    ///
    /// ```
    /// use tollgate::keyed::HeaplessKeyedTable;
    /// use tollgate::{Gcra, GcraState, Quota};
    ///
    /// const SLOW: Quota = match Quota::per_second(2) { Ok(q) => q, Err(_) => panic!() };
    /// const FAST: Quota = match Quota::per_second(20) { Ok(q) => q, Err(_) => panic!() };
    /// fn by_id(id: &u8) -> Gcra {
    ///     Gcra::token_bucket(if *id < 0x10 { FAST } else { SLOW })
    /// }
    /// static PER_ID: HeaplessKeyedTable<u8, Gcra, 8, fn(&u8) -> Gcra> =
    ///     HeaplessKeyedTable::from_parts_per_key(Gcra::token_bucket(SLOW), GcraState::new(), by_id);
    ///
    /// assert_eq!(PER_ID.snapshot(&0x01, 0).limit(), 20);
    /// assert_eq!(PER_ID.snapshot(&0x20, 0).limit(), 2);
    /// ```
    #[must_use]
    pub const fn from_parts_per_key(default: A, shared: A::State, quota: Q) -> Self {
        Self {
            slots: Mutex::new(RefCell::new(Slots {
                map: FnvIndexMap::new(),
                hint: SweepHint::new(),
            })),
            default,
            shared,
            policy: OverflowPolicy::SharedBucket,
            quota,
        }
    }

    /// The same table with another overflow policy.
    #[must_use]
    pub const fn with_overflow(mut self, policy: OverflowPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The same table with a per-key quota: `quota` gives each key its
    /// algorithm; the default still runs the shared overflow bucket.
    #[must_use]
    pub fn with_per_key<Q2: KeyQuota<K, A>>(self, quota: Q2) -> HeaplessKeyedTable<K, A, N, Q2> {
        HeaplessKeyedTable {
            slots: self.slots,
            default: self.default,
            shared: self.shared,
            policy: self.policy,
            quota,
        }
    }

    /// The overflow policy.
    #[must_use]
    pub const fn overflow_policy(&self) -> OverflowPolicy {
        self.policy
    }

    /// The default algorithm.
    #[must_use]
    pub const fn default_algorithm(&self) -> &A {
        &self.default
    }

    /// The most keys the table tracks: `N`.
    #[must_use]
    pub const fn capacity(&self) -> usize {
        N
    }
}

impl<K, A, const N: usize, Q> HeaplessKeyedTable<K, A, N, Q>
where
    K: Hash + Eq + Clone,
    A: Algorithm,
    Q: KeyQuota<K, A>,
{
    /// Runs `f` on the slots inside a critical section. `None` only if the
    /// table is already borrowed: a per-key quota function or a visitor
    /// called back into the same table.
    #[inline]
    fn with_slots<R>(&self, f: impl FnOnce(&mut Slots<K, A::State, N>) -> R) -> Option<R> {
        critical_section::with(|cs| {
            let mut slots = self.slots.borrow(cs).try_borrow_mut().ok()?;
            Some(f(&mut slots))
        })
    }

    /// Tries to take one permit for `key` at `now` (nanoseconds).
    pub fn check(&self, key: &K, now: u64) -> KeyedDecision {
        match self.check_n(key, 1, now) {
            Ok(decision) => decision,
            // capacity 0 is impossible for tollgate's algorithms; refuse
            Err(_) => super::refusal(now),
        }
    }

    /// Tries to take `n` permits for `key` at `now`; `n = 0` is a peek that
    /// changes nothing (and never inserts the key).
    ///
    /// # Errors
    /// [`CapacityExceeded`] if `n` is more than the key's algorithm can ever
    /// grant.
    pub fn check_n(&self, key: &K, n: u32, now: u64) -> Result<KeyedDecision, CapacityExceeded> {
        with_algorithm(&self.quota, &self.default, key, |alg| {
            if n > alg.capacity() {
                return Err(CapacityExceeded {
                    requested: n,
                    capacity: alg.capacity(),
                });
            }
            let step = self.with_slots(|slots| {
                if let Some(state) = slots.map.get(key) {
                    return Step::Done(check_tracked(alg, state, n, now, &mut slots.hint));
                }
                if n == 0 {
                    return Step::Done(Ok(untracked_peek(alg, now)));
                }
                if slots.map.len() >= N {
                    self.sweep(slots, now);
                }
                if slots.map.insert(key.clone(), alg.new_state()).is_err() {
                    return Step::Full(slots.hint.wait_from(now));
                }
                match slots.map.get(key) {
                    Some(state) => {
                        let at = slots.hint.insert_time(now);
                        Step::Done(check_tracked(alg, state, n, at, &mut slots.hint))
                    }
                    None => Step::Full(1), // unreachable: just inserted
                }
            });
            match step {
                Some(Step::Done(result)) => result,
                Some(Step::Full(wait)) => {
                    overflow(self.policy, alg, &self.default, &self.shared, n, now, wait)
                }
                // re-entered from a callback: treat as full
                None => overflow(self.policy, alg, &self.default, &self.shared, n, now, 1),
            }
        })
    }

    /// Evicts every idle key, and records when the next one can be idle.
    fn sweep(&self, slots: &mut Slots<K, A::State, N>, now: u64) {
        if !slots.hint.worth_sweeping(now) {
            return;
        }
        let hint = &mut slots.hint;
        hint.start(now);
        let (default, quota) = (&self.default, &self.quota);
        slots.map.retain(|key, state| {
            with_algorithm(quota, default, key, |alg| {
                if alg.is_idle(state, now) {
                    false
                } else {
                    hint.lower(now, alg.snapshot(state, now).reset_after_nanos());
                    true
                }
            })
        });
    }

    /// Gives back `n` permits of an earlier admission for `key`. If the key
    /// is not tracked, its admission came from the overflow path: with
    /// [`OverflowPolicy::SharedBucket`] the shared state gets them back.
    pub fn refund(&self, key: &K, n: u32, now: u64) {
        with_algorithm(&self.quota, &self.default, key, |alg| {
            let tracked = self.with_slots(|slots| match slots.map.get(key) {
                Some(state) => {
                    alg.refund(state, n, now);
                    slots.hint.reset();
                    true
                }
                None => false,
            });
            if tracked == Some(false) && self.policy == OverflowPolicy::SharedBucket {
                self.default.refund(&self.shared, n, now);
            }
        });
    }

    /// `key`'s state at `now` (a fresh state's if the key is not tracked).
    pub fn snapshot(&self, key: &K, now: u64) -> Snapshot {
        with_algorithm(&self.quota, &self.default, key, |alg| {
            self.with_slots(|slots| slots.map.get(key).map(|s| alg.snapshot(s, now)))
                .flatten()
                .unwrap_or_else(|| alg.snapshot(&alg.new_state(), now))
        })
    }

    /// Nanoseconds until `n` permits for `key` would be admitted by its own
    /// state (0 for an untracked key).
    ///
    /// # Errors
    /// [`CapacityExceeded`] if `n` can never be granted to `key`.
    pub fn time_until_ready(&self, key: &K, n: u32, now: u64) -> Result<u64, CapacityExceeded> {
        with_algorithm(&self.quota, &self.default, key, |alg| {
            match self
                .with_slots(|slots| slots.map.get(key).map(|s| alg.time_until_ready(s, n, now)))
            {
                Some(Some(result)) => result,
                _ => alg.time_until_ready(&alg.new_state(), n, now),
            }
        })
    }

    /// True if `key` currently has a slot.
    pub fn contains(&self, key: &K) -> bool {
        self.with_slots(|slots| slots.map.contains_key(key))
            .unwrap_or(false)
    }

    /// The number of tracked keys.
    pub fn len(&self) -> usize {
        self.with_slots(|slots| slots.map.len()).unwrap_or(0)
    }

    /// True if no key is tracked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Calls `visit` with every tracked key and its snapshot at `now`, in
    /// one critical section (keep `visit` short; it must not call into this
    /// table).
    pub fn for_each_snapshot(&self, now: u64, mut visit: impl FnMut(&K, Snapshot)) {
        let (default, quota) = (&self.default, &self.quota);
        self.with_slots(|slots| {
            for (key, state) in slots.map.iter() {
                let snapshot = with_algorithm(quota, default, key, |alg| alg.snapshot(state, now));
                visit(key, snapshot);
            }
        });
    }

    /// The overflow policy's shared state at `now`
    /// ([`OverflowPolicy::SharedBucket`]).
    pub fn shared_snapshot(&self, now: u64) -> Snapshot {
        self.default.snapshot(&self.shared, now)
    }

    /// Evicts every key whose state is idle at `now` (lossless: no future
    /// decision changes) and returns how many were evicted.
    pub fn evict_refilled(&self, now: u64) -> usize {
        self.with_slots(|slots| {
            let before = slots.map.len();
            slots.hint.reset();
            self.sweep(slots, now);
            before - slots.map.len()
        })
        .unwrap_or(0)
    }
}

enum Step {
    Done(Result<KeyedDecision, CapacityExceeded>),
    Full(u64),
}
