//! Async queued acquisition on tokio (feature `tokio`).
//!
//! A [`Queue`] puts an ordered, bounded waiting line in front of any
//! [`Limiter`]: a server that would rather delay a request a little than
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
//! let queue = Queue::builder(Bucket::token_bucket(Quota::per_second(10)?.allow_burst(2)?))
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
//!   ([`AcquireError::Displaced`]) so that the newest fits — .NET's
//!   `QueueProcessingOrder` as defined in dotnet/runtime#62817. Either way
//!   the waiter being served blocks the others: a smaller request behind it
//!   does not skip ahead.
//! - **Bound in permits.** `queue_limit` caps the permits waiting, not the
//!   number of requests (a 5-permit request counts 5). A request that does
//!   not fit is refused at once with [`AcquireError::QueueFull`] and an
//!   estimated `retry_after`. The default is unbounded: set one in servers.
//! - **Maximum wait.** A request whose estimated wait (from the limiter's
//!   state and the permits queued ahead, see
//!   [`Limiter::time_until_ready_after`]) exceeds `max_wait` is refused at
//!   once ([`AcquireError::MaxWaitExceeded`]), like nginx `limit_req burst`
//!   without `nodelay`. `max_wait` is also a hard cap: a waiter that has
//!   waited that long (possible under `NewestFirst`, when other code uses the
//!   same limiter, or with a limiter that cannot predict its waits) is
//!   refused then. [`Queue::acquire_until`] adds a per-call deadline with
//!   the same two effects ([`AcquireError::DeadlineExceeded`]).
//! - **Impossible requests.** `n` above the limiter's capacity (burst,
//!   largest weight, concurrency limit) is refused at once with
//!   [`AcquireError::CapacityExceeded`]; `n = 0` is granted at once.
//! - **Cancellation.** Dropping an [`Acquire`] future (a timeout,
//!   `select!`, a client gone) unlinks its waiter; a waiter holds no
//!   capacity while it waits, so the next one is served exactly as if the
//!   dropped one had never queued. If it had already been granted but not
//!   yet polled, its permits are refunded to the limiter and the next
//!   waiter is re-examined at once.
//! - **Release-based limiters** (a concurrency limiter, whose `check_n`
//!   takes and whose `refund` gives back): build the queue with
//!   [`QueueBuilder::release_on_drop`] so that dropping a [`QueuePermit`]
//!   refunds its permits and wakes the next waiter that fits. Such a
//!   limiter should refuse with `retry_after` 0 or `u64::MAX` ("not by
//!   time"), so that no timer is armed for it.
//! - [`Queue::close`] refuses every waiter and every later call with
//!   [`AcquireError::Closed`].
//!
//! # Cost
//!
//! No background task, no busy polling, no timer while idle. The waiters
//! live in a slab-backed linked list behind a `std::sync::Mutex` that is
//! held for a few instructions (link, unlink, one limiter check per
//! admission): O(1) memory per waiter, O(1) link and cancel. One tokio
//! timer per queue is armed for the waiter being served, at its exact
//! `retry_after`; when it fires, the queue admits every waiter that now
//! fits and wakes exactly those tasks (no thundering herd). Waiters behind
//! the head have no timer unless they carry a deadline or `max_wait`. An
//! uncontended `acquire` with capacity available takes no lock: one atomic
//! load, the limiter check and two counter increments.
//!
//! The limiter must be driven by the queue's clock ([`Queue::clock`], a
//! [`TokioClock`]) if other code also uses it directly. `acquire` must be
//! polled inside a tokio runtime with time enabled (as `tokio::time::sleep`
//! must).
//!
//! # `mem::forget`
//!
//! Forgetting an [`Acquire`] future never wedges the queue: admission is
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
//! | failed lease with `RetryAfter` metadata | [`AcquireError::QueueFull`] / [`AcquireError::WouldWait`] with `retry_after` |
//! | `CancellationToken` | drop the future, or [`Queue::acquire_until`] |
//! | `Dispose` | [`Queue::close`] |
//! | `GetStatistics()` | [`Queue::stats`] |
//! | (none) | `max_wait`: refuse at once what would wait too long |

mod error;
mod tokio_clock;
mod waiters;

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::boxed::Box;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Wake, Waker};
use std::vec::Vec;

