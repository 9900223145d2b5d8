//! The concurrency limiter: at most `limit` permits in flight.
//!
//! Unlike the rate limiters, a concurrency limiter has no time component:
//! permits are taken when work starts and given back when it ends. Its
//! permits therefore exist only as **guards**: a [`ConcurrencyPermit`]
//! holds the limiter's handle — a reference, or with feature `std` an
//! `Arc` for a permit that outlives the borrow (a spawned task) — and gives
//! its permits back when dropped. Through a reference it is a
//! [`Limiter`] whose permit is that guard, so it chains
//! with rate limiters (`bucket.and(&JOBS)`: all or nothing) and a chain or
//! statistics wrapper holds the guard for you, as does the permit of a
//! `queue::Queue` in front of it (whose waiters the guard's release wakes);
//! the waiters that drop the permits they get (an embassy `acquire`) take
//! only limiters whose permits are `Copy`, spent when granted, so no guard
//! is ever dropped by mistake.
//!
//! - [`ConcurrencyLimiter::try_acquire`]: a permit now, or a
//!   [`Refusal`].
//! - [`ConcurrencyLimiter::acquire`]: a future that resolves when the
//!   permits are free. It is woken by the release that frees them — no
//!   timer, no polling — on any executor (embassy, RTIC, a plain
//!   `block_on`). Waiters are served in the order they started waiting
//!   (see [Waiting](#waiting-in-line-oldest-first)).
//!
//! ```
//! use core::num::NonZeroU32;
//! use tollgate::ConcurrencyLimiter;
//!
//! static JOBS: ConcurrencyLimiter = ConcurrencyLimiter::new(NonZeroU32::new(2).unwrap());
//!
//! let a = JOBS.try_acquire(1)?;
//! let b = JOBS.try_acquire(1)?;
//! assert!(JOBS.try_acquire(1).is_err()); // 2 in flight
//! drop(a); // its permit comes back
//! let waiting = JOBS.acquire(1);
//! let c = embassy_futures::block_on(waiting)?;
//! assert_eq!(JOBS.in_flight(), 2);
//! # drop((b, c));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Waiting in line, oldest first
//!
//! An [`acquire`](ConcurrencyLimiter::acquire) that cannot take its
//! permits at once joins the back of the limiter's line. A release (a
//! permit dropped, [`release`](ConcurrencyLimiter::release), a raised
//! limit) hands the freed permits to the front of the line while the front
//! waiter's request fits, taking them on its behalf, and wakes exactly
//! those waiters: a release wakes no waiter it cannot admit, so a waiter is
//! woken once per admission (its first poll aside) however many wait. This
//! is .NET's `ConcurrencyLimiter` with `QueueProcessingOrder.OldestFirst`:
//!
//! - **No overtaking.** A waiter for 3 permits at the front is admitted
//!   before a later waiter for 1, even while 1 or 2 permits are free: a
//!   large request is never starved by smaller ones behind it.
//! - **Newcomers wait their turn.** While anyone waits in the line,
//!   [`try_acquire`](ConcurrencyLimiter::try_acquire) (and a new `acquire`,
//!   and a `queue::Queue` over the same limiter) is refused even if permits
//!   are free: it would overtake the line. Only an `acquire` or
//!   `try_acquire` that runs *concurrently* with a waiter joining the line
//!   may be ordered before it.
//! - **Cancellation.** Dropping a waiting future leaves the line (the
//!   waiters behind it are served at once if they now fit). A future that
//!   was granted its permits but dropped before it saw them passes them to
//!   the next waiters in line: no permit and no wake-up is lost.
//! - **The limit.** Raising it admits the waiters that now fit; lowering
//!   it below a waiter's request resolves that waiter to a refusal that
//!   [`is_never`](Refusal::is_never) (it could never be admitted).
//! - **Without `std`** the line has 8 slots (no allocation). A waiter that
//!   finds all 8 taken is not in the line: it wakes itself and is polled
//!   again (a busy wait through its executor, costing repeated polls and
//!   never a lost wake-up) until a slot frees, then joins the back. So
//!   order and "woken once per admission" hold for the 8 oldest waiters;
//!   the ones beyond them join in the order they find a free slot, and the
//!   waiters in the line are never woken by them.
//! - `mem::forget` on a waiting future keeps its place: when its turn
//!   comes it is granted, and those permits stay in flight (as a forgotten
//!   permit's do); without `std` its slot is never reused.
//!
//! # What `retry_after` means here
//!
//! Nothing but a release frees capacity, so no exact wait exists. A refusal
//! reports the limiter's *retry hint* (default [`DEFAULT_RETRY_HINT`], 1 ms;
//! set it with [`ConcurrencyLimiter::with_retry_hint`]) as `retry_after`: a
//! back-off for a caller that retries on its own (in whole seconds, it
//! rounds up to 1 s), not a promise. Nothing in tollgate waits on it: every
//! waiter on an in-flight limit (this limiter's
//! [`acquire`](ConcurrencyLimiter::acquire), and every layer that queues in
//! front of an in-flight limit) is woken by the release. `reset_after` in a snapshot is likewise zero when nothing is in
//! flight and the hint otherwise.
//!
//! # Leaked permits
//!
//! `mem::forget` on a permit (or a `Box::leak`, or an `Rc` cycle) never
//! returns its permits: they stay counted as in flight, so the limiter
//! admits *less*, never more (leaking fails closed and is memory-safe). A
//! caller that knows permits were leaked can give them back with
//! [`ConcurrencyLimiter::release`]; [`ConcurrencyPermit::into_raw`] is the
//! explicit way to detach permits from their guard for a later release.
//! `release` never takes the count below zero, but releasing permits that
//! are still held by someone else does let more work in than the limit
//! intends, so use it only for permits you know are gone.
//!
//! # Changing the limit
//!
//! [`ConcurrencyLimiter::set_limit`] changes the limit of a running
//! limiter. Permits in flight are not a function of the limit, so nothing
//! is converted: lowering the limit below the permits in flight refuses new
//! work until enough of them are released; raising it admits the waiters
//! that now fit (see [Waiting](#waiting-in-line-oldest-first)).
//!
//! # State protocol (for model checking)
//!
//! `in_flight` is one `AtomicU32`. Taking `n` is a `compare_exchange_weak`
//! loop from the loaded value `v` to `v + n`, taken only if
//! `v + n ≤ limit` (otherwise refuse without writing); giving back `n` is a
//! loop to `v − min(n, v)`. Those are `Relaxed` (the word publishes no
//! other data). `waiting` (an `AtomicU32`) counts the waiters in the line;
//! it is written under the line's lock and read without it.
//!
//! - A newcomer reads `waiting` and is refused if it is not zero, else
//!   takes as above.
//! - A waiter refused as a newcomer takes the lock, increments `waiting`,
//!   then a `SeqCst` fence, then looks again (takes if the line is empty
//!   and the permits are free, else joins the back).
//! - A release gives back, then a `SeqCst` fence, then reads `waiting`: at
//!   zero it returns (one load more than a bare decrement); otherwise,
//!   under the lock, it takes the permits of the front waiters that fit,
//!   marks them granted and decrements `waiting` for each, then wakes them
//!   after letting the lock go. Either the waiter's second look sees the
//!   release's permits or the release sees the waiter: no lost wake-up.
//! - A granted waiter's poll finds its permits taken; a granted waiter
//!   dropped before that gives them back through the release path, which
//!   hands them on: no permit is lost or given twice.

