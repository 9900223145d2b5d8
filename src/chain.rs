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
//! - the capacity is the smallest capacity; a request above it is
//!   [`CapacityExceeded`] before any member is touched.
//!
//! `Chain` is a [`Limiter`] when its members are limiters, and an
//! [`Algorithm`] (with state `(A::State, B::State)`) when they are
//! algorithms, so a keyed table can store a chained state per key.
//!
//! ```
//! use core::time::Duration;
//! use tollgate::{Bucket, Chain, FixedWindow, Limiter, Quota};
//!
//! // 10 per second with bursts of 5, and at most 20 per minute.
//! let chain = Chain::new(
//!     Bucket::token_bucket(Quota::per_second(10)?.allow_burst(5)?),
//!     Bucket::new(FixedWindow::new(20, Duration::from_secs(60))?),
//! );
//! assert!(chain.check_n(5, 0)?.is_allowed());
//! let refused = chain.check(0); // the bucket refuses: 100 ms
//! assert_eq!(refused.retry_after(), Duration::from_millis(100));
//! assert_eq!(chain.snapshot(0).remaining(), 0);
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

use crate::decision::{CapacityExceeded, Decision, Denied, Snapshot};
use crate::limiter::{Algorithm, Limiter};

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
pub fn most_restrictive(a: &Snapshot, b: &Snapshot) -> Snapshot {
    let reset = core::cmp::max(a.reset_after_nanos(), b.reset_after_nanos());
    // `remaining` may divide: compute each once
    let (ra, rb) = (a.remaining(), b.remaining());
    if rb < ra {
        Snapshot::new(b.limit(), rb, reset)
    } else {
        Snapshot::new(a.limit(), ra, reset)
    }
}

fn denied(retry_after: u64, a: &Snapshot, b: &Snapshot) -> Decision {
    Decision::Denied(Denied::new(retry_after, most_restrictive(a, b)))
}

impl<A: Limiter, B: Limiter> Limiter for Chain<A, B> {
    fn capacity(&self) -> u32 {
        core::cmp::min(self.first.capacity(), self.second.capacity())
    }

    fn check_n(&self, n: u32, now: u64) -> Result<Decision, CapacityExceeded> {
        let capacity = self.capacity();
        if n > capacity {
            return Err(CapacityExceeded {
                requested: n,
                capacity,
            });
        }
        let first = match self.first.check_n(n, now)? {
            Decision::Allowed(s) => s,
            Decision::Denied(d) => {
                // nothing taken anywhere; the wait is the longer of the two
                let wait_b = self.second.time_until_ready(n, now)?;
                let retry = core::cmp::max(d.retry_after_nanos(), wait_b);
                return Ok(denied(retry, d.snapshot(), &self.second.snapshot(now)));
            }
        };
        match self.second.check_n(n, now) {
            Ok(Decision::Allowed(s)) => Ok(Decision::Allowed(most_restrictive(&first, &s))),
            Ok(Decision::Denied(d)) => {
                self.first.refund(n, now);
                // after the refund, the first member's own wait (normally 0)
                let wait_a = self.first.time_until_ready(n, now).unwrap_or(u64::MAX);
                let retry = core::cmp::max(d.retry_after_nanos(), wait_a);
                Ok(denied(retry, &self.first.snapshot(now), d.snapshot()))
            }
            Err(e) => {
                // a member under-reported its capacity; still cost nothing
                self.first.refund(n, now);
                Err(CapacityExceeded {
                    requested: e.requested,
                    capacity: core::cmp::min(capacity, e.capacity),
                })
            }
        }
    }

    fn refund(&self, n: u32, now: u64) {
        self.first.refund(n, now);
        self.second.refund(n, now);
    }

    fn snapshot(&self, now: u64) -> Snapshot {
        most_restrictive(&self.first.snapshot(now), &self.second.snapshot(now))
    }

    fn time_until_ready(&self, n: u32, now: u64) -> Result<u64, CapacityExceeded> {
        let capacity = self.capacity();
        if n > capacity {
            return Err(CapacityExceeded {
                requested: n,
                capacity,
            });
        }
        Ok(core::cmp::max(
            self.first.time_until_ready(n, now)?,
            self.second.time_until_ready(n, now)?,
        ))
    }

    fn is_idle(&self, now: u64) -> bool {
        self.first.is_idle(now) && self.second.is_idle(now)
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
    fn check_n(&self, n: u32, now: u64) -> Result<Decision, CapacityExceeded> {
        self.0.check_n(self.1, n, now)
    }
    #[inline]
    fn refund(&self, n: u32, now: u64) {
        self.0.refund(self.1, n, now);
    }
    #[inline]
    fn snapshot(&self, now: u64) -> Snapshot {
        self.0.snapshot(self.1, now)
    }
    #[inline]
    fn time_until_ready(&self, n: u32, now: u64) -> Result<u64, CapacityExceeded> {
        self.0.time_until_ready(self.1, n, now)
    }
    #[inline]
    fn is_idle(&self, now: u64) -> bool {
        self.0.is_idle(self.1, now)
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

    fn new_state(&self) -> Self::State {
        (self.first.new_state(), self.second.new_state())
    }

    fn capacity(&self) -> u32 {
        core::cmp::min(self.first.capacity(), self.second.capacity())
    }

    fn check_n(&self, state: &Self::State, n: u32, now: u64) -> Result<Decision, CapacityExceeded> {
        self.applied(state).check_n(n, now)
    }

    fn refund(&self, state: &Self::State, n: u32, now: u64) {
        self.applied(state).refund(n, now);
    }

    fn snapshot(&self, state: &Self::State, now: u64) -> Snapshot {
        self.applied(state).snapshot(now)
    }

    fn time_until_ready(
        &self,
        state: &Self::State,
        n: u32,
        now: u64,
    ) -> Result<u64, CapacityExceeded> {
        self.applied(state).time_until_ready(n, now)
    }

    fn is_idle(&self, state: &Self::State, now: u64) -> bool {
        self.applied(state).is_idle(now)
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
            FixedWindow::from_nanos(2, 1_000_000_000).unwrap(),
        );
        let key_a = alg.new_state();
        let key_b = alg.new_state();
        assert!(alg.check_n(&key_a, 2, 0).unwrap().is_allowed());
        assert!(alg.check_n(&key_a, 1, 0).unwrap().is_denied());
        assert!(alg.check_n(&key_b, 1, 0).unwrap().is_allowed());
        assert!(!alg.is_idle(&key_a, 0));
        assert!(alg.is_idle(&key_a, 1_000_000_000));
    }

    #[test]
    fn capacity_is_checked_before_touching_members() {
        let chain = Chain::new(
            Bucket::token_bucket(Quota::per_second(10).unwrap()),
            Bucket::token_bucket(Quota::per_second(3).unwrap()),
        );
        assert_eq!(
            chain.check_n(4, 0),
            Err(CapacityExceeded {
                requested: 4,
                capacity: 3
            })
        );
        assert!(chain.is_idle(0));
    }
}