use tokio::time::{Instant, Sleep};

use crate::clock::{duration_to_nanos, Clock};
use crate::decision::Decision;
use crate::limiter::Limiter;
use crate::sync::{AtomicU32, AtomicU64, Ordering};

pub use error::AcquireError;
pub use tokio_clock::TokioClock;
use waiters::{Outcome, Waiters};

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
    /// Requests refused (any [`AcquireError`]).
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
}

impl<L: Limiter + Send + Sync + 'static> QueueBuilder<L> {
    /// Which waiter is served first (default [`QueueOrder::OldestFirst`]).
    pub fn order(mut self, order: QueueOrder) -> Self {
        self.order = order;
        self
    }

    /// The most permits that may wait at once (default: unbounded). 0 means
    /// no waiting at all: `acquire` then behaves like `try_acquire` but
    /// reports [`AcquireError::QueueFull`].
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
    /// limiter (`Limiter::refund`) and wakes the next waiter that fits.
    /// Set it for release-based limiters (concurrency limits); leave it off
    /// (the default) for rate limiters, whose permits are spent.
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
        let shared = Arc::new_cyclic(|weak: &Weak<Shared<L>>| Shared {
            limiter: self.limiter,
            clock,
            order: self.order,
            queue_limit: self.queue_limit,
            max_wait: self.max_wait,
            release_on_drop: self.release_on_drop,
            gate: AtomicU64::new(0),
            due: AtomicU32::new(0),
            driving: AtomicU32::new(0),
            inner: Mutex::new(Inner {
                waiters: Waiters::default(),
                closed: false,
            }),
            timer: Mutex::new(Timer {
                sleep: None,
                armed: None,
            }),
            timer_waker: Waker::from(Arc::new(TimerWake {
                shared: weak.clone(),
            })),
            counters: Counters::default(),
        });
        Queue { shared }
    }
}

/// An ordered, bounded waiting line in front of a [`Limiter`]; see the
/// [module docs](self).
///
/// `L` is any limiter: a [`Bucket`](crate::Bucket), an `Arc` of one, a
/// `&'static` one, or a small adaptor for one key of a keyed limiter.
#[derive(Debug)]
pub struct Queue<L> {
    shared: Arc<Shared<L>>,
}

/// Bit 0 of `gate`: closed. The rest: waiting requests × 2.
const CLOSED: u64 = 1;

#[derive(Debug)]
struct Shared<L> {
    limiter: L,
    clock: TokioClock,
    order: QueueOrder,
    queue_limit: u64,
    max_wait: Option<Duration>,
    release_on_drop: bool,
    /// Lock-free summary for the fast path: `waiting << 1 | closed`,
    /// written under `inner`'s lock.
    gate: AtomicU64,
    /// Set when the waiter being served must be (re-)examined.
    due: AtomicU32,
    /// Set while one thread runs the admission loop ([`Shared::drive`]).
    driving: AtomicU32,
    inner: Mutex<Inner>,
    timer: Mutex<Timer>,
    timer_waker: Waker,
    counters: Counters,
}

#[derive(Debug)]
struct Inner {
    waiters: Waiters,
    closed: bool,
}

#[derive(Debug)]
struct Timer {
    sleep: Option<Pin<Box<Sleep>>>,
    armed: Option<Instant>,
}

#[derive(Debug, Default)]
struct Counters {
    admitted_permits: AtomicU64,
    /// Σ (n − 1) over admitted requests, wrapping (n = 0 adds −1).
    extra_permits: AtomicU64,
    refused_requests: AtomicU64,
    cancelled_requests: AtomicU64,
    queue_nanos: AtomicU64,
    wakeups: AtomicU64,
}

/// The queue timer's waker: runs the admission loop, whichever task (if
/// any) is still around to poll.
struct TimerWake<L> {
    shared: Weak<Shared<L>>,
}

impl<L: Limiter + Send + Sync + 'static> Wake for TimerWake<L> {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(shared) = self.shared.upgrade() {
            shared.kick();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The critical sections cannot leave the data inconsistent mid-way
    // (a panicking limiter aside), so a poisoned lock is still usable.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn wake_all(wakers: Vec<Waker>) {
    for w in wakers {
        w.wake();
    }
}

/// How a waiter with an expiry is refused when it passes.
#[derive(Debug, Clone, Copy)]
enum Expiry {
    Deadline,
    MaxWait(Duration),
}

