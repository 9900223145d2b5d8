//! The `no_std` keyed table: a `heapless` index map behind a critical
//! section.

use core::cell::RefCell;
use core::hash::Hash;
use core::time::Duration;

use critical_section::Mutex;
use heapless::index_map::FnvIndexMap;

use super::{
    KeyQuota, KeyedTable, OverflowPolicy, SweepHint, TableBuilder, check_tracked, exceeded,
    overflow, untracked_peek, with_algorithm,
};
use crate::limiter::{Algorithm, Grant, Inheritance, Limiter};
use crate::refusal::Refusal;
use crate::snapshot::Snapshot;
use crate::time::Timestamp;

struct Slots<K, A: Algorithm, const N: usize> {
    map: FnvIndexMap<K, A::State, N>,
    hint: SweepHint,
    /// The default algorithm: inside the critical section, so that a
    /// [`reconfigure`](KeyedTable::reconfigure) is atomic with checks.
    default: A,
}

/// A keyed limiter for `no_std`: up to `N` keys (`N` a power of two, at
/// least 2), each with its own limiter state, in a fixed-size
/// [`heapless`](::heapless) index map protected by a
/// [`critical_section`], so it can be shared with interrupt handlers
/// wherever its algorithm's state is interrupt-safe
/// ([`LockFreedom::IS_INTERRUPT_SAFE`](crate::LockFreedom::IS_INTERRUPT_SAFE):
/// always without `std`: the 64-bit states of a 32-bit microcontroller
/// are critical sections too).
///
/// No allocation ever; the whole table can be a `static`, built by the
/// `const` [`TableBuilder::build`]. Eviction, overflow, per-key quotas and
/// reconfiguration work as described in the [module docs](super). Each
/// operation runs in one critical section; an insert into a full table
/// sweeps it once (O(`N`)), at most once per time a key can have become
/// idle.
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
/// use tollgate::keyed::{HeaplessKeyedTable, KeyedTable};
/// use tollgate::{valid, Gcra, Limiter, Quota, Timestamp};
///
/// const SLOW: Quota = valid!(Quota::per_second(2));
/// const FAST: Quota = valid!(Quota::per_second(20));
/// fn by_id(id: &u16) -> Gcra {
///     Gcra::token_bucket(if *id < 0x10 { FAST } else { SLOW })
/// }
/// // one bucket per CAN id, 64 ids tracked at most, fast ids below 0x10
/// static PER_ID: HeaplessKeyedTable<u16, Gcra, 64, fn(&u16) -> Gcra> =
///     HeaplessKeyedTable::builder(Gcra::token_bucket(SLOW))
///         .per_key(by_id as fn(&u16) -> Gcra)
///         .build();
///
/// let now = Timestamp::ZERO;
/// let first = PER_ID.try_acquire(&0x101, now);
/// assert!(first.is_ok());
/// assert!(PER_ID.contains(&0x101)); // its own slot
/// assert_eq!(PER_ID.len(), 1);
/// assert_eq!(PER_ID.snapshot(&0x01, now).limit(), 20);
/// assert_eq!(PER_ID.snapshot(&0x20, now).limit(), 2);
/// ```
pub struct HeaplessKeyedTable<K, A: Algorithm, const N: usize, Q = ()> {
    slots: Mutex<RefCell<Slots<K, A, N>>>,
    shared: A::State,
    policy: OverflowPolicy,
    quota: Q,
}

impl<K, A: Algorithm, const N: usize, Q> core::fmt::Debug for HeaplessKeyedTable<K, A, N, Q> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("HeaplessKeyedTable")
            .field("max_keys", &N)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl<K, A: Algorithm, const N: usize> HeaplessKeyedTable<K, A, N> {
    /// Starts configuring a table whose keys run `default` (see
    /// [`TableBuilder`]; `build` is `const`).
    pub const fn builder(default: A) -> TableBuilder<Self, A, ()> {
        TableBuilder::new(default, N, ())
    }
}

impl<K, A: Algorithm + Copy, const N: usize, Q: Copy>
    TableBuilder<HeaplessKeyedTable<K, A, N>, A, (), Q>
{
    crate::sync::const_fn_unless_loom! {
        /// The empty table (`const`, for a `static`).
        #[must_use]
        pub fn build(self) -> HeaplessKeyedTable<K, A, N, Q> {
            let (default, overflow, per_key) = (self.default, self.overflow, self.per_key);
            let shared = fresh_state::<A>(&default);
            HeaplessKeyedTable {
                slots: Mutex::new(RefCell::new(Slots {
                    map: FnvIndexMap::new(),
                    hint: SweepHint::new(),
                    default,
                })),
                shared,
                policy: overflow,
                quota: per_key,
            }
        }
    }
}

#[cfg(not(loom))]
const fn fresh_state<A: Algorithm>(_default: &A) -> A::State {
    A::FRESH_STATE
}

