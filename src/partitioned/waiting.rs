//! Waiting in a key's line of an in-flight policy: the future of
//! [`Partitioned::acquire_key_in_line`] (the line itself is in `lines`).

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use super::lines::{Join, Ticket};
use super::{Lease, Partitioned, Refusal};
use crate::time::Timestamp;

/// A place in a key's line of an in-flight policy (see
/// [`Partitioned::acquire_key_in_line`]). Dropped while queued, it leaves
/// the line; dropped after it was granted permits it never returned, it
/// gives them back (to the next waiter).
pub(super) struct InLine<'a, R, K> {
    limiter: &'a Partitioned<R, K>,
    index: usize,
    /// `None` once the future has resolved.
    key: Option<K>,
    n: u32,
    queue_limit: usize,
    now: Timestamp,
    ticket: Option<Ticket>,
}

impl<R, K> Unpin for InLine<'_, R, K> {}

impl<'a, R, K> Future for InLine<'a, R, K> {
    type Output = Result<Lease<K>, Refusal<'static>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let limiter = this.limiter;
        let Some(policy) = limiter.policies.get(this.index) else {
            return Poll::Ready(Ok(Lease::free()));
        };
        let store = &policy.store.store;
        let granted = match this.ticket {
            Some(ticket) => match store.poll_line(ticket, cx.waker()) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(outcome) => {
                    this.ticket = None;
                    outcome.map_err(|e| e.by(limiter.name, policy.name))
                }
            },
            None => {
                let Some(key) = this.key.as_ref() else {
                    return Poll::Pending; // polled after completion
                };
                match store.join_line(key, this.n, this.queue_limit, cx.waker()) {
                    // not an in-flight policy: one plain check
                    None => {
                        let key = this.key.take();
                        return Poll::Ready(match key {
                            Some(key) => {
                                limiter.try_acquire_key(Some(this.index), key, this.n, this.now)
                            }
                            None => Ok(Lease::free()),
                        });
                    }
                    Some(Join::Queued(ticket)) => {
                        this.ticket = Some(ticket);
                        return Poll::Pending;
                    }
                    Some(Join::Taken) => Ok(()),
                    Some(Join::Full(refusal) | Join::Capacity(refusal)) => {
                        Err(refusal.by(limiter.name, policy.name))
                    }
                }
            }
        };
        let key = this.key.take();
        Poll::Ready(granted.map(|()| Lease::taken(this.index, key, this.n, store, true)))
    }
}

impl<R, K> Drop for InLine<'_, R, K> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            if let Some(policy) = self.limiter.policies.get(self.index) {
                policy.store.store.leave_line(ticket);
            }
        }
    }
}

impl<R, K> Partitioned<R, K> {
    pub(super) fn in_line(
        &self,
        index: usize,
        key: K,
        n: u32,
        queue_limit: usize,
        now: Timestamp,
    ) -> InLine<'_, R, K> {
        InLine {
            limiter: self,
            index,
            key: Some(key),
            n,
            queue_limit,
            now,
            ticket: None,
        }
    }

    /// Admits `key` on policy `index` for `n` permits, waiting in the
    /// key's line when the policy is an in-flight limit
    /// ([`PartitionedBuilder::concurrency`](super::PartitionedBuilder::concurrency))
    /// and its permits are held: the release that frees them hands them to
    /// the line's front and wakes that waiter only — no timer, no polling,
    /// on any executor. Each key's
    /// line is served in arrival order (a newcomer's
    /// [`try_acquire_key`](Self::try_acquire_key) is refused while the
    /// key's line waits, so it does not overtake), with at most
    /// `queue_limit` waiters: one more is refused at once. The future has
    /// no maximum wait of its own: bound it with a timeout. Dropping it
    /// leaves the line, or gives back permits it was granted but never
    /// returned (they go to the next waiter): none is lost or given twice.
    ///
    /// A policy that is not an in-flight limit (and an index past the last
    /// policy) answers at once, as [`try_acquire_key`](Self::try_acquire_key)
    /// at `now`; an in-flight limit ignores `now`.
    ///
    /// ```
    /// use std::future::Future;
    /// use tollgate::partitioned::Partitioned;
    /// use tollgate::Limiter;
    /// use tollgate::Timestamp;
    ///
    /// let jobs = Partitioned::<u32, u32>::builder("jobs")
    ///     .concurrency(
    ///         "per_tenant",
    ///         |t: &u32| Some(*t),
    ///         Partitioned::<u32, u32>::in_flight_table(1, 100)?,
    ///     )
    ///     .build();
    /// let now = Timestamp::ZERO;
    /// let running = jobs.try_acquire(&7, now).expect("a free permit");
    /// let mut waiting = Box::pin(jobs.acquire_key_in_line(0, 7, 1, 10, now));
    /// let waker = std::task::Waker::noop();
    /// let mut cx = std::task::Context::from_waker(&waker);
    /// assert!(waiting.as_mut().poll(&mut cx).is_pending()); // in tenant 7's line
    /// assert!(jobs.try_acquire(&7, now).is_err()); // no overtaking
    /// drop(running); // the release hands its permit to the line
    /// assert!(waiting.as_mut().poll(&mut cx).is_ready());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// The [`Refusal`] of a full line (with the retry hint), of `n` above
    /// the limit, or of a policy that is not in flight.
    pub fn acquire_key_in_line(
        &self,
        index: usize,
        key: K,
        n: u32,
        queue_limit: usize,
        now: Timestamp,
    ) -> impl Future<Output = Result<Lease<K>, Refusal<'static>>> + '_ {
        self.in_line(index, key, n, queue_limit, now)
    }
}
