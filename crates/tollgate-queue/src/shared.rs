//! The queue's shared state and its admission loop.
//!
//! All waiting requests live in [`Waiters`] (a line per key) under one
//! mutex. Admission happens in [`Shared::drive`], run by whichever thread
//! kicks it (a newcomer that became the head of its line, a cancellation,
//! a release, or a line's timer waker), one thread at a time.

use core::hash::Hash;
use core::time::Duration;
use std::sync::{Arc, PoisonError, Weak};
use std::task::{Wake, Waker};
use std::vec::Vec;

use super::error::WaitError;
use super::waiters::{Outcome, Waiters};
use super::{QueueOrder, TokioClock};
use tollgate_core::limiter::Limiter;
use tollgate_core::sync::{AtomicU32, AtomicU64, Mutex, MutexGuard, Ordering, fence};
use tollgate_core::time::{Timestamp, duration_to_nanos};

/// Bit 0 of `gate`: closed. The rest: waiting requests × 2.
pub(super) const CLOSED: u64 = 1;

/// Bits of `due`: lines listed in `pending_bits` or `pending`; every line
/// waiting for a release; every line.
const DUE_PENDING: u32 = 1;
const DUE_RELEASE: u32 = 2;
const DUE_ALL: u32 = 4;
/// Lines are listed in `pending` (not only in `pending_bits`).
const DUE_LISTED: u32 = 8;

/// Lines below this id are listed in a bit mask, without a lock.
const BIT_LINES: usize = 64;

/// What the queue needs of its limiter and key: a [`Limiter`] over `K`
/// whose permits can be kept in the queue until their waiter takes them.
pub(super) trait Bounds<K>:
    Limiter<K, Permit: Send + 'static> + Send + Sync + 'static
{
}

impl<K, L: Limiter<K, Permit: Send + 'static> + Send + Sync + 'static> Bounds<K> for L {}

pub(super) struct Shared<L: Limiter<K>, K> {
    pub(super) limiter: L,
    pub(super) clock: TokioClock,
    pub(super) order: QueueOrder,
    pub(super) queue_limit: u64,
    pub(super) max_wait: Option<Duration>,
    pub(super) release_on_drop: bool,
    /// Lock-free summary for the fast path: `waiting << 1 | closed`,
    /// written under `inner`'s lock.
    pub(super) gate: AtomicU64,
    /// What must be (re-)examined: `DUE_*` bits.
    pub(super) due: AtomicU32,
    /// Lines to examine (`DUE_PENDING`), kept apart from `inner` so that a
    /// timer that fires while the driver holds `inner` can still list its
    /// line: lines below [`BIT_LINES`] (a direct limiter's one line, the
    /// first keys) one bit each, the others in `pending`.
    pub(super) pending_bits: AtomicU64,
    pub(super) pending: Mutex<Vec<usize>>,
    /// Set while one thread runs the admission loop ([`Shared::drive`]).
    pub(super) driving: AtomicU32,
    pub(super) inner: Mutex<Inner<K, L::Permit>>,
    /// For the lines' timer wakers.
    pub(super) this: Weak<Self>,
    pub(super) counters: Counters,
    /// Under loom: the clock the model moves (see [`super::timer`]).
    #[cfg(loom)]
    pub(super) model_clock: Arc<tollgate_core::clock::ManualClock>,
}

pub(super) struct Inner<K, P> {
    pub(super) waiters: Waiters<K, P>,
    pub(super) closed: bool,
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

/// A line's timer waker: has the line examined, whichever task (if any)
/// is still around to poll.
pub(super) struct TimerWake<L: Limiter<K>, K> {
    pub(super) shared: Weak<Shared<L, K>>,
    pub(super) line: usize,
}

impl<L: Bounds<K>, K: Hash + Eq + Clone + Send + Sync + 'static> Wake for TimerWake<L, K> {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(shared) = self.shared.upgrade() {
            shared.kick_line(self.line);
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
pub(super) enum Begin<P> {
    Granted(P),
    Refused(WaitError),
    Queued {
        key: usize,
        line: usize,
        serving: bool,
        wakers: WakeList,
    },
}

/// Whether a refusal leaves a waiter to wait for time (`Some(at)`, its
/// line's timer armed there) or for a release (`None`).
pub(super) fn wake_at(
    refusal: &tollgate_core::Refusal<'_>,
    release_on_drop: bool,
    now: u64,
) -> Option<u64> {
    // A release-based limiter's capacity comes back through releases
    // (which kick the queue), not with time: its `retry_after` is only a
    // hint, and a timer at the hint would poll it. Neither does a hint of
    // 0 or MAX arm one.
    let r = refusal.retry_after_nanos();
    let by_time = !release_on_drop && !refusal.is_until_release() && r != 0 && r != u64::MAX;
    by_time.then(|| now.saturating_add(r))
}

impl<L: Limiter<K>, K> Shared<L, K> {
    /// The queue's clock now, in ns (under loom, the model's clock).
    #[inline]
    pub(super) fn now(&self) -> u64 {
        #[cfg(not(loom))]
        {
            tollgate_core::clock::Clock::now(&self.clock).as_nanos()
        }
        #[cfg(loom)]
        {
            tollgate_core::clock::Clock::now(&*self.model_clock).as_nanos()
        }
    }
}

impl<L: Limiter<K>, K: Hash + Eq + Clone> Shared<L, K> {
    pub(super) fn serving_end(&self, w: &Waiters<K, L::Permit>, line: usize) -> Option<usize> {
        match self.order {
            QueueOrder::OldestFirst => w.front(line),
            QueueOrder::NewestFirst => w.back(line),
        }
    }

    pub(super) fn sync_gate(&self, inner: &Inner<K, L::Permit>) {
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

    /// The refusal of `n` permits, more than the limiter ever grants `key`.
    #[cold]
    pub(super) fn exceeded(&self, key: &K, n: u32) -> tollgate_core::refusal::Refusal<'static> {
        tollgate_core::refusal::Refusal::above(n, self.limiter.capacity(key))
    }

    /// Estimated wait for `n` permits of `key` joining its line now.
    pub(super) fn estimate(
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

    #[inline]
    pub(super) fn check(
        &self,
        key: &K,
        n: u32,
        now: u64,
    ) -> Result<L::Permit, tollgate_core::Refusal<'static>> {
        self.limiter
            .try_acquire_n(key, n, Timestamp::from_nanos(now))
    }

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
    fn list(&self, line: usize) {
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
    pub(super) fn kick_line(&self, line: usize) {
        self.list(line);
        self.drive();
    }

    /// Capacity came back by a release: re-examines every line waiting
    /// for one.
    pub(super) fn kick_release(&self) {
        self.due.fetch_or(DUE_RELEASE, Ordering::SeqCst);
        self.drive();
    }

    /// Re-examines every line.
    pub(super) fn kick_all(&self) {
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

    /// Takes a waiter's final outcome if it has one, freeing its slot.
    pub(super) fn collect(
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
    pub(super) fn expire(
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
    pub(super) fn cancel(&self, key: usize, subject: &K) {
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
    pub(super) fn give_back(&self, key: &K, permit: L::Permit, now: u64) {
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
    pub(super) fn released(&self) {
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

impl<L: Bounds<K>, K: Hash + Eq + Clone + Send + Sync + 'static> Shared<L, K> {
    /// The first poll of an acquisition: grant, refuse, or link a waiter.
    #[inline]
    pub(super) fn begin(
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
