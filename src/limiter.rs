//! The two limiter traits.
//!
//! tollgate separates an *algorithm* (a small, `Copy` configuration such as
//! a [`Gcra`](crate::Gcra) with its interval and tolerance) from its *state*
//! (a few atomic bytes). [`Algorithm`] is "algorithm applied to state at
//! `now`": it is what a keyed table uses to keep only the state per key and
//! compute each key's answer on the fly.
//!
//! [`Limiter<K>`](Limiter) is the one acquisition model: a limiter over keys
//! of type `K` — `()` for a self-contained limiter such as a [`Bucket`], a
//! key for a keyed table, a resource for a
//! [`Partitioned`](crate::partitioned::Partitioned) limiter — that answers
//! with a permit or a [`Refusal`]. Chains, statistics, waiters and
//! middleware work with any `Limiter`.
//!
//! Both traits take `now` as a [`Timestamp`] on the caller's monotonic
//! [`Clock`](crate::Clock); waits are [`Duration`]s. Every operation is
//! lock-free unless the implementing type documents otherwise, or the
//! target has no lock-free atomics of its width
//! ([`LockFreedom`](crate::LockFreedom) tells, per type and target).
//!
//! A rate limiter's permits come back with *time* (or a
//! [`refund`](Limiter::refund) of work that cost less): its permit, a
//! [`Grant`], holds nothing. A limit on work *in flight*, whose permits come
//! back when the work ends, is the
//! [`ConcurrencyLimiter`](crate::ConcurrencyLimiter), which hands out its
//! permits only through guards, or a partitioned limiter's in-flight
//! policy, whose [`Lease`](crate::partitioned::Lease) gives them back when
//! it drops.
//!
//! Waiting for a limiter is not part of the trait: a
//! [`Queue`](crate::queue::Queue) (feature `tokio`) waits in front of any
//! `Limiter`, keyed or not, woken by a timer for a rate and by the release
//! for an in-flight limit. `Limiter` is dyn-compatible: a
//! `Box<dyn Limiter<K, Permit = Grant>>` holds any rate limiter over `K`.

use core::time::Duration;

use crate::chain::Chain;
use crate::live::Inheritance;
use crate::refusal::Refusal;
use crate::snapshot::Snapshot;
use crate::time::Timestamp;

/// A rate-limiting algorithm applied to separately stored state.
///
/// Implementations must uphold:
/// - `check_n(state, 0, now)` changes nothing and returns `Ok(())`;
/// - `check_n(state, n, now)` with `n > capacity()` returns a refusal that
///   [`is_never`](Refusal::is_never) and changes nothing;
/// - `refund` never raises the available permits above `capacity()`;
/// - `is_idle(state, now)` is true only if `state` now behaves exactly like a
///   freshly created state (so it can be dropped without changing any
///   future decision).
pub trait Algorithm {
    /// The per-limiter mutable state (atomic, shared by reference).
    type State;

    /// A fresh state as a constant, so that a table of states can be built
    /// in `const` context (a `static` [`HeaplessKeyedTable`](crate::keyed::HeaplessKeyedTable)).
    /// Not available under `cfg(loom)`, whose atomics are not `const`.
    #[cfg(not(loom))]
    const FRESH_STATE: Self::State;

    /// A fresh state (full capacity).
    fn new_state(&self) -> Self::State;

    /// The most permits one request can ever take.
    fn capacity(&self) -> u32;

    /// Tries to take `n` permits at `now`. On an admission, the instant
    /// the state is full again (idle: `now` plus its snapshot's
    /// [`reset_after`](Snapshot::reset_after)), which a keyed table uses
    /// to know when the key can be evicted; a caller that does not read it
    /// pays nothing for it.
    ///
    /// # Errors
    /// The [`Refusal`] (one that [`is_never`](Refusal::is_never) if `n`
    /// can never be granted); nothing was taken.
    fn check_n(
        &self,
        state: &Self::State,
        n: u32,
        now: Timestamp,
    ) -> Result<Timestamp, Refusal<'static>>;

