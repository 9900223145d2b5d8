//! Partitioned limiters (feature `std`): .NET's `PartitionedRateLimiter`
//! for any kind of resource — an HTTP request, a message, a gRPC call, a
//! job.
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
//! `PartitionedRateLimiter.CreateChained`) into one [`Chain`](crate::Chain).
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
//! of either kind (work that never happened); a shaped policy's
//! reservation comes back only while it is the last place booked (see
//! [A waiter that goes away](#a-waiter-that-goes-away)).
//!
//! # Waiting for an in-flight limit: woken by the release
//!
//! An in-flight limit's permits come back only when a lease drops, so a
//! waiter on one is woken by a release, never by a timer:
//!
//! - in a [`Queue`](crate::queue::Queue) (feature `tokio`) in front of the
//!   partitioned limiter, each resource has its own line; dropping a
//!   [`QueuePermit`](crate::queue::QueuePermit) that holds an in-flight
//!   lease re-examines the lines waiting for a release and wakes exactly
//!   the waiters it admits. The queue bounds each line, refuses at once
//!   what would wait past its `max_wait`, and is the same for a rate policy
//!   (woken by its line's timer at the exact turn) and for a
//!   [`Chain`](crate::Chain) (admitted all or nothing);
//! - [`Partitioned::acquire_key_in_line`] waits in the in-flight policy's
//!   own line for a key: a release of that key hands it the permits (one
//!   atomic load more per release when nobody waits anywhere in the
//!   table), each key's line is served in arrival order, and while it
//!   waits a newcomer's plain check for that key is refused rather than
//!   overtaking it. A waiter that goes away leaves its line, and permits
//!   handed to it that it never saw go on to the next waiter.
//!
//! # Stores: carried across reloads
//!
//! Each policy charges a [`PolicyStore`]: its keyed table and how it is
//! charged. [`Partitioned::policy_store`] hands a running policy's store
//! to [`PartitionedBuilder::store`] of the limiter that replaces it, so a
//! configuration reload keeps every key's state; on the way,
//! [`PolicyStore::reconfigure`] changes the table's algorithm (each key
//! carrying over by an [`Inheritance`] rule) and
//! [`PolicyStore::with_shaping`] its shaping. Leases taken before the
//! switch give their permits back to the store they came from.
//!
//! # Shaping: delay instead of refusing (nginx `limit_req`)
//!
//! A token-bucket policy can *shape* instead of refuse:
//! [`PartitionedBuilder::shaped`] with a [`Shaping`] admits a request as
//! soon as its place in the bucket is reserved and tells the caller to wait
//! the lease's [`delay`](Lease::delay) before doing the work (the async `acquire`
//! sleeps it). This is nginx's `limit_req`, with the same arithmetic on
//! nanoseconds instead of milli-requests:
//!
//! | nginx | tollgate |
//! |---|---|
//! | `limit_req zone=z burst=B nodelay` | token bucket of burst `B + 1`, no shaping: the excess up to `B` at once |
//! | `limit_req zone=z burst=B` | [`Shaping::delay_all`] on a bucket of burst `B + 1`: each excess request waits its turn, one per interval |
//! | `limit_req zone=z burst=B delay=D` | [`Shaping::delay_after`]`(D)`: the first `D` excess requests pass at once, the rest wait |
//!
//! Each key's waiting requests are bounded by its burst and served in the
//! order they arrived (a reservation is a place in that key's line); one
//! client's flood never delays another client; a request whose wait would
//! exceed [`Shaping::max_wait`] is refused at once. Memory is the table's:
//! fixed.
//!
//! ## A waiter that goes away
//!
//! A waiter whose future is dropped (or whose lease is
//! [cancelled](Limiter::cancel)) gives its place back **only if
//! it is still the last place booked** in its bucket: the lease remembers
//! the bucket's state its reservation left, and the cancellation is one
//! compare-and-swap from exactly that state back by what it took
//! ([`KeyedTable::refund_if_last`]). If a later request booked a place
//! after it, the cancelled place **stays spent**, as nginx `limit_req`
//! keeps the slot of a client that disconnects while delayed: the bucket
//! admits less than it could, never more. Waiters that go away from the end
//! of the line, latest first, give every place back.
//!
//! Why not give the place back anyway, or move the later waiters up? A
//! token bucket has one number per key (its TAT): it cannot record a hole
//! in the middle of its line. Moving the TAT back by the cancelled place
//! while the waiters behind it keep the turns they booked (they are
//! already asleep until them) gives the last of those turns to the next
//! arrival too: two requests on one turn, more than the rate in that
//! window, and later arrivals overtaking earlier waiters (measured on a
//! real server: 24-26 requests/s against 10/s). Moving the later waiters
//! up would mean waking and re-timing every one of them, and a shared line
//! per key instead of 8 bytes, for capacity that comes back by itself once
//! the spent turn has passed (a spent place costs one interval of service,
//! never a request admitted twice). A plain refund stays right for permits
//! taken *now* rather than as a place in a line: a chain gives back an
//! unshaped stage's admission when a later stage refuses (see
//! [Chains](#chains-all-or-nothing)). A request refused for
//! [`Shaping::max_wait`] and a dry run's would-be delay cancel their
//! reservation at once, so it is still the last one unless another
//! request booked in the same instant.

