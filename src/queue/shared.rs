//! The queue's shared state and its admission loop.
//!
//! All waiting requests live in [`Waiters`] under one mutex. Admission
//! happens in [`Shared::drive`], run by whichever thread kicks it (a
//! newcomer that became the head, a cancellation, a release, or the queue
//! timer's waker), one thread at a time.

use core::time::Duration;
use std::sync::{Arc, PoisonError, Weak};
use std::task::{Wake, Waker};
use std::vec::Vec;

use super::error::WaitError;
use super::source::QueueLimiter;
use super::timer::QueueTimer;
use super::waiters::{Outcome, Waiters};
use super::{QueueOrder, TokioClock};
use crate::sync::{AtomicU32, AtomicU64, Mutex, MutexGuard, Ordering};
use crate::time::duration_to_nanos;

/// Bit 0 of `gate`: closed. The rest: waiting requests × 2.
pub(super) const CLOSED: u64 = 1;

#[derive(Debug)]
pub(super) struct Shared<L> {
    pub(super) limiter: L,
    pub(super) clock: TokioClock,
    pub(super) order: QueueOrder,
    pub(super) queue_limit: u64,
    pub(super) max_wait: Option<Duration>,
    pub(super) release_on_drop: bool,
    /// Lock-free summary for the fast path: `waiting << 1 | closed`,
    /// written under `inner`'s lock.
    pub(super) gate: AtomicU64,
    /// Set when the waiter being served must be (re-)examined.
    pub(super) due: AtomicU32,
    /// Set while one thread runs the admission loop ([`Shared::drive`]).
    pub(super) driving: AtomicU32,
    pub(super) inner: Mutex<Inner>,
    #[cfg_attr(loom, allow(dead_code))] // the model fires the timer itself
    pub(super) timer_waker: Waker,
    pub(super) counters: Counters,
    /// Under loom: the clock the model moves (see [`super::timer`]).
    #[cfg(loom)]
    pub(super) model_clock: Arc<crate::clock::ManualClock>,
}

#[derive(Debug)]
pub(super) struct Inner {
    pub(super) waiters: Waiters,
    pub(super) closed: bool,
    /// The queue's one timer (see [`QueueTimer`]).
    pub(super) timer: QueueTimer,
}

#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) admitted_permits: AtomicU64,
    /// Σ (n − 1) over admitted requests, wrapping (n = 0 adds −1).
    pub(super) extra_permits: AtomicU64,
    pub(super) refused_requests: AtomicU64,
    pub(super) cancelled_requests: AtomicU64,
    pub(super) queue_nanos: AtomicU64,
    pub(super) wakeups: AtomicU64,
}

/// The queue timer's waker: runs the admission loop, whichever task (if
/// any) is still around to poll.
pub(super) struct TimerWake<L> {
    pub(super) shared: Weak<Shared<L>>,
}

impl<L: QueueLimiter + Send + Sync + 'static> Wake for TimerWake<L> {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(shared) = self.shared.upgrade() {
            shared.kick();
        }
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The critical sections cannot leave the data inconsistent mid-way
    // (a panicking limiter aside), so a poisoned lock is still usable.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Wakers collected under the lock and woken after it is released: the
/// first few inline (no allocation for the usual one admission per timer
/// tick), the rest spilled to the heap.
#[derive(Default)]
pub(super) struct WakeList {
    inline: [Option<Waker>; 4],
    len: usize,
    spill: Vec<Waker>,
}

impl WakeList {
    pub(super) fn push(&mut self, waker: Waker) {
        match self.inline.get_mut(self.len) {
            Some(slot) => {
                *slot = Some(waker);
                self.len += 1;
            }
            None => self.spill.push(waker),
        }
    }

    fn len(&self) -> usize {
        self.len + self.spill.len()
    }

    fn wake_all(self) {
        for w in self.inline.into_iter().flatten() {
            w.wake();
        }
        for w in self.spill {
            w.wake();
        }
    }
}

/// How a waiter with an expiry is refused when it passes.
#[derive(Debug, Clone, Copy)]
pub(super) enum Expiry {
    Deadline,
    MaxWait(Duration),
}

impl Expiry {
    pub(super) fn error(self) -> WaitError {
        match self {
            Self::Deadline => WaitError::DeadlineExceeded,
            Self::MaxWait(max_wait) => WaitError::MaxWaitExceeded {
                estimated_wait: None,
                max_wait,
            },
        }
    }
}