    /// Gives back `n` permits taken by an earlier admission (for example
    /// when a later limiter in a chain refused the request). Meant for an
    /// admission made moments ago; see each algorithm for what a late or
    /// stale refund does (none ever lifts capacity above its limit at
    /// `now`; the GCRA can credit permits that had already expired).
    fn refund(&self, state: &Self::State, n: u32, now: Timestamp);

    /// The state at `now`, without changing it.
    fn snapshot(&self, state: &Self::State, now: Timestamp) -> Snapshot;

    /// The time from `now` until a request for `n` permits would be
    /// admitted if nothing else happens (zero if it would be admitted now).
    ///
    /// # Errors
    /// A refusal that [`is_never`](Refusal::is_never) if `n` can never be
    /// granted.
    fn time_until_ready(
        &self,
        state: &Self::State,
        n: u32,
        now: Timestamp,
    ) -> Result<Duration, Refusal<'static>>;

    /// True if `state` is indistinguishable from a fresh one at `now`.
    fn is_idle(&self, state: &Self::State, now: Timestamp) -> bool;

    /// True if capacity comes back only when its holders give it back (an
    /// in-flight limit), never with time. A keyed table full of busy keys
    /// then refuses a new key [`until_release`](Refusal::until_release):
    /// a slot frees up at a release, so a queue waits for one instead of
    /// polling a timer. The default is false (a rate).
    fn frees_on_release(&self) -> bool {
        false
    }

    /// The finest time step the algorithm relies on (a GCRA emission
    /// interval, a window, a segment): a clock whose resolution is coarser
    /// cannot enforce it ([`ConfigError::ClockTooCoarse`](crate::ConfigError::ClockTooCoarse)).
    fn required_resolution(&self) -> Duration;

    /// Carries `state`, kept under `self` until now, over to `next` by the
    /// [`Inheritance`] rule `how`: a live reconfiguration (see
    /// [`crate::live`]). The caller guarantees that no other operation on
    /// `state` runs meanwhile (a keyed table holds its lock). Rounding only
    /// ever leaves less room than the rule gives.
    fn carry_over(&self, next: &Self, state: &Self::State, how: Inheritance, now: Timestamp);

    /// The time from `now` until a request for `n` permits would be
    /// admitted if `ahead` permits (in requests of at most
    /// [`capacity`](Algorithm::capacity) each) were admitted before it, in
    /// order, and nothing else took capacity.
    ///
    /// This is what a queue needs to tell a newcomer how long it would wait
    /// behind the requests already queued. `None` means the algorithm
    /// cannot predict it (for example a limiter whose capacity returns when
    /// a holder releases it rather than with time), and is the default.
    fn time_until_ready_after(
        &self,
        state: &Self::State,
        ahead: u64,
        n: u32,
        now: Timestamp,
    ) -> Option<Duration> {
        let _ = (state, ahead, n, now);
        None
    }
}

