//! What a policy charges: a keyed table, a single limiter or nothing,
//! behind one type-erased [`Store`], and its public handle [`PolicyStore`].

use core::any::Any;
use core::fmt;
use core::time::Duration;
use std::sync::Arc;

use tollgate_core::keyed::KeyedTable;
use tollgate_core::limiter::{Algorithm, Grant, Inheritance, Limiter};
use tollgate_core::live::LiveBucket;
use tollgate_core::refusal::Refusal;
use tollgate_core::snapshot::Snapshot;
use tollgate_core::time::Timestamp;

use tollgate_core::gcra::Gcra;

use super::{DEFAULT, Lease, UNLIMITED_SNAPSHOT, give_back, no_key};

/// A policy's keyed store, with its type erased: what a [`Partitioned`](super::Partitioned)
/// charges.
///
/// Keyed stores are always given a key; the default limiter's store
/// ignores it, and a resource that no policy claims has none (`None`).
pub(super) trait Store<K>: Send + Sync {
    /// Takes `n` permits for `key`. The tables' own result type, so that a
    /// refusal is not copied from one layout to another behind this
    /// dynamic call.
    fn check_n(&self, key: Option<&K>, n: u32, now: Timestamp) -> Result<Grant, Refusal<'static>>;
    /// `key`'s state at `now`, taking nothing.
    fn snapshot(&self, key: Option<&K>, now: Timestamp) -> Snapshot;
    /// The most permits one request for `key` can take.
    fn capacity(&self, key: Option<&K>) -> u32;
    fn refund(&self, key: Option<&K>, n: u32, now: Timestamp);
    fn time_until_ready(
        &self,
        key: Option<&K>,
        n: u32,
        now: Timestamp,
    ) -> Result<Duration, Refusal<'static>>;
    /// [`Limiter::time_until_ready_after`] for `key`; `None` (the
    /// default) where time does not tell (an in-flight limit).
    fn time_until_ready_after(
        &self,
        key: Option<&K>,
        ahead: u64,
        n: u32,
        now: Timestamp,
    ) -> Option<Duration> {
        let _ = (key, ahead, n, now);
        None
    }
    /// Reconfigures the keyed table if `next` is an `Option<T::Algorithm>`
    /// holding a value (which it takes); false otherwise.
    fn reconfigure(&self, next: &mut dyn Any, how: Inheritance, now: Timestamp) -> bool {
        let _ = (next, how, now);
        false
    }
}

pub(super) struct Keyed<T>(pub(super) T);

impl<K, T> Store<K> for Keyed<T>
where
    T: KeyedTable<K> + Send + Sync,
    T::Algorithm: 'static,
{
    #[inline]
    fn check_n(&self, key: Option<&K>, n: u32, now: Timestamp) -> Result<Grant, Refusal<'static>> {
        match key {
            Some(key) => self.0.try_acquire_n(key, n, now),
            None => Err(no_key(n)), // never: policies have keys
        }
    }
    fn snapshot(&self, key: Option<&K>, now: Timestamp) -> Snapshot {
        match key {
            Some(key) => self.0.snapshot(key, now),
            None => UNLIMITED_SNAPSHOT,
        }
    }
    fn capacity(&self, key: Option<&K>) -> u32 {
        key.map_or(0, |key| self.0.capacity(key))
    }
    fn refund(&self, key: Option<&K>, n: u32, now: Timestamp) {
        if let Some(key) = key {
            self.0.refund(key, n, now);
        }
    }
    fn time_until_ready(
        &self,
        key: Option<&K>,
        n: u32,
        now: Timestamp,
    ) -> Result<Duration, Refusal<'static>> {
        match key {
            Some(key) => self.0.time_until_ready(key, n, now),
            None => Err(no_key(n)),
        }
    }
    fn time_until_ready_after(
        &self,
        key: Option<&K>,
        ahead: u64,
        n: u32,
        now: Timestamp,
    ) -> Option<Duration> {
        self.0.time_until_ready_after(key?, ahead, n, now)
    }
    fn reconfigure(&self, next: &mut dyn Any, how: Inheritance, now: Timestamp) -> bool {
        match next
            .downcast_mut::<Option<T::Algorithm>>()
            .and_then(Option::take)
        {
            Some(alg) => {
                self.0.reconfigure(alg, how, now);
                true
            }
            None => false,
        }
    }
}

