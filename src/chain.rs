//! Chains: several limiters that must all allow a request.
//!
//! [`Chain<A, B>`] asks `A`, then `B`. If `B` refuses after `A` admitted,
//! `A` is refunded at once, so **a refused request costs nothing** in any
//! limiter of the chain (.NET's chained limiter keeps the permits of the
//! limiters that admitted: dotnet/runtime#113314). Chains nest to any
//! length: `Chain::new(a, b).then(c)` is `Chain<Chain<A, B>, C>`.
//!
//! The chain's answer is the most restrictive one:
//! - a refusal's `retry_after` is the *largest* wait among the limiters
//!   (the chain admits the request only when every member would), computed
//!   without taking anything from the members that did not refuse;
//! - the snapshot reports the *smallest* `remaining` (with that limiter's
//!   limit) and the *largest* `reset_after`;
//! - the capacity is the smallest capacity; a request above it is refused
//!   [`never`](crate::Refusal::is_never) before any member is touched.

//!
//! `Chain` is a [`Limiter`] when its members are limiters, and an
//! [`Algorithm`] (with state `(A::State, B::State)`) when they are
//! algorithms, so a keyed table can store a chained state per key.
//!
//! ```
//! use core::time::Duration;
//! use tollgate::{Bucket, Chain, FixedWindow, Limiter, Quota, Timestamp};
//!
//! // 10 per second with bursts of 5, and at most 20 per minute.
//! let chain = Chain::new(
//!     Bucket::token_bucket(Quota::per_second(10)?.with_burst(5)?),
//!     Bucket::new(FixedWindow::new(20, Duration::from_secs(60))?),
//! );
//! let now = Timestamp::ZERO;
//! assert!(chain.check_n(5, now).is_ok());
//! let refused = chain.check(now).unwrap_err(); // the bucket refuses: 100 ms
//! assert_eq!(refused.retry_after(), Duration::from_millis(100));
//! assert_eq!(chain.snapshot(now).remaining(), 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Concurrency
//!
//! Each member is atomic on its own; the chain is not one atomic step. A
//! concurrent observer can see `A`'s permits taken for a request that `B`
//! then refuses (until the refund), so under contention a request may be
//! refused by `A` because of a request that ends up refused by `B`. That
//! errs on the side of admitting less; it never admits more than any
//! member allows.

use core::time::Duration;

use crate::limiter::{Algorithm, Limiter};
use crate::live::Inheritance;
use crate::refusal::Refusal;
use crate::snapshot::Snapshot;
use crate::time::{duration_to_nanos, Timestamp};

/// Two limiters that must both allow; nest for more. See the
/// [module documentation](self).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Chain<A, B> {
    first: A,
    second: B,
}

impl<A, B> Chain<A, B> {
    /// `first`, then `second`.
    #[must_use]
    pub const fn new(first: A, second: B) -> Self {
        Self { first, second }
    }

    /// Appends `next`: `Chain<Chain<A, B>, C>`.
    #[must_use]
    pub const fn then<C>(self, next: C) -> Chain<Self, C> {
        Chain::new(self, next)
    }

    /// The first member.
    #[must_use]
    pub const fn first(&self) -> &A {
        &self.first
    }

    /// The second member.
    #[must_use]
    pub const fn second(&self) -> &B {
        &self.second
    }
}

/// The more restrictive of two snapshots: the smaller `remaining` (with its
/// limit) and the larger `reset_after`.
#[must_use]
pub(crate) fn most_restrictive(a: &Snapshot, b: &Snapshot) -> Snapshot {
    let reset = core::cmp::max(a.reset_after_nanos(), b.reset_after_nanos());
    // `remaining` may divide: compute each once
    let (ra, rb) = (a.remaining(), b.remaining());
    if rb < ra {
        Snapshot::exact(b.limit(), rb, reset)
    } else {
        Snapshot::exact(a.limit(), ra, reset)
    }
}