/// A limiter over keys of type `K` (`()` for a direct limiter): the one
/// acquisition model of tollgate.
///
/// A non-blocking acquire of `n` permits for a key at `now` returns either
/// a [`Permit`](Limiter::Permit) or a [`Refusal`]. Buckets and windows are
/// `Limiter<()>` (the default); keyed tables are `Limiter<K>`, a limiter per
/// key; a [`Partitioned`](crate::partitioned::Partitioned) limiter is a
/// `Limiter<R>` over any resource; [`Chain`] (from [`and`](Limiter::and)),
/// [`WithStats`](crate::WithStats) and pointers (`&L`, `Arc<L>`, `Box<L>`)
/// are limiters over the same key as what they wrap.
///
/// What headers and dashboards need (remaining, reset) is computed when
/// asked ([`snapshot`](Limiter::snapshot)), never built on a check.
///
/// ```
/// use tollgate::keyed::ShardedKeyedTable;
/// use tollgate::{Bucket, Gcra, Limiter, Quota, Timestamp};
///
/// // generic code works with a direct limiter and a per-key one alike
/// fn admit<K, L: Limiter<K>>(limiter: &L, key: &K, now: Timestamp) -> bool {
///     limiter.try_acquire(key, now).is_ok()
/// }
///
/// let now = Timestamp::ZERO;
/// let bucket = Bucket::token_bucket(Quota::per_second(1)?);
/// assert!(admit(&bucket, &(), now));
/// assert!(!admit(&bucket, &(), now));
///
/// let per_ip = ShardedKeyedTable::builder(Gcra::token_bucket(Quota::per_second(1)?)).build()?;
/// assert!(admit(&per_ip, &[10, 0, 0, 1], now));
/// assert!(!admit(&per_ip, &[10, 0, 0, 1], now));
/// assert!(admit(&per_ip, &[10, 0, 0, 2], now)); // its own bucket
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Limiter<K: ?Sized = ()> {
    /// What an admission holds: a [`Grant`] for a rate (spent when
    /// granted, nothing to release), a lease that gives its in-flight
    /// permits back when it drops.
    type Permit;

    /// The most permits one request for `key` can ever take.
    fn capacity(&self, key: &K) -> u32;

    /// Tries to take `n` permits for `key` at `now`; `n = 0` is a peek.
    ///
    /// # Errors
    /// The [`Refusal`] (one that [`is_never`](Refusal::is_never) if `n`
    /// can never be granted); nothing was taken.
    fn try_acquire_n(
        &self,
        key: &K,
        n: u32,
        now: Timestamp,
    ) -> Result<Self::Permit, Refusal<'static>>;

    /// Tries to take one permit for `key` at `now`.
    ///
    /// # Errors
    /// The [`Refusal`]; nothing was taken.
    #[inline(always)]
    fn try_acquire(&self, key: &K, now: Timestamp) -> Result<Self::Permit, Refusal<'static>> {
        self.try_acquire_n(key, 1, now)
    }

    /// Gives back every permit `permit` took, as if the work never happened
    /// (a chain calls it when a later member refuses).
    fn cancel(&self, key: &K, permit: Self::Permit, now: Timestamp);

    /// Gives back `n` permits of an earlier rate admission for `key` (work
    /// that cost less than it took); never above the capacity. In-flight
    /// permits come back when their permit drops, not here.
    fn refund(&self, key: &K, n: u32, now: Timestamp);

    /// The state for `key` at `now` (limit, remaining, reset), computed when
    /// asked; takes nothing.
    fn snapshot(&self, key: &K, now: Timestamp) -> Snapshot;

    /// The time until `n` permits for `key` would be admitted (zero if
    /// now); takes nothing.
    ///
    /// # Errors
    /// A refusal that [`is_never`](Refusal::is_never) if `n` can never be
    /// granted.
    fn time_until_ready(
        &self,
        key: &K,
        n: u32,
        now: Timestamp,
    ) -> Result<Duration, Refusal<'static>>;

    /// How many limiters of a chain this one is: 1, the default; the sum of
    /// its members for a [`Chain`]. A chain numbers a refusal's
    /// [`Refusal::stage`] with it, so a limiter of your own that wraps a
    /// chain forwards it.
    ///
    /// ```
    /// use tollgate::{Bucket, Limiter, Quota};
    ///
    /// let b = || Bucket::token_bucket(Quota::per_second(1).unwrap());
    /// assert_eq!(b().stages(), 1);
    /// assert_eq!(b().and(b()).and(b()).stages(), 3);
    /// ```
    #[inline]
    fn stages(&self) -> usize {
        1
    }

    /// This limiter, then `next`: both must admit, all or nothing (see
    /// [`Chain`]). Any two limiters over the same key chain, yours
    /// included: when `next` refuses, the chain gives back what this one
    /// granted with [`cancel`](Self::cancel).
    #[inline]
    fn and<B: Limiter<K>>(self, next: B) -> Chain<Self, B>
    where
        Self: Sized,
    {
        Chain::new(self, next)
    }

    /// The time until `n` permits for `key` would be admitted if `ahead`
    /// permits were admitted before them first, in order; `None` if the
    /// limiter cannot predict it (the default). A queue in front of the
    /// limiter uses it to time its waiters; see
    /// [`Algorithm::time_until_ready_after`].
    #[inline]
    fn time_until_ready_after(
        &self,
        key: &K,
        ahead: u64,
        n: u32,
        now: Timestamp,
    ) -> Option<Duration> {
        let _ = (key, ahead, n, now);
        None
    }

    /// The finest time step the limiter relies on (zero: none); see
    /// [`Algorithm::required_resolution`].
    #[inline]
    fn required_resolution(&self) -> Duration {
        Duration::ZERO
    }
}