impl Expiry {
    fn error(self) -> AcquireError {
        match self {
            Self::Deadline => AcquireError::DeadlineExceeded,
            Self::MaxWait(max_wait) => AcquireError::MaxWaitExceeded {
                estimated_wait: None,
                max_wait,
            },
        }
    }
}

/// What the first poll of an `acquire` decided.
enum Begin {
    Granted,
    Refused(AcquireError),
    Queued {
        key: usize,
        serving: bool,
        wakers: Vec<Waker>,
    },
}

impl<L: Limiter + Send + Sync + 'static> Shared<L> {
    fn serving_end(&self, w: &Waiters) -> Option<usize> {
        match self.order {
            QueueOrder::OldestFirst => w.front(),
            QueueOrder::NewestFirst => w.back(),
        }
    }

    fn sync_gate(&self, inner: &Inner) {
        let closed = if inner.closed { CLOSED } else { 0 };
        self.gate
            .store(inner.waiters.len() << 1 | closed, Ordering::SeqCst);
    }

    fn count_admitted(&self, n: u32) {
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

    fn count_refused(&self) {
        self.counters
            .refused_requests
            .fetch_add(1, Ordering::Relaxed);
    }

    fn count_queue_time(&self, nanos: u64) {
        self.counters
            .queue_nanos
            .fetch_add(nanos, Ordering::Relaxed);
    }

    fn count_wakes(&self, k: usize) {
        if k > 0 {
            self.counters.wakeups.fetch_add(k as u64, Ordering::Relaxed);
        }
    }

    fn wake(&self, wakers: Vec<Waker>) {
        self.count_wakes(wakers.len());
        wake_all(wakers);
    }

    /// Estimated wait for `n` permits joining the queue now.
    fn estimate(&self, inner: &Inner, n: u32, now: u64) -> Option<u64> {
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
    fn begin(&self, n: u32, now: u64, deadline: Option<u64>, waker: &Waker) -> Begin {
        let gate = self.gate.load(Ordering::SeqCst);
        if gate & CLOSED != 0 {
            return Begin::Refused(AcquireError::Closed);
        }
        if n == 0 {
            return Begin::Granted;
        }
        let fifo = self.order == QueueOrder::OldestFirst;
        if gate == 0 || !fifo {
            // Nobody waits (or newest first): try the limiter without the lock.
            match self.limiter.check_n(n, now) {
                Ok(Decision::Allowed(_)) => return Begin::Granted,
                Ok(Decision::Denied(_)) => {}
                Err(e) => return Begin::Refused(e.into()),
            }
        } else if n > self.limiter.capacity() {
            return Begin::Refused(AcquireError::CapacityExceeded(crate::CapacityExceeded {
                requested: n,
                capacity: self.limiter.capacity(),
            }));
        }
        let mut inner = lock(&self.inner);
        if inner.closed {
            return Begin::Refused(AcquireError::Closed);
        }
        if !fifo || inner.waiters.len() == 0 {
            // Authoritative check under the lock: no waiter can be linked
            // in between, so a FIFO newcomer never overtakes one.
            match self.limiter.check_n(n, now) {
                Ok(Decision::Allowed(_)) => return Begin::Granted,
                Ok(Decision::Denied(_)) => {}
                Err(e) => return Begin::Refused(e.into()),
            }
        }
        let estimate = self.estimate(&inner, n, now);
        if let (Some(max_wait), Some(wait)) = (self.max_wait, estimate) {
            if wait > duration_to_nanos(max_wait) {
                return Begin::Refused(AcquireError::MaxWaitExceeded {
                    estimated_wait: Some(Duration::from_nanos(wait)),
                    max_wait,
                });
            }
        }
        if let (Some(deadline), Some(wait)) = (deadline, estimate) {
            if now.saturating_add(wait) > deadline {
                return Begin::Refused(AcquireError::DeadlineExceeded);
            }
        }
        let mut wakers = Vec::new();
        let needed = inner.waiters.permits().saturating_add(u64::from(n));
        if needed > self.queue_limit {
            if fifo || u64::from(n) > self.queue_limit {
                let retry_after = if fifo && u64::from(n) <= self.queue_limit {
                    self.room_after(&inner.waiters, needed - self.queue_limit, now)
                } else {
                    estimate
                };
                return Begin::Refused(AcquireError::QueueFull {
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
                    error: AcquireError::Displaced,
                };
                if let Some(w) = inner.waiters.resolve(oldest, outcome) {
                    wakers.push(w);
                }
            }
        }
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
    fn process(&self, inner: &mut Inner, now: u64, wakers: &mut Vec<Waker>) -> Option<u64> {
        if inner.closed {
            return None;
        }
        while let Some(key) = self.serving_end(&inner.waiters) {
            let n = inner.waiters.n(key);
            let outcome = match self.limiter.check_n(n, now) {
                Ok(Decision::Allowed(_)) => Outcome::Admitted { at: now },
                Ok(Decision::Denied(d)) => {
                    let r = d.retry_after_nanos();
                    // 0 or MAX: capacity comes back by release, not time.
                    return (r != 0 && r != u64::MAX).then(|| now.saturating_add(r));
                }
                Err(e) => Outcome::Refused {
                    at: now,
                    error: e.into(),
                },
            };
            if let Some(w) = inner.waiters.resolve(key, outcome) {
                wakers.push(w);
            }
        }
        None
    }

    /// Asks for the waiter being served to be re-examined now.
    fn kick(&self) {
        self.due.store(1, Ordering::SeqCst);
        self.drive();
    }

    /// The admission loop. One thread at a time runs it; a kick that
    /// arrives meanwhile (including one raised synchronously by the timer
    /// from inside this loop) is picked up before the runner leaves.
    fn drive(&self) {
        loop {
            if self.driving.swap(1, Ordering::SeqCst) != 0 {
                return; // the running driver will see `due`
            }
            while self.due.swap(0, Ordering::SeqCst) != 0 {
                let now = self.clock.now();
                let mut wakers = Vec::new();
                let arm = {
                    let mut inner = lock(&self.inner);
                    let arm = self.process(&mut inner, now, &mut wakers);
                    self.sync_gate(&inner);
                    arm
                };
                self.wake(wakers);
                self.arm_timer(arm);
            }
            self.driving.store(0, Ordering::SeqCst);
            if self.due.load(Ordering::SeqCst) == 0 {
                return;
            }
        }
    }

    /// Points the queue's timer at `at` (ns). Only the driver calls this.
    fn arm_timer(&self, at: Option<u64>) {
        let Some(at) = at else { return };
        let when = self.clock.instant_at(at);
        let mut timer = lock(&self.timer);
        let Timer { sleep, armed } = &mut *timer;
        let Some(sleep) = sleep.as_mut() else { return };
        if *armed != Some(when) {
            sleep.as_mut().reset(when);
            *armed = Some(when);
        }
        // Register the timer's waker. Unconstrained: a task's exhausted
        // co-operative budget must not turn this poll into a self-wake.
        let mut cx = Context::from_waker(&self.timer_waker);
        let mut fut = tokio::task::coop::unconstrained(sleep.as_mut());
        if Pin::new(&mut fut).poll(&mut cx).is_ready() {
            *armed = None;
            self.due.store(1, Ordering::SeqCst);
        }
    }

    /// Creates the queue's timer on first use (inside the runtime).
    fn ensure_timer(&self) {
        let mut timer = lock(&self.timer);
        if timer.sleep.is_none() {
            let far = self.clock.instant_at(u64::MAX);
            timer.sleep = Some(Box::pin(tokio::time::sleep_until(far)));
        }
    }

    /// Takes a waiter's final outcome if it has one, freeing its slot.
    fn collect(&self, key: usize, n: u32, waker: &Waker) -> Option<Result<(), AcquireError>> {
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
    fn expire(
        &self,
        key: usize,
        n: u32,
        waker: &Waker,
        error: AcquireError,
    ) -> Result<(), AcquireError> {
        self.kick();
        let now = self.clock.now();
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
    fn cancel(&self, key: usize, n: u32) {
        let now = self.clock.now();
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

    fn release(&self, n: u32) {
        self.limiter.refund(n, self.clock.now());
        if self.gate.load(Ordering::SeqCst) >> 1 != 0 {
            self.kick();
        }
    }
}

impl<L: Limiter + Send + Sync + 'static> Queue<L> {
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
        }
    }

    /// Waits for `n` permits, in queue order.
    ///
    /// Resolves to a [`QueuePermit`], or to an [`AcquireError`] at once when
    /// the request can never succeed, the queue is full or closed, or the
    /// estimated wait exceeds `max_wait`; later if the wait reaches
    /// `max_wait` or the queue is closed. Dropping the future leaves the
    /// queue as if the request had never been made (see the module docs).
    pub fn acquire(&self, n: u32) -> Acquire<'_, L> {
        Acquire {
            shared: &self.shared,
            n,
            deadline: None,
            state: State::Start,
            expiry: None,
        }
    }

    /// As [`acquire`](Self::acquire), with a deadline: refused at once with
    /// [`AcquireError::DeadlineExceeded`] when the estimated wait ends after
    /// `deadline`, and when `deadline` passes while waiting.
    pub fn acquire_until(&self, n: u32, deadline: Instant) -> Acquire<'_, L> {
        let mut acquire = self.acquire(n);
        acquire.deadline = Some(self.shared.clock.nanos_at(deadline));
        acquire
    }

    /// Takes `n` permits now or refuses, never waiting. Under
    /// [`QueueOrder::OldestFirst`] it refuses while others wait (it never
    /// overtakes them).
    ///
    /// # Errors
    /// [`AcquireError::WouldWait`] with the estimated wait,
    /// [`AcquireError::CapacityExceeded`], or [`AcquireError::Closed`].
    pub fn try_acquire(&self, n: u32) -> Result<QueuePermit<'_, L>, AcquireError> {
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

    fn try_acquire_inner(&self, n: u32) -> Result<(), AcquireError> {
        let shared = &*self.shared;
        let gate = shared.gate.load(Ordering::SeqCst);
        if gate & CLOSED != 0 {
            return Err(AcquireError::Closed);
        }
        if n == 0 {
            return Ok(());
        }
        let now = shared.clock.now();
        if gate != 0 && shared.order == QueueOrder::OldestFirst {
            if n > shared.limiter.capacity() {
                return Err(AcquireError::CapacityExceeded(crate::CapacityExceeded {
                    requested: n,
                    capacity: shared.limiter.capacity(),
                }));
            }
            let inner = lock(&shared.inner);
            let retry = shared.estimate(&inner, n, now);
            return Err(AcquireError::WouldWait {
                retry_after: retry.map(Duration::from_nanos),
            });
        }
        match shared.limiter.check_n(n, now)? {
            Decision::Allowed(_) => Ok(()),
            Decision::Denied(d) => {
                let r = d.retry_after_nanos();
                Err(AcquireError::WouldWait {
                    retry_after: (r != 0 && r != u64::MAX).then(|| Duration::from_nanos(r)),
                })
            }
        }
    }

    /// Refuses every waiter and every later call with
    /// [`AcquireError::Closed`]. Permits already granted stay valid.
    pub fn close(&self) {
        let shared = &*self.shared;
        let now = shared.clock.now();
        let mut wakers = Vec::new();
        {
            let mut inner = lock(&shared.inner);
            inner.closed = true;
            while let Some(key) = inner.waiters.front() {
                let outcome = Outcome::Refused {
                    at: now,
                    error: AcquireError::Closed,
                };
                if let Some(w) = inner.waiters.resolve(key, outcome) {
                    wakers.push(w);
                }
            }
            shared.sync_gate(&inner);
        }
        shared.wake(wakers);
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

#[derive(Debug)]
enum State {
    Start,
    Queued(usize),
    Done,
}

/// The future of [`Queue::acquire`]: resolves to a [`QueuePermit`].
///
/// Cancellation-safe: dropping it removes the waiter (and refunds permits
/// granted but not yet taken).
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct Acquire<'a, L: Limiter + Send + Sync + 'static> {
    shared: &'a Shared<L>,
    n: u32,
    deadline: Option<u64>,
    state: State,
    expiry: Option<(Pin<Box<Sleep>>, Expiry)>,
}

impl<'a, L: Limiter + Send + Sync + 'static> Acquire<'a, L> {
    fn permit(&self) -> QueuePermit<'a, L> {
        QueuePermit {
            shared: self.shared,
            n: self.n,
            live: true,
        }
    }

    fn finish(
        &mut self,
        result: Result<(), AcquireError>,
    ) -> Poll<Result<QueuePermit<'a, L>, AcquireError>> {
        self.state = State::Done;
        Poll::Ready(result.map(|()| self.permit()))
    }
}

