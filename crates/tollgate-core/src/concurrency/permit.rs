//! Permits as guards: [`ConcurrencyPermit`], and the future that waits in
//! the line for one.

use core::future::Future;
use core::ops::Deref;
use core::pin::Pin;
use core::task::{Context, Poll};

use super::{ConcurrencyLimiter, Join};
use crate::refusal::Refusal;
use crate::wakers::Ticket;

/// `n` permits held; dropping the permit gives them back.
///
/// `H` is the limiter's handle the permit holds: `&ConcurrencyLimiter`
/// (from [`ConcurrencyLimiter::try_acquire`] and `acquire`) or, with
/// feature `std`, `Arc<ConcurrencyLimiter>` (from
/// [`try_acquire_owned`](ConcurrencyLimiter::try_acquire_owned) and
/// `acquire_owned`): a permit that is `'static`, for work that outlives
/// the current borrow.
///
/// See the [module documentation](super) for what `mem::forget` does.
#[must_use = "dropping the permit releases it at once"]
#[derive(Debug)]
pub struct ConcurrencyPermit<H: Deref<Target = ConcurrencyLimiter>> {
    pub(super) limiter: H,
    pub(super) permits: u32,
}

impl<H: Deref<Target = ConcurrencyLimiter>> ConcurrencyPermit<H> {
    /// The permits this guard holds.
    #[must_use]
    pub const fn permits(&self) -> u32 {
        self.permits
    }

    /// Detaches the permits from the guard: they stay in flight until
    /// someone calls [`ConcurrencyLimiter::release`] with the returned
    /// count.
    #[must_use = "the returned permits stay in flight until released"]
    pub fn into_raw(self) -> u32 {
        let n = self.permits;
        core::mem::forget(self);
        n
    }

    /// Gives back `n` of the held permits now, keeping the rest.
    pub fn release_some(&mut self, n: u32) {
        let n = core::cmp::min(n, self.permits);
        self.permits -= n;
        self.limiter.release(n);
    }

    /// The limiter the permits belong to.
    #[must_use]
    pub fn limiter(&self) -> &H {
        &self.limiter
    }
}

impl<H: Deref<Target = ConcurrencyLimiter>> Drop for ConcurrencyPermit<H> {
    fn drop(&mut self) {
        self.limiter.release(self.permits);
    }
}

/// The future of [`ConcurrencyLimiter::acquire`].
#[must_use = "futures do nothing unless you `.await` or poll them"]
#[derive(Debug)]
pub(super) struct Acquire<H: Deref<Target = ConcurrencyLimiter>> {
    pub(super) limiter: H,
    pub(super) n: u32,
    pub(super) ticket: Option<Ticket>,
}

impl<H: Deref<Target = ConcurrencyLimiter>> Unpin for Acquire<H> {}

impl<H: Deref<Target = ConcurrencyLimiter> + Clone> Future for Acquire<H> {
    type Output = Result<ConcurrencyPermit<H>, Refusal<'static>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let limiter = &*this.limiter;
        let outcome = if let Some(ticket) = this.ticket {
            let Poll::Ready(outcome) = limiter.poll_ticket(ticket, cx.waker()) else {
                return Poll::Pending;
            };
            this.ticket = None;
            outcome
        } else {
            match limiter.take(this.n) {
                Ok(()) => Ok(()),
                Err(e) if e.is_never() => Err(e),
                Err(_) => match limiter.join(this.n, cx.waker()) {
                    Join::Done(done) => done,
                    Join::Queued(ticket) => {
                        this.ticket = Some(ticket);
                        return Poll::Pending;
                    }
                    Join::Full => {
                        // not in the line (every slot taken, only without
                        // `std`): polled again until a slot frees
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                },
            }
        };
        Poll::Ready(outcome.map(|()| ConcurrencyPermit {
            limiter: this.limiter.clone(),
            permits: this.n,
        }))
    }
}

impl<H: Deref<Target = ConcurrencyLimiter>> Drop for Acquire<H> {
    fn drop(&mut self) {
        // out of the line; permits granted but never seen go to the next
        if let Some(ticket) = self.ticket.take() {
            self.limiter.leave(ticket);
        }
    }
}