mod lines;
mod waiting;

use core::any::{Any, TypeId};
use core::fmt;
use core::task::{Poll, Waker};
use core::time::Duration;
use std::boxed::Box;
use std::string::String;
use std::sync::Arc;
use std::vec::Vec;

use crate::concurrency::InFlight;
use crate::gcra::Gcra;
use crate::keyed::{KeyedTable, ShardedKeyedTable, TableBuilder};
use crate::limiter::{Algorithm, Grant, Limiter};
use crate::live::{Inheritance, LiveBucket};
use crate::refusal::Refusal;
use crate::snapshot::Snapshot;
use crate::time::Timestamp;
use lines::{InFlightStore, Join, Ticket};

/// A policy's keyed store, with its type erased: what a [`Partitioned`]
/// charges.
///
/// Keyed stores are always given a key; the default limiter's store
/// ignores it, and a resource that no policy claims has none (`None`).
trait Store<K>: Send + Sync {
    /// Takes `n` permits for `key`; on an admission, the grant, whose
    /// `full_at` is exact for every store that can be shaped (`now` for the
    /// default limiter's and the unlimited store, which never are). The
    /// tables' own result type, so that a refusal is not copied from one
    /// layout to another behind this dynamic call.
    fn check_n(&self, key: Option<&K>, n: u32, now: Timestamp) -> Result<Grant, Refusal<'static>>;
    /// `key`'s state at `now`, taking nothing.
    fn snapshot(&self, key: Option<&K>, now: Timestamp) -> Snapshot;
    /// The most permits one request for `key` can take.
    fn capacity(&self, key: Option<&K>) -> u32;
    fn refund(&self, key: Option<&K>, n: u32, now: Timestamp);
    /// Gives back a shaped reservation only if it is still the last one
    /// booked ([`KeyedTable::refund_if_last`]); the default gives
    /// nothing back (stores that never shape).
    fn refund_if_last(&self, key: Option<&K>, n: u32, full_at: Timestamp, now: Timestamp) {
        let _ = (key, n, full_at, now);
    }
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
    /// The keyed table's [`Algorithm`](crate::limiter::Algorithm) type
    /// (`None`: not a keyed table).
    fn algorithm_type(&self) -> Option<TypeId> {
        None
    }
    /// Reconfigures the keyed table if `next` is an `Option<T::Algorithm>`
    /// holding a value (which it takes); false otherwise.
    fn reconfigure(&self, next: &mut dyn Any, how: Inheritance, now: Timestamp) -> bool {
        let _ = (next, how, now);
        false
    }
    /// Takes `n` permits for `key` or joins the key's line of at most
    /// `limit` waiters (`None`: the store has no lines, not in flight).
    fn join_line(&self, key: &K, n: u32, limit: usize, waker: &Waker) -> Option<Join> {
        let _ = (key, n, limit, waker);
        None
    }
    /// A queued waiter's outcome (see [`InFlightStore::poll`]).
    fn poll_line(&self, ticket: Ticket, waker: &Waker) -> Poll<Result<(), Refusal<'static>>> {
        let _ = (ticket, waker);
        Poll::Ready(Err(no_key(0)))
    }
    /// A queued waiter goes away (see [`InFlightStore::leave`]).
    fn leave_line(&self, ticket: Ticket) {
        let _ = ticket;
    }
}

