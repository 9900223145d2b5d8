//! What a [`Queue`](super::Queue) can wait on: [`QueueLimiter`].

use core::time::Duration;
use std::sync::Arc;

use crate::concurrency::ConcurrencyLimiter;
use crate::limiter::Limiter;
use crate::refusal::Refusal;
use crate::time::{duration_to_nanos, Timestamp};

/// A limiter a [`Queue`](super::Queue) can put waiters in front of: every
/// [`Limiter`] whose permits are `Copy` (spent when granted, capacity
/// returns with time: buckets, windows, chains of them), and the
/// [`ConcurrencyLimiter`] (owned, `&'static` or in an `Arc`), whose permits
/// the queue always gives back when a [`QueuePermit`](super::QueuePermit)
/// drops and whose waiters are woken by those releases only. A chain that
/// holds an in-flight guard is not one: the queue would drop the guard it
/// was granted. Implemented by tollgate; not for other types.
pub trait QueueLimiter: sealed::Source {}

impl<T: sealed::Source> QueueLimiter for T {}

pub(crate) mod sealed {
    use super::Refusal;

    /// The queue's view of a limiter, in nanoseconds.
    pub trait Source {
        /// Whether capacity comes back by releases (permits are given back
        /// when a queue permit drops) rather than by time.
        const RELEASE_BASED: bool;
        fn capacity(&self) -> u32;
        fn check_n(&self, n: u32, now: u64) -> Result<(), Refusal<'static>>;
        fn refund(&self, n: u32, now: u64);
        fn time_until_ready_after(&self, ahead: u64, n: u32, now: u64) -> Option<u64>;
        fn required_resolution(&self) -> core::time::Duration;
    }
}

impl<L: Limiter> sealed::Source for L
where
    L::Permit: Copy,
{
    const RELEASE_BASED: bool = false;
    #[inline]
    fn capacity(&self) -> u32 {
        Limiter::capacity(self, &())
    }
    #[inline]
    fn check_n(&self, n: u32, now: u64) -> Result<(), Refusal<'static>> {
        // a rate's permit is spent when granted
        Limiter::try_acquire_n(self, &(), n, Timestamp::from_nanos(now)).map(|_| ())
    }
    fn refund(&self, n: u32, now: u64) {
        Limiter::refund(self, &(), n, Timestamp::from_nanos(now));
    }
    fn time_until_ready_after(&self, ahead: u64, n: u32, now: u64) -> Option<u64> {
        Limiter::time_until_ready_after(self, &(), ahead, n, Timestamp::from_nanos(now))
            .map(duration_to_nanos)
    }
    fn required_resolution(&self) -> Duration {
        Limiter::required_resolution(self)
    }
}

macro_rules! concurrency_source {
    ($($ty:ty),*) => {$(
        impl sealed::Source for $ty {
            const RELEASE_BASED: bool = true;
            fn capacity(&self) -> u32 {
                self.limit()
            }
            fn check_n(&self, n: u32, _now: u64) -> Result<(), Refusal<'static>> {
                self.take(n)
            }
            fn refund(&self, n: u32, _now: u64) {
                self.release(n);
            }
            fn time_until_ready_after(&self, _ahead: u64, _n: u32, _now: u64) -> Option<u64> {
                None // capacity returns when holders release it
            }
            fn required_resolution(&self) -> Duration {
                Duration::ZERO
            }
        }
    )*};
}

concurrency_source!(
    ConcurrencyLimiter,
    Arc<ConcurrencyLimiter>,
    &'static ConcurrencyLimiter
);
