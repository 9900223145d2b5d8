//! [`RateLimiter`]: a limiter bundled with its clock, for the common case:
//! a direct limiter (`try_acquire()`) or a keyed table
//! (`try_acquire_key(&key)`), as governor's `check` and `check_key`.

use core::time::Duration;

use crate::clock::Clock;
use crate::error::{ConfigError, check_clock};
use crate::gcra::{BucketKind, Gcra};
#[cfg(feature = "std")]
use crate::keyed::ShardedKeyedTable;
use crate::limiter::{Bucket, Limiter};
use crate::quota::Quota;
use crate::refusal::Refusal;
use crate::snapshot::Snapshot;

/// A limiter and the clock it reads: call `try_acquire()` (or, over a
/// keyed table, `try_acquire_key(&key)`) and go.
///
/// ```
/// use tollgate::{ManualClock, Quota, RateLimiter};
/// use core::time::Duration;
///
/// let clock = ManualClock::new();
/// let limiter = RateLimiter::token_bucket(Quota::per_second(5)?, &clock)?;
/// for _ in 0..5 {
///     assert!(limiter.try_acquire().is_ok());
/// }
/// let refused = limiter.try_acquire().unwrap_err();
/// assert_eq!(refused.retry_after(), Duration::from_millis(200));
/// clock.advance(Duration::from_millis(200));
/// assert!(limiter.try_acquire().is_ok());
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
///
/// Per key, over any keyed table (sharded, lock-free, `no_std` heapless);
/// with feature `std`, [`RateLimiter::keyed`] builds a default table in one
/// call:
///
/// ```
/// use std::net::IpAddr;
/// use tollgate::clock::StdClock;
/// use tollgate::{Quota, RateLimiter};
///
/// // 10 per second and bursts of 10 per client, 10,000 clients tracked.
/// let limiter = RateLimiter::keyed(Quota::per_second(10)?, StdClock::new())?;
/// let client: IpAddr = "192.0.2.7".parse()?;
/// assert!(limiter.try_acquire_key(&client).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct RateLimiter<C, L = Bucket<Gcra>> {
    limiter: L,
    clock: C,
}

impl<C: Clock> RateLimiter<C, Bucket<Gcra>> {
    /// A token or leaky bucket enforcing `quota`, reading `clock`.
    ///
    /// # Errors
    /// [`ConfigError::ClockTooCoarse`] if `quota`'s interval is finer than
    /// the clock can resolve.
    pub fn new(kind: BucketKind, quota: Quota, clock: C) -> Result<Self, ConfigError> {
        Self::from_limiter(Bucket::new(Gcra::new(kind, quota)), clock)
    }

    /// A token bucket: `quota.burst()` at once, then the rate.
    ///
    /// # Errors
    /// As [`RateLimiter::new`].
    pub fn token_bucket(quota: Quota, clock: C) -> Result<Self, ConfigError> {
        Self::new(BucketKind::TokenBucket, quota, clock)
    }

    /// A strict-pacing leaky bucket: one permit per interval, no bursts.
    ///
    /// # Errors
    /// As [`RateLimiter::new`].
    pub fn leaky_bucket(quota: Quota, clock: C) -> Result<Self, ConfigError> {
        Self::new(BucketKind::LeakyBucket, quota, clock)
    }
}

impl<C: Clock, L> RateLimiter<C, L> {
    /// Wraps any limiter, direct or keyed, with a clock.
    ///
    /// # Errors
    /// [`ConfigError::ClockTooCoarse`] if the limiter's finest step (see
    /// [`Limiter::required_resolution`]) is finer than the clock can
    /// resolve. (A table's per-key quota function cannot be checked ahead
    /// of time: give it quotas the clock can enforce.)
    pub fn from_limiter<K: ?Sized>(limiter: L, clock: C) -> Result<Self, ConfigError>
    where
        L: Limiter<K>,
    {
        check_clock(limiter.required_resolution(), clock.resolution())?;
        Ok(Self { limiter, clock })
    }

    /// The wrapped limiter (for a table: its introspection and
    /// reconfiguration).
    #[must_use]
    pub const fn limiter(&self) -> &L {
        &self.limiter
    }

    /// The clock.
    #[must_use]
    pub const fn clock(&self) -> &C {
        &self.clock
    }
}

