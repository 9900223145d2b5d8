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
//! A line per client, in front of a keyed table:
//!
//! ```
//! use std::net::IpAddr;
//! use std::time::Duration;
//! use tollgate::keyed::ShardedKeyedTable;
//! use tollgate::queue::Queue;
//! use tollgate::{Gcra, Quota};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // 10 per second per client, no burst
//! let quota = Quota::per_second(10)?.with_burst(1)?;
//! let per_client = ShardedKeyedTable::builder(Gcra::token_bucket(quota)).build()?;
//! let queue = Queue::builder(per_client).queue_limit(20).build();
//!
//! let (a, b): (IpAddr, IpAddr) = ("192.0.2.7".parse()?, "192.0.2.8".parse()?);
//! let start = tokio::time::Instant::now();
//! queue.acquire(&a, 1).await?;
//! queue.acquire(&a, 1).await?; // a's turn comes 100 ms later
//! queue.acquire(&b, 1).await?; // b has its own line and bucket: at once
//! assert_eq!(start.elapsed(), Duration::from_millis(100));
//! # Ok(())
//! # }
//! ```
//!
//! A chain of a rate and an in-flight limit: a request waits for the rate,
//! then for one of 2 slots, and is let in by the release of a slot — no
//! timer, no polling:
//!
//! ```
//! use core::num::NonZeroU32;
//! use std::time::Duration;
//! use tollgate::queue::Queue;
//! use tollgate::{Bucket, ConcurrencyLimiter, Quota};
//!
//! static SLOTS: ConcurrencyLimiter = ConcurrencyLimiter::new(NonZeroU32::new(2).unwrap());
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let queue = Queue::new(Bucket::token_bucket(Quota::per_second(100)?).and(&SLOTS));
//! let first = queue.acquire(&(), 1).await?;
//! let _second = queue.acquire(&(), 1).await?;
//! let start = tokio::time::Instant::now();
//! let (third, ()) = tokio::join!(queue.acquire(&(), 1), async {
//!     tokio::time::sleep(Duration::from_secs(5)).await;
//!     drop(first); // a slot is released: the third is let in now
//! });
//! assert!(third.is_ok());
//! assert_eq!(start.elapsed(), Duration::from_secs(5));
//! assert_eq!(SLOTS.in_flight(), 2);
//! # Ok(())
//! # }
//! ```
//!
//! # Semantics
//!
//! - **One line per key.** Each key that has waiters has its own line,
//!   ordered, bounded and timed apart from the others; a key nobody waits
//!   for has none (and costs nothing). For a direct limiter (`K = ()`)
//!   there is one line.
//! - **Order.** [`QueueOrder::OldestFirst`] (FIFO, the default): a newcomer
//!   never overtakes a waiter of its key, so a large request is never
//!   starved by a stream of small ones; the head waits for exactly its
//!   permits. [`QueueOrder::NewestFirst`] (LIFO): a newcomer is tried at
//!   once even when others wait, the newest waiter is served first, and
//!   when the line is full the *oldest* waiters are refused
//!   ([`WaitError::Displaced`]) so that the newest fits — .NET's
//!   `QueueProcessingOrder` as defined in dotnet/runtime#62817. Either way
//!   the waiter being served blocks the others of its key: a smaller
//!   request behind it does not skip ahead. Keys are not ordered among
//!   themselves: capacity shared by several keys (an in-flight limit
//!   chained after a per-key rate) goes to whichever line the release or
//!   timer serves first.
//! - **Bound in permits, per key.** `queue_limit` caps the permits waiting
//!   in one key's line, not the number of requests (a 5-permit request
//!   counts 5). A request that does not fit is refused at once with
//!   [`WaitError::QueueFull`] and an estimated `retry_after`. The default
//!   is unbounded: set one in servers.
//! - **Maximum wait.** A request whose estimated wait (from the limiter's
//!   state and the permits queued ahead, see
//!   [`Limiter::time_until_ready_after`]) exceeds `max_wait` is refused at
//!   once ([`WaitError::MaxWaitExceeded`]), like nginx `limit_req burst`
//!   without `nodelay`. `max_wait` is also a hard cap: a waiter that has
//!   waited that long (possible under `NewestFirst`, when other code uses
//!   the same limiter, or with a limiter that cannot predict its waits, as
//!   an in-flight limit) is refused then. [`Queue::acquire_until`] adds a
//!   per-call deadline with the same two effects
//!   ([`WaitError::DeadlineExceeded`]).
//! - **Impossible requests.** `n` above the limiter's capacity for the key
//!   (burst, window limit, in-flight limit) is refused at once with
//!   [`WaitError::CapacityExceeded`].
//! - **Woken by time or by a release.** A waiter refused by a rate waits
//!   for its line's timer, armed at the refusal's exact `retry_after`, and
//!   is charged at that turn, not at the later instant the timer fires
//!   (tokio's timers fire on a 1 ms grid): a line's admissions keep the
//!   limiter's spacing, and the timer's lateness does not add up from one
//!   waiter to the next. (A bucket of burst 1 restarts from the whole
//!   nanosecond it admits at, so its turns may fall up to 1 ns per
//!   admission behind the exact `k·T`, never ahead.) A
//!   waiter refused by an in-flight limit (a refusal that
//!   [`is_until_release`](tollgate_core::Refusal::is_until_release)) has no timer:
//!   dropping a [`QueuePermit`] that holds an in-flight permit (the
//!   limiter's guard, kept inside it) re-examines the lines waiting for a
//!   release and wakes exactly the waiters it admits, with no time passing.
//!   If other code also returns capacity to the same limiter directly (a
//!   guard taken outside the queue), call [`Queue::recheck`] after it does.
//! - **Cancellation.** Dropping a [`Queue::acquire`] future (a timeout,
//!   `select!`, a client gone) unlinks its waiter; a waiter holds no
//!   capacity while it waits, so the next one is served exactly as if the
//!   dropped one had never queued. If it had already been granted but not
//!   yet polled, its permit goes back to the limiter
//!   ([`Limiter::cancel`]) and the lines are re-examined at once: no two
//!   requests ever hold the same slot.
//! - [`Queue::close`] refuses every waiter and every later call with
//!   [`WaitError::Closed`].
//!
//! # Cost
//!
//! No background task, no busy polling, no timer while idle. The waiters
//! live in a slab-backed linked list per key behind one
//! `std::sync::Mutex` that is held for a few instructions (link, unlink,
//! one limiter check per admission): O(1) memory per waiter, O(1) link
//! and cancel. A key's line, with its tokio timer, exists while someone
//! of that key waits; the timer is armed at the exact `retry_after` of
//! the waiter being served (`sleep_until`); when it fires, the queue admits
//! every waiter of that line that now fits and wakes exactly those tasks
//! (no thundering herd). Waiters behind the head have no timer unless they
//! carry a deadline or `max_wait`. An `acquire` while nobody waits takes
//! no lock: one atomic load, the clock and the limiter check; while some
//! key has waiters, a newcomer takes the mutex to find its key's line. A
//! release while someone waits re-examines the head of every line that
//! waits for a release (one limiter check each).
//!
//! The limiter must be driven by the queue's clock ([`Queue::clock`], a
//! [`TokioClock`]) if other code also uses it directly, and must be
//! `Send + Sync + 'static` (a line's timer waker holds the queue), with
//! permits that do not borrow it (the queue keeps a granted permit until
//! its waiter takes it): share a borrowed limiter as an `Arc` or a
//! `&'static`. `acquire` must be polled inside a tokio runtime with time
//! enabled (as `tokio::time::sleep` must).
//!
//! # `mem::forget`
//!
//! Forgetting a [`Queue::acquire`] future never wedges the queue: admission is
//! driven by the queue's own timer and by releases, not by the waiting
//! future, so the forgotten waiter is granted in its turn and the waiters
//! behind it proceed. What it costs: the permits granted to it are spent
//! (for a release-based limiter, never given back: the limit shrinks by
//! `n` for the life of the limiter), and its slot (a few dozen bytes) is
//! never reused. Forgetting a [`QueuePermit`] that holds an in-flight
//! permit, or one of a `release_on_drop` queue, likewise keeps its permits
//! forever.
//!
//! # Compared with .NET `System.Threading.RateLimiting`
//!
//! | .NET | tollgate |
//! |---|---|
//! | `AcquireAsync(permitCount)` | [`Queue::acquire`]`(&(), n).await` |
//! | `PartitionedRateLimiter.AcquireAsync(resource, permitCount)` | [`Queue::acquire`]`(&key, n).await` |
//! | `AttemptAcquire(permitCount)` | [`Queue::try_acquire`]`(&(), n)` |
//! | `QueueLimit` (permits, per partition) | [`QueueBuilder::queue_limit`] (permits, per key) |
//! | `QueueProcessingOrder.OldestFirst` / `NewestFirst` | [`QueueOrder::OldestFirst`] / [`QueueOrder::NewestFirst`] |
//! | failed lease with `RetryAfter` metadata | [`WaitError::QueueFull`] / [`WaitError::WouldWait`] with `retry_after` |
//! | `CancellationToken` | drop the future, or [`Queue::acquire_until`] |
//! | `Dispose` | [`Queue::close`] |
//! | `GetStatistics()` | [`Queue::stats`] |
//! | (none) | `max_wait`: refuse at once what would wait too long |

#![forbid(unsafe_code)]
#![warn(missing_debug_implementations)]
#![doc(test(attr(deny(unused_imports))))]

mod acquire;
mod builder;
mod error;
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
