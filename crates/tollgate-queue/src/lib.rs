//! # tollgate-queue
//!
//! Async queued acquisition on tokio: one waiting mechanism for every
//! limiter. Use it as `tollgate::queue` with feature `tokio` of `tollgate`
//! (which re-exports this crate; add `tollgate`, not this crate).
//!
//! A [`Queue`] puts ordered, bounded waiting lines in front of any
//! [`Limiter`]: a bucket, a keyed table (a line per client), a
//! [`Chain`](tollgate_core::Chain) of a rate and an in-flight limit, a partitioned
//! limiter, one of your own. A server that would rather delay a request a
//! little than refuse it awaits [`Queue::acquire`]; a caller that must not
//! wait uses [`Queue::try_acquire`]. Every call names the key: `&()` for a
//! direct limiter.
//!
//! ```
//! use std::time::Duration;
//! use tollgate::queue::Queue;
//! use tollgate::{Bucket, Quota};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // 10 per second, bursts of 2; at most 5 permits waiting, for at most 1 s.
//! let queue = Queue::builder(Bucket::token_bucket(Quota::per_second(10)?.with_burst(2)?))
//!     .queue_limit(5)
//!     .max_wait(Duration::from_secs(1))
//!     .build();
//!
//! let start = tokio::time::Instant::now();
//! for _ in 0..4 {
//!     queue.acquire(&(), 1).await?; // 2 at once, then one per 100 ms
//! }
//! assert_eq!(start.elapsed(), Duration::from_millis(200));
//! assert!(queue.try_acquire(&(), 1).is_err()); // would wait: refused at once
//! # Ok(())
//! # }
//! ```
//!
//! # Map
//!
//! | type | what |
//! |---|---|
//! | [`Queue`], [`QueueBuilder`], [`QueuePermit`] | the waiting lines in front of a limiter, their settings (order, bound, maximum wait), and the permit a wait ends with |
//! | [`QueueOrder`] | oldest first (FIFO) or newest first |
//! | [`WaitError`] | why a wait ended without permits: full, too long a wait, closed, past its deadline |
//! | [`TokioClock`] | tokio's clock (paused time in tests) as a limiter's clock |
//!
//! The [`guide`] has a line per client in front of a keyed table, a chain
//! of a rate and an in-flight limit, and one section each on the
//! [semantics](guide#semantics), the [cost](guide#cost),
//! [`mem::forget`](guide#memforget) and a
//! [comparison with .NET](guide#compared-with-net-systemthreadingratelimiting).
//!

#![forbid(unsafe_code)]
#![warn(missing_debug_implementations)]
#![doc(test(attr(deny(unused_imports))))]

mod acquire;
mod builder;
mod error;
pub mod guide;
mod shared;
mod timer;
mod tokio_clock;
mod waiters;

use core::fmt;
use core::future::Future;
use core::hash::Hash;
use core::time::Duration;
use std::sync::Arc;

#[cfg(loom)]
use std::time::Instant;
#[cfg(not(loom))]
use tokio::time::Instant;

use tollgate_core::limiter::Limiter;
use tollgate_core::sync::Ordering;

use acquire::Acquire;
pub use acquire::QueuePermit;
pub use builder::QueueBuilder;
pub use error::WaitError;
use shared::{CLOSED, Shared, WakeList, lock};
pub use tokio_clock::TokioClock;
use waiters::Outcome;

/// A queue keeps its waiting lines behind a mutex.
impl<L: Limiter<K>, K> tollgate_core::lock_freedom::LockFreedom for Queue<L, K> {
    const IS_LOCK_FREE: bool = false;
    const IS_INTERRUPT_SAFE: bool = false;
}

/// Which waiter a queue serves first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum QueueOrder {
    /// FIFO: the oldest waiter first; newcomers never overtake a waiter.
    #[default]
    OldestFirst,
    /// LIFO: newcomers are tried at once, the newest waiter is served
    /// first, and a full queue refuses its oldest waiters to fit a newcomer.
    NewestFirst,
}

/// Counters of a [`Queue`], for metrics.
///
/// Totals count requests since the queue was built. `time_in_queue` sums,
/// over every request that waited and has left the queue (granted, refused,
/// or cancelled), the time from joining the queue to leaving it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct QueueStats {
    /// Requests waiting now.
    pub queued_requests: u64,
    /// Permits asked for by the requests waiting now.
    pub queued_permits: u64,
    /// Requests granted (at once or after waiting).
    pub admitted_requests: u64,
    /// Permits granted.
    pub admitted_permits: u64,
    /// Requests refused (any [`WaitError`]).
    pub refused_requests: u64,
    /// Waiting requests whose future was dropped before it completed.
    pub cancelled_requests: u64,
    /// Total time spent waiting in the queue.
    pub time_in_queue: Duration,
    /// Task wake-ups the queue has issued: one per waiter it granted or
    /// refused while that waiter was waiting (a waiter's own deadline timer
    /// is tokio's wake-up, not counted here).
    pub wakeups: u64,
}