#[cfg(loom)]
fn fresh_state<A: Algorithm>(default: &A) -> A::State {
    default.new_state()
}

impl<K, A, const N: usize, Q> HeaplessKeyedTable<K, A, N, Q>
where
    K: Hash + Eq + Clone,
    A: Algorithm + Clone,
    Q: KeyQuota<K, A>,
{
    /// Runs `f` on the slots inside a critical section. `None` only if the
    /// table is already borrowed: a per-key quota function or a visitor
    /// called back into the same table.
    #[inline]
    fn with_slots<R>(&self, f: impl FnOnce(&mut Slots<K, A, N>) -> R) -> Option<R> {
        critical_section::with(|cs| {
            let mut slots = self.slots.borrow(cs).try_borrow_mut().ok()?;
            Some(f(&mut slots))
        })
    }

    /// Evicts every idle key, and records when the next one can be idle.
    fn sweep(&self, slots: &mut Slots<K, A, N>, now: Timestamp) {
        let now_ns = now.as_nanos();
        if !slots.hint.worth_sweeping(now_ns) {
            return;
        }
        let hint = &mut slots.hint;
        hint.start(now_ns);
        let (default, quota) = (&slots.default, &self.quota);
        slots.map.retain(|key, state| {
            with_algorithm(quota, default, key, |alg| {
                if alg.is_idle(state, now) {
                    false
                } else {
                    hint.lower(now_ns, alg.snapshot(state, now).reset_after_nanos());
                    true
                }
            })
        });
    }
}

impl<K, A, const N: usize, Q> HeaplessKeyedTable<K, A, N, Q>
where
    K: Hash + Eq + Clone,
    A: Algorithm + Clone,
    Q: KeyQuota<K, A>,
{
    fn check_until_full(
        &self,
        key: &K,
        n: u32,
        now: Timestamp,
    ) -> Result<Timestamp, Refusal<'static>> {
        let step = self.with_slots(|slots| {
            let alg = self
                .quota
                .algorithm_for(key)
                .unwrap_or_else(|| slots.default.clone());
            if n > alg.capacity() {
                return Err(exceeded(&alg, n));
            }
            if let Some(state) = slots.map.get(key) {
                return check_tracked(&alg, state, n, now, &mut slots.hint);
            }
            if n == 0 {
                return untracked_peek(&alg, now);
            }
            if slots.map.len() >= N {
                self.sweep(slots, now);
            }
            let wait = if slots.map.insert(key.clone(), alg.new_state()).is_err() {
                slots.hint.wait_from(now.as_nanos())
            } else if let Some(state) = slots.map.get(key) {
                let at = Timestamp::from_nanos(slots.hint.insert_time(now.as_nanos()));
                return check_tracked(&alg, state, n, at, &mut slots.hint);
            } else {
                1 // unreachable: just inserted
            };
            overflow(
                self.policy,
                &alg,
                &slots.default,
                &self.shared,
                n,
                now,
                wait,
            )
        });
        match step {
            Some(result) => result,
            // re-entered from a per-key quota function (which must not
            // call into its own table): refuse
            None => super::refusal(),
        }
    }
}

impl<K, A, const N: usize, Q> Limiter<K> for HeaplessKeyedTable<K, A, N, Q>
where
    K: Hash + Eq + Clone,
    A: Algorithm + Clone,
    Q: KeyQuota<K, A>,
{
    type Permit = Grant;

    super::grant_methods!();

    fn refund(&self, key: &K, n: u32, now: Timestamp) {
        self.with_slots(|slots| {
            let default = &slots.default;
            match slots.map.get(key) {
                Some(state) => {
                    with_algorithm(&self.quota, default, key, |alg| alg.refund(state, n, now));
                    slots.hint.reset();
                }
                None if self.policy == OverflowPolicy::SharedBucket => {
                    default.refund(&self.shared, n, now);
                }
                None => {}
            }
        });
    }

    fn snapshot(&self, key: &K, now: Timestamp) -> Snapshot {
        self.with_slots(|slots| {
            with_algorithm(&self.quota, &slots.default, key, |alg| {
                match slots.map.get(key) {
                    Some(state) => alg.snapshot(state, now),
                    None => alg.snapshot(&alg.new_state(), now),
                }
            })
        })
        .unwrap_or_else(|| Snapshot::from_nanos(0, 0, 0))
    }

    fn time_until_ready(
        &self,
        key: &K,
        n: u32,
        now: Timestamp,
    ) -> Result<Duration, Refusal<'static>> {
        self.with_slots(|slots| {
            with_algorithm(&self.quota, &slots.default, key, |alg| {
                match slots.map.get(key) {
                    Some(state) => alg.time_until_ready(state, n, now),
                    None => alg.time_until_ready(&alg.new_state(), n, now),
                }
            })
        })
        .unwrap_or(Ok(Duration::ZERO))
    }

    fn time_until_ready_after(
        &self,
        key: &K,
        ahead: u64,
        n: u32,
        now: Timestamp,
    ) -> Option<Duration> {
        self.with_slots(|slots| {
            with_algorithm(&self.quota, &slots.default, key, |alg| {
                match slots.map.get(key) {
                    Some(state) => alg.time_until_ready_after(state, ahead, n, now),
                    None => alg.time_until_ready_after(&alg.new_state(), ahead, n, now),
                }
            })
        })
        .flatten()
    }

    fn capacity(&self, key: &K) -> u32 {
        self.with_slots(|slots| {
            with_algorithm(&self.quota, &slots.default, key, Algorithm::capacity)
        })
        .unwrap_or(0)
    }
}

