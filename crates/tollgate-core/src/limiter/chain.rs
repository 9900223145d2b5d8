//! Chains: several limiters that must all admit a request, all or nothing.
//!
//! [`Chain<A, B>`] asks `A`, then `B`; [`Limiter::and`] builds one. If `B`
//! refuses after `A` admitted, `A`'s permit is given back at once
//! ([`Limiter::cancel`]), so **a refused request costs nothing** in any
//! limiter of the chain (.NET's chained limiter keeps the permits of the
//! limiters that admitted: dotnet/runtime#113314). Chains nest to any
//! length: `a.and(b).and(c)` is `Chain<Chain<A, B>, C>`. Any two limiters
//! over the same key chain — direct buckets (`K = ()`), keyed tables, a
//! `tollgate::partitioned::Partitioned` limiter (ASP.NET
//! Core's global limiter and endpoint policy), or one you write.
//!
//! The chain's answer:
//! - its permit is both members' permits, `(A::Permit, B::Permit)`;
//! - a refusal is the refusing member's, named by it, with the *largest*
//!   wait of the two (the chain admits only when every member would,
//!   computed without taking anything from the member that did not
//!   refuse) and [`stage`](crate::Refusal::stage) counting the members
//!   before it ([`Limiter::stages`]);
//! - a request that a member can [never](crate::Refusal::is_never) grant is
//!   refused so, and costs nothing;
//! - the [snapshot](Limiter::snapshot) is the member with the fewest
//!   permits remaining: its own limit, remaining and reset, consistent for
//!   headers.
//!
//! `Chain` is a [`Limiter`] when its members are limiters, and an
//! [`Algorithm`] (with state `(A::State, B::State)`) when they are
//! algorithms, so a keyed table can store a chained state per key.
//!
//! ```
//! use core::time::Duration;
//! use tollgate::{Bucket, FixedWindow, Limiter, Quota, Timestamp};
//!
//! // 10 per second with bursts of 5, and at most 20 per minute.
//! let chain = Bucket::token_bucket(Quota::per_second(10)?.with_burst(5)?)
//!     .and(Bucket::new(FixedWindow::new(20, Duration::from_secs(60))?));
//! let now = Timestamp::ZERO;
//! assert!(chain.try_acquire_n(&(), 5, now).is_ok());
//! let refused = chain.try_acquire(&(), now).unwrap_err(); // the bucket refuses: 100 ms
//! assert_eq!(refused.retry_after(), Duration::from_millis(100));
//! assert_eq!(refused.stage(), 0); // the first member
//! assert_eq!(chain.snapshot(&(), now).remaining(), 0);
//! // the window did not pay for the refused request
//! assert_eq!(chain.second().snapshot(now).remaining(), 15);
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

use super::{Algorithm, Bucket, BucketRef, Inheritance, Limiter};
use crate::refusal::Refusal;
use crate::snapshot::Snapshot;
use crate::time::{Timestamp, duration_to_nanos};

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

/// The snapshot of the member with the fewest permits remaining (on a tie,
/// the one that is full again later): one member's consistent limit,
/// remaining and reset, for headers.
fn tighter(a: Snapshot, b: Snapshot) -> Snapshot {
    let (ra, rb) = (a.remaining(), b.remaining());
    if rb < ra || (rb == ra && b.reset_after_nanos() > a.reset_after_nanos()) {
        b
    } else {
        a
    }
}

impl<K: ?Sized, A: Limiter<K>, B: Limiter<K>> Limiter<K> for Chain<A, B> {
    type Permit = (A::Permit, B::Permit);

    #[inline]
    fn capacity(&self, key: &K) -> u32 {
        core::cmp::min(self.first.capacity(key), self.second.capacity(key))
    }

