//! Waiting on tokio's timer in front of a partitioned limiter (any
//! [`Limiter`]): [`acquire_partitioned`].

use core::time::Duration;

use crate::clock::Clock;
use crate::limiter::Limiter;
use crate::refusal::Refusal;

/// Admits `resource` for `n` permits of `limiter` (any
/// [`Limiter`]: a partitioned one, a chain or one of your own), waiting its turn: a
/// shaped policy's delay; for an in-flight limit, a place in its key's
/// line, woken by the release that lets it in
/// ([`acquire_in_line`](Limiter::acquire_in_line)); for any
/// other refusal, checking again when the refusal's `retry_after` passes.
/// Waits at most `max_wait` (a shaped delay is bounded by its policy's own
/// maximum). Dropping the future cancels what it had reserved: a shaped
/// place comes back if it is still the last one booked, else it stays spent
/// (see the [module documentation](crate::partitioned)); a place in an
/// in-flight line is left, and a permit granted to it passes to the next
/// waiter. Sleeps on tokio's timer (feature `tokio`) and reads `clock`.
///
/// ```
/// use std::time::Duration;
/// use tollgate::partitioned::Partitioned;
/// use tollgate::queue;
/// use tollgate::{Bucket, Quota, StdClock};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let jobs = Partitioned::<u32, u32>::builder("jobs")
///     .default(Bucket::token_bucket(Quota::per_second(100)?))
///     .build();
/// let clock = StdClock::new();
/// match queue::acquire_partitioned(&jobs, &7, 1, &clock, Duration::from_secs(1)).await {
///     Ok(_lease) => { /* run job 7 */ }
///     Err(refusal) => println!("busy: retry in {:?}", refusal.retry_after()),
/// }
/// # Ok(()) }
/// ```
///
/// # Errors
/// The last [`Refusal`] when the wait would exceed `max_wait`.
pub async fn acquire_partitioned<'a, P, R, C>(
    limiter: &'a P,
    resource: &'a R,
    n: u32,
    clock: &'a C,
    max_wait: Duration,
) -> Result<P::Permit, Refusal<'static>>
where
    P: Limiter<R> + Sync + ?Sized,
    R: Sync + ?Sized,
    C: Clock + Sync,
    P::Permit: Send,
{
    let start = clock.now();
    loop {
        let now = clock.now();
        let left = max_wait.saturating_sub(now.saturating_duration_since(start));
        let (attempt, timed_out) =
            match tokio::time::timeout(left, limiter.acquire_in_line(resource, n, now)).await {
                Ok(attempt) => (attempt, false),
                // the wait is over while in a line: one last look
                Err(_) => (limiter.try_acquire_n(resource, n, clock.now()), true),
            };
        match attempt {
            Ok(permit) => {
                let delay = limiter.delay(&permit);
                if delay.is_zero() {
                    return Ok(permit);
                }
                // dropped while waiting: the reservation goes back
                let guard = CancelOnDrop {
                    limiter,
                    resource,
                    permit: Some(permit),
                    clock,
                };
                tokio::time::sleep(delay).await;
                return Ok(guard.defuse());
            }
            Err(refusal) => {
                let waited = clock.now().saturating_duration_since(start);
                if timed_out
                    || refusal.is_never()
                    || waited.saturating_add(refusal.retry_after()) > max_wait
                {
                    return Err(refusal);
                }
                tokio::time::sleep(refusal.retry_after()).await;
            }
        }
    }
}

/// Cancels a reserved lease unless defused.
struct CancelOnDrop<'a, P: Limiter<R> + ?Sized, R: ?Sized, C: Clock> {
    limiter: &'a P,
    resource: &'a R,
    permit: Option<P::Permit>,
    clock: &'a C,
}

impl<P: Limiter<R> + ?Sized, R: ?Sized, C: Clock> CancelOnDrop<'_, P, R, C> {
    fn defuse(mut self) -> P::Permit {
        match self.permit.take() {
            Some(lease) => lease,
            None => unreachable!("a lease is taken once"),
        }
    }
}

impl<P: Limiter<R> + ?Sized, R: ?Sized, C: Clock> Drop for CancelOnDrop<'_, P, R, C> {
    fn drop(&mut self) {
        if let Some(permit) = self.permit.take() {
            self.limiter.cancel(self.resource, permit, self.clock.now());
        }
    }
}