impl<K> Store<K> for InFlightStore<K>
where
    K: core::hash::Hash + Eq + Clone + Send + Sync,
{
    fn check_n(&self, key: Option<&K>, n: u32, now: Timestamp) -> Result<Grant, Refusal<'static>> {
        match key {
            Some(key) => InFlightStore::check_n(self, key, n, now),
            None => Err(no_key(n)), // never: policies have keys
        }
    }
    fn snapshot(&self, key: Option<&K>, now: Timestamp) -> Snapshot {
        match key {
            Some(key) => self.table.snapshot(key, now),
            None => UNLIMITED_SNAPSHOT,
        }
    }
    fn capacity(&self, key: Option<&K>) -> u32 {
        key.map_or(0, |key| self.table.capacity(key))
    }
    fn refund(&self, key: Option<&K>, n: u32, _: Timestamp) {
        if let Some(key) = key {
            self.release(key, n);
        }
    }
    fn time_until_ready(
        &self,
        key: Option<&K>,
        n: u32,
        now: Timestamp,
    ) -> Result<Duration, Refusal<'static>> {
        match key {
            Some(key) => self.table.time_until_ready(key, n, now),
            None => Err(no_key(n)),
        }
    }
    fn algorithm_type(&self) -> Option<TypeId> {
        Some(TypeId::of::<InFlight>())
    }
    fn reconfigure(&self, next: &mut dyn Any, how: Inheritance, now: Timestamp) -> bool {
        match next
            .downcast_mut::<Option<InFlight>>()
            .and_then(Option::take)
        {
            Some(alg) => {
                self.table.reconfigure(alg, how, now);
                // a raised limit lets waiters in
                self.serve_all();
                true
            }
            None => false,
        }
    }
    fn join_line(&self, key: &K, n: u32, limit: usize, waker: &Waker) -> Option<Join> {
        Some(self.join(key, n, limit, waker))
    }
    fn poll_line(&self, ticket: Ticket, waker: &Waker) -> Poll<Result<(), Refusal<'static>>> {
        self.poll(ticket, waker)
    }
    fn leave_line(&self, ticket: Ticket) {
        self.leave(ticket);
    }
}

