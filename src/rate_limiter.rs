//! [`RateLimiter`]: a limiter bundled with its clock, for the common case.

use core::time::Duration;

use crate::clock::Clock;
use crate::decision::{CapacityExceeded, Decision, Snapshot};
use crate::gcra::{BucketKind, Gcra};
use crate::limiter::{Bucket, Limiter};
use crate::quota::{Quota, QuotaError};

/// A limiter and the clock it reads: call `try_acquire()` and go.
///
/// ```
/// use tollgate::{ManualClock, Quota, RateLimiter};
/// use core::time::Duration;
///
/// let clock = ManualClock::new(0);
/// let limiter = RateLimiter::token_bucket(Quota::per_second(5)?, &clock)?;
/// for _ in 0..5 {
///     assert!(limiter.try_acquire().is_allowed());
/// }
/// let refused = limiter.try_acquire();
/// assert_eq!(refused.retry_after(), Duration::from_millis(200));
/// clock.advance(Duration::from_millis(200));
/// assert!(limiter.try_acquire().is_allowed());
/// # Ok::<(), tollgate::QuotaError>(())
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
    /// [`QuotaError::BelowClockResolution`] if `quota`'s interval is finer
    /// than the clock can resolve.
    pub fn new(kind: BucketKind, quota: Quota, clock: C) -> Result<Self, QuotaError> {
        let quota = quota.check_resolution(clock.resolution())?;
        Ok(Self {
            limiter: Bucket::new(Gcra::new(kind, quota)),
            clock,
        })
    }

    /// A token bucket: `quota.burst()` at once, then the rate.
    ///
    /// # Errors
    /// As [`RateLimiter::new`].
    pub fn token_bucket(quota: Quota, clock: C) -> Result<Self, QuotaError> {
        Self::new(BucketKind::TokenBucket, quota, clock)
    }

    /// A strict-pacing leaky bucket: one permit per interval, no bursts.
    ///
    /// # Errors
    /// As [`RateLimiter::new`].
    pub fn leaky_bucket(quota: Quota, clock: C) -> Result<Self, QuotaError> {
        Self::new(BucketKind::LeakyBucket, quota, clock)
    }
}

impl<C: Clock, L: Limiter> RateLimiter<C, L> {
    /// Wraps any limiter with a clock. The caller is responsible for the
    /// limiter's quota suiting the clock's resolution.
    #[must_use]
    pub const fn from_limiter(limiter: L, clock: C) -> Self {
        Self { limiter, clock }
    }

    /// Tries to take one permit now.
    #[inline]
    pub fn try_acquire(&self) -> Decision {
        self.limiter.check(self.clock.now())
    }

    /// Tries to take `n` permits now; `n = 0` is a peek.
    ///
    /// # Errors
    /// [`CapacityExceeded`] if `n` can never be granted.
    #[inline]
    pub fn try_acquire_n(&self, n: u32) -> Result<Decision, CapacityExceeded> {
        self.limiter.check_n(n, self.clock.now())
    }

    /// How long until `n` permits would be granted, without taking any.
    ///
    /// # Errors
    /// [`CapacityExceeded`] if `n` can never be granted.
    pub fn time_until_ready(&self, n: u32) -> Result<Duration, CapacityExceeded> {
        self.limiter
            .time_until_ready(n, self.clock.now())
            .map(Duration::from_nanos)
    }

    /// Gives back `n` permits of an earlier admission.
    pub fn refund(&self, n: u32) {
        self.limiter.refund(n, self.clock.now());
    }

    /// The limiter's state now.
    #[must_use]
    pub fn snapshot(&self) -> Snapshot {
        self.limiter.snapshot(self.clock.now())
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
