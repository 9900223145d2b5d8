//! The first poll of an acquisition: grant at once, refuse (closed, over
//! capacity, over the maximum wait or deadline, queue full), or link a
//! waiter into its key's line; and the wait estimates those refusals carry.

use core::hash::Hash;
use core::time::Duration;
use std::sync::{Arc, Weak};
use std::task::Waker;

use super::{Begin, Bounds, CLOSED, Inner, Shared, TimerWake, WakeList, lock, wake_at};
use crate::QueueOrder;
use crate::error::WaitError;
use crate::waiters::{Outcome, Waiters};
use tollgate_core::limiter::Limiter;
use tollgate_core::sync::Ordering;
use tollgate_core::time::{Timestamp, duration_to_nanos};

impl<L: Limiter<K>, K: Hash + Eq + Clone> Shared<L, K> {
    /// The refusal of `n` permits, more than the limiter ever grants `key`.
    #[cold]
    pub(crate) fn exceeded(&self, key: &K, n: u32) -> tollgate_core::refusal::Refusal<'static> {
        tollgate_core::refusal::Refusal::above(n, self.limiter.capacity(key))
    }

    /// Estimated wait for `n` permits of `key` joining its line now.
    pub(crate) fn estimate(
        &self,
        inner: &Inner<K, L::Permit>,
        key: &K,
        line: Option<usize>,
        n: u32,
        now: u64,
    ) -> Option<u64> {
        let ahead = match (self.order, line) {
            (QueueOrder::OldestFirst, Some(line)) => inner.waiters.line_permits(line),
            _ => 0,
        };
        self.wait_after(key, ahead, n, now)
    }

    /// The limiter's wait (ns) for `n` permits of `key` after `ahead`.
    fn wait_after(&self, key: &K, ahead: u64, n: u32, now: u64) -> Option<u64> {
        self.limiter
            .time_until_ready_after(key, ahead, n, Timestamp::from_nanos(now))
            .map(duration_to_nanos)
    }

    /// Estimated time until the oldest waiters of `line` holding at least
    /// `excess` permits have been admitted (FIFO), i.e. until a refused
    /// newcomer would fit. Walks only as far as those waiters.
    fn room_after(
        &self,
        w: &Waiters<K, L::Permit>,
        line: usize,
        excess: u64,
        now: u64,
    ) -> Option<u64> {
        let key = &w.line(line)?.key;
        let mut ahead = 0u64;
        let mut cursor = w.front(line);
        while let Some(slot) = cursor {
            let n = w.n(slot);
            let freed = ahead.saturating_add(u64::from(n));
            if freed >= excess {
                return self.wait_after(key, ahead, n, now);
            }
            ahead = freed;
            cursor = w.next(slot);
        }
        None
    }
}