fn denied(retry_after: u64, a: &Snapshot, b: &Snapshot) -> Refusal<'static> {
    Refusal::from_nanos(retry_after, most_restrictive(a, b))
}

impl<A: Limiter, B: Limiter> Limiter for Chain<A, B> {
    fn capacity(&self) -> u32 {
        core::cmp::min(self.first.capacity(), self.second.capacity())
    }

    fn check_n(&self, n: u32, now: Timestamp) -> Result<(), Refusal<'static>> {
        let capacity = self.capacity();
        if n > capacity {
            return Err(Refusal::never(n, self.snapshot(now)));
        }
        if let Err(d) = self.first.check_n(n, now) {
            if d.is_never() {
                return Err(d);
            }
            // nothing taken anywhere; the wait is the longer of the two
            let wait_b = duration_to_nanos(self.second.time_until_ready(n, now)?);
            let retry = core::cmp::max(d.retry_after_nanos(), wait_b);
            return Err(denied(retry, d.snapshot(), &self.second.snapshot(now)));
        }
        match self.second.check_n(n, now) {
            Ok(()) => Ok(()),
            Err(d) if !d.is_never() => {
                self.first.refund(n, now);
                // after the refund, the first member's own wait (normally 0)
                let wait_a = self
                    .first
                    .time_until_ready(n, now)
                    .map_or(u64::MAX, duration_to_nanos);
                let retry = core::cmp::max(d.retry_after_nanos(), wait_a);
                Err(denied(retry, &self.first.snapshot(now), d.snapshot()))
            }
            Err(e) => {
                // a member under-reported its capacity; still cost nothing
                self.first.refund(n, now);
                Err(e)
            }
        }
    }

    fn refund(&self, n: u32, now: Timestamp) {
        self.first.refund(n, now);
        self.second.refund(n, now);
    }

    fn snapshot(&self, now: Timestamp) -> Snapshot {
        most_restrictive(&self.first.snapshot(now), &self.second.snapshot(now))
    }

    fn time_until_ready(&self, n: u32, now: Timestamp) -> Result<Duration, Refusal<'static>> {
        let capacity = self.capacity();
        if n > capacity {
            return Err(Refusal::never(n, self.snapshot(now)));
        }
        Ok(core::cmp::max(
            self.first.time_until_ready(n, now)?,
            self.second.time_until_ready(n, now)?,
        ))
    }

    fn is_idle(&self, now: Timestamp) -> bool {
        self.first.is_idle(now) && self.second.is_idle(now)
    }

    fn required_resolution(&self) -> Duration {
        finest(
            self.first.required_resolution(),
            self.second.required_resolution(),
        )
    }
}

/// The finer of two required resolutions (zero means "no time step").
fn finest(a: Duration, b: Duration) -> Duration {
    match (a.is_zero(), b.is_zero()) {
        (true, _) => b,
        (_, true) => a,
        _ => core::cmp::min(a, b),
    }
}

/// An algorithm applied to one state, seen as a [`Limiter`].
struct Applied<'a, A: Algorithm>(&'a A, &'a A::State);

impl<A: Algorithm> Limiter for Applied<'_, A> {
    #[inline]
    fn capacity(&self) -> u32 {
        self.0.capacity()
    }
    #[inline]
    fn check_n(&self, n: u32, now: Timestamp) -> Result<(), Refusal<'static>> {
        self.0.check_n(self.1, n, now).map(|_| ())
    }
    #[inline]
    fn refund(&self, n: u32, now: Timestamp) {
        self.0.refund(self.1, n, now);
    }
    #[inline]
    fn snapshot(&self, now: Timestamp) -> Snapshot {
        self.0.snapshot(self.1, now)
    }
    #[inline]
    fn time_until_ready(&self, n: u32, now: Timestamp) -> Result<Duration, Refusal<'static>> {
        self.0.time_until_ready(self.1, n, now)
    }
    #[inline]
    fn is_idle(&self, now: Timestamp) -> bool {
        self.0.is_idle(self.1, now)
    }
    #[inline]
    fn required_resolution(&self) -> Duration {
        self.0.required_resolution()
    }
}

