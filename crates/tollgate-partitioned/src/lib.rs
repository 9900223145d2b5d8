//! # tollgate-partitioned
//!
//! Partitioned limiters: .NET's `PartitionedRateLimiter`
//! for any kind of resource — an HTTP request, a message, a gRPC call, a
//! job. Use it as `tollgate::partitioned` (feature `std` of `tollgate`, on
//! by default; `tollgate` re-exports this crate, add `tollgate`).
//!
//! A [`Partitioned<R, K>`] holds an ordered list of **policies**. Each one
//! has a name, a key function `Fn(&R) -> Option<K>` ("this resource is mine,
//! with this key" or "not mine"), and a **keyed table** that gives every
//! key its own limiter: any [`KeyedTable<K>`] (token or leaky bucket,
//! fixed or sliding window, per-key quotas, any overflow policy), or an
//! in-flight limit per key ([`PartitionedBuilder::concurrency`], nginx's
//! `limit_conn`). The first policy that claims a resource charges it; a
//! resource that no policy claims is charged to the optional **default**
//! limiter (one limiter for all of them), or passes. Each policy has its
//! own table, so keys of different policies never collide (a "Post" method
//! key and a "/Post" path key are different buckets).
//!
//! ```
//! use tollgate::keyed::ShardedKeyedTable;
//! use tollgate::partitioned::Partitioned;
//! use tollgate::{Bucket, Gcra, Limiter, Quota, Timestamp};
//!
//! struct Job { tenant: u32, priority: bool }
//!
//! let per_tenant = ShardedKeyedTable::builder(Gcra::token_bucket(Quota::per_second(2)?)).build()?;
//! let jobs = Partitioned::<Job, u32>::builder("jobs")
//!     // urgent jobs are not limited per tenant: no policy claims them
//!     .policy("per_tenant", |j: &Job| (!j.priority).then_some(j.tenant), per_tenant)
//!     // what no policy claims shares one bucket
//!     .default(Bucket::token_bucket(Quota::per_second(100)?))
//!     .build();
//!
//! let now = Timestamp::ZERO;
//! let job = Job { tenant: 7, priority: false };
//! assert!(jobs.try_acquire(&job, now).is_ok());
//! assert!(jobs.try_acquire(&job, now).is_ok());
//! let refused = jobs.try_acquire(&job, now).unwrap_err();
//! assert_eq!(refused.policy(), "per_tenant");
//! assert_eq!(refused.retry_after(), core::time::Duration::from_millis(500));
//! // another tenant has its own bucket
//! assert!(jobs.try_acquire(&Job { tenant: 8, priority: false }, now).is_ok());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Chains: all or nothing
//!
//! A partitioned limiter is a [`Limiter<R>`](Limiter) over its resource,
//! so [`Limiter::and`] chains it with others that must all admit
//! (ASP.NET Core's global limiter and endpoint policy; .NET's
//! `PartitionedRateLimiter.CreateChained`) into one [`Chain`](tollgate_core::Chain).
//! When a later one refuses, the permits the earlier ones granted are given
//! back at once, so **a refused request costs nothing**; the [`Refusal`]
//! names the limiter and policy that refused and carries the longest
//! `retry_after` of the chain.
//!
//! Any [`Limiter<R>`](Limiter) is a member, one you write included (an
//! allow-list, a credit balance, a quota kept elsewhere): it refuses with
//! [`Refusal::new`], and its [`cancel`](Limiter::cancel) is what the chain
//! calls to give back what it granted. A refusal's
//! [`stage`](Refusal::stage) counts the members before the refusing one
//! ([`Limiter::stages`]: 1 for a single limiter).
//!
//! # Leases
//!
//! An admission is a [`Lease`]. A rate limiter's permits are spent when
//! granted; an in-flight limit's permits are held by the lease and given
//! back when it drops (keep it until the work — for HTTP, the response body
//! — is done). [`Limiter::cancel`] gives back a lease's permits
//! of either kind (work that never happened).
//!
//! # Waiting: a `Queue` in front
//!
//! A partitioned limiter refuses; to wait instead, put a
//! `tollgate::queue::Queue` (feature `tokio`) in front of it: each
//! resource has its own line, bounded, in arrival order, with a
//! `max_wait`. A rate policy's line is woken by its timer at the exact
//! turn (nginx `limit_req` without `nodelay`: a token bucket of burst
//! `D + 1` and a queue limit of `B - D` is `burst=B delay=D`). An
//! in-flight policy's permits come back only when a lease drops, so its
//! line is woken by the release: dropping a
//! `tollgate::queue::QueuePermit` that holds an in-flight
//! lease wakes exactly the waiters it admits, with no timer. A waiter
//! holds nothing until its turn, so one that goes away leaves its line and
//! nobody is admitted twice.
//!
//! # Stores: carried across reloads
//!
//! Each policy charges a [`PolicyStore`]: its keyed table, type-erased.
//! [`Partitioned::policy_store`] hands a running policy's store (by name)
//! to [`PartitionedBuilder::store`] of the limiter that replaces it, so a
//! configuration reload keeps every key's state; on the way,
//! [`PolicyStore::reconfigure`] changes the table's algorithm (each key
//! carrying over by an [`Inheritance`](tollgate_core::Inheritance) rule). Leases taken before the
//! switch give their permits back to the store they came from. A
//! `PolicyStore` is a [`Limiter`] over its keys on its own, for a caller
//! that finds a resource's policy and key itself.