/// One limiter for every key (the default limiter).
pub(super) struct Unkeyed<L>(pub(super) L);

impl<K, L: Limiter<Permit: Copy> + Send + Sync> Store<K> for Unkeyed<L> {
    #[inline]
    fn check_n(&self, _: Option<&K>, n: u32, now: Timestamp) -> Result<Grant, Refusal<'static>> {
        self.0
            .try_acquire_n(&(), n, now)
            .map(|_| Grant::new(n, now))
    }
    fn snapshot(&self, _: Option<&K>, now: Timestamp) -> Snapshot {
        self.0.snapshot(&(), now)
    }
    fn capacity(&self, _: Option<&K>) -> u32 {
        self.0.capacity(&())
    }
    fn refund(&self, _: Option<&K>, n: u32, now: Timestamp) {
        self.0.refund(&(), n, now);
    }
    fn time_until_ready(
        &self,
        _: Option<&K>,
        n: u32,
        now: Timestamp,
    ) -> Result<Duration, Refusal<'static>> {
        self.0.time_until_ready(&(), n, now)
    }
    fn time_until_ready_after(
        &self,
        _: Option<&K>,
        ahead: u64,
        n: u32,
        now: Timestamp,
    ) -> Option<Duration> {
        self.0.time_until_ready_after(&(), ahead, n, now)
    }
}

/// One reconfigurable bucket that every key of a policy shares: no hashing,
/// no table lookup (a policy whose key is always the same).
pub(super) struct Single(pub(super) LiveBucket);

impl<K> Store<K> for Single {
    #[inline]
    fn check_n(&self, _: Option<&K>, n: u32, now: Timestamp) -> Result<Grant, Refusal<'static>> {
        self.0.try_acquire_n(&(), n, now)
    }
    fn snapshot(&self, _: Option<&K>, now: Timestamp) -> Snapshot {
        self.0.snapshot(now)
    }
    fn capacity(&self, _: Option<&K>) -> u32 {
        self.0.algorithm().capacity()
    }
    fn refund(&self, _: Option<&K>, n: u32, now: Timestamp) {
        self.0.refund(n, now);
    }
    fn time_until_ready(
        &self,
        _: Option<&K>,
        n: u32,
        now: Timestamp,
    ) -> Result<Duration, Refusal<'static>> {
        self.0.time_until_ready(n, now)
    }
    fn time_until_ready_after(
        &self,
        _: Option<&K>,
        ahead: u64,
        n: u32,
        now: Timestamp,
    ) -> Option<Duration> {
        Limiter::time_until_ready_after(&self.0, &(), ahead, n, now)
    }
    fn reconfigure(&self, next: &mut dyn Any, how: Inheritance, now: Timestamp) -> bool {
        match next.downcast_mut::<Option<Gcra>>().and_then(Option::take) {
            Some(gcra) => {
                self.0.set_algorithm(gcra, how, now);
                true
            }
            None => false,
        }
    }
}

/// Admits everything (a policy without a limit).
pub(super) struct Unlimited;

impl<K> Store<K> for Unlimited {
    #[inline]
    fn check_n(&self, _: Option<&K>, n: u32, now: Timestamp) -> Result<Grant, Refusal<'static>> {
        Ok(Grant::new(n, now))
    }
    fn snapshot(&self, _: Option<&K>, _: Timestamp) -> Snapshot {
        UNLIMITED_SNAPSHOT
    }
    fn capacity(&self, _: Option<&K>) -> u32 {
        u32::MAX
    }
    fn refund(&self, _: Option<&K>, _: u32, _: Timestamp) {}
    fn time_until_ready(
        &self,
        _: Option<&K>,
        _: u32,
        _: Timestamp,
    ) -> Result<Duration, Refusal<'static>> {
        Ok(Duration::ZERO)
    }
    fn time_until_ready_after(
        &self,
        _: Option<&K>,
        _: u64,
        _: u32,
        _: Timestamp,
    ) -> Option<Duration> {
        Some(Duration::ZERO)
    }
}

