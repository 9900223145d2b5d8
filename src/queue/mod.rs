//! Async queued acquisition on tokio (feature `tokio`).
//!
//! A [`Queue`] puts an ordered, bounded waiting line in front of any
//! [`Limiter`](crate::Limiter): a server that would rather delay a request a little than
//! refuse it awaits [`Queue::acquire`]; a caller that must not wait uses
//! [`Queue::try_acquire`].
//!
//! ```
//! use std::time::Duration;
//! use tollgate::queue::{Queue, QueueOrder};
//! use tollgate::{Bucket, Quota};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // 10 per second, bursts of 2; at most 5 permits waiting, for at most 1 s.
//! let queue = Queue::builder(Bucket::token_bucket(Quota::per_second(10)?.with_burst(2)?))
//!     .order(QueueOrder::OldestFirst)
//!     .queue_limit(5)
//!     .max_wait(Duration::from_secs(1))
//!     .build();
//!
//! let start = tokio::time::Instant::now();
//! for _ in 0..4 {
//!     queue.acquire(1).await?; // 2 at once, then one per 100 ms
//! }
//! assert_eq!(start.elapsed(), Duration::from_millis(200));
//! assert!(queue.try_acquire(1).is_err()); // would wait: refused at once
//! # Ok(())
//! # }
//! ```
//!
//! # Semantics
//!
//! - **Order.** [`QueueOrder::OldestFirst`] (FIFO, the default): a newcomer
//!   never overtakes a waiter, so a large request is never starved by a
//!   stream of small ones; the head waits for exactly its permits.
//!   [`QueueOrder::NewestFirst`] (LIFO): a newcomer is tried at once even
//!   when others wait, the newest waiter is served first, and when the
//!   queue is full the *oldest* waiters are refused
//!   ([`WaitError::Displaced`]) so that the newest fits — .NET's
//!   `QueueProcessingOrder` as defined in dotnet/runtime#62817. Either way
//!   the waiter being served blocks the others: a smaller request behind it
//!   does not skip ahead.
//! - **Bound in permits.** `queue_limit` caps the permits waiting, not the
//!   number of requests (a 5-permit request counts 5). A request that does
//!   not fit is refused at once with [`WaitError::QueueFull`] and an
//!   estimated `retry_after`. The default is unbounded: set one in servers.
//! - **Maximum wait.** A request whose estimated wait (from the limiter's
//!   state and the permits queued ahead, see
//!   [`Limiter::time_until_ready_after`](crate::Limiter::time_until_ready_after)) exceeds `max_wait` is refused at
//!   once ([`WaitError::MaxWaitExceeded`]), like nginx `limit_req burst`
//!   without `nodelay`. `max_wait` is also a hard cap: a waiter that has
//!   waited that long (possible under `NewestFirst`, when other code uses the
//!   same limiter, or with a limiter that cannot predict its waits) is
//!   refused then. [`Queue::acquire_until`] adds a per-call deadline with
//!   the same two effects ([`WaitError::DeadlineExceeded`]).
//! - **Impossible requests.** `n` above the limiter's capacity (burst,
//!   window limit, concurrency limit) is refused at once with
//!   [`WaitError::CapacityExceeded`]; `n = 0` is granted at once.
//! - **Cancellation.** Dropping a [`Queue::acquire`] future (a timeout,
//!   `select!`, a client gone) unlinks its waiter; a waiter holds no
//!   capacity while it waits, so the next one is served exactly as if the
//!   dropped one had never queued. If it had already been granted but not
//!   yet polled, its permits are refunded to the limiter and the next
//!   waiter is re-examined at once.
//! - **The concurrency limiter** ([`ConcurrencyLimiter`](crate::ConcurrencyLimiter),
//!   owned, `&'static` or in an `Arc`): dropping a [`QueuePermit`] always
//!   gives its permits back and wakes the next waiter that fits (the queue
//!   behaves as if built with [`QueueBuilder::release_on_drop`]). Such a
//!   queue arms no timer for its waiters (a refusal's `retry_after` is then
//!   only a hint): it never polls the limiter while nobody releases. If
//!   other code also returns capacity to the same limiter directly (a
//!   guard taken outside the queue), call [`Queue::recheck`] after it does.
//! - [`Queue::close`] refuses every waiter and every later call with
//!   [`WaitError::Closed`].
//!
//! # Cost
//!
//! No background task, no busy polling, no timer while idle. The waiters
//! live in a slab-backed linked list behind a `std::sync::Mutex` that is
//! held for a few instructions (link, unlink, one limiter check per
//! admission): O(1) memory per waiter, O(1) link and cancel. One tokio
//! timer per queue exists while someone waits (it is created with the first
//! waiter and dropped when the line empties) and is armed at the exact
//! `retry_after` of the waiter being served (`sleep_until`); when it fires,
//! the queue admits every waiter that now fits and wakes exactly those
//! tasks (no thundering herd). Waiters behind the head have no timer
//! unless they carry a deadline or `max_wait`. An uncontended `acquire`
//! with capacity available takes no lock: one atomic load, the clock, the
//! limiter check and one counter increment.
//!
//! The limiter must be driven by the queue's clock ([`Queue::clock`], a
//! [`TokioClock`]) if other code also uses it directly, and must be
//! `Send + Sync + 'static` (the timer's waker holds the queue): share a
//! borrowed limiter as an `Arc` or a `&'static`. `acquire` must be polled
//! inside a tokio runtime with time enabled (as `tokio::time::sleep` must).
//!
//! # `mem::forget`
//!
//! Forgetting a [`Queue::acquire`] future never wedges the queue: admission is
//! driven by the queue's own timer and by releases, not by the waiting
//! future, so the forgotten waiter is granted in its turn and the waiters
//! behind it proceed. What it costs: the permits granted to it are spent
//! (for a release-based limiter, never given back: the limit shrinks by
//! `n` for the life of the limiter), and its slot (a few dozen bytes) is
//! never reused. Forgetting a [`QueuePermit`] of a `release_on_drop` queue
//! likewise keeps its permits forever.
//!
//! # Compared with .NET `System.Threading.RateLimiting`
//!
//! | .NET | tollgate |
//! |---|---|
//! | `AcquireAsync(permitCount)` | [`Queue::acquire`]`(n).await` |
//! | `AttemptAcquire(permitCount)` | [`Queue::try_acquire`]`(n)` |
//! | `QueueLimit` (permits) | [`QueueBuilder::queue_limit`] (permits) |
//! | `QueueProcessingOrder.OldestFirst` / `NewestFirst` | [`QueueOrder::OldestFirst`] / [`QueueOrder::NewestFirst`] |
//! | failed lease with `RetryAfter` metadata | [`WaitError::QueueFull`] / [`WaitError::WouldWait`] with `retry_after` |
//! | `CancellationToken` | drop the future, or [`Queue::acquire_until`] |
//! | `Dispose` | [`Queue::close`] |
//! | `GetStatistics()` | [`Queue::stats`] |
//! | (none) | `max_wait`: refuse at once what would wait too long |