/// A rate limiter's permit: spent when granted, nothing to release on drop.
///
/// It records how many permits it took and the instant the limiter's state
/// is full again as this admission left it, so that
/// [`cancel`](Limiter::cancel) gives back exactly what it took, and a
/// keyed table's sweep knows when the key is idle. It is `Copy` and holds
/// no reference; a caller that ignores it pays nothing for it (the check is
/// inlined and the fields are never computed).
///
/// ```
/// use tollgate::{Bucket, Limiter, Quota, Timestamp};
///
/// let bucket = Bucket::token_bucket(Quota::per_second(10)?.with_burst(5)?);
/// let grant = bucket.try_acquire_n(&(), 3, Timestamp::ZERO)?;
/// assert_eq!(grant.permits(), 3);
/// // 3 permits at 100 ms each come back 300 ms later
/// assert_eq!(grant.full_at(), Timestamp::from_millis(300));
/// bucket.cancel(&(), grant, Timestamp::ZERO);
/// assert_eq!(bucket.snapshot(Timestamp::ZERO).remaining(), 5);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Grant {
    permits: u32,
    full_at: Timestamp,
}

impl Grant {
    /// A grant of `permits` that left the limiter full again at `full_at`:
    /// for a limiter of your own.
    #[inline(always)]
    #[must_use]
    pub const fn new(permits: u32, full_at: Timestamp) -> Self {
        Self { permits, full_at }
    }

    /// The permits taken.
    #[inline]
    #[must_use]
    pub const fn permits(&self) -> u32 {
        self.permits
    }

    /// The instant the limiter's state is full again as this admission left
    /// it (later admissions move it on).
    #[inline]
    #[must_use]
    pub const fn full_at(&self) -> Timestamp {
        self.full_at
    }
}

/// An [`Algorithm`] together with its state: the one-limiter case.
///
/// ```
/// use tollgate::{Bucket, Quota, Timestamp};
///
/// let bucket = Bucket::token_bucket(Quota::per_second(2)?);
/// let now = Timestamp::ZERO;
/// assert!(bucket.check(now).is_ok());
/// assert!(bucket.check(now).is_ok());
/// assert!(bucket.check(now).is_err());
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Debug)]
pub struct Bucket<A: Algorithm> {
    algorithm: A,
    state: A::State,
}

impl<A: Algorithm> Bucket<A> {
    /// A full limiter running `algorithm`.
    #[must_use]
    pub fn new(algorithm: A) -> Self {
        let state = algorithm.new_state();
        Self { algorithm, state }
    }

    /// A limiter from an algorithm and an existing state.
    #[must_use]
    pub const fn from_parts(algorithm: A, state: A::State) -> Self {
        Self { algorithm, state }
    }

    /// The algorithm (configuration).
    #[must_use]
    pub const fn algorithm(&self) -> &A {
        &self.algorithm
    }

    /// The state.
    #[must_use]
    pub const fn state(&self) -> &A::State {
        &self.state
    }
}

