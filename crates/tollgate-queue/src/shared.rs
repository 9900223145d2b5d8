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
use super::waiters::Waiters;
use super::{QueueOrder, TokioClock};
use tollgate_core::limiter::Limiter;
use tollgate_core::sync::{AtomicU32, AtomicU64, Mutex, MutexGuard, Ordering};
use tollgate_core::time::Timestamp;

mod begin;
mod drive;
mod settle;

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
}
