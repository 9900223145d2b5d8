//! The concurrency limiter: at most `limit` permits in flight.
//!
//! Unlike the rate limiters, a concurrency limiter has no time component:
//! permits are taken when work starts and given back when it ends. Its
//! permits therefore exist only as **guards**: [`ConcurrencyPermit`]
//! (borrowing the limiter) and, with feature `std`,
//! [`OwnedConcurrencyPermit`] (holding an `Arc`), each giving its permits
//! back when dropped. The limiter is deliberately not a
//! [`Limiter`](crate::Limiter): a chain, a statistics wrapper or an async
//! waiter built for rate limiters would take permits without a guard and
//! never give them back.
//!
//! - [`ConcurrencyLimiter::try_acquire`]: a permit now, or an
//!   [`AcquireError`].
//! - [`ConcurrencyLimiter::acquire`]: a future that resolves when the
//!   permits are free. It is woken by the release that frees them — no
//!   timer, no polling — on any executor (tokio, embassy, a plain
//!   `block_on`). Waiters are not served in order; for a bounded, ordered
//!   line with a maximum wait, put the limiter in a tokio
//!   `queue::Queue` (feature `tokio`).
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
//! # What `retry_after` means here
//!
//! Nothing but a release frees capacity, so no exact wait exists. A refusal
//! reports the limiter's *retry hint* (default [`DEFAULT_RETRY_HINT`], 1 ms;
//! set it with [`ConcurrencyLimiter::with_retry_hint`]) as `retry_after`: a
//! back-off for HTTP clients (`Retry-After` rounds it up to 1 s), not a
//! promise. Nothing in tollgate waits on it: every waiter on an in-flight
//! limit (this limiter's [`acquire`](ConcurrencyLimiter::acquire), a
//! `queue::Queue`, a partitioned limiter's per-key in-flight policy, an
//! HTTP concurrency policy that queues) is woken by the release. `reset_after` in a snapshot is likewise zero when nothing is in
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
//! work until enough of them are released; raising it wakes the waiters.
//!
//! # State protocol (for model checking)
//!
//! `in_flight` is one `AtomicU32`. Acquiring `n` is a
//! `compare_exchange_weak` loop from the loaded value `v` to `v + n`, taken
//! only if `v + n ≤ limit` (otherwise refuse without writing); releasing
//! `n` is a loop to `v − min(n, v)`, followed by waking the registered
//! waiters. Those two are `Relaxed` (the word publishes no other data); a
//! waiter registers its waker, then a `SeqCst` fence, then checks again,
//! and a release decrements, then a `SeqCst` fence, then looks for
//! waiters, so one of the two always sees the other.

use core::fmt;
use core::future::Future;
use core::num::NonZeroU32;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use crate::decision::{CapacityExceeded, Denied, Snapshot};
use crate::error::{AcquireError, ConfigError};
use crate::sync::{AtomicU32, Ordering};
use crate::time::duration_to_nanos;
use crate::wakers::{Registration, WakerSet};

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
    waiters: WakerSet,
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
                waiters: WakerSet::new(),
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
    /// [`AcquireError::Denied`] if fewer than `n` are free now (with the
    /// retry hint); [`AcquireError::CapacityExceeded`] if `n` is above the
    /// limit.
    pub fn try_acquire(&self, n: u32) -> Result<ConcurrencyPermit<'_>, AcquireError> {
        self.take(n)?;
        Ok(ConcurrencyPermit {
            limiter: self,
            permits: n,
        })
    }

    /// Waits until `n` permits are free and takes them; woken by the
    /// release that frees them. Resolves at once for `n = 0`. Dropping the
    /// future before it resolves takes nothing.
    ///
    /// # Errors
    /// The future resolves to [`CapacityExceeded`] at once if `n` is above
    /// the limit (it would wait forever).
    pub fn acquire(&self, n: u32) -> Acquire<'_> {
        Acquire {
            limiter: self,
            n,
            registration: None,
        }
    }

    /// Takes `n` permits without a guard: the internal step of every
    /// acquisition. `Ok(())` means taken.
    pub(crate) fn take(&self, n: u32) -> Result<(), AcquireError> {
        let limit = self.limit();
        if n > limit {
            return Err(AcquireError::CapacityExceeded(CapacityExceeded::new(
                n, limit,
            )));
        }
        if n == 0 {
            return Ok(()); // takes nothing: granted whatever is in flight
        }
        let mut v = self.in_flight.load(Ordering::Relaxed);
        loop {
            // v may exceed a lowered limit; compare in u64, no overflow
            if u64::from(v) + u64::from(n) > u64::from(limit) {
                return Err(AcquireError::Denied(Denied::from_nanos(
                    self.retry_hint,
                    self.snapshot_of(v, limit),
                )));
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
        Snapshot::exact(limit, limit.saturating_sub(in_flight), reset)
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
        self.waiters.wake_all();
        Ok(())
    }

    /// Gives back `n` permits that no guard will return: detached by
    /// [`ConcurrencyPermit::into_raw`], or leaked. Never below zero.
    pub fn release(&self, n: u32) {
        if n == 0 {
            return;
        }
        let _ = self
            .in_flight
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                (v != 0).then(|| v - core::cmp::min(v, n))
            });
        self.waiters.wake_all();
    }
}