/// The direct calls of a bucket ([`Bucket`], [`BucketRef`]): inherent, so
/// a user needs no trait in scope; its [`Limiter`] impl forwards to them.
macro_rules! direct_methods {
    ($ty:ty, $state:ident => $get:expr) => {
        impl<A: Algorithm> $ty {
            /// Tries to take one permit at `now`.
            ///
            /// # Errors
            /// The [`Refusal`] (when to retry, and the bucket's state);
            /// nothing was taken.
            #[inline(always)]
            pub fn check(&self, now: Timestamp) -> Result<(), Refusal<'static>> {
                self.check_n(1, now)
            }

            /// Tries to take `n` permits at `now`; `n = 0` is a peek.
            ///
            /// # Errors
            /// The [`Refusal`] (one that [`is_never`](Refusal::is_never) if
            /// `n` can never be granted); nothing was taken.
            #[inline(always)]
            pub fn check_n(&self, n: u32, now: Timestamp) -> Result<(), Refusal<'static>> {
                let $state = self;
                self.algorithm.check_n($get, n, now).map(|_| ())
            }

            /// Gives back `n` permits of an earlier admission (a request
            /// that a later stage refused); never above the burst.
            #[inline]
            pub fn refund(&self, n: u32, now: Timestamp) {
                let $state = self;
                self.algorithm.refund($get, n, now);
            }

            /// The bucket's state at `now` (limit, remaining, reset),
            /// computed when asked; takes nothing.
            #[inline]
            #[must_use]
            pub fn snapshot(&self, now: Timestamp) -> Snapshot {
                let $state = self;
                self.algorithm.snapshot($get, now)
            }

            /// The time until `n` permits would be admitted (zero if now).
            ///
            /// # Errors
            /// A refusal that [`is_never`](Refusal::is_never) if `n` can
            /// never be granted.
            #[inline]
            pub fn time_until_ready(
                &self,
                n: u32,
                now: Timestamp,
            ) -> Result<Duration, Refusal<'static>> {
                let $state = self;
                self.algorithm.time_until_ready($get, n, now)
            }

            /// True if the bucket is indistinguishable from a fresh one at
            /// `now` (see [`Algorithm::is_idle`]).
            #[inline]
            #[must_use]
            pub fn is_idle(&self, now: Timestamp) -> bool {
                let $state = self;
                self.algorithm.is_idle($get, now)
            }

            /// This bucket, then `next`: both must admit, all or nothing
            /// ([`Limiter::and`], callable without the trait in scope).
            #[inline]
            pub fn and<B: Limiter>(self, next: B) -> Chain<Self, B> {
                Chain::new(self, next)
            }
        }

        impl<A: Algorithm> Limiter for $ty {
            type Permit = Grant;
            #[inline]
            fn capacity(&self, _: &()) -> u32 {
                self.algorithm.capacity()
            }
            #[inline(always)]
            fn try_acquire_n(
                &self,
                _: &(),
                n: u32,
                now: Timestamp,
            ) -> Result<Grant, Refusal<'static>> {
                let $state = self;
                self.algorithm
                    .check_n($get, n, now)
                    .map(|full_at| Grant::new(n, full_at))
            }
            #[inline]
            fn cancel(&self, _: &(), grant: Grant, now: Timestamp) {
                <$ty>::refund(self, grant.permits(), now);
            }
            #[inline]
            fn refund(&self, _: &(), n: u32, now: Timestamp) {
                <$ty>::refund(self, n, now);
            }
            #[inline]
            fn snapshot(&self, _: &(), now: Timestamp) -> Snapshot {
                <$ty>::snapshot(self, now)
            }
            #[inline]
            fn time_until_ready(
                &self,
                _: &(),
                n: u32,
                now: Timestamp,
            ) -> Result<Duration, Refusal<'static>> {
                <$ty>::time_until_ready(self, n, now)
            }
            #[inline]
            fn required_resolution(&self) -> Duration {
                self.algorithm.required_resolution()
            }
            #[inline]
            fn time_until_ready_after(
                &self,
                _: &(),
                ahead: u64,
                n: u32,
                now: Timestamp,
            ) -> Option<Duration> {
                let $state = self;
                self.algorithm.time_until_ready_after($get, ahead, n, now)
            }
        }
    };
}

direct_methods!(Bucket<A>, b => &b.state);

