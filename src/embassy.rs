//! Embassy integration: a [`Clock`] on `embassy-time` and async waiting on
//! any [`Limiter`] (feature `embassy`).
//!
//! - [`EmbassyClock`] reads [`embassy_time::Instant::now`] and converts its
//!   ticks to a [`Timestamp`] exactly (floor) for any `TICK_HZ`, without
//!   overflow (`Timestamp::from(embassy_time::Instant)` does the same for
//!   any instant). Its [`resolution`](Clock::resolution) is one tick
//!   rounded up to whole nanoseconds, so a limiter finer than a tick is
//!   refused wherever it meets this clock: [`ConfigError::ClockTooCoarse`](crate::ConfigError::ClockTooCoarse)
//!   from [`RateLimiter::new`](crate::RateLimiter::new), and
//!   [`WaitError::ClockTooCoarse`] from `acquire` on a `static` bucket.
//! - [`acquire`]`(&limiter, &key, n)` waits until `n` permits are granted
//!   and takes them; [`until_ready`] waits until they *could* be taken,
//!   without taking them (`&()` is the key of a direct limiter; a keyed
//!   table waits per key). Both sleep on [`embassy_time::Timer::at`] (no
//!   polling loop, no allocation): check; on a refusal sleep until the
//!   refusal's `retry_after`, rounded **up** to the next tick; check again.
//!   A request that can never succeed (`n` above the burst or largest
//!   weight) is [`WaitError::CapacityExceeded`] at once instead of a wait
//!   forever. [`Wait::with_deadline`] / [`Wait::with_timeout`] bound the
//!   wait with [`WaitError::Timeout`].
//!
//! The library chooses no time driver and no tick rate: the application
//! enables one `embassy-time` driver and its `tick-hz-*` feature.
//!
//! # On a desktop, and the tests
//!
//! `examples/embassy-host` (its own crate) runs four tasks sharing one
//! limiter on embassy-executor's `platform-std`, printing each admission
//! with its time: `cargo run --manifest-path examples/embassy-host/Cargo.toml`.
//! The host tests run on embassy-time's mock driver in the workspace member
//! `embassy-tests` (its own crate so that the mock driver and the `std`
//! driver of the example are never unified into one build; the tests share
//! one global mock clock, so they are serialised): `cargo test -p
//! tollgate-embassy-tests`.
//!
//! # Time domain
//!
//! The waiters pass `EmbassyClock::now()` (the time since embassy's tick 0)
//! to the limiter. Make any direct `check` on the same limiter with the
//! same clock (for example through a `RateLimiter<EmbassyClock, _>`), or the
//! two callers would disagree about what time it is.
//!
//! # Fairness
//!
//! Waiters do not queue: each sleeps until its own retry time and re-checks,
//! and whichever checks first after capacity returns gets it. Every
//! admission still respects the quota exactly, and every waiter is served
//! as the quota allows when demand is below the rate. Under sustained
//! overload a large request can be overtaken repeatedly by smaller ones;
//! cap such demand upstream or use `n = 1` permits.
//!
//! # Example
//!
//! ```
//! use tollgate::embassy::{self, EmbassyClock, WaitError};
//! use tollgate::{valid, Bucket, Gcra, Quota};
//!
//! // checked at compile time, also against one tick of the application's TICK_HZ
//! const RATE: Quota = valid!(Quota::per_second(50));
//! static RADIO: Bucket<Gcra> =
//!     Bucket::leaky_bucket(valid!(RATE.check_resolution(EmbassyClock::RESOLUTION)));
//!
//! async fn send_frame() -> Result<(), WaitError> {
//!     embassy::acquire(&RADIO, &(), 1).await?; // sleeps until the radio may transmit
//!     // ... transmit ...
//!     Ok(())
//! }
//! # embassy_futures::block_on(send_frame()).unwrap();
//! ```

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use embassy_time::{Duration, Instant, Timer, TICK_HZ};

use crate::clock::Clock;
use crate::error::check_clock;
use crate::limiter::Limiter;
use crate::rate_limiter::RateLimiter;
use crate::refusal::Refusal;
use crate::snapshot::Snapshot;
use crate::ticks::Ratio;
use crate::time::{duration_to_nanos, Timestamp};

/// The application's tick rate as a reduced fraction of nanoseconds per
/// tick, computed at compile time (the conversions are shared with the other
/// tick clocks: exact, saturating, no run-time division by the rate).
const TICK_RATIO: Ratio = Ratio::from_hz(TICK_HZ);