#![forbid(unsafe_code)]
#![warn(missing_debug_implementations)]
#![doc(test(attr(deny(unused_imports))))]

use core::fmt;
use core::time::Duration;
use std::boxed::Box;
use std::string::String;
use std::sync::Arc;
use std::vec::Vec;

use tollgate_core::keyed::KeyedTable;
use tollgate_core::limiter::Limiter;
use tollgate_core::refusal::Refusal;
use tollgate_core::snapshot::Snapshot;
use tollgate_core::time::Timestamp;

mod in_flight;
mod store;

pub use in_flight::InFlightTable;
pub use store::PolicyStore;
use store::{Store, Unkeyed, Unlimited};

/// A policy's key function.
type KeyFn<R, K> = Box<dyn Fn(&R) -> Option<K> + Send + Sync>;

/// The one copy of `name` for the life of the process: a refusal names its
/// limiter and policy with `&'static str`s, so it can outlive the limiter
/// (be returned with `?` as a `Box<dyn Error>`, say). Each distinct name is
/// stored once, however many limiters (configuration reloads) use it, so
/// memory grows with the distinct names ever configured, never with
/// reloads.
fn intern(name: String) -> &'static str {
    static NAMES: std::sync::Mutex<std::collections::BTreeSet<&'static str>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut names = NAMES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(&known) = names.get(name.as_str()) {
        return known;
    }
    let name: &'static str = Box::leak(name.into_boxed_str());
    names.insert(name);
    name
}

struct Policy<R, K> {
    name: &'static str,
    key_of: KeyFn<R, K>,
    store: PolicyStore<K>,
}

/// Where policy index `usize::MAX` means the default limiter.
const DEFAULT: usize = usize::MAX;

/// A [`Lease`]'s policy index for the default limiter.
const LEASE_DEFAULT: u32 = u32::MAX;

/// A partitioned limiter: ordered policies, each with a keyed table, and
/// an optional default limiter. See the [module documentation](self).
pub struct Partitioned<R, K> {
    name: &'static str,
    policies: Vec<Policy<R, K>>,
    default: Option<(&'static str, PolicyStore<K>)>,
}

/// A partitioned limiter holds its policies' tables as trait objects (any
/// keyed table, lock-based ones included): conservatively, neither.
impl<R, K> tollgate_core::LockFreedom for Partitioned<R, K> {
    const IS_LOCK_FREE: bool = false;
    const IS_INTERRUPT_SAFE: bool = false;
}

impl<R, K> fmt::Debug for Partitioned<R, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Partitioned")
            .field("name", &self.name)
            .field(
                "policies",
                &self.policies.iter().map(|p| &p.name).collect::<Vec<_>>(),
            )
            .field("default", &self.default.as_ref().map(|d| &d.0))
            .finish()
    }
}

/// Builds a [`Partitioned`]; from [`Partitioned::builder`]. Policies are
/// tried in the order they are added.
#[must_use]
pub struct PartitionedBuilder<R, K> {
    inner: Partitioned<R, K>,
}

