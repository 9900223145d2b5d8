//! The admission loop: listing lines to examine (kicks), the one-at-a-time
//! driver that examines them, and the admission of each line's serving end.

use core::hash::Hash;
use std::vec::Vec;

use super::{
    BIT_LINES, DUE_ALL, DUE_LISTED, DUE_PENDING, DUE_RELEASE, Inner, Shared, WakeList, lock,
    wake_at,
};
use crate::error::WaitError;
use crate::waiters::Outcome;
use tollgate_core::limiter::Limiter;
use tollgate_core::sync::{AtomicU32, Ordering, fence};

impl<L: Limiter<K>, K: Hash + Eq + Clone> Shared<L, K> {
    /// Admits from the serving end of `line` while the limiter allows;
    /// arms the line's timer, or marks it as waiting for a release.
    fn process(
        &self,
        inner: &mut Inner<K, L::Permit>,
        line: usize,
        now: u64,
        wakers: &mut WakeList,
    ) {
        // a waiter whose turn has come is charged at its turn (a refusal
        // there is asked again now, so turns never chain through the past)
        let mut at = inner
            .waiters
            .line(line)
            .and_then(|l| l.turn)
            .filter(|&turn| turn <= now)
            .unwrap_or(now);
        while let Some(slot) = self.serving_end(&inner.waiters, line) {
            let n = inner.waiters.n(slot);
            let Some(l) = inner.waiters.line(line) else {
                return;
            };
            let outcome = match self.check(&l.key, n, at) {
                Ok(permit) => Outcome::Admitted {
                    at: now,
                    permit: Some(permit),
                },
                Err(e) if e.is_never() => Outcome::Refused {
                    at: now,
                    error: WaitError::CapacityExceeded(e),
                },
                Err(_) if at < now => {
                    at = now;
                    continue;
                }
                Err(e) => {
                    let wake = wake_at(&e, self.release_on_drop, at);
                    if let Some(l) = inner.waiters.line_mut(line) {
                        l.for_release = wake.is_none();
                        l.turn = wake;
                        if let Some(at) = wake
                            && l.timer.arm(&self.clock, at, &l.timer_waker)
                        {
                            // already past: look again
                            self.list(line);
                        }
                    }
                    return;
                }
            };
            if let Some(w) = inner.waiters.resolve(slot, outcome) {
                wakers.push(w);
            }
        }
    }

    /// Lists `line` for the driver.
    pub(super) fn list(&self, line: usize) {
        if line < BIT_LINES {
            self.pending_bits.fetch_or(1 << line, Ordering::SeqCst);
            self.due.fetch_or(DUE_PENDING, Ordering::SeqCst);
        } else {
            lock(&self.pending).push(line);
            self.due
                .fetch_or(DUE_PENDING | DUE_LISTED, Ordering::SeqCst);
        }
    }

    /// Asks for `line` to be re-examined now.
    pub(crate) fn kick_line(&self, line: usize) {
        self.list(line);
        self.drive();
    }

    /// Capacity came back by a release: re-examines every line waiting
    /// for one.
    pub(crate) fn kick_release(&self) {
        self.due.fetch_or(DUE_RELEASE, Ordering::SeqCst);
        self.drive();
    }

    /// Re-examines every line.
    pub(crate) fn kick_all(&self) {
        self.due.fetch_or(DUE_ALL, Ordering::SeqCst);
        self.drive();
    }

    /// The admission loop. One thread at a time runs it; a kick that
    /// arrives meanwhile (including one raised synchronously by a timer
    /// from inside this loop) is picked up before the runner leaves.
    ///
    /// Every access to `due` and `driving` is a read-modify-write, so the
    /// hand-over needs acquire/release only, not the total order of
    /// `SeqCst`: a kicker that finds `driving` set wrote `due` before its
    /// swap, and the runner's own swap back to 0 reads that swap's value
    /// (or a later one), so its next look at `due` sees the kick. With a
    /// plain store to `driving` that argument needed `SeqCst`'s total order
    /// (the store-buffering pattern), which loom cannot check (it models
    /// `SeqCst` as `AcqRel`); `loom-tests/tests/queue_admission_protocol.rs`
    /// checks this form.
    fn drive(&self) {
        loop {
            if self.driving.swap(1, Ordering::SeqCst) != 0 {
                return; // the running driver will see `due`
            }
            // A limiter that panics inside `process` unwinds out of here with
            // `driving` set: without this guard no later kick would ever
            // drive again, and every waiter would wait forever.
            let _unwinding = ReleaseDrivingOnPanic(&self.driving);
            loop {
                let due = self.due.swap(0, Ordering::SeqCst);
                if due == 0 {
                    break;
                }
                let bits = if due & DUE_PENDING != 0 {
                    self.pending_bits.swap(0, Ordering::SeqCst)
                } else {
                    0
                };
                let listed = if due & DUE_LISTED != 0 {
                    core::mem::take(&mut *lock(&self.pending))
                } else {
                    Vec::new() // no allocation
                };
                // Pairs with the fence of a release: the checks below see
                // the capacity it gave back, or it sees the waiters.
                fence(Ordering::SeqCst);
                let now = self.now();
                let mut wakers = WakeList::default();
                {
                    let mut inner = lock(&self.inner);
                    if !inner.closed {
                        let mut bits = bits;
                        while bits != 0 {
                            let line = bits.trailing_zeros() as usize;
                            bits &= bits - 1;
                            self.process(&mut inner, line, now, &mut wakers);
                        }
                        for line in listed {
                            self.process(&mut inner, line, now, &mut wakers);
                        }
                        if due & (DUE_RELEASE | DUE_ALL) != 0 {
                            for line in 0..inner.waiters.line_slots() {
                                let due_now = due & DUE_ALL != 0
                                    || inner.waiters.line(line).is_some_and(|l| l.for_release);
                                if due_now {
                                    self.process(&mut inner, line, now, &mut wakers);
                                }
                            }
                        }
                    }
                    self.sync_gate(&inner);
                }
                self.wake(wakers);
            }
            self.driving.swap(0, Ordering::SeqCst);
            if self.due.load(Ordering::SeqCst) == 0 {
                return;
            }
        }
    }
}

/// Clears the queue's `driving` flag when the admission loop unwinds (a
/// user's limiter panicked in it), so the next kick drives again. On the
/// normal path it does nothing: the loop clears the flag itself, in the
/// order the hand-over needs.
struct ReleaseDrivingOnPanic<'a>(&'a AtomicU32);

impl Drop for ReleaseDrivingOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.swap(0, Ordering::SeqCst);
        }
    }
}