impl<L: Bounds<K>, K: Hash + Eq + Clone + Send + Sync + 'static> Shared<L, K> {
    /// The first poll of an acquisition: grant, refuse, or link a waiter.
    #[inline]
    pub(crate) fn begin(
        &self,
        key: &K,
        n: u32,
        now: u64,
        deadline: Option<u64>,
        waker: &Waker,
    ) -> Begin<L::Permit> {
        let gate = self.gate.load(Ordering::SeqCst);
        if gate == 0 && n != 0 {
            // The common case, kept small enough to inline: nobody waits
            // and the queue is open, so try the limiter without the lock.
            if let Ok(permit) = self.check(key, n, now) {
                return Begin::Granted(permit);
            }
        }
        self.begin_slow(gate, key, n, now, deadline, waker)
    }

    #[inline(never)]
    fn begin_slow(
        &self,
        gate: u64,
        key: &K,
        n: u32,
        now: u64,
        deadline: Option<u64>,
        waker: &Waker,
    ) -> Begin<L::Permit> {
        if gate & CLOSED != 0 {
            return Begin::Refused(WaitError::Closed);
        }
        if n == 0 {
            return match self.check(key, 0, now) {
                Ok(permit) => Begin::Granted(permit),
                Err(e) => Begin::Refused(WaitError::CapacityExceeded(e)),
            };
        }
        if n > self.limiter.capacity(key) {
            return Begin::Refused(WaitError::CapacityExceeded(self.exceeded(key, n)));
        }
        let fifo = self.order == QueueOrder::OldestFirst;
        if gate != 0 && !fifo {
            // Newest first: a newcomer is tried at once even while others wait.
            match self.check(key, n, now) {
                Ok(permit) => return Begin::Granted(permit),
                Err(e) if e.is_never() => return Begin::Refused(WaitError::CapacityExceeded(e)),
                Err(_) => {}
            }
        }
        let mut inner = lock(&self.inner);
        if inner.closed {
            return Begin::Refused(WaitError::Closed);
        }
        let line = inner.waiters.line_of(key);
        let mut refused = None;
        if fifo && line.is_none() {
            // Authoritative check under the lock: no waiter of this key can
            // be linked in between, so a FIFO newcomer never overtakes one.
            match self.check(key, n, now) {
                Ok(permit) => return Begin::Granted(permit),
                Err(e) if e.is_never() => return Begin::Refused(WaitError::CapacityExceeded(e)),
                Err(e) => refused = Some(e),
            }
        }
        // With nobody of its key ahead, a limiter that cannot predict a
        // wait behind others still said how long this one waits.
        let estimate = self
            .estimate(&inner, key, line, n, now)
            .or_else(|| refused.and_then(|e| wake_at(&e, self.release_on_drop, 0)));
        if let (Some(max_wait), Some(wait)) = (self.max_wait, estimate)
            && wait > duration_to_nanos(max_wait)
        {
            return Begin::Refused(WaitError::MaxWaitExceeded {
                estimated_wait: Some(Duration::from_nanos(wait)),
                max_wait,
            });
        }
        if let (Some(deadline), Some(wait)) = (deadline, estimate)
            && now.saturating_add(wait) > deadline
        {
            return Begin::Refused(WaitError::DeadlineExceeded);
        }
        let mut wakers = WakeList::default();
        let queued = line.map_or(0, |l| inner.waiters.line_permits(l));
        let needed = queued.saturating_add(u64::from(n));
        if needed > self.queue_limit {
            let line = match line {
                Some(line) if !fifo && u64::from(n) <= self.queue_limit => line,
                _ => {
                    let retry_after = match line {
                        Some(line) if fifo && u64::from(n) <= self.queue_limit => {
                            self.room_after(&inner.waiters, line, needed - self.queue_limit, now)
                        }
                        _ => estimate,
                    };
                    return Begin::Refused(WaitError::QueueFull {
                        retry_after: retry_after.map(Duration::from_nanos),
                    });
                }
            };
            // Newest first: refuse the oldest until the newcomer fits.
            while inner
                .waiters
                .line_permits(line)
                .saturating_add(u64::from(n))
                > self.queue_limit
            {
                let Some(oldest) = inner.waiters.front(line) else {
                    break;
                };
                let outcome = Outcome::Refused {
                    at: now,
                    error: WaitError::Displaced,
                };
                if let Some(w) = inner.waiters.resolve(oldest, outcome) {
                    wakers.push(w);
                }
            }
        }
        // (displacing a line's last waiters above removed it)
        let line = match inner.waiters.line_of(key) {
            Some(line) => line,
            None => inner.waiters.new_line(key, |line| {
                Waker::from(Arc::new(TimerWake {
                    shared: Weak::clone(&self.this),
                    line,
                }))
            }),
        };
        if let Some(l) = inner.waiters.line_mut(line) {
            // Inside the runtime (a poll of `acquire`): create the timer
            // that serves this line, if there is none yet.
            l.timer.start(&self.clock);
        }
        let slot = inner.waiters.push_back(line, n, now, waker.clone());
        let serving = self.serving_end(&inner.waiters, line) == Some(slot);
        self.sync_gate(&inner);
        Begin::Queued {
            key: slot,
            line,
            serving,
            wakers,
        }
    }
}