/// A policy's keyed store: the table that gives every key its limiter,
/// with how the policy charges it (a rate, or in flight). Cloning it
/// shares the table.
///
/// Build one from a table ([`keyed`](Self::keyed), [`single`](Self::single),
/// [`in_flight`](Self::in_flight)) and give it to
/// [`PartitionedBuilder::store`](super::PartitionedBuilder::store); take one from a running limiter with
/// [`Partitioned::policy_store`](super::Partitioned::policy_store) to carry a policy's buckets into the
/// limiter that replaces it (a configuration reload), reconfigured on the
/// way:
///
/// ```
/// use tollgate::keyed::ShardedKeyedTable;
/// use tollgate::partitioned::{Partitioned, PolicyStore};
/// use tollgate::{Gcra, Inheritance, Limiter, Quota, Timestamp};
///
/// let table = ShardedKeyedTable::builder(Gcra::token_bucket(Quota::per_second(2)?)).build()?;
/// let old = Partitioned::<u32, u32>::builder("jobs")
///     .store("per_tenant", |t: &u32| Some(*t), PolicyStore::keyed(table))
///     .build();
/// let now = Timestamp::ZERO;
/// assert!(old.try_acquire(&7, now).is_ok());
/// assert!(old.try_acquire(&7, now).is_ok());
/// assert!(old.try_acquire(&7, now).is_err());
///
/// // the next configuration keeps tenant 7's bucket, under a new quota
/// let store = old.policy_store("per_tenant").expect("a policy of that name");
/// let bigger = Gcra::token_bucket(Quota::per_second(4)?);
/// assert!(store.reconfigure(bigger, Inheritance::UsedAmount, now).is_ok());
/// let new = Partitioned::<u32, u32>::builder("jobs")
///     .store("per_tenant", |t: &u32| Some(*t), store)
///     .build();
/// // 2 of 4 used: two more, then refused
/// assert!(new.try_acquire(&7, now).is_ok());
/// assert!(new.try_acquire(&7, now).is_ok());
/// assert!(new.try_acquire(&7, now).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct PolicyStore<K> {
    pub(super) store: Arc<dyn Store<K>>,
    pub(super) releases: bool,
}

impl<K> Clone for PolicyStore<K> {
    fn clone(&self) -> Self {
        Self {
            store: Arc::clone(&self.store),
            releases: self.releases,
        }
    }
}

impl<K> fmt::Debug for PolicyStore<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyStore")
            .field("holds_in_flight", &self.releases)
            .finish_non_exhaustive()
    }
}

impl<K: 'static> PolicyStore<K> {
    /// A rate policy's store: any keyed table, any algorithm; an admission
    /// spends its permits.
    pub fn keyed<T>(table: T) -> Self
    where
        T: KeyedTable<K> + Send + Sync + 'static,
        T::Algorithm: 'static,
    {
        Self {
            store: Arc::new(Keyed(table)),
            releases: false,
        }
    }

    /// One bucket shared by every key: for a policy whose resources all
    /// have the same key (a global limit), it skips the keyed table's
    /// hashing and lookup. It runs a [`Gcra`], so
    /// [`reconfigure`](Self::reconfigure) with a [`Gcra`] works as on a
    /// keyed table.
    ///
    /// ```
    /// use tollgate::partitioned::{Partitioned, PolicyStore};
    /// use tollgate::{Gcra, Limiter, LiveBucket, Quota, Timestamp};
    ///
    /// let all = PolicyStore::single(LiveBucket::new(Gcra::token_bucket(Quota::per_second(1)?)));
    /// let limiter = Partitioned::<u32, u32>::builder("jobs")
    ///     .store("all", |t: &u32| Some(*t), all)
    ///     .build();
    /// let now = Timestamp::ZERO;
    /// assert!(limiter.try_acquire(&7, now).is_ok());
    /// // tenant 8 shares tenant 7's bucket
    /// assert!(limiter.try_acquire(&8, now).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn single(bucket: LiveBucket) -> Self {
        Self {
            store: Arc::new(Single(bucket)),
            releases: false,
        }
    }
}