impl<'a, L: Limiter + Send + Sync + 'static> Future for Acquire<'a, L> {
    type Output = Result<QueuePermit<'a, L>, AcquireError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let shared = this.shared;
        match this.state {
            State::Start => {
                let now = shared.clock.now();
                match shared.begin(this.n, now, this.deadline, cx.waker()) {
                    Begin::Granted => {
                        shared.count_admitted(this.n);
                        this.finish(Ok(()))
                    }
                    Begin::Refused(e) => {
                        shared.count_refused();
                        this.finish(Err(e))
                    }
                    Begin::Queued {
                        key,
                        serving,
                        wakers,
                    } => {
                        this.state = State::Queued(key);
                        shared.wake(wakers);
                        shared.ensure_timer();
                        let max_wait = shared.max_wait.map(|m| {
                            (now.saturating_add(duration_to_nanos(m)), Expiry::MaxWait(m))
                        });
                        let deadline = this.deadline.map(|d| (d, Expiry::Deadline));
                        let expiry = match (max_wait, deadline) {
                            (Some(a), Some(b)) => Some(if b.0 <= a.0 { b } else { a }),
                            (a, b) => a.or(b),
                        };
                        if let Some((at, kind)) = expiry {
                            let when = shared.clock.instant_at(at);
                            this.expiry = Some((Box::pin(tokio::time::sleep_until(when)), kind));
                        }
                        if serving {
                            shared.kick();
                        }
                        // The kick may already have granted it.
                        this.poll_queued(cx, key)
                    }
                }
            }
            State::Queued(key) => this.poll_queued(cx, key),
            State::Done => Poll::Ready(Err(AcquireError::Closed)),
        }
    }
}

