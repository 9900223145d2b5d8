//! The concurrency limiter: at most `limit` permits in flight.
//!
//! Unlike the rate limiters, a concurrency limiter has no time component:
//! permits are taken when work starts and given back when it ends. The state
//! is one atomic `u32` (the permits in flight).
//!
//! - [`ConcurrencyLimiter::try_acquire`] returns a [`ConcurrencyPermit`], an
//!   RAII guard that gives its permits back when dropped.
//! - As an [`Algorithm`] / [`Limiter`], `check_n` takes permits *without* a
//!   guard and `refund` gives them back (what a chain or a keyed table
//!   needs); the `now` argument is ignored.
//!
//! # What `retry_after` means here
//!
//! Nothing but a release frees capacity, so no exact wait exists. A refusal
//! reports the limiter's *retry hint* (default
//! [`DEFAULT_RETRY_HINT_NANOS`], 1 ms; set it with
//! [`Concurrency::with_retry_hint`]) as `retry_after`, and
//! `time_until_ready` returns the hint while too few permits are free, 0
//! otherwise. It is a back-off for pollers and HTTP clients
//! (`Retry-After` rounds it up to 1 s), not a promise. `reset_after` in a
//! snapshot is likewise 0 when nothing is in flight and the hint otherwise.
//!
//! # Leaked permits
//!
//! `mem::forget` on a permit (or a `Box::leak`, or an `Rc` cycle) never
//! returns its permits: they stay counted as in flight, so the limiter
//! admits *less*, never more (leaking fails closed and is memory-safe). A
//! caller that knows permits were leaked can give them back with
//! [`ConcurrencyLimiter::release`]; [`ConcurrencyPermit::into_raw`] is the
//! explicit way to detach permits from their guard for later release.
//! `release` never takes the count below zero, but releasing permits that
//! are still held by someone else does let more work in than the limit
//! intends, so use it only for permits you know are gone.
//!
//! ```
//! use tollgate::ConcurrencyLimiter;
//!
//! let limiter = ConcurrencyLimiter::new(2)?;
//! let a = limiter.try_acquire(1)?;
//! let b = limiter.try_acquire(1)?;
//! assert!(limiter.try_acquire(1).is_err()); // 2 in flight
//! drop(a);
//! let c = limiter.try_acquire(1)?; // a's permit came back
//! core::mem::forget(b); // leaked: still counted
//! drop(c);
//! assert_eq!(limiter.in_flight(), 1);
//! limiter.release(1); // recover the leaked permit
//! assert_eq!(limiter.in_flight(), 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use core::fmt;

use crate::decision::{CapacityExceeded, Decision, Denied, Snapshot};
use crate::limiter::{Algorithm, Limiter};
use crate::sync::{AtomicU32, Ordering};

/// Default `retry_after` of a refusal: 1 ms (see the
/// [module documentation](self)).
pub const DEFAULT_RETRY_HINT_NANOS: u64 = 1_000_000;

/// The concurrency algorithm: at most `limit` permits in flight.
///
/// A small `Copy` configuration applied to a [`ConcurrencyState`]; the
/// self-contained limiter is [`ConcurrencyLimiter`].
///
/// # State protocol (for model checking)
///
/// The state is one `AtomicU32`, the permits in flight. Acquiring `n` is a
/// `compare_exchange_weak` loop from the loaded value `v` to `v + n`, taken
/// only if `v + n ≤ limit` (otherwise refuse without writing). Releasing `n`
/// is a `compare_exchange_weak` loop to `v − min(n, v)`. All `Relaxed`: the
/// word publishes no other data. (Guarded work that needs to see another
/// thread's results must synchronise through its own means.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Concurrency {
    limit: u32,
    retry_hint: u64,
}