mod acquire;
#[cfg(not(loom))]
mod any_limiter;
mod error;
mod shared;
mod source;
mod timer;
mod tokio_clock;
mod waiters;

use core::future::Future;
use core::time::Duration;
use std::sync::{Arc, Weak};
use std::task::Waker;

#[cfg(loom)]
use std::time::Instant;
#[cfg(not(loom))]
use tokio::time::Instant;

use crate::sync::{AtomicU32, AtomicU64, Mutex, Ordering};
pub use source::QueueLimiter;

use acquire::Acquire;
pub use acquire::QueuePermit;
#[cfg(not(loom))]
pub use any_limiter::acquire;
pub use error::WaitError;
use shared::{lock, Counters, Inner, Shared, TimerWake, WakeList, CLOSED};
pub use tokio_clock::TokioClock;
use waiters::{Outcome, Waiters};

/// A queue keeps its waiting line behind a mutex.
impl<L> crate::lock_freedom::LockFreedom for Queue<L> {
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

/// Builds a [`Queue`]; from [`Queue::builder`].
#[derive(Debug)]
#[must_use]
pub struct QueueBuilder<L> {
    limiter: L,
    order: QueueOrder,
    queue_limit: u64,
    max_wait: Option<Duration>,
    release_on_drop: bool,
    clock: Option<TokioClock>,
    #[cfg(loom)]
    model_clock: Option<Arc<crate::clock::ManualClock>>,
}

impl<L: QueueLimiter + Send + Sync + 'static> QueueBuilder<L> {
    /// Loom models only: the manual clock the queue reads instead of
    /// tokio's (the model moves it and fires the queue's timer with
    /// [`Queue::model_fire_timer`]).
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn model_clock(mut self, clock: Arc<crate::clock::ManualClock>) -> Self {
        self.model_clock = Some(clock);
        self
    }

