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
//! `tollgate::partitioned::Partitioned` limiter — that answers
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
//! policy, whose `Lease` gives them back when
//! it drops.
//!
//! Waiting for a limiter is not part of the trait: [`wait::Wait`](crate::wait::Wait)
//! waits on any `Limiter` over a clock that can sleep, keyed or not, woken
//! by the clock's timer for a rate, and
//! [`ConcurrencyLimiter::acquire`](crate::ConcurrencyLimiter::acquire) by the
//! release for an in-flight limit. `Limiter` is dyn-compatible: a
//! `Box<dyn Limiter<K, Permit = Grant>>` holds any rate limiter over `K`.

use core::time::Duration;

mod bucket;
pub mod chain;

pub use bucket::{Bucket, BucketRef, Grant};
use chain::Chain;

use crate::refusal::Refusal;
use crate::snapshot::Snapshot;
use crate::time::Timestamp;

/// What a reconfigured limiter keeps of the permits already used. See
/// [`live`](crate::live).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Inheritance {
    /// The same number of permits stays used (capped at the new capacity).
    #[default]
    UsedAmount,
    /// The same fraction of the capacity stays used.
    UsedFraction,
    /// Nothing stays used: the limiter starts full.
    Reset,
}

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
/// key; a `tollgate::partitioned::Partitioned` limiter is a
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