impl Concurrency {
    /// At most `limit` permits in flight.
    ///
    /// # Errors
    /// [`ConcurrencyError::ZeroLimit`] for 0.
    pub const fn new(limit: u32) -> Result<Self, ConcurrencyError> {
        if limit == 0 {
            return Err(ConcurrencyError::ZeroLimit);
        }
        Ok(Self {
            limit,
            retry_hint: DEFAULT_RETRY_HINT_NANOS,
        })
    }

    /// Sets the `retry_after` reported by refusals and `time_until_ready`
    /// (see the [module documentation](self)).
    #[must_use]
    pub const fn with_retry_hint(self, retry_hint_nanos: u64) -> Self {
        Self {
            retry_hint: retry_hint_nanos,
            ..self
        }
    }

    /// The most permits in flight at once.
    #[must_use]
    pub const fn limit(&self) -> u32 {
        self.limit
    }

    /// The retry hint in nanoseconds.
    #[must_use]
    pub const fn retry_hint_nanos(&self) -> u64 {
        self.retry_hint
    }

    /// Takes `n` permits from `state` behind an RAII guard.
    ///
    /// # Errors
    /// [`AcquireError::Denied`] if fewer than `n` are free now;
    /// [`AcquireError::CapacityExceeded`] if `n > limit`.
    pub fn try_acquire<'a>(
        &self,
        state: &'a ConcurrencyState,
        n: u32,
    ) -> Result<ConcurrencyPermit<'a>, AcquireError> {
        match self.check_n(state, n, 0) {
            Ok(Decision::Allowed(_)) => Ok(ConcurrencyPermit { state, permits: n }),
            Ok(Decision::Denied(d)) => Err(AcquireError::Denied(d)),
            Err(e) => Err(AcquireError::CapacityExceeded(e)),
        }
    }

    #[inline]
    fn snapshot_of(&self, in_flight: u32) -> Snapshot {
        let reset = if in_flight == 0 { 0 } else { self.retry_hint };
        Snapshot::new(self.limit, self.limit.saturating_sub(in_flight), reset)
    }
}

/// A concurrency limiter's state: one atomic `u32`, the permits in flight.
#[derive(Debug, Default)]
#[repr(transparent)]
pub struct ConcurrencyState {
    in_flight: AtomicU32,
}

impl ConcurrencyState {
    crate::sync::const_fn_unless_loom! {
        /// Nothing in flight.
        #[must_use]
        pub fn new() -> Self {
            Self { in_flight: AtomicU32::new(0) }
        }
    }

    /// Permits currently in flight.
    #[must_use]
    pub fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Gives back `n` permits (never below zero).
    pub fn release(&self, n: u32) {
        let _ = self
            .in_flight
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                (v != 0 && n != 0).then(|| v - core::cmp::min(v, n))
            });
    }
}

impl Algorithm for Concurrency {
    type State = ConcurrencyState;

    #[inline]
    fn new_state(&self) -> ConcurrencyState {
        ConcurrencyState::new()
    }

    #[inline]
    fn capacity(&self) -> u32 {
        self.limit
    }

    fn check_n(
        &self,
        state: &ConcurrencyState,
        n: u32,
        _now: u64,
    ) -> Result<Decision, CapacityExceeded> {
        if n > self.limit {
            return Err(CapacityExceeded {
                requested: n,
                capacity: self.limit,
            });
        }
        let mut v = state.in_flight.load(Ordering::Relaxed);
        loop {
            // v ≤ limit (only this type writes), n ≤ limit: no overflow in u64
            if v as u64 + n as u64 > self.limit as u64 {
                return Ok(Decision::Denied(Denied::new(
                    self.retry_hint,
                    self.snapshot_of(v),
                )));
            }
            if n == 0 {
                return Ok(Decision::Allowed(self.snapshot_of(v)));
            }
            match state.in_flight.compare_exchange_weak(
                v,
                v + n,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(Decision::Allowed(self.snapshot_of(v + n))),
                Err(current) => v = current,
            }
        }
    }

    #[inline]
    fn refund(&self, state: &ConcurrencyState, n: u32, _now: u64) {
        state.release(n);
    }

