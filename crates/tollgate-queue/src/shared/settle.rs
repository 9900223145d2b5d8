//! A waiter's end (its outcome collected, its expiry passed, its future
//! dropped) and capacity coming back through the queue (a permit given
//! back or released), which serves the lines that can use it.

use core::hash::Hash;
use std::task::Waker;

use super::{Shared, lock};
use crate::error::WaitError;
use crate::waiters::Outcome;
use tollgate_core::limiter::Limiter;
use tollgate_core::sync::{Ordering, fence};
use tollgate_core::time::Timestamp;

impl<L: Limiter<K>, K: Hash + Eq + Clone> Shared<L, K> {
    /// Takes a waiter's final outcome if it has one, freeing its slot.
    pub(crate) fn collect(
        &self,
        key: usize,
        n: u32,
        waker: &Waker,
    ) -> Option<Result<L::Permit, WaitError>> {
        let mut inner = lock(&self.inner);
        let (at, refused) = match inner.waiters.resolved(key) {
            None => {
                inner.waiters.set_waker(key, waker);
                return None;
            }
            Some(resolved) => resolved,
        };
        let waited = at.saturating_sub(inner.waiters.enqueued_at(key));
        let permit = inner.waiters.take_permit(key);
        inner.waiters.release(key);
        drop(inner);
        self.count_queue_time(waited);
        match (refused, permit) {
            (None, Some(permit)) => {
                self.count_admitted(n);
                Some(Ok(permit))
            }
            (Some(error), _) => {
                self.count_refused();
                Some(Err(error))
            }
            (None, None) => {
                self.count_refused();
                Some(Err(WaitError::Closed)) // a permit is taken once
            }
        }
    }

    /// A waiter's expiry passed: admit it if it fits right now, else
    /// refuse it.
    pub(crate) fn expire(
        &self,
        key: usize,
        line: usize,
        n: u32,
        waker: &Waker,
        error: WaitError,
    ) -> Result<L::Permit, WaitError> {
        self.kick_line(line);
        let now = self.now();
        let mut inner = lock(&self.inner);
        if inner.waiters.is_waiting(key) {
            let line = inner.waiters.line_of_slot(key);
            let serving = self.serving_end(&inner.waiters, line) == Some(key);
            let _ = inner
                .waiters
                .resolve(key, Outcome::Refused { at: now, error });
            self.sync_gate(&inner);
            drop(inner);
            if serving {
                self.kick_line(line);
            }
        } else {
            drop(inner);
        }
        match self.collect(key, n, waker) {
            Some(result) => result,
            None => Err(error), // unreachable: resolved above
        }
    }

    /// The future of a waiter was dropped.
    pub(crate) fn cancel(&self, key: usize, subject: &K) {
        let now = self.now();
        let mut inner = lock(&self.inner);
        // `None` while it waits; else when it was resolved, and its refusal
        let resolved = inner.waiters.resolved(key);
        let line = inner.waiters.line_of_slot(key);
        let serving = resolved.is_none() && self.serving_end(&inner.waiters, line) == Some(key);
        let at = resolved.map_or(now, |(at, _)| at);
        let waited = at.saturating_sub(inner.waiters.enqueued_at(key));
        let permit = inner.waiters.take_permit(key);
        inner.waiters.release(key);
        self.sync_gate(&inner);
        drop(inner);
        self.count_queue_time(waited);
        match resolved {
            None => {
                self.counters
                    .cancelled_requests
                    .fetch_add(1, Ordering::Relaxed);
                if serving {
                    self.kick_line(line);
                }
            }
            Some((_, None)) => {
                self.counters
                    .cancelled_requests
                    .fetch_add(1, Ordering::Relaxed);
                if let Some(permit) = permit {
                    self.give_back(subject, permit, now);
                }
            }
            Some((_, Some(_))) => self.count_refused(),
        }
    }

    /// Gives a permit granted through the queue back to the limiter, as if
    /// it had never been taken, and serves whoever can use it: the line of
    /// `key` (a rate's capacity came back early) and every line waiting
    /// for a release.
    pub(crate) fn give_back(&self, key: &K, permit: L::Permit, now: u64) {
        self.limiter.cancel(key, permit, Timestamp::from_nanos(now));
        if !self.waiting_after_release() {
            return;
        }
        let line = lock(&self.inner).waiters.line_of(key);
        if let Some(line) = line {
            self.list(line);
        }
        self.kick_release();
    }

    /// A permit granted through the queue was released (its guard dropped):
    /// serves every line waiting for a release, if anyone waits (one fence
    /// and one load when nobody does).
    pub(crate) fn released(&self) {
        if self.waiting_after_release() {
            self.kick_release();
        }
    }

    /// Whether anyone waits, read after capacity went back: the fence
    /// pairs with the driver's, so either the driver's checks see the
    /// capacity or this sees the waiters.
    fn waiting_after_release(&self) -> bool {
        fence(Ordering::SeqCst);
        self.gate.load(Ordering::SeqCst) >> 1 != 0
    }
}