use core::fmt;
use core::future::Future;
use core::num::NonZeroU32;
use core::time::Duration;

use crate::error::ConfigError;
use crate::limiter::Limiter;
use crate::refusal::Refusal;
use crate::snapshot::Snapshot;
use crate::sync::{AtomicU32, Ordering};
use crate::time::{Timestamp, duration_to_nanos};
use crate::wakers::Line;

/// Default `retry_after` of a refusal: 1 ms (see the
/// [module documentation](self)).
pub const DEFAULT_RETRY_HINT: Duration = Duration::from_millis(1);

/// At most `limit` permits in flight, handed out as guards.
///
/// `const`-constructible, so it can be a `static`. See the [module
/// documentation](self).
pub struct ConcurrencyLimiter {
    limit: AtomicU32,
    in_flight: AtomicU32,
    retry_hint: u64,
    /// Waiters in the line: written under `line`'s lock, read without it.
    waiting: AtomicU32,
    line: LineLock,
}

/// The line's lock: std's mutex (loom's under loom, from `crate::sync`),
/// a critical section without `std`.
#[cfg(feature = "std")]
type LineLock = crate::sync::Mutex<Line>;
#[cfg(not(feature = "std"))]
type LineLock = critical_section::Mutex<core::cell::RefCell<Line>>;