    /// Which waiter is served first (default [`QueueOrder::OldestFirst`]).
    pub fn order(mut self, order: QueueOrder) -> Self {
        self.order = order;
        self
    }

    /// The most permits that may wait at once (default: unbounded). 0 means
    /// no waiting at all: `acquire` then behaves like `try_acquire` but
    /// reports [`WaitError::QueueFull`].
    pub fn queue_limit(mut self, permits: u64) -> Self {
        self.queue_limit = permits;
        self
    }

    /// Refuse at once a request whose estimated wait exceeds `max_wait`,
    /// and refuse a waiter once it has waited `max_wait` (default: none).
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = Some(max_wait);
        self
    }

    /// Whether dropping a [`QueuePermit`] gives its permits back to the
    /// limiter (`Limiter::refund`) and wakes the next waiter that fits:
    /// for a `Limiter` whose capacity comes back by refunds rather than
    /// with time. Always on for the [`ConcurrencyLimiter`](crate::ConcurrencyLimiter)
    /// (whatever this says); leave it off (the default) for rate limiters,
    /// whose permits are spent and whose capacity returns with time.
    pub fn release_on_drop(mut self, release: bool) -> Self {
        self.release_on_drop = release;
        self
    }

    /// The clock to read (default: a new [`TokioClock`]). Share one clock
    /// between the queue and any other user of the same limiter.
    pub fn clock(mut self, clock: TokioClock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The queue.
    #[must_use]
    pub fn build(self) -> Queue<L> {
        let clock = self.clock.unwrap_or_default();
        #[cfg(loom)]
        let model_clock = self
            .model_clock
            .unwrap_or_else(|| Arc::new(crate::clock::ManualClock::new()));
        let shared = Arc::new_cyclic(|weak: &Weak<Shared<L>>| Shared {
            limiter: self.limiter,
            clock,
            order: self.order,
            queue_limit: self.queue_limit,
            max_wait: self.max_wait,
            release_on_drop: self.release_on_drop || L::RELEASE_BASED,
            gate: AtomicU64::new(0),
            due: AtomicU32::new(0),
            driving: AtomicU32::new(0),
            inner: Mutex::new(Inner {
                waiters: Waiters::default(),
                closed: false,
                timer: timer::QueueTimer::default(),
            }),
            timer_waker: Waker::from(Arc::new(TimerWake {
                shared: weak.clone(),
            })),
            counters: Counters::default(),
            #[cfg(loom)]
            model_clock,
        });
        Queue { shared }
    }
}

/// An ordered, bounded waiting line in front of a [`Limiter`](crate::Limiter); see the
/// [module docs](self).
///
/// `L` is any limiter: a [`Bucket`](crate::Bucket), an `Arc` of one, a
/// `&'static` one, or a small adaptor for one key of a keyed limiter.
#[derive(Debug)]
pub struct Queue<L> {
    shared: Arc<Shared<L>>,
}