/// The embassy time driver as a tollgate [`Clock`]: the time since
/// embassy's tick 0.
///
/// Conversion is exact (rounded down to the nanosecond) for any `TICK_HZ`
/// and saturates instead of overflowing. The resolution is one tick, rounded
/// up to whole nanoseconds (30 518 ns at 32 768 Hz, 1 000 ns at 1 MHz).
///
/// ```
/// use core::time::Duration;
/// use tollgate::embassy::EmbassyClock;
/// use tollgate::{Clock, ConfigError, Quota, RateLimiter, Timestamp};
///
/// let clock = EmbassyClock::new();
/// assert_eq!(clock.resolution(), EmbassyClock::RESOLUTION);
/// // Ticks and timestamps convert both ways at the application's TICK_HZ.
/// let one_sec = EmbassyClock::instant_at(Timestamp::from_secs(1));
/// assert_eq!(one_sec.as_ticks(), embassy_time::TICK_HZ);
/// assert_eq!(Timestamp::from(one_sec), Timestamp::from_secs(1));
///
/// // A quota finer than one tick is refused, never silently clamped.
/// let too_fine = Quota::new(1, EmbassyClock::RESOLUTION - Duration::from_nanos(1))?;
/// assert!(matches!(
///     RateLimiter::token_bucket(too_fine, clock),
///     Err(ConfigError::ClockTooCoarse { .. })
/// ));
/// # Ok::<(), ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct EmbassyClock;

impl EmbassyClock {
    /// One tick of the application's `TICK_HZ`, rounded up to whole
    /// nanoseconds: what [`Clock::resolution`] reports, usable in `const`
    /// quota checks ([`Quota::check_resolution`](crate::Quota::check_resolution)).
    pub const RESOLUTION: core::time::Duration =
        core::time::Duration::from_nanos(TICK_RATIO.resolution_nanos());

    /// The clock (it has no state: the driver is global).
    #[must_use]
    pub const fn new() -> Self {
        Self
    }

    /// The timestamp of an embassy instant (its ticks since tick 0, rounded
    /// down to the nanosecond, saturating).
    #[must_use]
    pub const fn timestamp(instant: Instant) -> Timestamp {
        Timestamp::from_nanos(TICK_RATIO.ticks_to_nanos(instant.as_ticks()))
    }

    /// The first [`Instant`] at which this clock reads at least `at`: the
    /// time rounded **up** to a whole tick, saturating.
    #[must_use]
    pub const fn instant_at(at: Timestamp) -> Instant {
        Instant::from_ticks(TICK_RATIO.nanos_to_ticks_ceil(at.as_nanos()))
    }
}

impl From<Instant> for Timestamp {
    /// [`EmbassyClock::timestamp`].
    fn from(instant: Instant) -> Self {
        EmbassyClock::timestamp(instant)
    }
}

impl Clock for EmbassyClock {
    #[inline]
    fn now(&self) -> Timestamp {
        Self::timestamp(Instant::now())
    }

    fn resolution(&self) -> core::time::Duration {
        Self::RESOLUTION
    }
}

