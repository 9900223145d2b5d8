//! The line of waiters: joining it, leaving it, and serving it at a
//! release (the protocol is in the [module documentation](super)).

use core::task::Poll;

use super::ConcurrencyLimiter;
use crate::refusal::Refusal;
use crate::sync::{Ordering, fence};
use crate::wakers::{Line, State, Ticket, Woken};

/// What joining the line gave.
pub(super) enum Join {
    /// Taken (the line was empty and the permits free), or refused for
    /// ever.
    Done(Result<(), Refusal<'static>>),
    /// In the line.
    Queued(Ticket),
    /// Every slot is taken (only without `std`): not in the line.
    Full,
}

impl ConcurrencyLimiter {
    pub(super) fn with_line<R>(&self, f: impl FnOnce(&mut Line) -> R) -> R {
        #[cfg(feature = "std")]
        {
            // every critical section leaves the line consistent
            let mut line = self
                .line
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            f(&mut line)
        }
        #[cfg(not(feature = "std"))]
        critical_section::with(|cs| f(&mut self.line.borrow_ref_mut(cs)))
    }

    /// Hands the free permits to the front of the line while they fit and
    /// wakes those waiters (after refusing, if `refuse_above_limit`, every
    /// waiter above the limit). Call after freeing permits or changing the
    /// limit: one load when nobody waits.
    pub(super) fn serve(&self, refuse_above_limit: bool) {
        // pairs with the fence in `join`: either this load sees the waiter,
        // or the waiter's look sees what the caller freed
        fence(Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) == 0 {
            return;
        }
        loop {
            let mut woken = Woken::new();
            let more = self.with_line(|line| {
                let limit = self.limit();
                while refuse_above_limit && !woken.is_full() {
                    let Some(waker) = line.refuse_first_above(limit) else {
                        break;
                    };
                    self.waiting.fetch_sub(1, Ordering::SeqCst);
                    woken.push(waker);
                }
                while let Some(n) = line.front() {
                    if woken.is_full() {
                        return true;
                    }
                    let state = if n > limit {
                        State::Refused(limit)
                    } else if self.take_free(n, limit).is_ok() {
                        State::Granted
                    } else {
                        break;
                    };
                    self.waiting.fetch_sub(1, Ordering::SeqCst);
                    woken.push(line.pop_front(state));
                }
                woken.is_full()
            });
            woken.wake();
            if !more {
                return;
            }
        }
    }

    /// A waiter refused as a newcomer: takes `n` now if nobody is in the
    /// line and they are free, else joins the back of the line.
    pub(super) fn join(&self, n: u32, waker: &core::task::Waker) -> Join {
        self.with_line(|line| {
            // count, then look: a release in between either is seen by this
            // look or sees the waiter (see the module documentation)
            self.waiting.fetch_add(1, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            let limit = self.limit();
            let done = if n > limit {
                Some(Err(Refusal::above(n, limit)))
            } else if line.is_empty() && self.take_free(n, limit).is_ok() {
                Some(Ok(()))
            } else {
                None
            };
            let joined = match done {
                Some(done) => Join::Done(done),
                None => line.push_back(n, waker).map_or(Join::Full, Join::Queued),
            };
            if !matches!(joined, Join::Queued(_)) {
                self.waiting.fetch_sub(1, Ordering::SeqCst);
            }
            joined
        })
    }

    /// A queued waiter's outcome: its permits (taken on its behalf), a
    /// refusal, or still waiting (keeping `waker`).
    pub(super) fn poll_ticket(
        &self,
        ticket: Ticket,
        waker: &core::task::Waker,
    ) -> Poll<Result<(), Refusal<'static>>> {
        match self.with_line(|line| line.poll(ticket, waker)) {
            Some((State::Waiting, _)) => Poll::Pending,
            Some((State::Granted, _)) => Poll::Ready(Ok(())),
            Some((State::Refused(limit), n)) => Poll::Ready(Err(Refusal::above(n, limit))),
            // a stale ticket (never given out twice): nothing was taken
            _ => Poll::Ready(Err(Refusal::above(0, 0))),
        }
    }

    /// A queued waiter that goes away: leaves the line (the waiters behind
    /// it may now fit), or gives back the permits it was granted but never
    /// saw.
    pub(super) fn leave(&self, ticket: Ticket) {
        let left = self.with_line(|line| {
            let left = line.remove(ticket);
            if let Some((State::Waiting, ..)) = left {
                self.waiting.fetch_sub(1, Ordering::SeqCst);
            }
            left
        });
        match left {
            Some((State::Waiting, _, true)) => self.serve(false),
            Some((State::Granted, n, _)) => self.release(n),
            _ => {}
        }
    }
}