struct Keyed<T>(T);

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
    fn refund_if_last(&self, key: Option<&K>, n: u32, full_at: Timestamp, now: Timestamp) {
        if let Some(key) = key {
            self.0.refund_if_last(key, n, full_at, now);
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
    fn algorithm_type(&self) -> Option<TypeId> {
        Some(TypeId::of::<T::Algorithm>())
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
struct Unkeyed<L>(L);

impl<K, L: Limiter<Permit: Copy> + Send + Sync> Store<K> for Unkeyed<L> {
    #[inline]
    fn check_n(&self, _: Option<&K>, n: u32, now: Timestamp) -> Result<Grant, Refusal<'static>> {
        // never shaped: the instant is not needed
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
struct Single(LiveBucket);

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
    fn refund_if_last(&self, _: Option<&K>, n: u32, full_at: Timestamp, now: Timestamp) {
        self.0.refund_if_last(n, full_at, now);
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
    fn algorithm_type(&self) -> Option<TypeId> {
        Some(TypeId::of::<Gcra>())
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
struct Unlimited;

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

/// A policy's keyed store: the table that gives every key its limiter,
/// with how the policy charges it (rate, shaped, or in flight). Cloning it
/// shares the table.
///
/// Build one from a table ([`keyed`](Self::keyed), [`shaped`](Self::shaped),
/// [`in_flight`](Self::in_flight)) and give it to
/// [`PartitionedBuilder::store`]; take one from a running limiter with
/// [`Partitioned::policy_store`] to carry a policy's buckets into the
/// limiter that replaces it (a configuration reload), reconfigured or
/// reshaped on the way:
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
/// let store = old.policy_store(0).expect("policy 0");
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
    store: Arc<dyn Store<K>>,
    releases: bool,
    shaping: Option<Shaping>,
}

impl<K> Clone for PolicyStore<K> {
    fn clone(&self) -> Self {
        Self {
            store: Arc::clone(&self.store),
            releases: self.releases,
            shaping: self.shaping,
        }
    }
}

impl<K> fmt::Debug for PolicyStore<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyStore")
            .field("holds_in_flight", &self.releases)
            .field("shaping", &self.shaping)
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
            shaping: None,
        }
    }

    /// A token-bucket store that delays excess requests instead of
    /// refusing them (see [`Shaping`] and the [module documentation](self)).
    pub fn shaped<T>(table: T, shaping: Shaping) -> Self
    where
        T: KeyedTable<K, Algorithm = Gcra> + Send + Sync + 'static,
    {
        Self {
            store: Arc::new(Keyed(table)),
            releases: false,
            shaping: Some(shaping),
        }
    }

    /// One bucket shared by every key: for a policy whose resources all
    /// have the same key (a global limit), it skips the keyed table's
    /// hashing and lookup. It runs a [`Gcra`], so
    /// [`reconfigure`](Self::reconfigure) with a [`Gcra`] and
    /// [`with_shaping`](Self::with_shaping) work as on a keyed table.
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
            shaping: None,
        }
    }

    /// An in-flight limit per key (nginx `limit_conn`): a lease holds its
    /// permits until it drops. Build `table` with
    /// [`Partitioned::in_flight_table`].
    pub fn in_flight(table: InFlightTable<K>) -> Self
    where
        K: core::hash::Hash + Eq + Clone + Send + Sync,
    {
        Self {
            store: Arc::new(table.0),
            releases: true,
            shaping: None,
        }
    }
}

impl<K> PolicyStore<K> {
    /// True for an in-flight limit (its leases give permits back on drop).
    #[must_use]
    pub fn holds_in_flight(&self) -> bool {
        self.releases
    }

    /// The store's shaping, if it delays instead of refusing.
    #[must_use]
    pub fn shaping(&self) -> Option<Shaping> {
        self.shaping
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

    /// The same table, delaying instead of refusing by `shaping`
    /// (replacing any shaping it had).
    ///
    /// # Errors
    /// The store back, unchanged, when its table is not a [`Gcra`] table
    /// (shaping needs a token bucket's reservations) or it holds in-flight
    /// permits.
    pub fn with_shaping(mut self, shaping: Shaping) -> Result<Self, Self> {
        if self.releases || self.store.algorithm_type() != Some(TypeId::of::<Gcra>()) {
            return Err(self);
        }
        self.shaping = Some(shaping);
        Ok(self)
    }

    /// The same table, refusing instead of delaying.
    #[must_use]
    pub fn without_shaping(mut self) -> Self {
        self.shaping = None;
        self
    }
}

/// A policy's store is a limiter over its keys, on its own: what a
/// [`Partitioned`] policy charges once its key function has found the key,
/// for a caller that finds keys itself (the HTTP layer routes a request to
/// a policy and extracts its key once). Its permit is a [`Lease`]; a
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
        charge(
            DEFAULT,
            "",
            "",
            &self.store,
            self.releases,
            self.shaping,
            Some(key.clone()),
            n,
            now,
        )
    }

    /// Gives a lease's permits back (see [`Partitioned`]'s
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

    #[inline]
    fn delay(&self, lease: &Lease<K>) -> Duration {
        lease.delay()
    }
}

/// Delay instead of refusing, for a token-bucket policy (see the [module
/// documentation](self)): nginx `limit_req` without `nodelay`, or with
/// `delay=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shaping {
    /// Excess requests that pass without waiting (nginx `delay=`).
    delay_after: u32,
    /// The longest wait accepted; a longer one is refused at once.
    max_wait: Option<Duration>,
}

impl Shaping {
    /// Every request beyond the rate waits for its turn (nginx `burst=B`
    /// without `nodelay`).
    #[must_use]
    pub const fn delay_all() -> Self {
        Self {
            delay_after: 0,
            max_wait: None,
        }
    }