/// Why an async wait ended without permits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitError {
    /// The request can never succeed: it asks for more than the limiter's
    /// burst (the refusal [`is_never`](Refusal::is_never)). Returned at
    /// once, never after a wait.
    CapacityExceeded(Refusal<'static>),
    /// The limiter's finest step is shorter than one embassy tick, so the
    /// tick clock cannot enforce it. Returned at once.
    ClockTooCoarse {
        /// The limiter's finest step.
        step: core::time::Duration,
        /// One tick.
        resolution: core::time::Duration,
    },
    /// The permits cannot be granted by the deadline. Returned as soon as
    /// the limiter's answer shows it (the waiter does not sleep until the
    /// deadline for nothing); nothing was taken.
    Timeout {
        /// The tick at which the permits would have been available, as the
        /// limiter saw it when the wait gave up.
        ready_at: Instant,
        /// The deadline that would have been missed.
        deadline: Instant,
    },
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::CapacityExceeded(_) => f.write_str("the request can never be granted"),
            Self::ClockTooCoarse { step, resolution } => write!(
                f,
                "the limiter's step of {step:?} is finer than one embassy tick ({resolution:?})"
            ),
            Self::Timeout { ready_at, deadline } => write!(
                f,
                "rate limited past the deadline: ready at tick {}, deadline at tick {}",
                ready_at.as_ticks(),
                deadline.as_ticks()
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

/// The future returned by [`acquire`] and [`until_ready`].
///
/// It resolves to the limiter's [`Snapshot`] once the permits are granted
/// (for `acquire`: taken; for `until_ready`: available). Dropping it before
/// it resolves takes nothing, so it is cancel-safe (for example inside
/// `select`).
///
/// ```
/// use embassy_time::Duration;
/// use tollgate::embassy::{acquire, WaitError};
/// use tollgate::{Bucket, Quota};
///
/// let bucket = Bucket::token_bucket(Quota::per_second(10)?.with_burst(2)?);
/// embassy_futures::block_on(async {
///     // Two permits are there at once.
///     let s = acquire(&bucket, &(), 2).with_timeout(Duration::from_millis(10)).await?;
///     assert_eq!(s.remaining(), 0);
///     // The next one needs 100 ms: more than the 10 ms timeout allows,
///     // which the waiter knows without sleeping.
///     let late = acquire(&bucket, &(), 1).with_timeout(Duration::from_millis(10)).await;
///     assert!(matches!(late, Err(WaitError::Timeout { .. })));
///     // Three can never fit in a burst of two: an error, not a wait.
///     assert!(matches!(acquire(&bucket, &(), 3).await, Err(WaitError::CapacityExceeded(_))));
///     Ok::<(), WaitError>(())
/// })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "futures do nothing unless you `.await` or poll them"]
#[derive(Debug)]
pub struct Wait<'a, L, K = ()>
where
    L: Limiter<K, Permit: Copy> + ?Sized,
    K: ?Sized,
{
    limiter: &'a L,
    key: &'a K,
    n: u32,
    take: bool,
    deadline: Option<Instant>,
    timer: Option<Timer>,
}

impl<'a, L, K> Wait<'a, L, K>
where
    L: Limiter<K, Permit: Copy> + ?Sized,
    K: ?Sized,
{
    const fn new(limiter: &'a L, key: &'a K, n: u32, take: bool) -> Self {
        Self {
            limiter,
            key,
            n,
            take,
            deadline: None,
            timer: None,
        }
    }

    /// Gives up with [`WaitError::Timeout`] if the permits cannot be granted
    /// at or before `deadline`. Permits available right now are granted
    /// even if the deadline has passed.
    pub fn with_deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// [`with_deadline`](Self::with_deadline) at `timeout` from now (from
    /// the moment this method is called), saturating.
    pub fn with_timeout(self, timeout: Duration) -> Self {
        let now = Instant::now();
        let deadline = now
            .checked_add(timeout)
            .unwrap_or(Instant::from_ticks(u64::MAX));
        self.with_deadline(deadline)
    }

    /// Asks the limiter once at `now`: the snapshot if granted,
    /// otherwise the nanoseconds still to wait.
    fn ask(&self, now: Timestamp) -> Result<Result<Snapshot, u64>, Refusal<'static>> {
        if self.take {
            Ok(match self.limiter.try_acquire_n(self.key, self.n, now) {
                // a rate's permit is spent when granted
                Ok(_) => Ok(self.limiter.snapshot(self.key, now)),
                Err(d) if d.is_never() => return Err(d),
                Err(d) => Err(d.retry_after_nanos()),
            })
        } else {
            let wait = self.limiter.time_until_ready(self.key, self.n, now)?;
            Ok(if wait.is_zero() {
                Ok(self.limiter.snapshot(self.key, now))
            } else {
                Err(duration_to_nanos(wait))
            })
        }
    }
}

impl<L, K> Future for Wait<'_, L, K>
where
    L: Limiter<K, Permit: Copy> + ?Sized,
    K: ?Sized,
{
    type Output = Result<Snapshot, WaitError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // `Wait` is `Unpin`: a reference, integers and an (Unpin) `Timer`.
        let this = self.get_mut();
        if this.timer.is_none() {
            // where a limiter meets the tick clock: a step finer than a
            // tick cannot be enforced (a `static` bucket was never checked)
            let step = this.limiter.required_resolution();
            if check_clock(step, EmbassyClock::RESOLUTION).is_err() {
                return Poll::Ready(Err(WaitError::ClockTooCoarse {
                    step,
                    resolution: EmbassyClock::RESOLUTION,
                }));
            }
        }
        loop {
            if let Some(timer) = this.timer.as_mut() {
                if Pin::new(timer).poll(cx).is_pending() {
                    return Poll::Pending;
                }
                this.timer = None;
            }
            let now = Instant::now().as_ticks();
            let now_nanos = TICK_RATIO.ticks_to_nanos(now);
            let wait = match this.ask(Timestamp::from_nanos(now_nanos)) {
                Err(e) => return Poll::Ready(Err(WaitError::CapacityExceeded(e))),
                Ok(Ok(snapshot)) => return Poll::Ready(Ok(snapshot)),
                Ok(Err(wait)) => wait,
            };
            // The first tick whose time is at or after `now + wait`; at
            // least one tick ahead so a zero wait can never spin.
            let wake = TICK_RATIO
                .nanos_to_ticks_ceil(now_nanos.saturating_add(wait))
                .max(now.saturating_add(1));
            if let Some(deadline) = this.deadline {
                if wake > deadline.as_ticks() {
                    return Poll::Ready(Err(WaitError::Timeout {
                        ready_at: Instant::from_ticks(wake),
                        deadline,
                    }));
                }
            }
            // Polling a fresh timer registers the waker and returns Pending.
            this.timer = Some(Timer::at(Instant::from_ticks(wake)));
        }
    }
}