impl<C: Clock, L: Limiter> RateLimiter<C, L> {
    /// Tries to take one permit now: the limiter's permit (a
    /// [`Grant`](crate::Grant) for a rate, spent when granted; a guard for
    /// an in-flight limit, to hold until the work ends).
    ///
    /// # Errors
    /// The [`Refusal`]; nothing was taken.
    #[inline(always)]
    pub fn try_acquire(&self) -> Result<L::Permit, Refusal<'static>> {
        self.try_acquire_n(1)
    }

    /// Tries to take `n` permits now; `n = 0` is a peek.
    ///
    /// # Errors
    /// The [`Refusal`] (one that [`is_never`](Refusal::is_never) if `n`
    /// can never be granted); nothing was taken.
    #[inline(always)]
    pub fn try_acquire_n(&self, n: u32) -> Result<L::Permit, Refusal<'static>> {
        self.try_acquire_key_n(&(), n)
    }

    /// How long until `n` permits would be granted, without taking any.
    ///
    /// # Errors
    /// A refusal that [`is_never`](Refusal::is_never) if `n` can never be
    /// granted.
    pub fn time_until_ready(&self, n: u32) -> Result<Duration, Refusal<'static>> {
        self.time_until_key_ready(&(), n)
    }

    /// Gives back `n` permits of an earlier admission.
    pub fn refund(&self, n: u32) {
        self.refund_key(&(), n);
    }

    /// The limiter's state now.
    #[must_use]
    pub fn snapshot(&self) -> Snapshot {
        self.snapshot_key(&())
    }
}

/// Over a keyed limiter (a table, a partitioned limiter, a chain of them):
/// the same calls for one key. The direct calls above are these at the key
/// `&()`.
impl<C: Clock, L> RateLimiter<C, L> {
    /// Tries to take one permit for `key` now.
    ///
    /// # Errors
    /// The [`Refusal`], with the [`KeyedPath`](crate::keyed::KeyedPath)
    /// that answered; nothing was taken.
    #[inline]
    pub fn try_acquire_key<K: ?Sized>(&self, key: &K) -> Result<L::Permit, Refusal<'static>>
    where
        L: Limiter<K>,
    {
        self.try_acquire_key_n(key, 1)
    }

    /// Tries to take `n` permits for `key` now; `n = 0` is a peek.
    ///
    /// # Errors
    /// The [`Refusal`] (one that [`is_never`](Refusal::is_never) if `n`
    /// can never be granted to `key`); nothing was taken.
    #[inline(always)]
    pub fn try_acquire_key_n<K: ?Sized>(
        &self,
        key: &K,
        n: u32,
    ) -> Result<L::Permit, Refusal<'static>>
    where
        L: Limiter<K>,
    {
        self.limiter.try_acquire_n(key, n, self.clock.now())
    }

    /// How long until `n` permits for `key` would be granted, taking none.
    ///
    /// # Errors
    /// A refusal that [`is_never`](Refusal::is_never) if `n` can never be
    /// granted to `key`.
    pub fn time_until_key_ready<K: ?Sized>(
        &self,
        key: &K,
        n: u32,
    ) -> Result<Duration, Refusal<'static>>
    where
        L: Limiter<K>,
    {
        self.limiter.time_until_ready(key, n, self.clock.now())
    }

    /// Gives back `n` permits of an earlier admission for `key`.
    pub fn refund_key<K: ?Sized>(&self, key: &K, n: u32)
    where
        L: Limiter<K>,
    {
        self.limiter.refund(key, n, self.clock.now());
    }

    /// `key`'s state now.
    #[must_use]
    pub fn snapshot_key<K: ?Sized>(&self, key: &K) -> Snapshot
    where
        L: Limiter<K>,
    {
        self.limiter.snapshot(key, self.clock.now())
    }
}

#[cfg(feature = "std")]
impl<K: core::hash::Hash + Eq + Clone, C: Clock> RateLimiter<C, ShardedKeyedTable<K, Gcra>> {
    /// A token bucket of `quota` per key (governor's `RateLimiter::keyed`),
    /// in a [`ShardedKeyedTable`] of 10,000 keys (build the table yourself
    /// for other settings and pass it to [`RateLimiter::from_limiter`]),
    /// reading `clock`.
    ///
    /// # Errors
    /// As [`RateLimiter::from_limiter`].
    pub fn keyed(quota: Quota, clock: C) -> Result<Self, ConfigError> {
        Self::from_limiter(
            ShardedKeyedTable::builder(Gcra::token_bucket(quota)).build()?,
            clock,
        )
    }
}
