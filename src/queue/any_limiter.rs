//! Waiting on tokio's timer in front of any [`Limiter`], direct, per key
//! or partitioned: [`acquire`].

use core::time::Duration;

use crate::clock::Clock;
use crate::limiter::Limiter;
use crate::refusal::Refusal;

/// Admits `key` for `n` permits of `limiter` — any [`Limiter`]: a keyed
/// table (a limiter per client), a partitioned limiter, a chain, one of
/// your own — waiting its turn, and returns the limiter's permit:
/// - for a rate, it sleeps until the refusal's `retry_after` and checks
///   again (as governor's `until_key_ready`: waiters of one key are not
///   ordered among themselves; a [`Queue`](super::Queue) orders the waiters
///   of a direct limiter);
/// - for an in-flight limit, it takes a place in that key's line and is
///   woken by the release that lets it in
///   ([`acquire_in_line`](Limiter::acquire_in_line)): no timer, no polling;
/// - for a shaped policy of a partitioned limiter, it sleeps the reserved
///   turn ([`Limiter::delay`]).
///
/// Waits at most `max_wait` (a shaped delay is bounded by its policy's own
/// maximum). Dropping the future cancels what it had reserved: a shaped
/// place comes back if it is still the last one booked, else it stays spent
/// (see the [module documentation](crate::partitioned)); a place in an
/// in-flight line is left, and a permit granted to it passes to the next
/// waiter. Sleeps on tokio's timer (feature `tokio`) and reads `clock`.
///
/// A per-client limiter that waits, in a tokio service:
///
/// ```
/// use std::time::Duration;
/// use tollgate::keyed::ShardedKeyedTable;
/// use tollgate::{queue, Gcra, Quota, StdClock};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let per_client = ShardedKeyedTable::builder(Gcra::token_bucket(Quota::per_second(10)?)).build()?;
/// let clock = StdClock::new();
/// let client: std::net::IpAddr = "192.0.2.7".parse()?;
/// for _ in 0..11 {
///     // the 11th waits about 100 ms for its turn
///     queue::acquire(&per_client, &client, 1, &clock, Duration::from_secs(1)).await?;
/// }
/// # Ok(()) }
/// ```
///
/// # Errors
/// The last [`Refusal`] when the wait would exceed `max_wait`.
pub async fn acquire<'a, P, R, C>(
    limiter: &'a P,
    key: &'a R,
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
            match tokio::time::timeout(left, limiter.acquire_in_line(key, n, now)).await {
                Ok(attempt) => (attempt, false),
                // the wait is over while in a line: one last look
                Err(_) => (limiter.try_acquire_n(key, n, clock.now()), true),
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
                    key,
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
    key: &'a R,
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
            self.limiter.cancel(self.key, permit, self.clock.now());
        }
    }
}