crate::sync::const_fn_unless_loom! {
    fn new_line() -> LineLock {
        #[cfg(feature = "std")]
        {
            LineLock::new(Line::new())
        }
        #[cfg(not(feature = "std"))]
        {
            critical_section::Mutex::new(core::cell::RefCell::new(Line::new()))
        }
    }
}

impl fmt::Debug for ConcurrencyLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConcurrencyLimiter")
            .field("limit", &self.limit())
            .field("in_flight", &self.in_flight())
            .field("retry_hint", &self.retry_hint())
            .finish_non_exhaustive()
    }
}

impl ConcurrencyLimiter {
    crate::sync::const_fn_unless_loom! {
        /// At most `limit` permits in flight. `const` and infallible (a
        /// limit of zero cannot be written), for a `static`:
        ///
        /// ```
        /// use core::num::NonZeroU32;
        /// use tollgate::ConcurrencyLimiter;
        ///
        /// static JOBS: ConcurrencyLimiter =
        ///     ConcurrencyLimiter::new(NonZeroU32::new(4).unwrap()); // checked at compile time
        /// assert_eq!(JOBS.limit(), 4);
        /// ```
        #[must_use]
        pub fn new(limit: NonZeroU32) -> Self {
            Self {
                limit: AtomicU32::new(limit.get()),
                in_flight: AtomicU32::new(0),
                retry_hint: duration_to_nanos(DEFAULT_RETRY_HINT),
                waiting: AtomicU32::new(0),
                line: new_line(),
            }
        }
    }

    /// At most `limit` permits in flight, for a limit read at run time.
    ///
    /// # Errors
    /// [`ConfigError::ZeroLimit`] for 0.
    pub fn with_limit(limit: u32) -> Result<Self, ConfigError> {
        match NonZeroU32::new(limit) {
            Some(limit) => Ok(Self::new(limit)),
            None => Err(ConfigError::ZeroLimit),
        }
    }

    /// The same limiter reporting `retry_hint` as the `retry_after` of its
    /// refusals (see the [module documentation](self)).
    #[must_use]
    pub const fn with_retry_hint(mut self, retry_hint: Duration) -> Self {
        self.retry_hint = duration_to_nanos(retry_hint);
        self
    }