/// Clones are handles to the same queue (same waiters, limiter and
/// counters), convenient for moving into spawned tasks.
impl<L> Clone for Queue<L> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<L: QueueLimiter + Send + Sync + 'static> Queue<L> {
    /// A queue with the defaults: oldest first, unbounded, no `max_wait`,
    /// permits spent on drop.
    #[must_use]
    pub fn new(limiter: L) -> Self {
        Self::builder(limiter).build()
    }

    /// Starts configuring a queue in front of `limiter`.
    pub fn builder(limiter: L) -> QueueBuilder<L> {
        QueueBuilder {
            limiter,
            order: QueueOrder::OldestFirst,
            queue_limit: u64::MAX,
            max_wait: None,
            release_on_drop: false,
            clock: None,
            #[cfg(loom)]
            model_clock: None,
        }
    }

    /// Waits for `n` permits, in queue order.
    ///
    /// Resolves to a [`QueuePermit`], or to an [`WaitError`] at once when
    /// the request can never succeed, the queue is full or closed, or the
    /// estimated wait exceeds `max_wait`; later if the wait reaches
    /// `max_wait` or the queue is closed. Dropping the future leaves the
    /// queue as if the request had never been made, refunding permits
    /// granted but not yet taken (see the module docs); polling it again
    /// after it completed yields `Err(WaitError::Closed)` rather than
    /// panicking.
    pub fn acquire(
        &self,
        n: u32,
    ) -> impl Future<Output = Result<QueuePermit<'_, L>, WaitError>> + '_ {
        Acquire::new(&self.shared, n, None)
    }

    /// As [`acquire`](Self::acquire), with a deadline: refused at once with
    /// [`WaitError::DeadlineExceeded`] when the estimated wait ends after
    /// `deadline`, and when `deadline` passes while waiting.
    pub fn acquire_until(
        &self,
        n: u32,
        deadline: Instant,
    ) -> impl Future<Output = Result<QueuePermit<'_, L>, WaitError>> + '_ {
        Acquire::new(
            &self.shared,
            n,
            Some(self.shared.clock.timestamp(deadline).as_nanos()),
        )
    }

    /// Takes `n` permits now or refuses, never waiting. Under
    /// [`QueueOrder::OldestFirst`] it refuses while others wait (it never
    /// overtakes them).
    ///
    /// # Errors
    /// [`WaitError::WouldWait`] with the estimated wait,
    /// [`WaitError::CapacityExceeded`], or [`WaitError::Closed`].
    pub fn try_acquire(&self, n: u32) -> Result<QueuePermit<'_, L>, WaitError> {
        let shared = &*self.shared;
        let result = self.try_acquire_inner(n);
        match &result {
            Ok(()) => shared.count_admitted(n),
            Err(_) => shared.count_refused(),
        }
        result.map(|()| QueuePermit {
            shared,
            n,
            live: true,
        })
    }

    fn try_acquire_inner(&self, n: u32) -> Result<(), WaitError> {
        let shared = &*self.shared;
        let gate = shared.gate.load(Ordering::SeqCst);
        if gate & CLOSED != 0 {
            return Err(WaitError::Closed);
        }
        if n == 0 {
            return Ok(());
        }
        let now = shared.now();
        if gate != 0 && shared.order == QueueOrder::OldestFirst {
            if n > shared.limiter.capacity() {
                return Err(WaitError::CapacityExceeded(shared.exceeded(n)));
            }
            let inner = lock(&shared.inner);
            let retry = shared.estimate(&inner, n, now);
            return Err(WaitError::WouldWait {
                retry_after: retry.map(Duration::from_nanos),
            });
        }
        match shared.limiter.check_n(n, now) {
            Ok(()) => Ok(()),
            Err(d) if d.is_never() => Err(WaitError::CapacityExceeded(d)),
            Err(d) => {
                let r = d.retry_after_nanos();
                Err(WaitError::WouldWait {
                    retry_after: (r != 0 && r != u64::MAX).then(|| Duration::from_nanos(r)),
                })
            }
        }
    }

    /// Re-examines the waiter being served now, granting it (and those
    /// behind it) if the limiter allows. The queue does this by itself on
    /// every release through a [`QueuePermit`], cancellation and timer
    /// tick; call it after returning capacity to the limiter by other
    /// means (for example a concurrency permit released outside the queue).
    pub fn recheck(&self) {
        if self.shared.gate.load(Ordering::SeqCst) >> 1 != 0 {
            self.shared.kick();
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
            inner.timer.stop();
            while let Some(key) = inner.waiters.front() {
                let outcome = Outcome::Refused {
                    at: now,
                    error: WaitError::Closed,
                };
                if let Some(w) = inner.waiters.resolve(key, outcome) {
                    wakers.push(w);
                }
            }
            shared.sync_gate(&inner);
        }
        shared.wake(wakers);
    }

    /// Loom models only: where the queue's timer is armed (ns on the model
    /// clock), if it is.
    #[cfg(loom)]
    #[doc(hidden)]
    #[must_use]
    pub fn model_timer(&self) -> Option<u64> {
        lock(&self.shared.inner).timer.armed
    }

    /// Loom models only: the queue's timer fires, as tokio's timer driver
    /// makes it do at the armed instant (its waker runs the admission
    /// loop).
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn model_fire_timer(&self) {
        std::task::Wake::wake_by_ref(&Arc::new(TimerWake {
            shared: Arc::downgrade(&self.shared),
        }));
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

    /// The service order.
    #[must_use]
    pub fn order(&self) -> QueueOrder {
        self.shared.order
    }

    /// The most permits that may wait at once.
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