    #[inline]
    fn snapshot(&self, state: &ConcurrencyState, _now: u64) -> Snapshot {
        self.snapshot_of(state.in_flight())
    }

    fn time_until_ready(
        &self,
        state: &ConcurrencyState,
        n: u32,
        _now: u64,
    ) -> Result<u64, CapacityExceeded> {
        if n > self.limit {
            return Err(CapacityExceeded {
                requested: n,
                capacity: self.limit,
            });
        }
        let v = state.in_flight();
        Ok(if v as u64 + n as u64 > self.limit as u64 {
            self.retry_hint
        } else {
            0
        })
    }

    #[inline]
    fn is_idle(&self, state: &ConcurrencyState, _now: u64) -> bool {
        state.in_flight() == 0
    }
}

/// `n` permits held; dropping the permit gives them back.
///
/// See the [module documentation](self) for what `mem::forget` does.
#[must_use = "dropping the permit releases it at once"]
#[derive(Debug)]
pub struct ConcurrencyPermit<'a> {
    state: &'a ConcurrencyState,
    permits: u32,
}

impl ConcurrencyPermit<'_> {
    /// The permits this guard holds.
    #[must_use]
    pub const fn permits(&self) -> u32 {
        self.permits
    }

    /// Detaches the permits from the guard: they stay in flight until
    /// someone calls `release(n)` with the returned count.
    #[must_use = "the returned permits stay in flight until released"]
    pub fn into_raw(self) -> u32 {
        let n = self.permits;
        core::mem::forget(self);
        n
    }

    /// Gives back `n` of the held permits now, keeping the rest.
    pub fn release_some(&mut self, n: u32) {
        let n = core::cmp::min(n, self.permits);
        self.state.release(n);
        self.permits -= n;
    }
}

impl Drop for ConcurrencyPermit<'_> {
    fn drop(&mut self) {
        self.state.release(self.permits);
    }
}

/// At most `limit` permits in flight: [`Concurrency`] with its state.
///
/// `const`-constructible, so it can be a `static`. Implements [`Limiter`]
/// (with `check_n` taking permits without a guard and `refund` releasing
/// them) so it chains with the rate limiters.
#[derive(Debug)]
pub struct ConcurrencyLimiter {
    algorithm: Concurrency,
    state: ConcurrencyState,
}

impl ConcurrencyLimiter {
    crate::sync::const_fn_unless_loom! {
        /// At most `limit` permits in flight.
        ///
        /// # Errors
        /// [`ConcurrencyError::ZeroLimit`] for 0.
        pub fn new(limit: u32) -> Result<Self, ConcurrencyError> {
            match Concurrency::new(limit) {
                Ok(algorithm) => Ok(Self::from_algorithm(algorithm)),
                Err(e) => Err(e),
            }
        }
    }

    crate::sync::const_fn_unless_loom! {
        /// A limiter running `algorithm` (for a custom retry hint).
        #[must_use]
        pub fn from_algorithm(algorithm: Concurrency) -> Self {
            Self { algorithm, state: ConcurrencyState::new() }
        }
    }

    /// Takes `n` permits behind an RAII guard that gives them back on drop.
    ///
    /// # Errors
    /// [`AcquireError::Denied`] if fewer than `n` are free now;
    /// [`AcquireError::CapacityExceeded`] if `n > limit`.
    pub fn try_acquire(&self, n: u32) -> Result<ConcurrencyPermit<'_>, AcquireError> {
        self.algorithm.try_acquire(&self.state, n)
    }

    /// Permits currently in flight.
    #[must_use]
    pub fn in_flight(&self) -> u32 {
        self.state.in_flight()
    }

    /// Permits free now.
    #[must_use]
    pub fn available(&self) -> u32 {
        self.algorithm.limit.saturating_sub(self.in_flight())
    }

    /// Gives back `n` permits taken without a guard (`check_n`) or detached
    /// by [`ConcurrencyPermit::into_raw`] or leaked. Never below zero.
    pub fn release(&self, n: u32) {
        self.state.release(n);
    }

    /// The algorithm (configuration).
    #[must_use]
    pub const fn algorithm(&self) -> &Concurrency {
        &self.algorithm
    }

    /// The state.
    #[must_use]
    pub const fn state(&self) -> &ConcurrencyState {
        &self.state
    }
}