/// Ordered, bounded waiting lines in front of any [`Limiter`] — one line
/// per key that has waiters; see the [module docs](self).
///
/// `L` is any limiter over keys `K`: a [`Bucket`](tollgate_core::Bucket) (`K =
/// ()`), a keyed table, a [`Chain`](tollgate_core::Chain), a partitioned limiter,
/// one of your own, owned, in an `Arc` or `&'static`. Its permits must not
/// borrow it (the queue keeps a granted permit until its waiter takes it):
/// put a [`ConcurrencyLimiter`](tollgate_core::ConcurrencyLimiter) in a `static`
/// (or leak it) and queue on the `&'static` reference.
pub struct Queue<L: Limiter<K>, K = ()> {
    shared: Arc<Shared<L, K>>,
}

impl<L: Limiter<K>, K> fmt::Debug for Queue<L, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &*self.shared;
        f.debug_struct("Queue")
            .field("order", &s.order)
            .field("queue_limit", &s.queue_limit)
            .field("max_wait", &s.max_wait)
            .field("release_on_drop", &s.release_on_drop)
            .field("waiting", &(s.gate.load(Ordering::Relaxed) >> 1))
            .finish_non_exhaustive()
    }
}

/// Clones are handles to the same queue (same waiters, limiter and
/// counters), convenient for moving into spawned tasks.
impl<L: Limiter<K>, K> Clone for Queue<L, K> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<
    L: Limiter<K, Permit: Send + 'static> + Send + Sync + 'static,
    K: Hash + Eq + Clone + Send + Sync + 'static,