    /// Takes `n` permits now, behind a guard that gives them back on drop.
    ///
    /// # Errors
    /// A [`Refusal`] if fewer than `n` are free now, or if waiters of
    /// [`acquire`](Self::acquire) are in line (it would overtake them),
    /// with the retry hint; one that [`is_never`](Refusal::is_never) if
    /// `n` is above the limit.
    pub fn try_acquire(&self, n: u32) -> Result<ConcurrencyPermit<&Self>, Refusal<'static>> {
        self.take(n)?;
        Ok(ConcurrencyPermit {
            limiter: self,
            permits: n,
        })
    }

    /// Waits until `n` permits are free and takes them, in line behind
    /// the waiters already there; woken by the release that admits it (see
    /// [Waiting](self#waiting-in-line-oldest-first)). Resolves at once for
    /// `n = 0`. Dropping the future before it resolves takes nothing: the
    /// permits already taken for it go to the next waiters.
    ///
    /// # Errors
    /// The future resolves at once to a refusal that
    /// [`is_never`](Refusal::is_never) if `n` is above the limit (it would
    /// wait forever).
    pub fn acquire(
        &self,
        n: u32,
    ) -> impl Future<Output = Result<ConcurrencyPermit<&Self>, Refusal<'static>>> + '_ {
        Acquire {
            limiter: self,
            n,
            ticket: None,
        }
    }

    /// Takes `n` permits without a guard for a newcomer: the internal step
    /// of every acquisition outside the line. Refused while anyone waits in
    /// the line (a newcomer never overtakes a waiter). `Ok(())` means taken.
    pub(crate) fn take(&self, n: u32) -> Result<(), Refusal<'static>> {
        let limit = self.limit();
        if n > limit {
            return Err(Refusal::never(n, self.snapshot_of(self.in_flight(), limit)));
        }
        if n == 0 {
            return Ok(()); // takes nothing: granted whatever is in flight
        }
        if self.waiting.load(Ordering::SeqCst) != 0 {
            return Err(self.busy(self.in_flight(), limit));
        }
        self.take_free(n, limit)
    }

    /// The refusal of a request that must wait for a release, with `v`
    /// permits in flight: the retry hint, and capacity back by a release.
    fn busy(&self, v: u32, limit: u32) -> Refusal<'static> {
        Refusal::from_nanos(self.retry_hint, self.snapshot_of(v, limit)).until_release()
    }

    /// Takes `n` (≤ `limit`) if they are free, whoever waits.
    fn take_free(&self, n: u32, limit: u32) -> Result<(), Refusal<'static>> {
        let mut v = self.in_flight.load(Ordering::Relaxed);
        loop {
            // v may exceed a lowered limit; compare in u64, no overflow
            if u64::from(v) + u64::from(n) > u64::from(limit) {
                return Err(self.busy(v, limit));
            }
            match self.in_flight.compare_exchange_weak(
                v,
                v + n,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(()),
                Err(current) => v = current,
            }
        }
    }

    /// Permits currently in flight.
    #[must_use]
    pub fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// The most permits in flight at once.
    #[must_use]
    pub fn limit(&self) -> u32 {
        self.limit.load(Ordering::Relaxed)
    }

    /// Permits free now.
    #[must_use]
    pub fn available(&self) -> u32 {
        self.limit().saturating_sub(self.in_flight())
    }

    /// The `retry_after` its refusals report.
    #[must_use]
    pub const fn retry_hint(&self) -> Duration {
        Duration::from_nanos(self.retry_hint)
    }

    /// The limiter's state: limit, permits free, and `reset_after` (zero
    /// when nothing is in flight, the retry hint otherwise).
    #[must_use]
    pub fn snapshot(&self) -> Snapshot {
        self.snapshot_of(self.in_flight(), self.limit())
    }

    fn snapshot_of(&self, in_flight: u32, limit: u32) -> Snapshot {
        let reset = if in_flight == 0 { 0 } else { self.retry_hint };
        Snapshot::from_nanos(limit, limit.saturating_sub(in_flight), reset)
    }

    /// Changes the limit of the running limiter (see the [module
    /// documentation](self)).
    ///
    /// # Errors
    /// [`ConfigError::ZeroLimit`] for 0; the limit is then unchanged.
    pub fn set_limit(&self, limit: u32) -> Result<(), ConfigError> {
        if limit == 0 {
            return Err(ConfigError::ZeroLimit);
        }
        self.limit.store(limit, Ordering::Relaxed);
        // refuse the waiters the new limit can never admit, then admit the
        // ones that now fit
        self.serve(true);
        Ok(())
    }

    /// Gives back `n` permits that no guard will return: detached by
    /// [`ConcurrencyPermit::into_raw`], or leaked. Never below zero.
    pub fn release(&self, n: u32) {
        if n == 0 {
            return;
        }
        let _ = crate::sync::update_u32(&self.in_flight, |v| {
            (v != 0).then(|| v - core::cmp::min(v, n))
        });
        self.serve(false);
    }
}

/// A concurrency limiter is a [`Limiter`] through a reference: its permit
/// is the guard, which gives its permits
/// back when it drops, so it chains with rate limiters (all or nothing: a
/// refused chain drops the guard it took), and a
/// `tollgate::queue::Queue` over it (or over a chain holding it)
/// wakes its waiters at the release.
///
/// ```
/// use core::num::NonZeroU32;
/// use tollgate::{Bucket, ConcurrencyLimiter, Limiter, Quota, Timestamp};
///
/// static JOBS: ConcurrencyLimiter = ConcurrencyLimiter::new(NonZeroU32::new(1).unwrap());
/// // 10 jobs per second, and at most 1 running
/// let limiter = Bucket::token_bucket(Quota::per_second(10)?).and(&JOBS);
/// let now = Timestamp::ZERO;
/// let running = limiter.try_acquire(&(), now)?;
/// let refused = limiter.try_acquire(&(), now).unwrap_err();
/// assert_eq!(refused.stage(), 1); // the in-flight limit refused
/// assert_eq!(limiter.first().snapshot(now).remaining(), 9); // and the rate paid nothing
/// drop(running); // the job ends: its permit comes back
/// assert!(limiter.try_acquire(&(), now).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Only a reference is a `Limiter`: an `Arc<ConcurrencyLimiter>` keeps its
/// own `try_acquire(n)` (a `Limiter` impl on the `Arc` would take over the
/// method name wherever the trait is in scope); chain `&*arc`.
///
/// Its [`refund`](Limiter::refund) gives nothing back: in-flight permits
/// come back when their guard drops (or by
/// [`ConcurrencyLimiter::release`] after
/// [`ConcurrencyPermit::into_raw`]). Waiters that drop permits when
/// admitted (an embassy `acquire`, [`RateLimiter`](crate::RateLimiter))
/// take only limiters whose permits are `Copy`, spent when granted, so an
/// in-flight permit is never dropped by mistake; a `queue::Queue` keeps
/// the guard in the permit it hands out.
impl<'a> Limiter for &'a ConcurrencyLimiter {
    type Permit = ConcurrencyPermit<&'a ConcurrencyLimiter>;

