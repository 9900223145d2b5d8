//! What a partitioned limiter does: the [`PartitionedLimiter`] trait that
//! [`Partitioned`] and [`Chained`] implement.

use core::future::Future;
use core::time::Duration;

#[cfg(doc)]
use super::Partitioned;
use super::{Admission, Chained, Refusal};
use crate::snapshot::Snapshot;
use crate::time::Timestamp;

/// What a partitioned limiter (or a chain of them) does: admit a resource
/// or refuse it, all or nothing.
pub trait PartitionedLimiter<R: ?Sized> {
    /// What an admission holds.
    type Lease;

    /// Tries to admit `resource` for `n` permits at `now`.
    ///
    /// # Errors
    /// The [`Refusal`]; nothing was taken.
    fn try_acquire_n(
        &self,
        resource: &R,
        n: u32,
        now: Timestamp,
    ) -> Result<Admission<Self::Lease>, Refusal<'_>>;

    /// Gives back every permit a lease took (the work did not happen): an
    /// in-flight lease's and a rate admission's at once; a shaped policy's
    /// reservation only if no place was booked after it (else it stays
    /// spent; see the [module documentation](crate::partitioned)).
    fn cancel(&self, lease: Self::Lease, now: Timestamp);

    /// The state of the limiter that would charge `resource`, taking
    /// nothing: for rate-limit headers, computed when asked (an admission
    /// builds none). For a chain, the member with the fewest permits
    /// remaining; for a resource no limiter charges, an unlimited
    /// snapshot.
    fn snapshot(&self, resource: &R, now: Timestamp) -> Snapshot;

    /// The time until `resource` could be admitted for `n` permits, taking
    /// nothing.
    fn time_until_ready(&self, resource: &R, n: u32, now: Timestamp) -> Duration;

    /// Tries to admit `resource` for one permit at `now`.
    ///
    /// # Errors
    /// The [`Refusal`]; nothing was taken.
    fn try_acquire(
        &self,
        resource: &R,
        now: Timestamp,
    ) -> Result<Admission<Self::Lease>, Refusal<'_>> {
        self.try_acquire_n(resource, 1, now)
    }

    /// How many limiters of a chain this one is: 1, the default, for a
    /// single limiter (a [`Partitioned`] or one of your own); the sum of
    /// its members for a [`Chained`]. A chain numbers a refusal's
    /// [`Refusal::stage`] with it, so a limiter of your own that wraps a
    /// chain forwards it to the chain.
    ///
    /// ```
    /// use tollgate::partitioned::{Partitioned, PartitionedLimiter};
    ///
    /// let a = Partitioned::<u32, u32>::builder("a").build();
    /// let b = Partitioned::<u32, u32>::builder("b").build();
    /// let c = Partitioned::<u32, u32>::builder("c").build();
    /// assert_eq!(a.stages(), 1);
    /// assert_eq!(a.and(b).and(c).stages(), 3);
    /// ```
    fn stages(&self) -> usize {
        1
    }

    /// This limiter, then `next`: both must admit (see the [module
    /// documentation](crate::partitioned)). Any two limiters chain, yours
    /// included: when `next` refuses, the chain gives back what this one
    /// granted with [`cancel`](Self::cancel).
    fn and<B: PartitionedLimiter<R>>(self, next: B) -> Chained<Self, B>
    where
        Self: Sized,
    {
        Chained {
            first: self,
            second: next,
        }
    }

    /// Admits `resource` for `n` permits at `now`, or, when an in-flight
    /// limit refuses it, waits in that key's line until a release lets it
    /// in (see [`Partitioned::acquire_key_in_line`]): woken by the release,
    /// no timer, on any executor. Any other refusal (a rate) resolves at
    /// once, as [`try_acquire_n`](Self::try_acquire_n). Bound the wait with
    /// a timeout; dropping the future gives back whatever it had taken. In
    /// a [`Chained`] limiter the members are admitted in order, each
    /// waiting in its own line, holding what the earlier ones granted.
    ///
    /// The default (a limiter with no in-flight lines) is
    /// [`try_acquire_n`](Self::try_acquire_n).
    fn acquire_in_line<'a>(
        &'a self,
        resource: &'a R,
        n: u32,
        now: Timestamp,
    ) -> impl Future<Output = Result<Admission<Self::Lease>, Refusal<'a>>> + 'a {
        core::future::ready(self.try_acquire_n(resource, n, now))
    }
}
