//! Waiting for permits on any async runtime: a [`Clock`] that can also
//! [`Sleep`] lets a limiter be awaited.
//!
//! [`Wait`] checks the limiter; on a refusal it sleeps on the clock's timer
//! until the refusal's `retry_after` (at least one resolution step ahead,
//! so it never spins) and checks again. No polling loop, no allocation, no
//! queue: every admission respects the quota exactly, and whichever waiter
//! checks first after capacity returns gets it (for ordered, bounded
//! waiting, put a queue in front instead). A request that can never
//! succeed (`n` above the burst) is [`WaitError::CapacityExceeded`] at
//! once, never a wait forever; [`Wait::with_deadline`] and
//! [`Wait::with_timeout`] bound the wait.
//!
//! A runtime's clock implements [`Sleep`] (embassy's `EmbassyClock` does,
//! with feature `embassy`); [`RateLimiter::acquire`] then waits on a
//! limiter bundled with that clock, and [`Wait::new`] on any [`Limiter`]
//! and key.
//!
//! ```
//! use core::future::{ready, Ready};
//! use tollgate::wait::Sleep;
//! use tollgate::{Clock, ManualClock, Quota, RateLimiter, Timestamp};
//!
//! // A test clock whose "sleep" jumps to the wake-up time at once.
//! struct Jump(ManualClock);
//! impl Clock for Jump {
//!     fn now(&self) -> Timestamp { self.0.now() }
//!     fn resolution(&self) -> core::time::Duration { self.0.resolution() }
//! }
//! impl Sleep for Jump {
//!     type Timer = Ready<()>;
//!     fn sleep_until(&self, at: Timestamp) -> Ready<()> {
//!         self.0.set(at);
//!         ready(())
//!     }
//! }
//!
//! let quota = Quota::per_second(10)?.with_burst(1)?;
//! let limiter = RateLimiter::token_bucket(quota, Jump(ManualClock::new()))?;
//! embassy_futures::block_on(async {
//!     let first = limiter.acquire(1).await?; // at once
//!     let second = limiter.acquire(1).await?; // after 100 ms on the clock
//!     assert_eq!((first, second), (Timestamp::ZERO, Timestamp::from_millis(100)));
//!     // the state the admission left, asked for at its instant
//!     assert_eq!(limiter.limiter().snapshot(second).remaining(), 0);
//!     Ok::<(), tollgate::wait::WaitError>(())
//! })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A wait resolves to the **admission instant**: the `now` of the check
//! that granted the permits (for [`until_ready`](RateLimiter::until_ready),
//! the instant they were found available). A task that paces itself (send,
//! then wait for the next slot) measures its period from that instant, not
//! from a clock read after the `.await`, which can come any time later (the
//! executor, an interrupt) and would show gaps shorter than the quota's
//! interval where there are none. Nothing else is computed on an
//! admission; a caller that wants the limiter's state then asks for it at
//! that instant: `limiter.snapshot(&key, at)` ([`Limiter::snapshot`]; a
//! bucket's own `snapshot(at)`).

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use crate::clock::Clock;
use crate::error::check_clock;
use crate::limiter::Limiter;
use crate::rate_limiter::RateLimiter;
use crate::refusal::Refusal;
use crate::time::{Timestamp, duration_to_nanos};

/// A [`Clock`] whose runtime can sleep until a time on it: all an async
/// wait needs beyond reading the time.
pub trait Sleep: Clock {
    /// The runtime's timer (`Unpin`, as embassy's `Timer` is).
    type Timer: Future<Output = ()> + Unpin;

    /// A timer that completes when this clock reads `at` or later, never
    /// before (round up to the runtime's tick).
    fn sleep_until(&self, at: Timestamp) -> Self::Timer;
}

/// Why an async wait ended without permits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitError {
    /// The request can never succeed: it asks for more than the limiter's
    /// burst (the refusal [`is_never`](Refusal::is_never)). Returned at
    /// once, never after a wait.
    CapacityExceeded(Refusal<'static>),
    /// The limiter's finest step is shorter than the clock's resolution (one
    /// tick), so the clock cannot enforce it. Returned at once.
    ClockTooCoarse {
        /// The limiter's finest step.
        step: Duration,
        /// The clock's resolution.
        resolution: Duration,
    },
    /// The permits cannot be granted by the deadline. Returned as soon as
    /// the limiter's answer shows it (the waiter does not sleep until the
    /// deadline for nothing); nothing was taken.
    Timeout {
        /// When the permits would have been available, as the limiter saw
        /// it when the wait gave up.
        ready_at: Timestamp,
        /// The deadline that would have been missed.
        deadline: Timestamp,
    },
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::CapacityExceeded(_) => f.write_str("the request can never be granted"),
            Self::ClockTooCoarse { step, resolution } => write!(
                f,
                "the limiter's step of {step:?} is finer than the clock's resolution ({resolution:?})"
            ),
            Self::Timeout { ready_at, deadline } => write!(
                f,
                "rate limited past the deadline: ready at {ready_at}, deadline at {deadline}"
            ),
        }
    }
}

impl core::error::Error for WaitError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Self::CapacityExceeded(e) => Some(e),
            Self::ClockTooCoarse { .. } | Self::Timeout { .. } => None,
        }
    }
}