impl<'a, L: Limiter + Send + Sync + 'static> Acquire<'a, L> {
    fn poll_queued(
        &mut self,
        cx: &mut Context<'_>,
        key: usize,
    ) -> Poll<Result<QueuePermit<'a, L>, AcquireError>> {
        let this = self;
        if let Some(result) = this.shared.collect(key, this.n, cx.waker()) {
            return this.finish(result);
        }
        if let Some((sleep, kind)) = &mut this.expiry {
            if sleep.as_mut().poll(cx).is_ready() {
                let error = kind.error();
                let result = this.shared.expire(key, this.n, cx.waker(), error);
                return this.finish(result);
            }
        }
        Poll::Pending
    }
}

impl<L: Limiter + Send + Sync + 'static> Drop for Acquire<'_, L> {
    fn drop(&mut self) {
        if let State::Queued(key) = self.state {
            self.shared.cancel(key, self.n);
        }
    }
}

/// Permits granted by a [`Queue`].
///
/// For a rate limiter the permits are spent: dropping the permit does
/// nothing (unless the queue was built with
/// [`release_on_drop`](QueueBuilder::release_on_drop)); call
/// [`release`](Self::release) to give back permits that went unused. For a
/// release-based limiter built with `release_on_drop`, dropping the permit
/// returns its capacity and wakes the next waiter that fits.
#[derive(Debug)]
#[must_use = "dropping a permit at once may release it at once"]
pub struct QueuePermit<'a, L: Limiter + Send + Sync + 'static> {
    shared: &'a Shared<L>,
    n: u32,
    live: bool,
}

impl<L: Limiter + Send + Sync + 'static> QueuePermit<'_, L> {
    /// The number of permits held.
    #[must_use]
    pub fn permits(&self) -> u32 {
        self.n
    }

    /// Gives the permits back to the limiter (`Limiter::refund`) and wakes
    /// the next waiter that now fits.
    pub fn release(mut self) {
        self.live = false;
        if self.n > 0 {
            self.shared.release(self.n);
        }
    }

    /// Keeps the permits spent: dropping does not release them even with
    /// `release_on_drop`.
    pub fn forget(mut self) {
        self.live = false;
    }
}

impl<L: Limiter + Send + Sync + 'static> Drop for QueuePermit<'_, L> {
    fn drop(&mut self) {
        if self.live && self.shared.release_on_drop && self.n > 0 {
            self.shared.release(self.n);
        }
    }
}
