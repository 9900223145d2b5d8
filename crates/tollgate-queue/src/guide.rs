//! The queue, part by part: a line per client, a chain of limits, what
//! the lines guarantee, what waiting costs, and how it maps onto .NET's
//! queued limiters. The [crate root](crate) has the first example and the
//! map of types.
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
//! - **Order.** [`QueueOrder::OldestFirst`](crate::QueueOrder::OldestFirst) (FIFO, the default): a newcomer
//!   never overtakes a waiter of its key, so a large request is never
//!   starved by a stream of small ones; the head waits for exactly its
//!   permits. [`QueueOrder::NewestFirst`](crate::QueueOrder::NewestFirst) (LIFO): a newcomer is tried at
//!   once even when others wait, the newest waiter is served first, and
//!   when the line is full the *oldest* waiters are refused
//!   ([`WaitError::Displaced`](crate::WaitError::Displaced)) so that the newest fits — .NET's
//!   `QueueProcessingOrder` as defined in dotnet/runtime#62817. Either way
//!   the waiter being served blocks the others of its key: a smaller
//!   request behind it does not skip ahead. Keys are not ordered among
//!   themselves: capacity shared by several keys (an in-flight limit
//!   chained after a per-key rate) goes to whichever line the release or
//!   timer serves first.
//! - **Bound in permits, per key.** `queue_limit` caps the permits waiting
//!   in one key's line, not the number of requests (a 5-permit request
//!   counts 5). A request that does not fit is refused at once with
//!   [`WaitError::QueueFull`](crate::WaitError::QueueFull) and an estimated `retry_after`. The default
//!   is unbounded: set one in servers.
//! - **Maximum wait.** A request whose estimated wait (from the limiter's
//!   state and the permits queued ahead, see
//!   [`Limiter::time_until_ready_after`](crate::Limiter::time_until_ready_after)) exceeds `max_wait` is refused at
//!   once ([`WaitError::MaxWaitExceeded`](crate::WaitError::MaxWaitExceeded)), like nginx `limit_req burst`
//!   without `nodelay`. `max_wait` is also a hard cap: a waiter that has
//!   waited that long (possible under `NewestFirst`, when other code uses
//!   the same limiter, or with a limiter that cannot predict its waits, as
//!   an in-flight limit) is refused then. [`Queue::acquire_until`](crate::Queue::acquire_until) adds a
//!   per-call deadline with the same two effects
//!   ([`WaitError::DeadlineExceeded`](crate::WaitError::DeadlineExceeded)).
//! - **Impossible requests.** `n` above the limiter's capacity for the key
//!   (burst, window limit, in-flight limit) is refused at once with
//!   [`WaitError::CapacityExceeded`](crate::WaitError::CapacityExceeded).
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
//!   dropping a [`QueuePermit`](crate::QueuePermit) that holds an in-flight permit (the
//!   limiter's guard, kept inside it) re-examines the lines waiting for a
//!   release and wakes exactly the waiters it admits, with no time passing.
//!   If other code also returns capacity to the same limiter directly (a
//!   guard taken outside the queue), call [`Queue::recheck`](crate::Queue::recheck) after it does.
//! - **Cancellation.** Dropping a [`Queue::acquire`](crate::Queue::acquire) future (a timeout,
//!   `select!`, a client gone) unlinks its waiter; a waiter holds no
//!   capacity while it waits, so the next one is served exactly as if the
//!   dropped one had never queued. If it had already been granted but not
//!   yet polled, its permit goes back to the limiter
//!   ([`Limiter::cancel`](crate::Limiter::cancel)) and the lines are re-examined at once: no two
//!   requests ever hold the same slot.
//! - [`Queue::close`](crate::Queue::close) refuses every waiter and every later call with
//!   [`WaitError::Closed`](crate::WaitError::Closed).
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
//! The limiter must be driven by the queue's clock ([`Queue::clock`](crate::Queue::clock), a
//! [`TokioClock`](crate::TokioClock)) if other code also uses it directly, and must be
//! `Send + Sync + 'static` (a line's timer waker holds the queue), with
//! permits that do not borrow it (the queue keeps a granted permit until
//! its waiter takes it): share a borrowed limiter as an `Arc` or a
//! `&'static`. `acquire` must be polled inside a tokio runtime with time
//! enabled (as `tokio::time::sleep` must).
//!
//! # `mem::forget`
//!
//! Forgetting a [`Queue::acquire`](crate::Queue::acquire) future never wedges the queue: admission is
//! driven by the queue's own timer and by releases, not by the waiting
//! future, so the forgotten waiter is granted in its turn and the waiters
//! behind it proceed. What it costs: the permits granted to it are spent
//! (for a release-based limiter, never given back: the limit shrinks by
//! `n` for the life of the limiter), and its slot (a few dozen bytes) is
//! never reused. Forgetting a [`QueuePermit`](crate::QueuePermit) that holds an in-flight
//! permit, or one of a `release_on_drop` queue, likewise keeps its permits
//! forever.
//!
//! # Compared with .NET `System.Threading.RateLimiting`
//!
//! | .NET | tollgate |
//! |---|---|
//! | `AcquireAsync(permitCount)` | [`Queue::acquire`](crate::Queue::acquire)`(&(), n).await` |
//! | `PartitionedRateLimiter.AcquireAsync(resource, permitCount)` | [`Queue::acquire`](crate::Queue::acquire)`(&key, n).await` |
//! | `AttemptAcquire(permitCount)` | [`Queue::try_acquire`](crate::Queue::try_acquire)`(&(), n)` |
//! | `QueueLimit` (permits, per partition) | [`QueueBuilder::queue_limit`](crate::QueueBuilder::queue_limit) (permits, per key) |
//! | `QueueProcessingOrder.OldestFirst` / `NewestFirst` | [`QueueOrder::OldestFirst`](crate::QueueOrder::OldestFirst) / [`QueueOrder::NewestFirst`](crate::QueueOrder::NewestFirst) |
//! | failed lease with `RetryAfter` metadata | [`WaitError::QueueFull`](crate::WaitError::QueueFull) / [`WaitError::WouldWait`](crate::WaitError::WouldWait) with `retry_after` |
//! | `CancellationToken` | drop the future, or [`Queue::acquire_until`](crate::Queue::acquire_until) |
//! | `Dispose` | [`Queue::close`](crate::Queue::close) |
//! | `GetStatistics()` | [`Queue::stats`](crate::Queue::stats) |
//! | (none) | `max_wait`: refuse at once what would wait too long |
