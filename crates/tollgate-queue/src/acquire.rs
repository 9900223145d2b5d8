//! The [`Acquire`] future and the [`QueuePermit`] it resolves to.

use core::future::Future;
use core::hash::Hash;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::sync::Arc;

use super::error::WaitError;
use super::shared::{Begin, Bounds, Expiry, Shared};
use super::timer::ExpiryTimer;
use tollgate_core::limiter::Limiter;
use tollgate_core::time::duration_to_nanos;

enum State {
    Start,
    Queued { slot: usize, line: usize },
    Done,
}

/// The future of [`Queue::acquire`](super::Queue::acquire): resolves to a [`QueuePermit`].
///
/// Cancellation-safe: dropping it removes the waiter (and gives back
/// permits granted but not yet taken). Polling it again after it has
/// completed yields `Err(WaitError::Closed)` rather than panicking.
#[must_use = "futures do nothing unless awaited"]
pub(crate) struct Acquire<L: Limiter<K>, K: Hash + Eq + Clone> {
    /// The queue and the key, moved into the permit when it is granted
    /// (`None` once the future has completed).
    handle: Option<(Arc<Shared<L, K>>, K)>,
    n: u32,
    deadline: Option<u64>,
    state: State,
    expiry: Option<(ExpiryTimer, Expiry)>,
}

impl<L: Limiter<K>, K: Hash + Eq + Clone> Unpin for Acquire<L, K> {}

impl<L: Bounds<K>, K: Hash + Eq + Clone + Send + Sync + 'static> Acquire<L, K> {
    pub(super) fn new(shared: Arc<Shared<L, K>>, key: K, n: u32, deadline: Option<u64>) -> Self {
        Self {
            handle: Some((shared, key)),
            n,
            deadline,
            state: State::Start,
            expiry: None,
        }
    }

    /// The waiter's answer: the queue handle and the key move into the
    /// permit.
    fn finish(
        &mut self,
        result: Result<L::Permit, WaitError>,
    ) -> Poll<Result<QueuePermit<L, K>, WaitError>> {
        self.state = State::Done;
        let handle = self.handle.take();
        Poll::Ready(match (result, handle) {
            (Ok(permit), Some((shared, key))) => Ok(QueuePermit {
                shared,
                key,
                n: self.n,
                permit: Some(permit),
            }),
            (Ok(_), None) => Err(WaitError::Closed), // never: taken only here
            (Err(e), _) => Err(e),
        })
    }
}

impl<L: Bounds<K>, K: Hash + Eq + Clone + Send + Sync + 'static> Future for Acquire<L, K> {
    type Output = Result<QueuePermit<L, K>, WaitError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let Some((shared, key)) = this.handle.as_ref() else {
            return Poll::Ready(Err(WaitError::Closed));
        };
        match this.state {
            State::Start => {
                let now = shared.now();
                let begun = shared.begin(key, this.n, now, this.deadline, cx.waker());
                match begun {
                    Begin::Granted(permit) => {
                        shared.count_admitted(this.n);
                        this.finish(Ok(permit))
                    }
                    Begin::Refused(e) => {
                        shared.count_refused();
                        this.finish(Err(e))
                    }
                    Begin::Queued {
                        key: slot,
                        line,
                        serving,
                        wakers,
                    } => {
                        this.state = State::Queued { slot, line };
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
                            shared.kick_line(line);
                            // The kick may already have granted it.
                            this.poll_queued(cx, slot, line)
                        } else {
                            // Behind others: the waker is registered; only
                            // the expiry (if any) needs arming.
                            this.poll_expiry(cx, slot, line)
                        }
                    }
                }
            }
            State::Queued { slot, line } => this.poll_queued(cx, slot, line),
            State::Done => Poll::Ready(Err(WaitError::Closed)),
        }
    }
}