impl Limiter for ConcurrencyLimiter {
    #[inline]
    fn capacity(&self) -> u32 {
        self.algorithm.limit
    }
    #[inline]
    fn check_n(&self, n: u32, now: u64) -> Result<Decision, CapacityExceeded> {
        self.algorithm.check_n(&self.state, n, now)
    }
    #[inline]
    fn refund(&self, n: u32, _now: u64) {
        self.state.release(n);
    }
    #[inline]
    fn snapshot(&self, now: u64) -> Snapshot {
        self.algorithm.snapshot(&self.state, now)
    }
    #[inline]
    fn time_until_ready(&self, n: u32, now: u64) -> Result<u64, CapacityExceeded> {
        self.algorithm.time_until_ready(&self.state, n, now)
    }
    #[inline]
    fn is_idle(&self, _now: u64) -> bool {
        self.in_flight() == 0
    }
}

#[cfg(feature = "std")]
mod owned {
    use std::sync::Arc;

    use super::{AcquireError, ConcurrencyLimiter};

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
        /// let limiter = Arc::new(ConcurrencyLimiter::new(1)?);
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
            let permits = self.try_acquire(n)?.into_raw();
            Ok(OwnedConcurrencyPermit {
                limiter: Arc::clone(self),
                permits,
            })
        }
    }
}

#[cfg(feature = "std")]
pub use owned::OwnedConcurrencyPermit;

/// Why a [`Concurrency`] limiter could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConcurrencyError {
    /// A limit of zero permits: nothing could ever run.
    ZeroLimit,
}

impl fmt::Display for ConcurrencyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroLimit => f.write_str("concurrency limit must be at least 1"),
        }
    }
}

impl core::error::Error for ConcurrencyError {}

/// Why [`ConcurrencyLimiter::try_acquire`] returned no permit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AcquireError {
    /// Too few permits are free now.
    Denied(Denied),
    /// More permits than the limit: can never succeed.
    CapacityExceeded(CapacityExceeded),
}

impl fmt::Display for AcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Denied(_) => f.write_str("concurrency limit reached"),
            Self::CapacityExceeded(e) => e.fmt(f),
        }
    }
}

impl core::error::Error for AcquireError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_limit_is_an_error() {
        assert_eq!(
            ConcurrencyLimiter::new(0).map(|_| ()),
            Err(ConcurrencyError::ZeroLimit)
        );
    }

    #[test]
    fn permits_return_on_drop_and_release_some() {
        let l = ConcurrencyLimiter::new(5).unwrap();
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
        let l = ConcurrencyLimiter::new(2).unwrap();
        let n = l.try_acquire(2).unwrap().into_raw();
        assert_eq!(l.in_flight(), 2);
        l.release(n);
        assert!(l.is_idle(0));
        l.release(10); // never below zero
        assert_eq!(l.in_flight(), 0);
    }

    #[test]
    fn refusal_reports_the_retry_hint() {
        let l =
            ConcurrencyLimiter::from_algorithm(Concurrency::new(1).unwrap().with_retry_hint(5_000));
        assert!(l.check(0).is_allowed());
        let d = l.check(0);
        assert_eq!(d.denied().unwrap().retry_after_nanos(), 5_000);
        assert_eq!(l.time_until_ready(1, 0), Ok(5_000));
        assert_eq!(l.snapshot(0).reset_after_nanos(), 5_000);
        l.refund(1, 0);
        assert_eq!(l.time_until_ready(1, 0), Ok(0));
    }
}