    /// The first `excess` requests beyond the rate pass at once, the rest
    /// wait (nginx `delay=N`).
    #[must_use]
    pub const fn delay_after(excess: u32) -> Self {
        Self {
            delay_after: excess,
            max_wait: None,
        }
    }

    /// Refuses at once a request that would wait longer than `max_wait`.
    #[must_use]
    pub const fn max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = Some(max_wait);
        self
    }

    /// The excess requests that pass without waiting.
    #[must_use]
    pub const fn excess_without_delay(&self) -> u32 {
        self.delay_after
    }

    /// The longest wait accepted.
    #[must_use]
    pub const fn longest_wait(&self) -> Option<Duration> {
        self.max_wait
    }

    /// The wait for an admission of `n` permits that left its bucket full
    /// again `lead` nanoseconds after its `now`, at the rate of `rate` (a
    /// snapshot of that bucket): the work queued ahead of it beyond the
    /// free excess.
    fn delay(&self, rate: &Snapshot, lead: u64, n: u32) -> Duration {
        // the lead before this admission (less its n permits), less the
        // free excess; in the bucket's units, rounded up
        Duration::from_nanos(
            rate.lead_less_permits_nanos(lead, u64::from(n) + u64::from(self.delay_after)),
        )
    }
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
    default: Option<(&'static str, Arc<dyn Store<K>>)>,
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

    /// A token-bucket policy that delays excess requests instead of
    /// refusing them (see [`Shaping`] and the [module documentation](self)).
    pub fn shaped<T>(
        self,
        name: impl Into<String>,
        key_of: impl Fn(&R) -> Option<K> + Send + Sync + 'static,
        table: T,
        shaping: Shaping,
    ) -> Self
    where
        T: KeyedTable<K, Algorithm = Gcra> + Send + Sync + 'static,
    {
        self.store(name, key_of, PolicyStore::shaped(table, shaping))
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
                shaping: None,
            },
        )
    }

    /// The limiter of every resource that no policy claims (one limiter for
    /// all of them). Without one, such resources pass.
    pub fn default<L>(mut self, limiter: L) -> Self
    where
        L: Limiter<Permit: Copy> + Send + Sync + 'static,
    {
        self.inner.default = Some(("default", Arc::new(Unkeyed(limiter))));
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

/// A keyed table of in-flight limits, for [`PartitionedBuilder::concurrency`],
/// with each key's line of waiters (see
/// [`Partitioned::acquire_key_in_line`]).
#[derive(Debug)]
pub struct InFlightTable<K>(InFlightStore<K>);

impl<R, K: core::hash::Hash + Eq + Clone + Send + Sync + 'static> Partitioned<R, K> {
    /// A table of at most `limit` in flight per key, for up to `max_keys`
    /// keys (a full table of busy keys refuses new keys: their
    /// permits could not be counted).
    ///
    /// # Errors
    /// [`ConfigError::ZeroLimit`](crate::ConfigError::ZeroLimit) or a table
    /// size error.
    pub fn in_flight_table(
        limit: u32,
        max_keys: usize,
    ) -> Result<InFlightTable<K>, crate::ConfigError> {
        if limit == 0 {
            return Err(crate::ConfigError::ZeroLimit);
        }
        let alg = InFlight::with_limit(limit);
        let table: TableBuilder<ShardedKeyedTable<K, InFlight>, InFlight, _> =
            ShardedKeyedTable::builder(alg);
        Ok(InFlightTable(InFlightStore::new(
            table
                .max_keys(max_keys)
                .overflow(crate::keyed::OverflowPolicy::Deny)
                .build()?,
        )))
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
    /// For a shaped policy's reservation: when its admission left the
    /// bucket full (ns), which identifies it as the last one booked; 0
    /// for any other lease (see [`Partitioned::cancel_lease`]).
    full_at: u64,
    /// How long to wait before doing the work, in ns (a shaped
    /// reservation's turn).
    delay: u64,
    /// For an in-flight limit: the store to give the permits back to.
    release: Option<Arc<dyn Store<K>>>,
}

impl<K> fmt::Debug for Lease<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("policy", &self.policy)
            .field("permits", &self.n)
            .field("delay", &self.delay())
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
            full_at: 0,
            delay: 0,
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
            full_at: 0,
            delay: 0,
            release: releases.then(|| Arc::clone(store)),
        }
    }

    /// True if the lease holds in-flight permits (given back on drop).
    #[must_use]
    pub fn holds_in_flight(&self) -> bool {
        self.release.is_some()
    }

    /// How long to wait before doing the work: zero unless a [`Shaping`]
    /// policy reserved a later turn for it.
    #[must_use]
    pub const fn delay(&self) -> Duration {
        Duration::from_nanos(self.delay)
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
const UNLIMITED_SNAPSHOT: Snapshot = Snapshot::exact(u32::MAX, u32::MAX, 0);

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

    /// Policy `index`'s store, shared (see [`PolicyStore`]): to carry its
    /// buckets into another partitioned limiter. `None` past the last
    /// policy.
    #[must_use]
    pub fn policy_store(&self, index: usize) -> Option<PolicyStore<K>> {
        self.policies.get(index).map(|p| p.store.clone())
    }

    /// The policy claiming `resource` and its key, if any.
    #[inline]
    fn claim(&self, resource: &R) -> Option<(usize, K)> {
        self.policies
            .iter()
            .enumerate()
            .find_map(|(i, p)| (p.key_of)(resource).map(|k| (i, k)))
    }

    /// Charges policy `index` (`None`: the default limiter) for `key`
    /// directly, skipping the key functions: for callers that route
    /// resources themselves (the HTTP layer matches a path to a policy
    /// once). An index past the last policy charges nothing (a free lease).
    ///
    /// # Errors
    /// The [`Refusal`]; nothing was taken.
    #[inline]
    pub fn try_acquire_key(
        &self,
        index: Option<usize>,
        key: K,
        n: u32,
        now: Timestamp,
    ) -> Result<Lease<K>, Refusal<'static>> {
        match index {
            Some(i) => match self.policies.get(i) {
                Some(p) => self.charge(
                    i,
                    p.name,
                    &p.store.store,
                    p.store.releases,
                    p.store.shaping,
                    Some(key),
                    n,
                    now,
                ),
                None => Ok(Lease::free()),
            },
            None => self.charge_default(Some(key), n, now),
        }
    }

    /// The state of policy `index`'s limiter for `key` (`None`: the
    /// default limiter's), taking nothing: the snapshot for an admission
    /// made with [`try_acquire_key`](Self::try_acquire_key), computed when
    /// asked (for rate-limit headers). An index past the last policy, or
    /// no default limiter, is unlimited.
    #[must_use]
    pub fn snapshot_key(&self, index: Option<usize>, key: &K, now: Timestamp) -> Snapshot {
        // the default limiter ignores keys
        let key = index.map(|_| key);
        self.store_of(index)
            .map_or(UNLIMITED_SNAPSHOT, |store| store.snapshot(key, now))
    }

    /// Policy `index`'s store (`None`: the default limiter's); `None` past
    /// the last policy, or without a default limiter.
    #[inline]
    fn store_of(&self, index: Option<usize>) -> Option<&Arc<dyn Store<K>>> {
        match index {
            Some(i) => self.policies.get(i).map(|p| &p.store.store),
            None => self.default.as_ref().map(|(_, store)| store),
        }
    }

    fn charge_default(
        &self,
        key: Option<K>,
        n: u32,
        now: Timestamp,
    ) -> Result<Lease<K>, Refusal<'static>> {
        match &self.default {
            Some((name, store)) => self.charge(DEFAULT, name, store, false, None, key, n, now),
            None => Ok(Lease::free()),
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn charge(
        &self,
        index: usize,
        name: &'static str,
        store: &Arc<dyn Store<K>>,
        releases: bool,
        shaping: Option<Shaping>,
        key: Option<K>,
        n: u32,
        now: Timestamp,
    ) -> Result<Lease<K>, Refusal<'static>> {
        charge(
            index, self.name, name, store, releases, shaping, key, n, now,
        )
    }

    /// Gives a lease's permits back: an in-flight lease's at once; a rate
    /// admission's by a refund (it took them now, as in a chain whose
    /// later stage refused); a shaped policy's reservation only if it is
    /// still the last one booked for its key. A reservation with a later
    /// one on top stays spent: moving the bucket back under the later
    /// waiter, which keeps its turn, would give that same turn to the next
    /// arrival too (see the [module documentation](self)).
    fn cancel_lease(&self, lease: Lease<K>, now: Timestamp) {
        let index = (lease.policy != LEASE_DEFAULT).then_some(lease.policy as usize);
        give_back(self.store_of(index), lease, now);
    }
}