/// What the first poll of an `acquire` decided.
pub(super) enum Begin {
    Granted,
    Refused(WaitError),
    Queued {
        key: usize,
        serving: bool,
        wakers: WakeList,
    },
}

impl<L> Shared<L> {
    /// The queue's clock now, in ns (under loom, the model's clock).
    #[inline]
    pub(super) fn now(&self) -> u64 {
        #[cfg(not(loom))]
        {
            crate::clock::Clock::now(&self.clock).as_nanos()
        }
        #[cfg(loom)]
        {
            crate::clock::Clock::now(&*self.model_clock).as_nanos()
        }
    }
}

impl<L: QueueLimiter + Send + Sync + 'static> Shared<L> {
    pub(super) fn serving_end(&self, w: &Waiters) -> Option<usize> {
        match self.order {
            QueueOrder::OldestFirst => w.front(),
            QueueOrder::NewestFirst => w.back(),
        }
    }

    pub(super) fn sync_gate(&self, inner: &Inner) {
        let closed = if inner.closed { CLOSED } else { 0 };
        self.gate
            .store(inner.waiters.len() << 1 | closed, Ordering::SeqCst);
    }

    pub(super) fn count_admitted(&self, n: u32) {
        // One atomic add for the common single permit: requests are
        // derived as permits minus the extra permits of larger requests.
        self.counters
            .admitted_permits
            .fetch_add(u64::from(n), Ordering::Relaxed);
        if n != 1 {
            // n = 0 counts one request and no permit: −1 extra.
            self.counters
                .extra_permits
                .fetch_add(u64::from(n).wrapping_sub(1), Ordering::Relaxed);
        }
    }

    pub(super) fn count_refused(&self) {
        self.counters
            .refused_requests
            .fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn count_queue_time(&self, nanos: u64) {
        self.counters
            .queue_nanos
            .fetch_add(nanos, Ordering::Relaxed);
    }

    pub(super) fn count_wakes(&self, k: usize) {
        if k > 0 {
            self.counters.wakeups.fetch_add(k as u64, Ordering::Relaxed);
        }
    }

    pub(super) fn wake(&self, wakers: WakeList) {
        self.count_wakes(wakers.len());
        wakers.wake_all();
    }

    /// Estimated wait for `n` permits joining the queue now.
    /// The refusal of `n` permits, more than the limiter ever grants.
    #[cold]
    pub(super) fn exceeded(&self, n: u32) -> crate::refusal::Refusal<'static> {
        let capacity = self.limiter.capacity();
        crate::refusal::Refusal::above(n, capacity)
    }

    pub(super) fn estimate(&self, inner: &Inner, n: u32, now: u64) -> Option<u64> {
        let ahead = match self.order {
            QueueOrder::OldestFirst => inner.waiters.permits(),
            QueueOrder::NewestFirst => 0,
        };
        self.limiter.time_until_ready_after(ahead, n, now)
    }

    /// Estimated time until the oldest waiters holding at least `excess`
    /// permits have been admitted (FIFO), i.e. until a refused newcomer
    /// would fit. Walks only as far as those waiters.
    fn room_after(&self, w: &Waiters, excess: u64, now: u64) -> Option<u64> {
        let mut ahead = 0u64;
        let mut cursor = w.front();
        while let Some(key) = cursor {
            let n = w.n(key);
            let freed = ahead.saturating_add(u64::from(n));
            if freed >= excess {
                return self.limiter.time_until_ready_after(ahead, n, now);
            }
            ahead = freed;
            cursor = w.next(key);
        }
        None
    }

    /// The first poll of an acquisition: grant, refuse, or link a waiter.
    #[inline]
    pub(super) fn begin(&self, n: u32, now: u64, deadline: Option<u64>, waker: &Waker) -> Begin {
        let gate = self.gate.load(Ordering::SeqCst);
        if gate == 0 && n != 0 {
            // The common case, kept small enough to inline: nobody waits
            // and the queue is open, so try the limiter without the lock.
            if self.limiter.check_n(n, now).is_ok() {
                return Begin::Granted;
            }
        }
        self.begin_slow(gate, n, now, deadline, waker)
    }

    #[inline(never)]
    fn begin_slow(
        &self,
        gate: u64,
        n: u32,
        now: u64,
        deadline: Option<u64>,
        waker: &Waker,
    ) -> Begin {
        if gate & CLOSED != 0 {
            return Begin::Refused(WaitError::Closed);
        }
        if n == 0 {
            return Begin::Granted;
        }
        let fifo = self.order == QueueOrder::OldestFirst;
        if gate == 0 {
            // Already tried above: refused or impossible.
            if n > self.limiter.capacity() {
                return Begin::Refused(WaitError::CapacityExceeded(self.exceeded(n)));
            }
        } else if !fifo {
            // Newest first: a newcomer is tried at once even while others wait.
            match self.limiter.check_n(n, now) {
                Ok(()) => return Begin::Granted,
                Err(e) if e.is_never() => return Begin::Refused(WaitError::CapacityExceeded(e)),
                Err(_) => {}
            }
        } else if n > self.limiter.capacity() {
            return Begin::Refused(WaitError::CapacityExceeded(self.exceeded(n)));
        }
        let mut inner = lock(&self.inner);
        if inner.closed {
            return Begin::Refused(WaitError::Closed);
        }
        if !fifo || inner.waiters.len() == 0 {
            // Authoritative check under the lock: no waiter can be linked
            // in between, so a FIFO newcomer never overtakes one.
            match self.limiter.check_n(n, now) {
                Ok(()) => return Begin::Granted,
                Err(e) if e.is_never() => return Begin::Refused(WaitError::CapacityExceeded(e)),
                Err(_) => {}
            }
        }
        let estimate = self.estimate(&inner, n, now);
        if let (Some(max_wait), Some(wait)) = (self.max_wait, estimate) {
            if wait > duration_to_nanos(max_wait) {
                return Begin::Refused(WaitError::MaxWaitExceeded {
                    estimated_wait: Some(Duration::from_nanos(wait)),
                    max_wait,
                });
            }
        }
        if let (Some(deadline), Some(wait)) = (deadline, estimate) {
            if now.saturating_add(wait) > deadline {
                return Begin::Refused(WaitError::DeadlineExceeded);
            }
        }
        let mut wakers = WakeList::default();
        let needed = inner.waiters.permits().saturating_add(u64::from(n));
        if needed > self.queue_limit {
            if fifo || u64::from(n) > self.queue_limit {
                let retry_after = if fifo && u64::from(n) <= self.queue_limit {
                    self.room_after(&inner.waiters, needed - self.queue_limit, now)
                } else {
                    estimate
                };
                return Begin::Refused(WaitError::QueueFull {
                    retry_after: retry_after.map(Duration::from_nanos),
                });
            }
            // Newest first: refuse the oldest until the newcomer fits.
            while inner.waiters.permits().saturating_add(u64::from(n)) > self.queue_limit {
                let Some(oldest) = inner.waiters.front() else {
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
        // Inside the runtime (a poll of `acquire`): create the timer that
        // serves this busy period, if there is none yet.
        inner.timer.start(&self.clock);
        let key = inner.waiters.push_back(n, now, waker.clone());
        let serving = self.serving_end(&inner.waiters) == Some(key);
        self.sync_gate(&inner);
        Begin::Queued {
            key,
            serving,
            wakers,
        }
    }

    /// Admits from the serving end while the limiter allows; returns the
    /// instant (ns) at which the waiter being served should be re-examined.
    fn process(&self, inner: &mut Inner, now: u64, wakers: &mut WakeList) -> Option<u64> {
        if inner.closed {
            return None;
        }
        while let Some(key) = self.serving_end(&inner.waiters) {
            let n = inner.waiters.n(key);
            let outcome = match self.limiter.check_n(n, now) {
                Ok(()) => Outcome::Admitted { at: now },
                Err(e) if e.is_never() => Outcome::Refused {
                    at: now,
                    error: WaitError::CapacityExceeded(e),
                },
                Err(d) => {
                    // A release-based limiter's capacity comes back through
                    // releases (which kick this loop), not with time: its
                    // `retry_after` is only a hint, and a timer at the hint
                    // would poll it. Neither does a hint of 0 or MAX arm one.
                    let r = d.retry_after_nanos();
                    let by_time = !self.release_on_drop && r != 0 && r != u64::MAX;
                    return by_time.then(|| now.saturating_add(r));
                }
            };
            if let Some(w) = inner.waiters.resolve(key, outcome) {
                wakers.push(w);
            }
        }
        None
    }

    /// Asks for the waiter being served to be re-examined now.
    pub(super) fn kick(&self) {
        self.due.swap(1, Ordering::SeqCst);
        self.drive();
    }

    /// The admission loop. One thread at a time runs it; a kick that
    /// arrives meanwhile (including one raised synchronously by the timer
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
            while self.due.swap(0, Ordering::SeqCst) != 0 {
                let now = self.now();
                let mut wakers = WakeList::default();
                {
                    let mut inner = lock(&self.inner);
                    match self.process(&mut inner, now, &mut wakers) {
                        Some(at) => self.arm_timer(&mut inner, at),
                        // Idle: no timer at all.
                        None if inner.waiters.len() == 0 => inner.timer.stop(),
                        None => {} // waiting for a release, not for time
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

    /// Points the queue's timer at `at` (ns). Only the driver calls this,
    /// under the `inner` lock: if the timer fires synchronously (a deadline
    /// already past), its waker only raises `due`, which this driver picks
    /// up, so the lock is never taken twice.
    fn arm_timer(&self, inner: &mut Inner, at: u64) {
        if inner.timer.arm(&self.clock, at, &self.timer_waker) {
            self.due.swap(1, Ordering::SeqCst);
        }
    }

    /// Takes a waiter's final outcome if it has one, freeing its slot.
    pub(super) fn collect(
        &self,
        key: usize,
        n: u32,
        waker: &Waker,
    ) -> Option<Result<(), WaitError>> {
        let mut inner = lock(&self.inner);
        match inner.waiters.outcome(key) {
            Outcome::Waiting => {
                inner.waiters.set_waker(key, waker);
                None
            }
            Outcome::Admitted { at } => {
                let waited = at.saturating_sub(inner.waiters.enqueued_at(key));
                inner.waiters.release(key);
                drop(inner);
                self.count_queue_time(waited);
                self.count_admitted(n);
                Some(Ok(()))
            }
            Outcome::Refused { at, error } => {
                let waited = at.saturating_sub(inner.waiters.enqueued_at(key));
                inner.waiters.release(key);
                drop(inner);
                self.count_queue_time(waited);
                self.count_refused();
                Some(Err(error))
            }
        }
    }

    /// A waiter's expiry passed: admit it if it fits right now, else
    /// refuse it.
    pub(super) fn expire(
        &self,
        key: usize,
        n: u32,
        waker: &Waker,
        error: WaitError,
    ) -> Result<(), WaitError> {
        self.kick();
        let now = self.now();
        let mut inner = lock(&self.inner);
        if inner.waiters.outcome(key) == Outcome::Waiting {
            let serving = self.serving_end(&inner.waiters) == Some(key);
            let _ = inner
                .waiters
                .resolve(key, Outcome::Refused { at: now, error });
            self.sync_gate(&inner);
            drop(inner);
            if serving {
                self.kick();
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
    pub(super) fn cancel(&self, key: usize, n: u32) {
        let now = self.now();
        let mut inner = lock(&self.inner);
        let outcome = inner.waiters.outcome(key);
        let serving = self.serving_end(&inner.waiters) == Some(key);
        let at = match outcome {
            Outcome::Waiting => now,
            Outcome::Admitted { at } | Outcome::Refused { at, .. } => at,
        };
        let waited = at.saturating_sub(inner.waiters.enqueued_at(key));
        inner.waiters.release(key);
        self.sync_gate(&inner);
        drop(inner);
        self.count_queue_time(waited);
        match outcome {
            Outcome::Waiting => {
                self.counters
                    .cancelled_requests
                    .fetch_add(1, Ordering::Relaxed);
                if serving {
                    self.kick();
                }
            }
            Outcome::Admitted { .. } => {
                self.counters
                    .cancelled_requests
                    .fetch_add(1, Ordering::Relaxed);
                self.limiter.refund(n, now);
                self.kick();
            }
            Outcome::Refused { .. } => self.count_refused(),
        }
    }

    pub(super) fn release(&self, n: u32) {
        self.limiter.refund(n, self.now());
        if self.gate.load(Ordering::SeqCst) >> 1 != 0 {
            self.kick();
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