    fn capacity(&self, _: &()) -> u32 {
        self.limit()
    }

    fn try_acquire_n(
        &self,
        _: &(),
        n: u32,
        _: Timestamp,
    ) -> Result<Self::Permit, Refusal<'static>> {
        ConcurrencyLimiter::try_acquire(self, n)
    }

    fn cancel(&self, _: &(), permit: Self::Permit, _: Timestamp) {
        drop(permit);
    }

    fn refund(&self, _: &(), _: u32, _: Timestamp) {}

    fn snapshot(&self, _: &(), _: Timestamp) -> Snapshot {
        ConcurrencyLimiter::snapshot(self)
    }

    fn time_until_ready(&self, _: &(), n: u32, _: Timestamp) -> Result<Duration, Refusal<'static>> {
        self.wait_hint(n)
    }
}

impl ConcurrencyLimiter {
    /// The time until `n` permits could be taken, as far as a limit with no
    /// time component knows: zero if they are free now and nobody waits,
    /// else the retry hint (a release, not time, brings them back).
    fn wait_hint(&self, n: u32) -> Result<Duration, Refusal<'static>> {
        let (limit, in_flight) = (self.limit(), self.in_flight());
        if n > limit {
            return Err(Refusal::never(n, self.snapshot_of(in_flight, limit)));
        }
        let free = u64::from(in_flight) + u64::from(n) <= u64::from(limit);
        Ok(if free && self.waiting.load(Ordering::SeqCst) == 0 {
            Duration::ZERO
        } else {
            Duration::from_nanos(self.retry_hint)
        })
    }
}

#[cfg(feature = "std")]
mod owned {
    use core::future::Future;
    use std::sync::Arc;

    use super::{Acquire, ConcurrencyLimiter, ConcurrencyPermit};
    use crate::refusal::Refusal;

    impl ConcurrencyLimiter {
        /// Like [`try_acquire`](ConcurrencyLimiter::try_acquire), with a
        /// permit that keeps the limiter alive (feature `std`).
        ///
        /// ```
        /// use std::sync::Arc;
        /// use tollgate::ConcurrencyLimiter;
        ///
        /// let limiter = Arc::new(ConcurrencyLimiter::with_limit(1)?);
        /// let permit = limiter.try_acquire_owned(1)?;
        /// let worker = std::thread::spawn(move || drop(permit));
        /// worker.join().unwrap();
        /// assert_eq!(limiter.in_flight(), 0);
        /// # Ok::<(), Box<dyn std::error::Error>>(())
        /// ```
        ///
        /// # Errors
        /// As [`try_acquire`](ConcurrencyLimiter::try_acquire).
        pub fn try_acquire_owned(
            self: &Arc<Self>,
            n: u32,
        ) -> Result<ConcurrencyPermit<Arc<Self>>, Refusal<'static>> {
            self.take(n)?;
            Ok(ConcurrencyPermit {
                limiter: Arc::clone(self),
                permits: n,
            })
        }

        /// Like [`acquire`](ConcurrencyLimiter::acquire), resolving to a
        /// permit that holds an `Arc` (feature `std`).
        ///
        /// # Errors
        /// As [`acquire`](ConcurrencyLimiter::acquire).
        pub fn acquire_owned(
            self: &Arc<Self>,
            n: u32,
        ) -> impl Future<Output = Result<ConcurrencyPermit<Arc<Self>>, Refusal<'static>>> + Send + 'static
        {
            Acquire {
                limiter: Arc::clone(self),
                n,
                ticket: None,
            }
        }
    }
}

mod line;
mod permit;
#[cfg(test)]
mod tests;

use line::Join;
use permit::Acquire;
pub use permit::ConcurrencyPermit;