/// Charges `n` permits of `key` to `store`: a lease, or the refusal by
/// policy `name` of limiter `limiter`.
#[allow(clippy::too_many_arguments)]
#[inline]
fn charge<K>(
    index: usize,
    limiter: &'static str,
    name: &'static str,
    store: &Arc<dyn Store<K>>,
    releases: bool,
    shaping: Option<Shaping>,
    key: Option<K>,
    n: u32,
    now: Timestamp,
) -> Result<Lease<K>, Refusal<'static>> {
    match store.check_n(key.as_ref(), n, now) {
        // the common case, inline in the caller: an unshaped admission
        Ok(_) if shaping.is_none() => Ok(Lease::taken(index, key, n, store, releases)),
        d => charge_rest(
            index, limiter, name, store, releases, shaping, key, n, now, d,
        ),
    }
}

/// [`charge`] after anything but an unshaped admission: a shaped one (a
/// delay, perhaps too long) or a refusal.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn charge_rest<K>(
    index: usize,
    limiter: &'static str,
    name: &'static str,
    store: &Arc<dyn Store<K>>,
    releases: bool,
    shaping: Option<Shaping>,
    key: Option<K>,
    n: u32,
    now: Timestamp,
    d: Result<Grant, Refusal<'static>>,
) -> Result<Lease<K>, Refusal<'static>> {
    match d {
        Ok(grant) => {
            let full_at = grant.full_at();
            let mut lease = Lease::taken(index, key, n, store, releases);
            let Some(shaping) = shaping else {
                return Ok(lease);
            };
            // A reservation: its turn comes from the instant its own
            // admission left the bucket full (a later booking's does not
            // count), and only the last one booked can go back. The
            // snapshot gives the bucket's rate.
            let rate = store.snapshot(lease.key.as_ref(), now);
            let lead = full_at.as_nanos().saturating_sub(now.as_nanos());
            let delay = shaping.delay(&rate, lead, n);
            lease.full_at = full_at.as_nanos();
            if let Some(max) = shaping.max_wait {
                if delay > max {
                    // too long a wait: give the reservation back
                    give_back(Some(store), lease, now);
                    return Err(Refusal::new(delay.saturating_sub(max), rate).by(limiter, name));
                }
            }
            lease.delay = crate::time::duration_to_nanos(delay);
            Ok(lease)
        }
        Err(refusal) => Err(refusal.by(limiter, name)),
    }
}