impl<A: Algorithm, B: Algorithm> Chain<A, B> {
    #[inline]
    fn applied<'a>(
        &'a self,
        state: &'a (A::State, B::State),
    ) -> Chain<Applied<'a, A>, Applied<'a, B>> {
        Chain::new(
            Applied(&self.first, &state.0),
            Applied(&self.second, &state.1),
        )
    }
}

impl<A: Algorithm, B: Algorithm> Algorithm for Chain<A, B> {
    type State = (A::State, B::State);

    #[cfg(not(loom))]
    #[allow(clippy::declare_interior_mutable_const)]
    const FRESH_STATE: Self::State = (A::FRESH_STATE, B::FRESH_STATE);

    fn new_state(&self) -> Self::State {
        (self.first.new_state(), self.second.new_state())
    }

    fn capacity(&self) -> u32 {
        core::cmp::min(self.first.capacity(), self.second.capacity())
    }

    fn check_n(
        &self,
        state: &Self::State,
        n: u32,
        now: Timestamp,
    ) -> Result<Timestamp, Refusal<'static>> {
        self.applied(state).check_n(n, now)?;
        Ok(self.snapshot(state, now).full_at(now.as_nanos()))
    }

    fn refund(&self, state: &Self::State, n: u32, now: Timestamp) {
        self.applied(state).refund(n, now);
    }

    fn snapshot(&self, state: &Self::State, now: Timestamp) -> Snapshot {
        self.applied(state).snapshot(now)
    }

    fn time_until_ready(
        &self,
        state: &Self::State,
        n: u32,
        now: Timestamp,
    ) -> Result<Duration, Refusal<'static>> {
        self.applied(state).time_until_ready(n, now)
    }

    fn is_idle(&self, state: &Self::State, now: Timestamp) -> bool {
        self.applied(state).is_idle(now)
    }

    fn required_resolution(&self) -> Duration {
        finest(
            self.first.required_resolution(),
            self.second.required_resolution(),
        )
    }

    fn carry_over(&self, next: &Self, state: &Self::State, how: Inheritance, now: Timestamp) {
        self.first.carry_over(&next.first, &state.0, how, now);
        self.second.carry_over(&next.second, &state.1, how, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Bucket, FixedWindow, Gcra, Quota};

    #[test]
    fn chain_as_algorithm_keeps_state_per_key() {
        let alg = Chain::new(
            Gcra::token_bucket(Quota::per_second(10).unwrap()),
            FixedWindow::new(2, Duration::from_secs(1)).unwrap(),
        );
        let key_a = alg.new_state();
        let key_b = alg.new_state();
        let zero = Timestamp::ZERO;
        assert!(alg.check_n(&key_a, 2, zero).is_ok());
        assert!(alg.check_n(&key_a, 1, zero).is_err());
        assert!(alg.check_n(&key_b, 1, zero).is_ok());
        assert!(!alg.is_idle(&key_a, zero));
        assert!(alg.is_idle(&key_a, Timestamp::from_secs(1)));
        assert_eq!(alg.required_resolution(), Duration::from_millis(100));
    }

    #[test]
    fn capacity_is_checked_before_touching_members() {
        let chain = Chain::new(
            Bucket::token_bucket(Quota::per_second(10).unwrap()),
            Bucket::token_bucket(Quota::per_second(3).unwrap()),
        );
        let never = chain.check_n(4, Timestamp::ZERO).unwrap_err();
        assert!(never.is_never());
        assert_eq!((never.requested(), never.limit()), (4, 3));
        assert!(chain.is_idle(Timestamp::ZERO));
    }
}