/// The future that waits for `n` permits of a limiter for a key; see the
/// [module documentation](self).
///
/// It resolves to the admission instant once the permits are granted
/// (taken, for an acquiring wait; available, for a readiness wait): the
/// `now` on the wait's clock of the check that granted them.
/// Dropping it before it resolves takes nothing, so it is cancel-safe (for
/// example inside `select`). Any [`Limiter`] whose permits are spent when
/// granted (`Copy`): a bucket, a window, a chain of them, a keyed table. (A
/// [`ConcurrencyLimiter`](crate::ConcurrencyLimiter) waits with its own
/// `acquire(n)`, woken by the release.)
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct Wait<'a, C, L, K = ()>
where
    C: Sleep + ?Sized,
    L: Limiter<K, Permit: Copy> + ?Sized,
    K: ?Sized,
{
    clock: &'a C,
    limiter: &'a L,
    key: &'a K,
    n: u32,
    take: bool,
    deadline: Option<Timestamp>,
    timer: Option<C::Timer>,
}

impl<'a, C, L, K> Wait<'a, C, L, K>
where
    C: Sleep + ?Sized,
    L: Limiter<K, Permit: Copy> + ?Sized,
    K: ?Sized,
{
    /// Waits on `clock` until `n` permits of `limiter` for `key` (`&()` for
    /// a direct limiter) are granted: taken if `take`, only available
    /// otherwise. `n = 0` resolves at once.
    pub const fn new(clock: &'a C, limiter: &'a L, key: &'a K, n: u32, take: bool) -> Self {
        Self {
            clock,
            limiter,
            key,
            n,
            take,
            deadline: None,
            timer: None,
        }
    }

    /// Gives up with [`WaitError::Timeout`] if the permits cannot be granted
    /// at or before `deadline` on the wait's clock. Permits available right
    /// now are granted even if the deadline has passed.
    pub fn with_deadline(mut self, deadline: Timestamp) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// [`with_deadline`](Self::with_deadline) at `timeout` from now (from
    /// the moment this method is called), saturating.
    pub fn with_timeout(self, timeout: Duration) -> Self {
        let deadline = self.clock.now().saturating_add(timeout);
        self.with_deadline(deadline)
    }

    /// Asks the limiter once at `now`: `Ok(())` if granted (at `now`),
    /// otherwise the nanoseconds still to wait.
    fn ask(&self, now: Timestamp) -> Result<Result<(), u64>, Refusal<'static>> {
        if self.take {
            Ok(match self.limiter.try_acquire_n(self.key, self.n, now) {
                // a rate's permit is spent when granted
                Ok(_) => Ok(()),
                Err(d) if d.is_never() => return Err(d),
                Err(d) => Err(d.retry_after_nanos()),
            })
        } else {
            let wait = self.limiter.time_until_ready(self.key, self.n, now)?;
            Ok(if wait.is_zero() {
                Ok(())
            } else {
                Err(duration_to_nanos(wait))
            })
        }
    }
}

impl<C, L, K> fmt::Debug for Wait<'_, C, L, K>
where
    C: Sleep + ?Sized,
    L: Limiter<K, Permit: Copy> + ?Sized,
    K: ?Sized,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Wait")
            .field("n", &self.n)
            .field("take", &self.take)
            .field("deadline", &self.deadline)
            .field("sleeping", &self.timer.is_some())
            .finish_non_exhaustive()
    }
}

impl<C, L, K> Future for Wait<'_, C, L, K>
where
    C: Sleep + ?Sized,
    L: Limiter<K, Permit: Copy> + ?Sized,
    K: ?Sized,
{
    type Output = Result<Timestamp, WaitError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // `Wait` is `Unpin`: references, integers and an `Unpin` timer.
        let this = self.get_mut();
        let resolution = this.clock.resolution();
        if this.timer.is_none() {
            // where a limiter meets the clock: a step finer than a tick
            // cannot be enforced (a `static` bucket was never checked)
            let step = this.limiter.required_resolution();
            if check_clock(step, resolution).is_err() {
                return Poll::Ready(Err(WaitError::ClockTooCoarse { step, resolution }));
            }
        }
        loop {
            if let Some(timer) = this.timer.as_mut() {
                if Pin::new(timer).poll(cx).is_pending() {
                    return Poll::Pending;
                }
                this.timer = None;
            }
            let now = this.clock.now();
            let wait = match this.ask(now) {
                Err(e) => return Poll::Ready(Err(WaitError::CapacityExceeded(e))),
                Ok(Ok(())) => return Poll::Ready(Ok(now)),
                Ok(Err(wait)) => wait,
            };
            // at least one resolution step ahead, so a zero wait (or a
            // clock that has not ticked) never spins
            let ready_at = now.saturating_add(Duration::from_nanos(wait));
            let wake = ready_at.max(now.saturating_add(resolution.max(Duration::from_nanos(1))));
            if let Some(deadline) = this.deadline
                && ready_at > deadline
            {
                return Poll::Ready(Err(WaitError::Timeout { ready_at, deadline }));
            }
            // Polling a fresh timer registers the waker and returns Pending.
            this.timer = Some(this.clock.sleep_until(wake));
        }
    }
}

impl<C: Sleep, L: Limiter<Permit: Copy>> RateLimiter<C, L> {
    /// Waits on the limiter's clock until `n` permits are granted and takes
    /// them; resolves to the admission instant (see [`Wait`]).
    ///
    /// # Errors
    /// The future resolves to [`WaitError::CapacityExceeded`] at once if
    /// `n` can never be granted, and to [`WaitError::Timeout`] if a
    /// deadline set with [`Wait::with_deadline`] / [`Wait::with_timeout`]
    /// cannot be met.
    pub fn acquire(&self, n: u32) -> Wait<'_, C, L> {
        Wait::new(self.clock(), self.limiter(), &(), n, true)
    }

    /// Waits until `n` permits could be taken, taking none: wait for
    /// capacity before preparing work, then take it with a check. Resolves
    /// to the instant they were found available.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    pub fn until_ready(&self, n: u32) -> Wait<'_, C, L> {
        Wait::new(self.clock(), self.limiter(), &(), n, false)
    }
}