impl<R, K> fmt::Debug for PartitionedBuilder<R, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PartitionedBuilder")
            .field(&self.inner)
            .finish()
    }
}

impl<R, K: Send + Sync + 'static> Partitioned<R, K> {
    /// Starts a partitioned limiter named `name` (the name its refusals
    /// report as their limiter).
    pub fn builder(name: impl Into<String>) -> PartitionedBuilder<R, K> {
        PartitionedBuilder {
            inner: Self {
                name: intern(name.into()),
                policies: Vec::new(),
                default: None,
            },
        }
    }
}

impl<R, K: Send + Sync + 'static> PartitionedBuilder<R, K> {
    /// A policy charging `store` (see [`PolicyStore`]): resources for which
    /// `key_of` returns a key are charged to that key's limiter. The other
    /// policy methods are shorthands for this one.
    pub fn store(
        mut self,
        name: impl Into<String>,
        key_of: impl Fn(&R) -> Option<K> + Send + Sync + 'static,
        store: PolicyStore<K>,
    ) -> Self {
        self.inner.policies.push(Policy {
            name: intern(name.into()),
            key_of: Box::new(key_of),
            store,
        });
        self
    }

    /// A policy: resources for which `key_of` returns a key are charged to
    /// that key's limiter in `table` (any keyed table, any algorithm).
    pub fn policy<T>(
        self,
        name: impl Into<String>,
        key_of: impl Fn(&R) -> Option<K> + Send + Sync + 'static,
        table: T,
    ) -> Self
    where
        T: KeyedTable<K> + Send + Sync + 'static,
        T::Algorithm: 'static,
    {
        self.store(name, key_of, PolicyStore::keyed(table))
    }

    /// A policy without a limit: the resources it claims pass, and no
    /// later policy or default limiter sees them (.NET's
    /// `RateLimitPartition.GetNoLimiter`). Put it first to exempt a class of
    /// keys — an internal network, a health checker — from the policies
    /// after it.
    pub fn unlimited(
        self,
        name: impl Into<String>,
        claims: impl Fn(&R) -> bool + Send + Sync + 'static,
    ) -> Self
    where
        K: Default,
    {
        self.store(
            name,
            move |r: &R| claims(r).then(K::default),
            PolicyStore {
                store: Arc::new(Unlimited),
                releases: false,
            },
        )
    }

    /// The limiter of every resource that no policy claims (one limiter for
    /// all of them). Without one, such resources pass.
    pub fn default<L>(mut self, limiter: L) -> Self
    where
        L: Limiter<Permit: Copy> + Send + Sync + 'static,
    {
        self.inner.default = Some((
            "default",
            PolicyStore {
                store: Arc::new(Unkeyed(limiter)),
                releases: false,
            },
        ));
        self
    }

    /// The partitioned limiter.
    #[must_use]
    pub fn build(self) -> Partitioned<R, K> {
        self.inner
    }
}

impl<R, K: core::hash::Hash + Eq + Clone + Send + Sync + 'static> PartitionedBuilder<R, K> {
    /// An in-flight limit per key (nginx `limit_conn`): at most `limit`
    /// leases of a key held at once; a refusal's `retry_after` is a 1 ms
    /// hint, and a waiter is woken by the release instead (see the [module
    /// documentation](self)). Build `table` with
    /// [`Partitioned::in_flight_table`].
    pub fn concurrency(
        self,
        name: impl Into<String>,
        key_of: impl Fn(&R) -> Option<K> + Send + Sync + 'static,
        table: InFlightTable<K>,
    ) -> Self {
        self.store(name, key_of, PolicyStore::in_flight(table))
    }
}

/// A request admitted by a partitioned limiter. See the [module
/// documentation](self).
#[must_use = "dropping a lease releases its in-flight permits at once"]
pub struct Lease<K> {
    /// The policy's index ([`LEASE_DEFAULT`]: the default limiter); 32
    /// bits, packed with `n`, keep the lease as small as a request's
    /// future wants it (two leases ride in every HTTP response future).
    policy: u32,
    n: u32,
    key: Option<K>,
    /// For an in-flight limit: the store to give the permits back to.
    release: Option<Arc<dyn Store<K>>>,
}