> Queue<L, K>
{
    /// A queue with the defaults: oldest first, unbounded, no `max_wait`,
    /// permits spent on drop.
    #[must_use]
    pub fn new(limiter: L) -> Self {
        Queue::builder(limiter).build()
    }

    /// Starts configuring a queue in front of `limiter`.
    pub fn builder(limiter: L) -> QueueBuilder<L, K> {
        QueueBuilder::new(limiter)
    }

    /// Waits for `n` permits of `key` (`&()` for a direct limiter), in the
    /// order of that key's line.
    ///
    /// Resolves to a [`QueuePermit`], or to an [`WaitError`] at once when
    /// the request can never succeed, the key's line is full or the queue
    /// closed, or the estimated wait exceeds `max_wait`; later if the wait
    /// reaches `max_wait` or the queue is closed. Dropping the
    /// future leaves the line as if the request had never been made, giving
    /// back permits granted but not yet taken (see the module docs);
    /// polling it again after it completed yields `Err(WaitError::Closed)`
    /// rather than panicking.
    ///
    /// The future and the permit own a handle to the queue and a clone of
    /// `key`: they borrow nothing, so either can be moved into a spawned
    /// task or a response body.
    pub fn acquire(
        &self,
        key: &K,
        n: u32,
    ) -> impl Future<Output = Result<QueuePermit<L, K>, WaitError>> + Send + 'static {
        Acquire::new(Arc::clone(&self.shared), key.clone(), n, None)
    }

    /// As [`acquire`](Self::acquire), with a deadline: refused at once with
    /// [`WaitError::DeadlineExceeded`] when the estimated wait ends after
    /// `deadline`, and when `deadline` passes while waiting.
    pub fn acquire_until(
        &self,
        key: &K,
        n: u32,
        deadline: Instant,
    ) -> impl Future<Output = Result<QueuePermit<L, K>, WaitError>> + Send + 'static {
        let deadline = self.shared.clock.timestamp(deadline).as_nanos();
        Acquire::new(Arc::clone(&self.shared), key.clone(), n, Some(deadline))
    }

    /// Takes `n` permits of `key` now or refuses, never waiting. Under
    /// [`QueueOrder::OldestFirst`] it refuses while others wait for the
    /// same key (it never overtakes them).
    ///
    /// # Errors
    /// [`WaitError::WouldWait`] with the estimated wait,
    /// [`WaitError::CapacityExceeded`], or [`WaitError::Closed`].
    pub fn try_acquire(&self, key: &K, n: u32) -> Result<QueuePermit<L, K>, WaitError> {
        let shared = &*self.shared;
        let result = self.try_acquire_inner(key, n);
        match &result {
            Ok(_) => shared.count_admitted(n),
            Err(_) => shared.count_refused(),
        }
        result.map(|permit| QueuePermit {
            shared: Arc::clone(&self.shared),
            key: key.clone(),
            n,
            permit: Some(permit),
        })
    }

    fn try_acquire_inner(&self, key: &K, n: u32) -> Result<L::Permit, WaitError> {
        let shared = &*self.shared;
        let gate = shared.gate.load(Ordering::SeqCst);
        if gate & CLOSED != 0 {
            return Err(WaitError::Closed);
        }
        let now = shared.now();
        if gate != 0 && n != 0 && shared.order == QueueOrder::OldestFirst {
            let inner = lock(&shared.inner);
            if let Some(line) = inner.waiters.line_of(key) {
                if n > shared.limiter.capacity(key) {
                    return Err(WaitError::CapacityExceeded(shared.exceeded(key, n)));
                }
                let retry = shared.estimate(&inner, key, Some(line), n, now);
                return Err(WaitError::WouldWait {
                    retry_after: retry.map(Duration::from_nanos),
                });
            }
        }
        match shared.check(key, n, now) {
            Ok(permit) => Ok(permit),
            Err(d) if d.is_never() => Err(WaitError::CapacityExceeded(d)),
            // the wait a timer would be armed for (none for a release)
            Err(d) => Err(WaitError::WouldWait {
                retry_after: shared::wake_at(&d, false, 0).map(Duration::from_nanos),
            }),
        }
    }

    /// Re-examines the waiters being served now, granting them (and those
    /// behind them) if the limiter allows. The queue does this by itself on
    /// every release through a [`QueuePermit`], cancellation and timer
    /// tick; call it after returning capacity to the limiter by other
    /// means (for example an in-flight guard taken outside the queue).
    pub fn recheck(&self) {
        if self.shared.gate.load(Ordering::SeqCst) >> 1 != 0 {
            self.shared.kick_all();
        }
    }

    /// Refuses every waiter and every later call with
    /// [`WaitError::Closed`]. Permits already granted stay valid.
    pub fn close(&self) {
        let shared = &*self.shared;
        let now = shared.now();
        let mut wakers = WakeList::default();
        {
            let mut inner = lock(&shared.inner);
            inner.closed = true;
            for line in 0..inner.waiters.line_slots() {
                while let Some(slot) = inner.waiters.front(line) {
                    let outcome = Outcome::Refused {
                        at: now,
                        error: WaitError::Closed,
                    };
                    if let Some(w) = inner.waiters.resolve(slot, outcome) {
                        wakers.push(w);
                    }
                }
            }
            shared.sync_gate(&inner);
        }
        shared.wake(wakers);
    }

    /// Loom models only: where the timer of the line of `key` is armed (ns
    /// on the model clock), if it is.
    #[cfg(loom)]
    #[must_use]
    pub fn model_timer(&self, key: &K) -> Option<u64> {
        let inner = lock(&self.shared.inner);
        let line = inner.waiters.line_of(key)?;
        inner.waiters.line(line)?.timer.armed
    }

    /// Loom models only: the timer of the line of `key` fires, as tokio's
    /// timer driver makes it do at the armed instant (its waker runs the
    /// admission loop).
    #[cfg(loom)]
    pub fn model_fire_timer(&self, key: &K) {
        let waker = {
            let inner = lock(&self.shared.inner);
            inner
                .waiters
                .line_of(key)
                .and_then(|line| inner.waiters.line(line))
                .map(|l| l.timer_waker.clone())
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// True once [`close`](Self::close) has been called.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.shared.gate.load(Ordering::SeqCst) & CLOSED != 0
    }

    /// The queue's counters now.
    #[must_use]
    pub fn stats(&self) -> QueueStats {
        let shared = &*self.shared;
        let (queued_requests, queued_permits) = {
            let inner = lock(&shared.inner);
            (inner.waiters.len(), inner.waiters.permits())
        };
        let c = &shared.counters;
        // Read `extra` first: a concurrent admission then shows up in
        // permits before its extra, never the reverse (no transient
        // underflow of the request count).
        let extra = c.extra_permits.load(Ordering::SeqCst);
        let admitted_permits = c.admitted_permits.load(Ordering::SeqCst);
        QueueStats {
            queued_requests,
            queued_permits,
            admitted_requests: admitted_permits.wrapping_sub(extra),
            admitted_permits,
            refused_requests: c.refused_requests.load(Ordering::Relaxed),
            cancelled_requests: c.cancelled_requests.load(Ordering::Relaxed),
            time_in_queue: Duration::from_nanos(c.queue_nanos.load(Ordering::Relaxed)),
            wakeups: c.wakeups.load(Ordering::Relaxed),
        }
    }

    /// The wrapped limiter.
    #[must_use]
    pub fn limiter(&self) -> &L {
        &self.shared.limiter
    }

    /// The clock the queue reads (share it with other users of the limiter).
    #[must_use]
    pub fn clock(&self) -> &TokioClock {
        &self.shared.clock
    }

    /// The service order within a key's line.
    #[must_use]
    pub fn order(&self) -> QueueOrder {
        self.shared.order
    }

    /// The most permits that may wait at once for one key.
    #[must_use]
    pub fn queue_limit(&self) -> u64 {
        self.shared.queue_limit
    }

    /// The maximum wait, if any.
    #[must_use]
    pub fn max_wait(&self) -> Option<Duration> {
        self.shared.max_wait
    }
}