impl<L: Bounds<K>, K: Hash + Eq + Clone + Send + Sync + 'static> Acquire<L, K> {
    fn poll_queued(
        &mut self,
        cx: &mut Context<'_>,
        slot: usize,
        line: usize,
    ) -> Poll<Result<QueuePermit<L, K>, WaitError>> {
        let Some((shared, _)) = self.handle.as_ref() else {
            return Poll::Ready(Err(WaitError::Closed));
        };
        if let Some(result) = shared.collect(slot, self.n, cx.waker()) {
            return self.finish(result);
        }
        self.poll_expiry(cx, slot, line)
    }

    fn poll_expiry(
        &mut self,
        cx: &mut Context<'_>,
        slot: usize,
        line: usize,
    ) -> Poll<Result<QueuePermit<L, K>, WaitError>> {
        let Some((shared, _)) = self.handle.as_ref() else {
            return Poll::Ready(Err(WaitError::Closed));
        };
        if let Some((timer, kind)) = &mut self.expiry
            && timer.poll_passed(cx, shared.now())
        {
            let error = kind.error();
            let result = shared.expire(slot, line, self.n, cx.waker(), error);
            return self.finish(result);
        }
        Poll::Pending
    }
}

impl<L: Limiter<K>, K: Hash + Eq + Clone> Drop for Acquire<L, K> {
    fn drop(&mut self) {
        if let (State::Queued { slot, .. }, Some((shared, key))) = (&self.state, &self.handle) {
            shared.cancel(*slot, key);
        }
    }
}

/// Permits granted by a [`Queue`](super::Queue): the limiter's own permit,
/// held until this drops.
///
/// For a rate limiter the permits are spent: dropping the permit does
/// nothing (unless the queue was built with
/// [`release_on_drop`](super::QueueBuilder::release_on_drop)); call
/// [`release`](Self::release) to give back permits that went unused. For an
/// in-flight limit (a [`ConcurrencyLimiter`](tollgate_core::ConcurrencyLimiter), a
/// chain or a partitioned limiter holding one), dropping the permit returns
/// its capacity and wakes the waiters that now fit, in their order.
pub struct QueuePermit<L: Limiter<K>, K: Hash + Eq + Clone = ()> {
    pub(super) shared: Arc<Shared<L, K>>,
    pub(super) key: K,
    pub(super) n: u32,
    pub(super) permit: Option<L::Permit>,
}

impl<L: Limiter<K, Permit: core::fmt::Debug>, K: Hash + Eq + Clone + core::fmt::Debug>
    core::fmt::Debug for QueuePermit<L, K>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("QueuePermit")
            .field("key", &self.key)
            .field("n", &self.n)
            .field("permit", &self.permit)
            .finish()
    }
}

impl<L: Limiter<K>, K: Hash + Eq + Clone> QueuePermit<L, K> {
    /// The number of permits held.
    #[must_use]
    pub fn permits(&self) -> u32 {
        self.n
    }

    /// The limiter's own permit (a [`Grant`](tollgate_core::Grant), a
    /// [`Lease`](tollgate_partitioned::Lease), a guard).
    #[must_use]
    pub fn inner(&self) -> Option<&L::Permit> {
        self.permit.as_ref()
    }

    /// Gives the permits back to the limiter now ([`Limiter::cancel`]: a
    /// rate's unused permits return, an in-flight guard is released) and
    /// wakes the waiters that now fit.
    pub fn release(mut self) {
        if let Some(permit) = self.permit.take() {
            self.shared.give_back(&self.key, permit, self.shared.now());
        }
    }

    /// Keeps the permits taken for good: dropping does not give them back,
    /// even with `release_on_drop` or for an in-flight guard (whose
    /// capacity is then lost for the life of the limiter).
    pub fn forget(mut self) {
        core::mem::forget(self.permit.take());
    }
}

impl<L: Limiter<K>, K: Hash + Eq + Clone> Drop for QueuePermit<L, K> {
    fn drop(&mut self) {
        let Some(permit) = self.permit.take() else {
            return;
        };
        if self.shared.release_on_drop {
            self.shared.give_back(&self.key, permit, self.shared.now());
        } else if core::mem::needs_drop::<L::Permit>() {
            // an in-flight guard: its release may admit a waiter
            drop(permit);
            self.shared.released();
        }
    }
}