impl<K> PolicyStore<K> {
    /// True for an in-flight limit (its leases give permits back on drop).
    #[must_use]
    pub fn holds_in_flight(&self) -> bool {
        self.releases
    }

    /// True if both handles share one table.
    #[must_use]
    pub fn same_table(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.store, &other.store)
    }

    /// Reconfigures every key's limiter to `next` (the table's
    /// [`KeyedTable::reconfigure`]: each key's state carries over by
    /// `how`). Every limiter sharing this table sees the change at once.
    ///
    /// # Errors
    /// `next` back, untouched, when the table does not run algorithm `A`
    /// (or the store is not a keyed table).
    pub fn reconfigure<A: Algorithm + 'static>(
        &self,
        next: A,
        how: Inheritance,
        now: Timestamp,
    ) -> Result<(), A> {
        let mut slot = Some(next);
        self.store.reconfigure(&mut slot, how, now);
        match slot {
            Some(unused) => Err(unused),
            None => Ok(()),
        }
    }
}

/// A policy's store is a limiter over its keys, on its own: what a
/// [`Partitioned`](super::Partitioned) policy charges once its key function has found the key,
/// for a caller that finds keys itself (the HTTP layer routes a request to
/// a policy and extracts its key once). Its permit is a [`Lease`](super::Lease); a
/// refusal names no limiter or policy (there is none to name).
///
/// ```
/// use tollgate::keyed::ShardedKeyedTable;
/// use tollgate::partitioned::PolicyStore;
/// use tollgate::{Gcra, Limiter, Quota, Timestamp};
///
/// let table = ShardedKeyedTable::builder(Gcra::token_bucket(Quota::per_second(1)?)).build()?;
/// let per_tenant = PolicyStore::keyed(table);
/// let now = Timestamp::ZERO;
/// assert!(per_tenant.try_acquire(&7u32, now).is_ok());
/// assert!(per_tenant.try_acquire(&7, now).is_err());
/// assert!(per_tenant.try_acquire(&8, now).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl<K: Clone> Limiter<K> for PolicyStore<K> {
    type Permit = Lease<K>;

    fn capacity(&self, key: &K) -> u32 {
        self.store.capacity(Some(key))
    }

    #[inline]
    fn try_acquire_n(&self, key: &K, n: u32, now: Timestamp) -> Result<Lease<K>, Refusal<'static>> {
        self.charge(DEFAULT, "", "", Some(key.clone()), n, now)
    }

    /// Gives a lease's permits back (see [`Partitioned`](super::Partitioned)'s
    /// [`cancel`](Limiter::cancel)); the lease knows its key.
    fn cancel(&self, _: &K, lease: Lease<K>, now: Timestamp) {
        give_back(Some(&self.store), lease, now);
    }

    /// Gives `n` permits back to a rate store; an in-flight store's come
    /// back when their lease drops, not here.
    fn refund(&self, key: &K, n: u32, now: Timestamp) {
        if !self.releases {
            self.store.refund(Some(key), n, now);
        }
    }

    fn snapshot(&self, key: &K, now: Timestamp) -> Snapshot {
        self.store.snapshot(Some(key), now)
    }

    fn time_until_ready(
        &self,
        key: &K,
        n: u32,
        now: Timestamp,
    ) -> Result<Duration, Refusal<'static>> {
        self.store.time_until_ready(Some(key), n, now)
    }

    fn time_until_ready_after(
        &self,
        key: &K,
        ahead: u64,
        n: u32,
        now: Timestamp,
    ) -> Option<Duration> {
        self.store.time_until_ready_after(Some(key), ahead, n, now)
    }
}