/// `n` permits held; dropping the permit gives them back.
///
/// See the [module documentation](self) for what `mem::forget` does.
#[must_use = "dropping the permit releases it at once"]
#[derive(Debug)]
pub struct ConcurrencyPermit<'a> {
    limiter: &'a ConcurrencyLimiter,
    permits: u32,
}

impl ConcurrencyPermit<'_> {
    /// The permits this guard holds.
    #[must_use]
    pub const fn permits(&self) -> u32 {
        self.permits
    }

    /// Detaches the permits from the guard: they stay in flight until
    /// someone calls [`ConcurrencyLimiter::release`] with the returned
    /// count.
    #[must_use = "the returned permits stay in flight until released"]
    pub fn into_raw(self) -> u32 {
        let n = self.permits;
        core::mem::forget(self);
        n
    }

    /// Gives back `n` of the held permits now, keeping the rest.
    pub fn release_some(&mut self, n: u32) {
        let n = core::cmp::min(n, self.permits);
        self.permits -= n;
        self.limiter.release(n);
    }
}

impl Drop for ConcurrencyPermit<'_> {
    fn drop(&mut self) {
        self.limiter.release(self.permits);
    }
}

/// The future of [`ConcurrencyLimiter::acquire`].
#[must_use = "futures do nothing unless you `.await` or poll them"]
#[derive(Debug)]
pub struct Acquire<'a> {
    limiter: &'a ConcurrencyLimiter,
    n: u32,
    registration: Option<Registration>,
}

impl<'a> Future for Acquire<'a> {
    type Output = Result<ConcurrencyPermit<'a>, CapacityExceeded>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let limiter = this.limiter;
        let mut registered = false;
        loop {
            match limiter.take(this.n) {
                Ok(()) => {
                    if let Some(r) = this.registration.take() {
                        limiter.waiters.unregister(r);
                    }
                    return Poll::Ready(Ok(ConcurrencyPermit {
                        limiter,
                        permits: this.n,
                    }));
                }
                Err(AcquireError::CapacityExceeded(e)) => return Poll::Ready(Err(e)),
                Err(AcquireError::Denied(_)) if registered => return Poll::Pending,
                Err(AcquireError::Denied(_)) => {
                    // register, then look again: a release in between has
                    // either been seen by this second look or sees the waker
                    this.registration =
                        Some(limiter.waiters.register(cx.waker(), this.registration));
                    registered = true;
                }
            }
        }
    }
}

impl Drop for Acquire<'_> {
    fn drop(&mut self) {
        // A release wakes every registered waiter at once, so a cancelled
        // one never holds a wake-up that another needed.
        if let Some(r) = self.registration.take() {
            self.limiter.waiters.unregister(r);
        }
    }
}

/// The concurrency limit as an [`Algorithm`](crate::Algorithm), for the
/// per-key in-flight limits of a [`Partitioned`](crate::partitioned::Partitioned)
/// limiter: `check_n` takes permits and `refund` releases them. Crate-private
/// on purpose: outside a lease that releases on drop it would leak permits.
#[cfg(feature = "std")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct InFlight {
    pub(crate) limit: u32,
    pub(crate) retry_hint: u64,
}

/// Permits in flight for one key.
#[cfg(feature = "std")]
#[derive(Debug, Default)]
pub(crate) struct InFlightState(AtomicU32);