impl<K> fmt::Debug for Lease<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("policy", &self.policy)
            .field("permits", &self.n)
            .field("holds_in_flight", &self.release.is_some())
            .finish_non_exhaustive()
    }
}

impl<K> Lease<K> {
    /// A lease that charged nothing (no policy, no default limiter).
    const fn free() -> Self {
        Self {
            policy: LEASE_DEFAULT,
            key: None,
            n: 0,
            release: None,
        }
    }

    /// The lease of `n` permits taken from policy `policy`'s `store` for
    /// `key`; it holds the store when the store `releases` (in flight).
    fn taken(
        policy: usize,
        key: Option<K>,
        n: u32,
        store: &Arc<dyn Store<K>>,
        releases: bool,
    ) -> Self {
        Self {
            // no limiter has 2^32 policies: a larger index is the default's
            policy: u32::try_from(policy).unwrap_or(LEASE_DEFAULT),
            key,
            n,
            release: releases.then(|| Arc::clone(store)),
        }
    }

    /// True if the lease holds in-flight permits (given back on drop).
    #[must_use]
    pub fn holds_in_flight(&self) -> bool {
        self.release.is_some()
    }

    /// The permits the lease took.
    #[must_use]
    pub const fn permits(&self) -> u32 {
        self.n
    }
}

impl<K> Drop for Lease<K> {
    fn drop(&mut self) {
        // an in-flight limit's refund ignores time
        if let Some(store) = self.release.take() {
            store.refund(self.key.as_ref(), self.n, Timestamp::ZERO);
        }
    }
}

/// The snapshot of an admission that charged nothing.
const UNLIMITED_SNAPSHOT: Snapshot = Snapshot::from_nanos(u32::MAX, u32::MAX, 0);

/// The refusal of a store asked without a key (never: every policy has
/// one).
#[cold]
fn no_key(n: u32) -> Refusal<'static> {
    Refusal::above(n, 0)
}

impl<R, K> Partitioned<R, K> {
    /// The limiter's name.
    #[must_use]
    pub fn name(&self) -> &str {
        self.name
    }

    /// The policy names, in the order they are tried.
    pub fn policy_names(&self) -> impl Iterator<Item = &str> {
        self.policies.iter().map(|p| p.name)
    }

    /// The store of the policy named `name`, shared (see [`PolicyStore`]):
    /// to carry its buckets into another partitioned limiter. `None` if no
    /// policy has that name.
    #[must_use]
    pub fn policy_store(&self, name: &str) -> Option<PolicyStore<K>> {
        self.policies
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.store.clone())
    }

    /// The policy claiming `resource` and its key, if any.
    #[inline]
    fn claim(&self, resource: &R) -> Option<(usize, K)> {
        self.policies
            .iter()
            .enumerate()
            .find_map(|(i, p)| (p.key_of)(resource).map(|k| (i, k)))
    }

    /// Charges policy `i` for `key`.
    #[inline]
    fn charge_policy(
        &self,
        i: usize,
        key: K,
        n: u32,
        now: Timestamp,
    ) -> Result<Lease<K>, Refusal<'static>> {
        let p = &self.policies[i];
        p.store.charge(i, self.name, p.name, Some(key), n, now)
    }

    /// Policy `index`'s store (`None`: the default limiter's); `None` past
    /// the last policy, or without a default limiter.
    #[inline]
    fn store_of(&self, index: Option<usize>) -> Option<&Arc<dyn Store<K>>> {
        match index {
            Some(i) => self.policies.get(i).map(|p| &p.store.store),
            None => self.default.as_ref().map(|(_, d)| &d.store),
        }
    }

    fn charge_default(
        &self,
        key: Option<K>,
        n: u32,
        now: Timestamp,
    ) -> Result<Lease<K>, Refusal<'static>> {
        match &self.default {
            Some((name, store)) => store.charge(DEFAULT, self.name, name, key, n, now),
            None => Ok(Lease::free()),
        }
    }

    /// Gives a lease's permits back (see [`give_back`]).
    fn cancel_lease(&self, lease: Lease<K>, now: Timestamp) {
        let index = (lease.policy != LEASE_DEFAULT).then_some(lease.policy as usize);
        give_back(self.store_of(index), lease, now);
    }
}

