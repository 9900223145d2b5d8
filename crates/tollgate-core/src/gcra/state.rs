//! The atomic state [`GcraState`], and the [`Algorithm`] that runs the
//! GCRA step on it with a compare-and-swap.

use core::time::Duration;

use super::{Gcra, Outcome};
use crate::limiter::{Algorithm, Bucket, Inheritance};
use crate::quota::Quota;
use crate::refusal::Refusal;
use crate::snapshot::Snapshot;
use crate::sync::{AtomicU64, Ordering};
use crate::time::Timestamp;

/// A GCRA bucket's state: one atomic `u64` theoretical arrival time.
///
/// 8 bytes, `const`-constructible (so it can be a `static`), `Default` is a
/// full bucket.
#[derive(Debug, Default)]
#[repr(transparent)]
pub struct GcraState {
    tat: AtomicU64,
}

impl GcraState {
    crate::sync::const_fn_unless_loom! {
        /// A full bucket.
        #[must_use]
        pub fn new() -> Self {
            Self { tat: AtomicU64::new(0) }
        }
    }

    /// The theoretical arrival time of this state under `gcra` (the
    /// configuration that keeps it): when the bucket is full again, in
    /// nanoseconds rounded up (an exact bucket keeps it in units of `1/d`
    /// ns; see the [module docs](super)).
    #[must_use]
    pub fn tat(&self, gcra: &Gcra) -> Timestamp {
        Timestamp::from_nanos(gcra.tat_nanos(self.tat.load(Ordering::Relaxed)))
    }
}

impl Gcra {
    /// [`Gcra::outcome_cas`] of a bucket in units of `1/d` ns, `d > 1`
    /// (out of line: the whole-nanosecond path stays small).
    #[inline(never)]
    fn outcome_scaled(&self, state: &GcraState, n: u32, now: Timestamp) -> Outcome {
        self.outcome_cas(state, n, self.scaled(now.as_nanos()))
    }

    /// The compare-and-swap loop of [`Algorithm::check_n`] with `now` in
    /// the bucket's units and `n` within the capacity; it carries scalars
    /// only.
    #[inline(always)]
    fn outcome_cas(&self, state: &GcraState, n: u32, now: u64) -> Outcome {
        let mut tat = state.tat.load(Ordering::Relaxed);
        loop {
            let (outcome, store) = self.outcome_in(tat, n, now);
            let Some(new_tat) = store else {
                return outcome;
            };
            // A lost race means someone else moved the TAT: decide again on
            // their value.
            match state.tat.compare_exchange_weak(
                tat,
                new_tat,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return outcome,
                Err(current) => tat = current,
            }
        }
    }
}

impl Algorithm for Gcra {
    type State = GcraState;

    #[cfg(not(loom))]
    #[allow(clippy::declare_interior_mutable_const)]
    const FRESH_STATE: Self::State = GcraState::new();

    #[inline]
    fn new_state(&self) -> GcraState {
        GcraState::new()
    }

    #[inline]
    fn capacity(&self) -> u32 {
        self.capacity.get()
    }

    #[inline(always)]
    fn check_n(
        &self,
        state: &GcraState,
        n: u32,
        now: Timestamp,
    ) -> Result<Timestamp, Refusal<'static>> {
        if n > self.capacity.get() {
            return Err(self.exceeded(n));
        }
        // the one flag: whole nanoseconds run inline; a scaled bucket runs
        // its compare-and-swap loop out of line. Both hand back an
        // `Outcome` of two words (in registers, never through a stack
        // slot), and the decision is built from it here, inline: a caller
        // that reads only `is_ok()` pays for nothing else.
        if self.scale != 1 {
            let outcome = self.outcome_scaled(state, n, now);
            return self.decision_of::<true>(outcome, now.as_nanos());
        }
        let outcome = self.outcome_cas(state, n, self.clamped(now.as_nanos()));
        self.decision_of::<false>(outcome, now.as_nanos())
    }

    #[inline]
    fn refund(&self, state: &GcraState, n: u32, now: Timestamp) {
        let now = now.as_nanos();
        let mut tat = state.tat.load(Ordering::Relaxed);
        while let Some(new_tat) = self.refunded(tat, n, now) {
            match state.tat.compare_exchange_weak(
                tat,
                new_tat,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(current) => tat = current,
            }
        }
    }

    #[inline]
    fn snapshot(&self, state: &GcraState, now: Timestamp) -> Snapshot {
        self.snapshot_of(state.tat.load(Ordering::Relaxed), now.as_nanos())
    }

    #[inline]
    fn time_until_ready(
        &self,
        state: &GcraState,
        n: u32,
        now: Timestamp,
    ) -> Result<Duration, Refusal<'static>> {
        self.wait_of(state.tat.load(Ordering::Relaxed), n, now.as_nanos())
            .map(Duration::from_nanos)
    }

    #[inline]
    fn is_idle(&self, state: &GcraState, now: Timestamp) -> bool {
        self.is_idle_at(state.tat.load(Ordering::Relaxed), now.as_nanos())
    }

    #[inline]
    fn required_resolution(&self) -> Duration {
        self.interval()
    }

    fn carry_over(&self, next: &Self, state: &GcraState, how: Inheritance, now: Timestamp) {
        let tat = state.tat.load(Ordering::Relaxed);
        let carried = next.inherit_tat_exact(self, tat, now.as_nanos(), how);
        state.tat.store(carried, Ordering::Relaxed);
    }

    /// Exact for both kinds when the `ahead` permits come in requests of at
    /// most the capacity each: a token bucket admits the last of
    /// `ahead + n` permits once `lead + (ahead + n)·T ≤ τ + T`; a leaky
    /// bucket admits each request when the previous work has drained, so
    /// the request starts after `lead + ahead·T`.
    fn time_until_ready_after(
        &self,
        state: &GcraState,
        ahead: u64,
        n: u32,
        now: Timestamp,
    ) -> Option<Duration> {
        self.wait_after_of(state.tat.load(Ordering::Relaxed), ahead, n, now.as_nanos())
            .map(Duration::from_nanos)
    }
}

impl Bucket<Gcra> {
    crate::sync::const_fn_unless_loom! {
        /// A full token bucket enforcing `quota`'s rate and burst.
        #[must_use]
        pub fn token_bucket(quota: Quota) -> Self {
            Self::from_parts(Gcra::token_bucket(quota), GcraState::new())
        }
    }

    crate::sync::const_fn_unless_loom! {
        /// A strict-pacing leaky bucket enforcing `quota`'s rate, accepting
        /// requests of up to `quota.burst()` permits.
        #[must_use]
        pub fn leaky_bucket(quota: Quota) -> Self {
            Self::from_parts(Gcra::leaky_bucket(quota), GcraState::new())
        }
    }
}