#[cfg(feature = "std")]
impl InFlight {
    /// At most `limit` in flight, with the default retry hint.
    pub(crate) const fn with_limit(limit: u32) -> Self {
        Self {
            limit,
            retry_hint: duration_to_nanos(DEFAULT_RETRY_HINT),
        }
    }

    fn snapshot_of(&self, in_flight: u32) -> Snapshot {
        let reset = if in_flight == 0 { 0 } else { self.retry_hint };
        Snapshot::exact(self.limit, self.limit.saturating_sub(in_flight), reset)
    }
}

#[cfg(feature = "std")]
impl crate::limiter::Algorithm for InFlight {
    type State = InFlightState;

    #[cfg(not(loom))]
    #[allow(clippy::declare_interior_mutable_const)]
    const FRESH_STATE: InFlightState = InFlightState(AtomicU32::new(0));

    fn new_state(&self) -> InFlightState {
        InFlightState(AtomicU32::new(0))
    }

    fn capacity(&self) -> u32 {
        self.limit
    }

    fn check_n(
        &self,
        state: &InFlightState,
        n: u32,
        _now: crate::time::Timestamp,
    ) -> Result<crate::decision::Decision, CapacityExceeded> {
        use crate::decision::Decision;
        if n > self.limit {
            return Err(CapacityExceeded::new(n, self.limit));
        }
        let mut v = state.0.load(Ordering::Relaxed);
        loop {
            if u64::from(v) + u64::from(n) > u64::from(self.limit) {
                return Ok(Decision::Denied(Denied::from_nanos(
                    self.retry_hint,
                    self.snapshot_of(v),
                )));
            }
            if n == 0 {
                return Ok(Decision::Allowed(self.snapshot_of(v)));
            }
            match state
                .0
                .compare_exchange_weak(v, v + n, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Ok(Decision::Allowed(self.snapshot_of(v + n))),
                Err(current) => v = current,
            }
        }
    }

    fn refund(&self, state: &InFlightState, n: u32, _now: crate::time::Timestamp) {
        let _ = state
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                (v != 0 && n != 0).then(|| v - core::cmp::min(v, n))
            });
    }

    fn snapshot(&self, state: &InFlightState, _now: crate::time::Timestamp) -> Snapshot {
        self.snapshot_of(state.0.load(Ordering::Relaxed))
    }

    fn time_until_ready(
        &self,
        state: &InFlightState,
        n: u32,
        _now: crate::time::Timestamp,
    ) -> Result<Duration, CapacityExceeded> {
        if n > self.limit {
            return Err(CapacityExceeded::new(n, self.limit));
        }
        let v = state.0.load(Ordering::Relaxed);
        Ok(if u64::from(v) + u64::from(n) > u64::from(self.limit) {
            Duration::from_nanos(self.retry_hint)
        } else {
            Duration::ZERO
        })
    }

    fn is_idle(&self, state: &InFlightState, _now: crate::time::Timestamp) -> bool {
        state.0.load(Ordering::Relaxed) == 0
    }

    fn required_resolution(&self) -> Duration {
        Duration::ZERO
    }

    /// Permits in flight are not a function of the limit: nothing to carry.
    fn carry_over(
        &self,
        _next: &Self,
        _state: &InFlightState,
        _how: crate::live::Inheritance,
        _now: crate::time::Timestamp,
    ) {
    }
}

#[cfg(feature = "std")]
mod owned {
    use core::future::Future;
    use core::pin::Pin;
    use core::task::{Context, Poll};
    use std::sync::Arc;

    use super::{AcquireError, ConcurrencyLimiter};
    use crate::decision::CapacityExceeded;

    /// `n` permits held on an `Arc`-shared limiter, for work that outlives
    /// the current borrow (a spawned task). Dropping it gives them back.
    #[must_use = "dropping the permit releases it at once"]
    #[derive(Debug)]
    pub struct OwnedConcurrencyPermit {
        limiter: Arc<ConcurrencyLimiter>,
        permits: u32,
    }

    impl OwnedConcurrencyPermit {
        /// The permits this guard holds.
        #[must_use]
        pub const fn permits(&self) -> u32 {
            self.permits
        }

        /// The limiter the permits belong to.
        #[must_use]
        pub fn limiter(&self) -> &Arc<ConcurrencyLimiter> {
            &self.limiter
        }
    }

