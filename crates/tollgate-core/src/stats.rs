//! Opt-in statistics: what .NET's `GetStatistics` reports.
//!
//! Wrap any [`Limiter`] in [`WithStats`] to count the permits it admitted,
//! refused and had refunded, and to read its currently available permits.
//! A limiter that is not wrapped pays nothing. The counters are separate
//! `Relaxed` atomic `u64`s updated after the decision (one `fetch_add` per
//! check, no lock): each total is exact once the counted calls have
//! returned, but a [`Statistics`] read during concurrent checks is not one
//! atomic snapshot of all counters.
//!
//! Counting rules (in permits, not requests):
//! - a check of `n` that is allowed adds `n` to `admitted`; a peek (`n = 0`)
//!   counts nothing;
//! - a refused check adds `n` to `refused`, and so does a request that can
//!   never succeed ([`is_never`](crate::Refusal::is_never));
//! - a refund of `n` adds `n` to `refunded` (so a request refused later in a
//!   [`Chain`](crate::Chain) shows up as admitted and refunded by the
//!   limiters before the refusing one: `admitted − refunded` is the net).
//!
//! ```
//! use tollgate::{Bucket, Limiter, Quota, Timestamp, WithStats};
//!
//! let limiter = WithStats::new(Bucket::token_bucket(Quota::per_second(3)?));
//! for _ in 0..5 {
//!     let _ = limiter.try_acquire(&(), Timestamp::ZERO);
//! }
//! let stats = limiter.statistics(&(), Timestamp::ZERO);
//! assert_eq!((stats.admitted, stats.refused, stats.available), (3, 2, 0));
//! # Ok::<(), tollgate::ConfigError>(())
//! ```

use core::time::Duration;

use crate::limiter::Limiter;
use crate::refusal::Refusal;
use crate::snapshot::Snapshot;
use crate::sync::{AtomicU64, Ordering};
use crate::time::Timestamp;

/// A limiter with permit counters. See the [module documentation](self).
#[derive(Debug)]
pub struct WithStats<L> {
    inner: L,
    admitted: AtomicU64,
    refused: AtomicU64,
    refunded: AtomicU64,
}

/// Totals read from a [`WithStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub struct Statistics {
    /// Permits admitted since creation (or the last reset).
    pub admitted: u64,
    /// Permits refused (including requests that can never succeed).
    pub refused: u64,
    /// Permits given back through `refund`.
    pub refunded: u64,
    /// Permits the limiter could admit at the instant read.
    pub available: u32,
}

impl<L> WithStats<L> {
    crate::sync::const_fn_unless_loom! {
        /// Wraps `inner` with zeroed counters.
        #[must_use]
        pub fn new(inner: L) -> Self {
            Self {
                inner,
                admitted: AtomicU64::new(0),
                refused: AtomicU64::new(0),
                refunded: AtomicU64::new(0),
            }
        }
    }

    /// The wrapped limiter.
    #[must_use]
    pub const fn inner(&self) -> &L {
        &self.inner
    }

    /// Unwraps the limiter, dropping the counters.
    #[must_use]
    pub fn into_inner(self) -> L {
        self.inner
    }

    /// Permits admitted so far.
    #[must_use]
    pub fn admitted(&self) -> u64 {
        self.admitted.load(Ordering::Relaxed)
    }

    /// Permits refused so far.
    #[must_use]
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Permits refunded so far.
    #[must_use]
    pub fn refunded(&self) -> u64 {
        self.refunded.load(Ordering::Relaxed)
    }

    /// Zeroes the counters and returns their previous values (each swapped
    /// atomically on its own); `available` is not a counter and reads 0.
    pub fn take(&self) -> Statistics {
        Statistics {
            admitted: self.admitted.swap(0, Ordering::Relaxed),
            refused: self.refused.swap(0, Ordering::Relaxed),
            refunded: self.refunded.swap(0, Ordering::Relaxed),
            available: 0,
        }
    }

    #[inline]
    fn count(counter: &AtomicU64, n: u32) {
        if n != 0 {
            // u64 of permits: 2^32 checks of u32::MAX permits before a wrap;
            // saturate anyway rather than wrap
            let _ = crate::sync::update_u64(counter, |v| Some(v.saturating_add(u64::from(n))));
        }
    }
}

impl<L> WithStats<L> {
    /// The counters and the permits available for `key` (`&()` for a
    /// direct limiter) at `now`.
    #[must_use]
    pub fn statistics<K: ?Sized>(&self, key: &K, now: Timestamp) -> Statistics
    where
        L: Limiter<K>,
    {
        Statistics {
            admitted: self.admitted(),
            refused: self.refused(),
            refunded: self.refunded(),
            available: self.inner.snapshot(key, now).remaining(),
        }
    }
}

/// Its permit is the inner limiter's with the count it took, so that a
/// [`cancel`](Limiter::cancel) (a chain's later member refused) counts
/// as refunded.
impl<K: ?Sized, L: Limiter<K>> Limiter<K> for WithStats<L> {
    type Permit = (L::Permit, u32);

    #[inline]
    fn capacity(&self, key: &K) -> u32 {
        self.inner.capacity(key)
    }

    #[inline]
    fn try_acquire_n(
        &self,
        key: &K,
        n: u32,
        now: Timestamp,
    ) -> Result<Self::Permit, Refusal<'static>> {
        match self.inner.try_acquire_n(key, n, now) {
            Ok(permit) => {
                Self::count(&self.admitted, n);
                Ok((permit, n))
            }
            Err(r) => {
                Self::count(&self.refused, n);
                Err(r)
            }
        }
    }

    #[inline]
    fn cancel(&self, key: &K, permit: Self::Permit, now: Timestamp) {
        self.inner.cancel(key, permit.0, now);
        Self::count(&self.refunded, permit.1);
    }

    #[inline]
    fn refund(&self, key: &K, n: u32, now: Timestamp) {
        self.inner.refund(key, n, now);
        Self::count(&self.refunded, n);
    }

    #[inline]
    fn snapshot(&self, key: &K, now: Timestamp) -> Snapshot {
        self.inner.snapshot(key, now)
    }

    #[inline]
    fn time_until_ready(
        &self,
        key: &K,
        n: u32,
        now: Timestamp,
    ) -> Result<Duration, Refusal<'static>> {
        self.inner.time_until_ready(key, n, now)
    }

    #[inline]
    fn stages(&self) -> usize {
        self.inner.stages()
    }

    #[inline]
    fn time_until_ready_after(
        &self,
        key: &K,
        ahead: u64,
        n: u32,
        now: Timestamp,
    ) -> Option<Duration> {
        self.inner.time_until_ready_after(key, ahead, n, now)
    }

    #[inline]
    fn required_resolution(&self) -> Duration {
        self.inner.required_resolution()
    }
}
