//! The [`Acquire`] future and the [`QueuePermit`] it resolves to.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use super::error::WaitError;
use super::shared::{Begin, Expiry, Shared};
use super::source::QueueLimiter;
use super::timer::ExpiryTimer;
use crate::time::duration_to_nanos;

#[derive(Debug)]
enum State {
    Start,
    Queued(usize),
    Done,
}

/// The future of [`Queue::acquire`](super::Queue::acquire): resolves to a [`QueuePermit`].
///
/// Cancellation-safe: dropping it removes the waiter (and refunds permits
/// granted but not yet taken). Polling it again after it has completed
/// yields `Err(WaitError::Closed)` rather than panicking.
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub(crate) struct Acquire<'a, L: QueueLimiter + Send + Sync + 'static> {
    shared: &'a Shared<L>,
    n: u32,
    deadline: Option<u64>,
    state: State,
    expiry: Option<(ExpiryTimer, Expiry)>,
}

impl<'a, L: QueueLimiter + Send + Sync + 'static> Acquire<'a, L> {
    pub(super) fn new(shared: &'a Shared<L>, n: u32, deadline: Option<u64>) -> Self {
        Self {
            shared,
            n,
            deadline,
            state: State::Start,
            expiry: None,
        }
    }

    fn permit(&self) -> QueuePermit<'a, L> {
        QueuePermit {
            shared: self.shared,
            n: self.n,
            live: true,
        }
    }

    fn finish(
        &mut self,
        result: Result<(), WaitError>,
    ) -> Poll<Result<QueuePermit<'a, L>, WaitError>> {
        self.state = State::Done;
        Poll::Ready(result.map(|()| self.permit()))
    }
}

impl<'a, L: QueueLimiter + Send + Sync + 'static> Future for Acquire<'a, L> {
    type Output = Result<QueuePermit<'a, L>, WaitError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let shared = this.shared;
        match this.state {
            State::Start => {
                let now = shared.now();
                match shared.begin(this.n, now, this.deadline, cx.waker()) {
                    Begin::Granted => {
                        shared.count_admitted(this.n);
                        this.finish(Ok(()))
                    }
                    Begin::Refused(e) => {
                        shared.count_refused();
                        this.finish(Err(e))
                    }
                    Begin::Queued {
                        key,
                        serving,
                        wakers,
                    } => {
                        this.state = State::Queued(key);
                        shared.wake(wakers);
                        let max_wait = shared.max_wait.map(|m| {
                            (now.saturating_add(duration_to_nanos(m)), Expiry::MaxWait(m))
                        });
                        let deadline = this.deadline.map(|d| (d, Expiry::Deadline));
                        let expiry = match (max_wait, deadline) {
                            (Some(a), Some(b)) => Some(if b.0 <= a.0 { b } else { a }),
                            (a, b) => a.or(b),
                        };
                        if let Some((at, kind)) = expiry {
                            this.expiry = Some((ExpiryTimer::at(&shared.clock, at), kind));
                        }
                        if serving {
                            shared.kick();
                            // The kick may already have granted it.
                            this.poll_queued(cx, key)
                        } else {
                            // Behind others: the waker is registered; only
                            // the expiry (if any) needs arming.
                            this.poll_expiry(cx, key)
                        }
                    }
                }
            }
            State::Queued(key) => this.poll_queued(cx, key),
            State::Done => Poll::Ready(Err(WaitError::Closed)),
        }
    }
}

impl<'a, L: QueueLimiter + Send + Sync + 'static> Acquire<'a, L> {
    fn poll_queued(
        &mut self,
        cx: &mut Context<'_>,
        key: usize,
    ) -> Poll<Result<QueuePermit<'a, L>, WaitError>> {
        let this = self;
        if let Some(result) = this.shared.collect(key, this.n, cx.waker()) {
            return this.finish(result);
        }
        this.poll_expiry(cx, key)
    }

    fn poll_expiry(
        &mut self,
        cx: &mut Context<'_>,
        key: usize,
    ) -> Poll<Result<QueuePermit<'a, L>, WaitError>> {
        let this = self;
        if let Some((timer, kind)) = &mut this.expiry {
            if timer.poll_passed(cx, this.shared.now()) {
                let error = kind.error();
                let result = this.shared.expire(key, this.n, cx.waker(), error);
                return this.finish(result);
            }
        }
        Poll::Pending
    }
}

impl<L: QueueLimiter + Send + Sync + 'static> Drop for Acquire<'_, L> {
    fn drop(&mut self) {
        if let State::Queued(key) = self.state {
            self.shared.cancel(key, self.n);
        }
    }
}

/// Permits granted by a [`Queue`](super::Queue).
///
/// For a rate limiter the permits are spent: dropping the permit does
/// nothing (unless the queue was built with
/// [`release_on_drop`](super::QueueBuilder::release_on_drop)); call
/// [`release`](Self::release) to give back permits that went unused. For a
/// [`ConcurrencyLimiter`](crate::ConcurrencyLimiter) (or a queue built with
/// `release_on_drop`), dropping the permit returns its capacity and wakes
/// the next waiter that fits.
#[derive(Debug)]
#[must_use = "dropping a permit at once may release it at once"]
pub struct QueuePermit<'a, L: QueueLimiter + Send + Sync + 'static> {
    pub(super) shared: &'a Shared<L>,
    pub(super) n: u32,
    pub(super) live: bool,
}

impl<L: QueueLimiter + Send + Sync + 'static> QueuePermit<'_, L> {
    /// The number of permits held.
    #[must_use]
    pub fn permits(&self) -> u32 {
        self.n
    }

    /// Gives the permits back to the limiter (`Limiter::refund`) and wakes
    /// the next waiter that now fits.
    pub fn release(mut self) {
        self.live = false;
        if self.n > 0 {
            self.shared.release(self.n);
        }
    }

    /// Keeps the permits spent: dropping does not release them even with
    /// `release_on_drop`.
    pub fn forget(mut self) {
        self.live = false;
    }
}

impl<L: QueueLimiter + Send + Sync + 'static> Drop for QueuePermit<'_, L> {
    fn drop(&mut self) {
        if self.live && self.shared.release_on_drop && self.n > 0 {
            self.shared.release(self.n);
        }
    }
}