    impl Drop for OwnedConcurrencyPermit {
        fn drop(&mut self) {
            self.limiter.release(self.permits);
        }
    }

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
        ) -> Result<OwnedConcurrencyPermit, AcquireError> {
            self.take(n)?;
            Ok(OwnedConcurrencyPermit {
                limiter: Arc::clone(self),
                permits: n,
            })
        }

        /// Like [`acquire`](ConcurrencyLimiter::acquire), resolving to an
        /// [`OwnedConcurrencyPermit`] (feature `std`).
        ///
        /// # Errors
        /// As [`acquire`](ConcurrencyLimiter::acquire).
        pub fn acquire_owned(
            self: &Arc<Self>,
            n: u32,
        ) -> impl Future<Output = Result<OwnedConcurrencyPermit, CapacityExceeded>> + Send + 'static
        {
            let limiter = Arc::clone(self);
            AcquireOwned {
                limiter,
                n,
                registration: None,
            }
        }
    }

    struct AcquireOwned {
        limiter: Arc<ConcurrencyLimiter>,
        n: u32,
        registration: Option<crate::wakers::Registration>,
    }

    impl Future for AcquireOwned {
        type Output = Result<OwnedConcurrencyPermit, CapacityExceeded>;

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            let this = self.get_mut();
            let mut borrowed = super::Acquire {
                limiter: &this.limiter,
                n: this.n,
                registration: this.registration.take(),
            };
            let poll = Pin::new(&mut borrowed).poll(cx);
            this.registration = borrowed.registration.take();
            // the borrowed future's Drop has nothing left to unregister
            drop(borrowed);
            poll.map(|r| {
                r.map(|permit| OwnedConcurrencyPermit {
                    limiter: Arc::clone(&this.limiter),
                    permits: permit.into_raw(),
                })
            })
        }
    }

    impl Drop for AcquireOwned {
        fn drop(&mut self) {
            if let Some(r) = self.registration.take() {
                self.limiter.waiters.unregister(r);
            }
        }
    }
}

#[cfg(feature = "std")]
pub use owned::OwnedConcurrencyPermit;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_limit_is_an_error() {
        assert_eq!(
            ConcurrencyLimiter::with_limit(0).map(|_| ()),
            Err(ConfigError::ZeroLimit)
        );
    }

    #[test]
    fn permits_return_on_drop_and_release_some() {
        let l = ConcurrencyLimiter::with_limit(5).unwrap();
        let mut p = l.try_acquire(4).unwrap();
        assert_eq!(l.available(), 1);
        assert!(matches!(l.try_acquire(2), Err(AcquireError::Denied(_))));
        p.release_some(3);
        assert_eq!((p.permits(), l.in_flight()), (1, 1));
        drop(p);
        assert_eq!(l.in_flight(), 0);
        assert!(matches!(
            l.try_acquire(6),
            Err(AcquireError::CapacityExceeded(CapacityExceeded {
                requested: 6,
                capacity: 5
            }))
        ));
    }

    #[test]
    fn into_raw_detaches_until_release() {
        let l = ConcurrencyLimiter::with_limit(2).unwrap();
        let n = l.try_acquire(2).unwrap().into_raw();
        assert_eq!(l.in_flight(), 2);
        l.release(n);
        assert_eq!(l.in_flight(), 0);
        l.release(10); // never below zero
        assert_eq!(l.in_flight(), 0);
    }

    #[test]
    fn refusal_reports_the_retry_hint() {
        let l = ConcurrencyLimiter::with_limit(1)
            .unwrap()
            .with_retry_hint(Duration::from_micros(5));
        let held = l.try_acquire(1).unwrap();
        let Err(AcquireError::Denied(d)) = l.try_acquire(1) else {
            panic!("expected a refusal")
        };
        assert_eq!(d.retry_after(), Duration::from_micros(5));
        assert_eq!(l.snapshot().reset_after(), Duration::from_micros(5));
        drop(held);
        assert_eq!(l.snapshot().reset_after(), Duration::ZERO);
    }

    #[test]
    fn lowering_the_limit_refuses_until_enough_are_released() {
        let l = ConcurrencyLimiter::with_limit(3).unwrap();
        let a = l.try_acquire(2).unwrap();
        l.set_limit(1).unwrap();
        assert!(l.try_acquire(1).is_err()); // 2 in flight > 1
        drop(a);
        assert!(l.try_acquire(1).is_ok());
        assert_eq!(l.set_limit(0), Err(ConfigError::ZeroLimit));
        assert_eq!(l.limit(), 1);
    }
}