/// An [`Algorithm`] and its state held by reference: a [`Limiter`] whose
/// configuration can stay in flash.
///
/// A `static` [`Bucket`] holds its configuration next to its atomic state,
/// and a `static` with interior mutability is placed in RAM whole (56 bytes
/// for a [`Bucket<Gcra>`](crate::Gcra)). Keeping the algorithm in an
/// immutable `static` (read-only memory) and only the state in a mutable one
/// brings a bucket's RAM down to its state: 8 bytes for a GCRA bucket.
///
/// ```
/// use tollgate::{valid, BucketRef, Gcra, GcraState, Quota, Timestamp};
///
/// static RADIO_CONFIG: Gcra = Gcra::leaky_bucket(valid!(Quota::per_second(50))); // read-only memory
/// static RADIO_STATE: GcraState = GcraState::new(); // 8 bytes of RAM
/// static RADIO: BucketRef<'static, Gcra> = BucketRef::new(&RADIO_CONFIG, &RADIO_STATE);
///
/// assert!(RADIO.check(Timestamp::ZERO).is_ok());
/// assert!(RADIO.check(Timestamp::ZERO).is_err());
/// assert_eq!(core::mem::size_of::<GcraState>(), 8);
/// assert_eq!(core::mem::size_of::<tollgate::Bucket<Gcra>>(), 56);
/// ```
#[derive(Debug)]
pub struct BucketRef<'a, A: Algorithm> {
    algorithm: &'a A,
    state: &'a A::State,
}

impl<A: Algorithm> Clone for BucketRef<'_, A> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<A: Algorithm> Copy for BucketRef<'_, A> {}

impl<'a, A: Algorithm> BucketRef<'a, A> {
    /// A limiter applying `algorithm` to `state`.
    #[must_use]
    pub const fn new(algorithm: &'a A, state: &'a A::State) -> Self {
        Self { algorithm, state }
    }

    /// The algorithm (configuration).
    #[must_use]
    pub const fn algorithm(&self) -> &'a A {
        self.algorithm
    }

    /// The state.
    #[must_use]
    pub const fn state(&self) -> &'a A::State {
        self.state
    }
}

direct_methods!(BucketRef<'_, A>, b => b.state);

macro_rules! forward_limiter {
    ($($ptr:ty),*) => {$(
        impl<K: ?Sized, L: Limiter<K> + ?Sized> Limiter<K> for $ptr {
            type Permit = L::Permit;
            #[inline]
            fn capacity(&self, key: &K) -> u32 {
                (**self).capacity(key)
            }
            #[inline(always)]
            fn try_acquire_n(&self, key: &K, n: u32, now: Timestamp) -> Result<L::Permit, Refusal<'static>> {
                (**self).try_acquire_n(key, n, now)
            }
            #[inline]
            fn cancel(&self, key: &K, permit: L::Permit, now: Timestamp) {
                (**self).cancel(key, permit, now);
            }
            #[inline]
            fn refund(&self, key: &K, n: u32, now: Timestamp) {
                (**self).refund(key, n, now);
            }
            #[inline]
            fn snapshot(&self, key: &K, now: Timestamp) -> Snapshot {
                (**self).snapshot(key, now)
            }
            #[inline]
            fn time_until_ready(&self, key: &K, n: u32, now: Timestamp) -> Result<Duration, Refusal<'static>> {
                (**self).time_until_ready(key, n, now)
            }
            #[inline]
            fn stages(&self) -> usize {
                (**self).stages()
            }
            #[inline]
            fn time_until_ready_after(&self, key: &K, ahead: u64, n: u32, now: Timestamp) -> Option<Duration> {
                (**self).time_until_ready_after(key, ahead, n, now)
            }
            #[inline]
            fn required_resolution(&self) -> Duration {
                (**self).required_resolution()
            }
        }
    )*};
}

forward_limiter!(&L);
#[cfg(feature = "std")]
forward_limiter!(std::sync::Arc<L>, std::boxed::Box<L>);
