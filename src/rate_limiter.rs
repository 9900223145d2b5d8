//! [`RateLimiter`]: a limiter bundled with its clock, for the common case.

use core::time::Duration;

use crate::clock::Clock;
use crate::error::{check_clock, ConfigError};
use crate::gcra::{BucketKind, Gcra};
use crate::keyed::KeyedTable;
#[cfg(feature = "std")]
use crate::keyed::ShardedKeyedTable;
use crate::limiter::{Algorithm, Bucket, Grant, Limiter};
use crate::quota::Quota;
use crate::refusal::Refusal;
use crate::snapshot::Snapshot;

/// A limiter and the clock it reads: call `try_acquire()` and go.
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
#[derive(Debug)]
pub struct RateLimiter<C: Clock, L: Limiter = Bucket<Gcra>> {
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

impl<C: Clock, L: Limiter> RateLimiter<C, L> {
    /// Wraps any limiter with a clock.
    ///
    /// # Errors
    /// [`ConfigError::ClockTooCoarse`] if the limiter's finest step (see
    /// [`Limiter::required_resolution`]) is finer than the clock can
    /// resolve.
    pub fn from_limiter(limiter: L, clock: C) -> Result<Self, ConfigError> {
        check_clock(limiter.required_resolution(), clock.resolution())?;
        Ok(Self { limiter, clock })
    }

    /// Tries to take one permit now: the limiter's permit (a
    /// [`Grant`] for a rate, spent when granted; a guard for
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
        self.limiter.try_acquire_n(&(), n, self.clock.now())
    }

    /// How long until `n` permits would be granted, without taking any.
    ///
    /// # Errors
    /// A refusal that [`is_never`](Refusal::is_never) if `n` can never be
    /// granted.
    pub fn time_until_ready(&self, n: u32) -> Result<Duration, Refusal<'static>> {
        self.limiter.time_until_ready(&(), n, self.clock.now())
    }

    /// Gives back `n` permits of an earlier admission.
    pub fn refund(&self, n: u32) {
        self.limiter.refund(&(), n, self.clock.now());
    }

    /// The limiter's state now.
    #[must_use]
    pub fn snapshot(&self) -> Snapshot {
        self.limiter.snapshot(&(), self.clock.now())
    }

    /// The wrapped limiter.
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

/// A keyed table and the clock it reads: call `try_acquire(&key)` and go.
///
/// Any [`KeyedTable`] works (sharded, lock-free, `no_std` heapless). With
/// feature `std`,
/// [`KeyedRateLimiter::token_bucket`] builds a default table in one call:
///
/// ```
/// use std::net::IpAddr;
/// use tollgate::{KeyedRateLimiter, Quota, StdClock};
///
/// // 10 per second and bursts of 10 per client, 10,000 clients tracked.
/// let limiter = KeyedRateLimiter::token_bucket(Quota::per_second(10)?, StdClock::new())?;
/// let client: IpAddr = "192.0.2.7".parse()?;
/// assert!(limiter.try_acquire(&client).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct KeyedRateLimiter<T, C> {
    table: T,
    clock: C,
}

impl<T, C: Clock> KeyedRateLimiter<T, C> {
    /// Pairs `table` with `clock`.
    ///
    /// # Errors
    /// [`ConfigError::ClockTooCoarse`] if the table's default algorithm has
    /// a step finer than the clock can resolve. (A per-key quota function
    /// cannot be checked ahead of time: give it quotas the clock can
    /// enforce.)
    pub fn new<K: ?Sized>(table: T, clock: C) -> Result<Self, ConfigError>
    where
        T: KeyedTable<K>,
    {
        check_clock(
            table.default_algorithm().required_resolution(),
            clock.resolution(),
        )?;
        Ok(Self { table, clock })
    }

    /// Tries to take one permit for `key` now.
    ///
    /// # Errors
    /// The [`Refusal`], with the [`KeyedPath`](crate::keyed::KeyedPath)
    /// that answered; nothing was taken.
    #[inline]
    pub fn try_acquire<K: ?Sized>(&self, key: &K) -> Result<Grant, Refusal<'static>>
    where
        T: KeyedTable<K>,
    {
        self.try_acquire_n(key, 1)
    }

    /// Tries to take `n` permits for `key` now; `n = 0` is a peek.
    ///
    /// # Errors
    /// The [`Refusal`] (one that [`is_never`](Refusal::is_never) if `n`
    /// can never be granted to `key`); nothing was taken.
    #[inline]
    pub fn try_acquire_n<K: ?Sized>(&self, key: &K, n: u32) -> Result<Grant, Refusal<'static>>
    where
        T: KeyedTable<K>,
    {
        self.table.try_acquire_n(key, n, self.clock.now())
    }

    /// How long until `n` permits for `key` would be granted, taking none.
    ///
    /// # Errors
    /// A refusal that [`is_never`](Refusal::is_never) if `n` can never be
    /// granted to `key`.
    pub fn time_until_ready<K: ?Sized>(&self, key: &K, n: u32) -> Result<Duration, Refusal<'static>>
    where
        T: KeyedTable<K>,
    {
        self.table.time_until_ready(key, n, self.clock.now())
    }

    /// Gives back `n` permits of an earlier admission for `key`.
    pub fn refund<K: ?Sized>(&self, key: &K, n: u32)
    where
        T: KeyedTable<K>,
    {
        self.table.refund(key, n, self.clock.now());
    }

    /// `key`'s state now.
    #[must_use]
    pub fn snapshot<K: ?Sized>(&self, key: &K) -> Snapshot
    where
        T: KeyedTable<K>,
    {
        self.table.snapshot(key, self.clock.now())
    }

    /// The table (for its introspection and reconfiguration).
    #[must_use]
    pub const fn table(&self) -> &T {
        &self.table
    }

    /// The clock.
    #[must_use]
    pub const fn clock(&self) -> &C {
        &self.clock
    }
}

#[cfg(feature = "std")]
impl<K: core::hash::Hash + Eq + Clone, C: Clock> KeyedRateLimiter<ShardedKeyedTable<K, Gcra>, C> {
    /// A token bucket of `quota` per key, in a
    /// [`ShardedKeyedTable`] of 10,000 keys (build the table yourself for
    /// other settings), reading `clock`.
    ///
    /// # Errors
    /// As [`KeyedRateLimiter::new`].
    pub fn token_bucket(quota: Quota, clock: C) -> Result<Self, ConfigError> {
        Self::new(
            ShardedKeyedTable::builder(Gcra::token_bucket(quota)).build()?,
            clock,
        )
    }

    /// A strict-pacing leaky bucket of `quota` per key (see
    /// [`KeyedRateLimiter::token_bucket`]).
    ///
    /// # Errors
    /// As [`KeyedRateLimiter::new`].
    pub fn leaky_bucket(quota: Quota, clock: C) -> Result<Self, ConfigError> {
        Self::new(
            ShardedKeyedTable::builder(Gcra::leaky_bucket(quota)).build()?,
            clock,
        )
    }
}