/// Waits until `n` permits of `limiter` for `key` (`&()` for a direct
/// limiter) are granted and takes them; resolves to the snapshot after the
/// admission. `n = 0` resolves at once. Sleeps on embassy timers; time is
/// read from [`EmbassyClock`]. Any [`Limiter`] whose permits are spent
/// when granted (`Copy`): a bucket, a window, a chain of them, a keyed
/// table — a limiter per key. (A [`ConcurrencyLimiter`](crate::ConcurrencyLimiter)
/// waits with its own `acquire(n)`, woken by the release.)
///
/// ```
/// use tollgate::{embassy, valid, Bucket, Gcra, Quota};
///
/// static RADIO: Bucket<Gcra> = Bucket::leaky_bucket(valid!(Quota::per_second(50)));
/// embassy_futures::block_on(async {
///     embassy::acquire(&RADIO, &(), 1).await?; // the radio may transmit
///     Ok::<(), embassy::WaitError>(())
/// })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// The future resolves to [`WaitError::CapacityExceeded`] at once if `n`
/// can never be granted, to [`WaitError::ClockTooCoarse`] at once if the
/// limiter's step is finer than one tick, and to [`WaitError::Timeout`] if
/// a deadline set with [`Wait::with_deadline`] / [`Wait::with_timeout`]
/// cannot be met.
pub fn acquire<'a, L, K>(limiter: &'a L, key: &'a K, n: u32) -> Wait<'a, L, K>
where
    L: Limiter<K, Permit: Copy> + ?Sized,
    K: ?Sized,
{
    Wait::new(limiter, key, n, true)
}

/// Waits until `n` permits of `limiter` for `key` *could* be taken, without
/// taking them (a peek); resolves to the snapshot at that time. Use it to
/// wait for capacity before preparing work, then take it with a check.
/// Unlike governor's `until_ready`, this takes nothing: the taking version
/// is [`acquire`].
///
/// # Errors
/// As [`acquire`].
pub fn until_ready<'a, L, K>(limiter: &'a L, key: &'a K, n: u32) -> Wait<'a, L, K>
where
    L: Limiter<K, Permit: Copy> + ?Sized,
    K: ?Sized,
{
    Wait::new(limiter, key, n, false)
}

impl<L: Limiter<Permit: Copy>> RateLimiter<EmbassyClock, L> {
    /// Waits until `n` permits are granted and takes them (see
    /// [`acquire`]).
    ///
    /// ```
    /// use tollgate::embassy::EmbassyClock;
    /// use tollgate::{Quota, RateLimiter};
    ///
    /// let limiter = RateLimiter::token_bucket(Quota::per_second(5)?, EmbassyClock::new())?;
    /// let snapshot = embassy_futures::block_on(limiter.acquire(1))?;
    /// assert_eq!(snapshot.remaining(), 4);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire(&self, n: u32) -> Wait<'_, L> {
        Wait::new(self.limiter(), &(), n, true)
    }

    /// Waits until `n` permits could be taken, taking none (see
    /// [`until_ready`]).
    pub fn until_ready(&self, n: u32) -> Wait<'_, L> {
        Wait::new(self.limiter(), &(), n, false)
    }
}