impl<K> PolicyStore<K> {
    /// Charges `n` permits of `key`: a lease of policy `index`, or the
    /// refusal by policy `name` of limiter `limiter`.
    #[inline]
    fn charge(
        &self,
        index: usize,
        limiter: &'static str,
        name: &'static str,
        key: Option<K>,
        n: u32,
        now: Timestamp,
    ) -> Result<Lease<K>, Refusal<'static>> {
        match self.store.check_n(key.as_ref(), n, now) {
            Ok(_) => Ok(Lease::taken(index, key, n, &self.store, self.releases)),
            Err(refusal) => Err(refused(refusal, limiter, name)),
        }
    }
}

/// A store's refusal, named (out of line: the admitted path stays short).
#[cold]
#[inline(never)]
fn refused(
    refusal: Refusal<'static>,
    limiter: &'static str,
    name: &'static str,
) -> Refusal<'static> {
    refusal.by(limiter, name)
}

/// Gives a lease's permits back: an in-flight lease's at once (it knows
/// its store); a rate admission's to `store` by a refund (it took them
/// now, as in a chain whose later stage refused).
fn give_back<K>(store: Option<&Arc<dyn Store<K>>>, mut lease: Lease<K>, now: Timestamp) {
    // taken here: the drop must not release again
    if let Some(own) = lease.release.take() {
        own.refund(lease.key.as_ref(), lease.n, now);
    } else if let Some(store) = store {
        store.refund(lease.key.as_ref(), lease.n, now);
    }
}

/// A partitioned limiter is a limiter over its resource: its permit is a
/// [`Lease`].
impl<R, K> Limiter<R> for Partitioned<R, K> {
    type Permit = Lease<K>;

    /// The most permits the limiter that would charge `resource` grants at
    /// once (`u32::MAX` for a resource no limiter charges).
    fn capacity(&self, resource: &R) -> u32 {
        let (index, key) = self.claim(resource).unzip();
        self.store_of(index)
            .map_or(u32::MAX, |store| store.capacity(key.as_ref()))
    }

    #[inline]
    fn try_acquire_n(
        &self,
        resource: &R,
        n: u32,
        now: Timestamp,
    ) -> Result<Lease<K>, Refusal<'static>> {
        match self.claim(resource) {
            Some((i, key)) => self.charge_policy(i, key, n, now),
            None => self.charge_default(None, n, now),
        }
    }

    fn cancel(&self, _: &R, lease: Lease<K>, now: Timestamp) {
        self.cancel_lease(lease, now);
    }

    /// Gives `n` permits back to the rate limiter that charges `resource`;
    /// an in-flight policy's permits come back when their lease drops,
    /// not here.
    fn refund(&self, resource: &R, n: u32, now: Timestamp) {
        let (index, key) = self.claim(resource).unzip();
        let releases = index.is_some_and(|i| self.policies[i].store.releases);
        if let (Some(store), false) = (self.store_of(index), releases) {
            store.refund(key.as_ref(), n, now);
        }
    }

    fn snapshot(&self, resource: &R, now: Timestamp) -> Snapshot {
        let (index, key) = self.claim(resource).unzip();
        self.store_of(index).map_or(UNLIMITED_SNAPSHOT, |store| {
            store.snapshot(key.as_ref(), now)
        })
    }

    fn time_until_ready(
        &self,
        resource: &R,
        n: u32,
        now: Timestamp,
    ) -> Result<Duration, Refusal<'static>> {
        let (index, key) = self.claim(resource).unzip();
        let Some(store) = self.store_of(index) else {
            return Ok(Duration::ZERO);
        };
        store.time_until_ready(key.as_ref(), n, now)
    }

    /// The wait behind `ahead` permits in the claiming policy's limiter
    /// (what a `tollgate::queue::Queue` in front of this limiter
    /// tells a newcomer); `None` for an in-flight policy.
    fn time_until_ready_after(
        &self,
        resource: &R,
        ahead: u64,
        n: u32,
        now: Timestamp,
    ) -> Option<Duration> {
        let (index, key) = self.claim(resource).unzip();
        let Some(store) = self.store_of(index) else {
            return Some(Duration::ZERO);
        };
        store.time_until_ready_after(key.as_ref(), ahead, n, now)
    }
}