/// Gives a lease's permits back: an in-flight lease's at once (it knows
/// its store); a rate admission's to `store` by a refund (it took them
/// now, as in a chain whose later stage refused); a shaped policy's
/// reservation only if it is still the last one booked for its key. A
/// reservation with a later one on top stays spent: moving the bucket back
/// under the later waiter, which keeps its turn, would give that same turn
/// to the next arrival too (see the [module documentation](self)).
fn give_back<K>(store: Option<&Arc<dyn Store<K>>>, mut lease: Lease<K>, now: Timestamp) {
    // taken here: the drop must not release again
    if let Some(own) = lease.release.take() {
        own.refund(lease.key.as_ref(), lease.n, now);
        return;
    }
    if let Some(store) = store {
        if lease.full_at == 0 {
            store.refund(lease.key.as_ref(), lease.n, now);
        } else {
            let full_at = Timestamp::from_nanos(lease.full_at);
            store.refund_if_last(lease.key.as_ref(), lease.n, full_at, now);
        }
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
            Some((i, key)) => self.try_acquire_key(Some(i), key, n, now),
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
    /// (what a [`Queue`](crate::queue::Queue) in front of this limiter
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

    #[inline]
    fn delay(&self, lease: &Lease<K>) -> Duration {
        lease.delay()
    }
}