    #[inline]
    fn try_acquire_n(
        &self,
        key: &K,
        n: u32,
        now: Timestamp,
    ) -> Result<Self::Permit, Refusal<'static>> {
        let a = match self.first.try_acquire_n(key, n, now) {
            Ok(a) => a,
            Err(r) if r.is_never() => return Err(r),
            // nothing taken; the chain admits only when both would
            Err(r) => {
                return match self.second.time_until_ready(key, n, now) {
                    Ok(wait) => Err(r.waiting_at_least(duration_to_nanos(wait))),
                    Err(never) => Err(never.later_by(self.first.stages())),
                };
            }
        };
        match self.second.try_acquire_n(key, n, now) {
            Ok(b) => Ok((a, b)),
            Err(r) => {
                // a refused request costs nothing
                self.first.cancel(key, a, now);
                let r = r.later_by(self.first.stages());
                if r.is_never() {
                    return Err(r);
                }
                // after the refund, the first member's own wait (normally 0)
                Err(match self.first.time_until_ready(key, n, now) {
                    Ok(wait) => r.waiting_at_least(duration_to_nanos(wait)),
                    Err(_) => r,
                })
            }
        }
    }

    #[inline]
    fn cancel(&self, key: &K, permit: Self::Permit, now: Timestamp) {
        self.first.cancel(key, permit.0, now);
        self.second.cancel(key, permit.1, now);
    }

    #[inline]
    fn refund(&self, key: &K, n: u32, now: Timestamp) {
        self.first.refund(key, n, now);
        self.second.refund(key, n, now);
    }

    /// The member with the fewest permits remaining (on a tie, the one full
    /// again later).
    fn snapshot(&self, key: &K, now: Timestamp) -> Snapshot {
        tighter(
            self.first.snapshot(key, now),
            self.second.snapshot(key, now),
        )
    }

    fn time_until_ready(
        &self,
        key: &K,
        n: u32,
        now: Timestamp,
    ) -> Result<Duration, Refusal<'static>> {
        let a = self.first.time_until_ready(key, n, now)?;
        let b = self
            .second
            .time_until_ready(key, n, now)
            .map_err(|r| r.later_by(self.first.stages()))?;
        Ok(core::cmp::max(a, b))
    }

    #[inline]
    fn stages(&self) -> usize {
        self.first.stages().saturating_add(self.second.stages())
    }

    fn time_until_ready_after(
        &self,
        key: &K,
        ahead: u64,
        n: u32,
        now: Timestamp,
    ) -> Option<Duration> {
        let a = self.first.time_until_ready_after(key, ahead, n, now)?;
        let b = self.second.time_until_ready_after(key, ahead, n, now)?;
        Some(core::cmp::max(a, b))
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

impl<A: Algorithm, B: Algorithm> Chain<A, B> {
    #[inline]
    fn applied<'a>(
        &'a self,
        state: &'a (A::State, B::State),
    ) -> Chain<BucketRef<'a, A>, BucketRef<'a, B>> {
        // each member's algorithm applied to its own state: a bucket
        Chain::new(
            BucketRef::new(&self.first, &state.0),
            BucketRef::new(&self.second, &state.1),
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
        self.applied(state)
            .try_acquire_n(&(), n, now)
            .map(|(a, b)| core::cmp::max(a.full_at(), b.full_at()))
    }

    fn refund(&self, state: &Self::State, n: u32, now: Timestamp) {
        self.applied(state).refund(&(), n, now);
    }

    fn snapshot(&self, state: &Self::State, now: Timestamp) -> Snapshot {
        self.applied(state).snapshot(&(), now)
    }

    fn time_until_ready(
        &self,
        state: &Self::State,
        n: u32,
        now: Timestamp,
    ) -> Result<Duration, Refusal<'static>> {
        self.applied(state).time_until_ready(&(), n, now)
    }

    fn is_idle(&self, state: &Self::State, now: Timestamp) -> bool {
        self.first.is_idle(&state.0, now) && self.second.is_idle(&state.1, now)
    }

    /// Only when both members' capacity comes back at a release (a member
    /// that refills with time frees the chain's capacity with time too).
    fn frees_on_release(&self) -> bool {
        self.first.frees_on_release() && self.second.frees_on_release()
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

impl<A: Algorithm> Bucket<A> {
    /// This bucket, then `next`: both must admit, all or nothing
    /// ([`Limiter::and`], callable without the trait in scope).
    #[inline]
    pub fn and<B: Limiter>(self, next: B) -> Chain<Self, B> {
        Chain::new(self, next)
    }
}

impl<A: Algorithm> BucketRef<'_, A> {
    /// This bucket, then `next`: both must admit, all or nothing
    /// ([`Limiter::and`], callable without the trait in scope).
    #[inline]
    pub fn and<B: Limiter>(self, next: B) -> Chain<Self, B> {
        Chain::new(self, next)
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
    fn a_request_above_a_members_capacity_costs_nothing() {
        let chain = Chain::new(
            Bucket::token_bucket(Quota::per_second(10).unwrap()),
            Bucket::token_bucket(Quota::per_second(3).unwrap()),
        );
        let never = chain.try_acquire_n(&(), 4, Timestamp::ZERO).unwrap_err();
        assert!(never.is_never());
        assert_eq!((never.requested(), never.limit()), (4, 3));
        // the first member's permits went back: both are full
        assert_eq!(chain.first().snapshot(Timestamp::ZERO).remaining(), 10);
        assert_eq!(chain.second().snapshot(Timestamp::ZERO).remaining(), 3);
        assert_eq!(never.stage(), 1);
    }
}