impl<K, A, const N: usize, Q> KeyedTable<K> for HeaplessKeyedTable<K, A, N, Q>
where
    K: Hash + Eq + Clone,
    A: Algorithm + Clone,
    Q: KeyQuota<K, A>,
{
    type Algorithm = A;

    fn contains(&self, key: &K) -> bool {
        self.with_slots(|slots| slots.map.contains_key(key))
            .unwrap_or(false)
    }

    fn len(&self) -> usize {
        self.with_slots(|slots| slots.map.len()).unwrap_or(0)
    }

    fn max_keys(&self) -> usize {
        N
    }

    fn overflow_policy(&self) -> OverflowPolicy {
        self.policy
    }

    fn default_algorithm(&self) -> A {
        critical_section::with(|cs| self.slots.borrow(cs).borrow().default.clone())
    }

    fn shared_snapshot(&self, now: Timestamp) -> Snapshot {
        self.with_slots(|slots| slots.default.snapshot(&self.shared, now))
            .unwrap_or_else(|| Snapshot::from_nanos(0, 0, 0))
    }

    fn for_each_snapshot(&self, now: Timestamp, visit: &mut dyn FnMut(&K, Snapshot)) {
        self.with_slots(|slots| {
            for (key, state) in slots.map.iter() {
                let snapshot = with_algorithm(&self.quota, &slots.default, key, |alg| {
                    alg.snapshot(state, now)
                });
                visit(key, snapshot);
            }
        });
    }

    fn evict_refilled(&self, now: Timestamp) -> usize {
        self.with_slots(|slots| {
            let before = slots.map.len();
            slots.hint.reset();
            self.sweep(slots, now);
            before - slots.map.len()
        })
        .unwrap_or(0)
    }

    fn reconfigure(&self, next: A, how: Inheritance, now: Timestamp) {
        self.with_slots(|slots| {
            for (key, state) in slots.map.iter() {
                if self.quota.algorithm_for(key).is_none() {
                    slots.default.carry_over(&next, state, how, now);
                }
            }
            slots.default.carry_over(&next, &self.shared, how, now);
            slots.default = next;
            // keys may become idle sooner or later than the hint says
            slots.hint.reset();
        });
    }

    fn update_key_quota(
        &self,
        key: &K,
        how: Inheritance,
        now: Timestamp,
        update: &mut dyn FnMut(),
    ) {
        self.with_slots(|slots| {
            let old = self
                .quota
                .algorithm_for(key)
                .unwrap_or_else(|| slots.default.clone());
            update();
            let new = self
                .quota
                .algorithm_for(key)
                .unwrap_or_else(|| slots.default.clone());
            if let Some(state) = slots.map.get(key) {
                old.carry_over(&new, state, how, now);
            }
            slots.hint.reset();
        });
    }
}

impl<K, A: Copy + Algorithm, const N: usize> TableBuilder<HeaplessKeyedTable<K, A, N>, A, (), ()> {
    /// A per-key quota: each key's algorithm (see [`KeyQuota`]),
    /// `const` for a `static` table: a `fn(&K) -> A`, or a closure that
    /// captures only `Copy` values. The default algorithm still runs the
    /// keys it returns nothing for, and the shared overflow state.
    pub const fn per_key<Q: Copy>(
        self,
        quota: Q,
    ) -> TableBuilder<HeaplessKeyedTable<K, A, N>, A, (), Q> {
        TableBuilder {
            default: self.default,
            max_keys: self.max_keys,
            shards: self.shards,
            overflow: self.overflow,
            hasher: (),
            per_key: quota,
            table: core::marker::PhantomData,
        }
    }
}

impl<K, A: Copy + Algorithm, const N: usize, Q: Copy>
    TableBuilder<HeaplessKeyedTable<K, A, N>, A, (), Q>
{
    /// What to do with a new key when the table is full of busy keys
    /// (default [`OverflowPolicy::SharedBucket`]). `const`, for a `static`
    /// table.
    pub const fn overflow(mut self, policy: OverflowPolicy) -> Self {
        self.overflow = policy;
        self
    }
}
