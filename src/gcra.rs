//! The lazy-timestamp bucket: GCRA for token and leaky buckets.
//!
//! One atomic `u64` per bucket holds the *theoretical arrival time* (TAT):
//! the instant at which the bucket would be full again. Nothing runs in the
//! background; every operation computes from the TAT and `now`.
//!
//! With emission interval `T` (rounded up) and capacity `c` (the burst for
//! a token bucket, the largest weight for a leaky bucket), let
//! `lead = max(TAT − now, 0)`, the work still queued ahead of `now`:
//!
//! - **token bucket** (tolerance `τ = (burst − 1)·T`): `n` permits are
//!   admitted iff `lead + n·T ≤ τ + T`, i.e. `new = max(TAT, now) + n·T ≤
//!   now + τ + T`; the refusal's `retry_after` is `new − (now + τ + T)`.
//!   A fresh bucket admits `burst` at once, then one every `T`.
//! - **leaky bucket** (strict pacing, `τ = 0`): a request of weight `n ≤ c`
//!   is admitted only when the previous work has drained (`lead = 0`), then
//!   occupies `n·T`. Admissions are never closer than `T` per unit of
//!   weight, and never two at one instant. Its capacity `c` is the quota's
//!   burst: the heaviest request it admits at one instant.
//!
//! `n = 0` is a peek; `n > c` is [`CapacityExceeded`] (it can never
//! succeed). A [`refund`](Algorithm::refund) moves the TAT back by `n·T` but
//! never before `now`, so it cannot lift capacity above the burst. A bucket
//! whose TAT is `≤ now` is indistinguishable from a fresh one, which is what
//! makes eviction from keyed tables lossless.
//!
//! A refund is exact when it follows its admission closely, as in a chain:
//! the TAT moves back by exactly what the admission added. One TAT cannot
//! record *when* permits were taken, though: if, between the admission and
//! its refund, another caller found the bucket already refilled past that
//! admission (its `now` beyond the TAT the admission left), the refunded
//! permits had expired anyway and the refund credits them to the present,
//! up to `n` permits more than the burst at one instant. Refund only
//! permits taken within their own refill time (`n·T`); the loom models of
//! the chain pin the exact case (`loom-tests/`).
//!
//! # Clocks that go backwards
//!
//! Under a monotonic clock `lead ≤ c·T` after every admission, so a larger
//! lead means time went back — or merely that this caller's `now` is stale
//! (read, then preempted). A stale `now` must never "heal" a fresher
//! caller's TAT downward, so the bucket heals only when the lead exceeds
//! `c·T` by more than the *heal threshold* (default 1 s,
//! [`Gcra::with_heal_threshold`]). Healing sets the bucket to "empty at
//! `now`" (`TAT = now + τ + T`): service resumes one interval later rather
//! than after the jump, and no extra capacity is ever granted. Under the
//! threshold, a stale `now` only sees the bucket as fuller than it is.
//!
//! All arithmetic saturates: no input panics or wraps.

use core::time::Duration;

use crate::decision::{CapacityExceeded, Decision, Denied, Snapshot};
use crate::limiter::{Algorithm, Bucket};
use crate::live::Inheritance;
use crate::quota::Quota;
use crate::sync::{AtomicU64, Ordering};
use crate::time::{duration_to_nanos, Timestamp};

/// Default heal threshold: 1 second.
pub const DEFAULT_HEAL_THRESHOLD: Duration = Duration::from_secs(1);
pub(crate) const DEFAULT_HEAL_THRESHOLD_NANOS: u64 = 1_000_000_000;

/// Which shape of bucket a [`Gcra`] enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BucketKind {
    /// Token bucket: admits up to the burst at once, refills at the rate.
    TokenBucket,
    /// Strict-pacing leaky bucket: admissions exactly `T` apart per unit of
    /// weight; a request of up to `burst` permits at one instant, only once
    /// the previous work has drained.
    LeakyBucket,
}

/// The GCRA algorithm: a bucket's configuration, small and `Copy`.
///
/// Apply it to a [`GcraState`] (8 bytes) through the [`Algorithm`] trait,
/// or use [`Bucket::token_bucket`] / [`Bucket::leaky_bucket`] for both
/// together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Gcra {
    interval: u64,
    /// `capacity × interval`: the largest lead a monotonic clock can leave.
    max_lead: u64,
    /// `max_lead + heal_threshold`, saturating.
    heal_limit: u64,
    /// Lead of a bucket that is "empty at now": `τ + T`.
    empty_lead: u64,
    heal_threshold: u64,
    capacity: u32,
    kind: BucketKind,
}

impl Gcra {
    /// A token bucket enforcing `quota` (rate and burst).
    #[must_use]
    pub const fn token_bucket(quota: Quota) -> Self {
        Self::new(BucketKind::TokenBucket, quota)
    }

    /// A strict-pacing leaky bucket enforcing `quota`'s rate, accepting
    /// requests of up to `quota.burst()` permits.
    #[must_use]
    pub const fn leaky_bucket(quota: Quota) -> Self {
        Self::new(BucketKind::LeakyBucket, quota)
    }

    /// A bucket of the given kind.
    #[must_use]
    pub const fn new(kind: BucketKind, quota: Quota) -> Self {
        let interval = quota.interval_nanos();
        let capacity = quota.burst();
        // A validated quota guarantees capacity × interval fits; saturate anyway.
        let max_lead = interval.saturating_mul(capacity as u64);
        let empty_lead = match kind {
            BucketKind::TokenBucket => max_lead,
            BucketKind::LeakyBucket => interval,
        };
        Self {
            interval,
            max_lead,
            heal_limit: max_lead.saturating_add(DEFAULT_HEAL_THRESHOLD_NANOS),
            empty_lead,
            heal_threshold: DEFAULT_HEAL_THRESHOLD_NANOS,
            capacity,
            kind,
        }
    }

    /// Sets the heal threshold: how far beyond its largest possible lead a
    /// bucket's TAT must be before it is treated as a clock that went back.
    /// Smaller heals faster after a real jump; it must stay above the
    /// longest time a caller can hold a stale `now` (preemption between
    /// reading the clock and checking), or a stale caller could heal a
    /// fresher one's TAT downward.
    #[must_use]
    pub const fn with_heal_threshold(self, threshold: Duration) -> Self {
        let threshold_nanos = duration_to_nanos(threshold);
        Self {
            heal_threshold: threshold_nanos,
            heal_limit: self.max_lead.saturating_add(threshold_nanos),
            ..self
        }
    }

    /// The emission interval `T`.
    #[must_use]
    pub const fn interval(&self) -> Duration {
        Duration::from_nanos(self.interval)
    }

    /// The emission interval `T` in nanoseconds.
    #[must_use]
    pub const fn interval_nanos(&self) -> u64 {
        self.interval
    }

    /// The tolerance `τ` (zero for a leaky bucket).
    #[must_use]
    pub const fn tolerance(&self) -> Duration {
        Duration::from_nanos(match self.kind {
            BucketKind::TokenBucket => self.max_lead - self.interval,
            BucketKind::LeakyBucket => 0,
        })
    }

    /// The heal threshold.
    #[must_use]
    pub const fn heal_threshold(&self) -> Duration {
        Duration::from_nanos(self.heal_threshold)
    }

    /// Token or leaky bucket.
    #[must_use]
    pub const fn kind(&self) -> BucketKind {
        self.kind
    }

    /// The configuration as six words, for [`crate::live`]'s atomic cell.
    pub(crate) const fn to_words(self) -> [u64; 6] {
        let kind = match self.kind {
            BucketKind::TokenBucket => 0,
            BucketKind::LeakyBucket => 1,
        };
        [
            self.interval,
            self.max_lead,
            self.heal_limit,
            self.empty_lead,
            self.heal_threshold,
            (self.capacity as u64) << 1 | kind,
        ]
    }

    /// The configuration back from [`Gcra::to_words`].
    #[inline]
    pub(crate) const fn from_words(w: [u64; 6]) -> Self {
        Self {
            interval: w[0],
            max_lead: w[1],
            heal_limit: w[2],
            empty_lead: w[3],
            heal_threshold: w[4],
            capacity: (w[5] >> 1) as u32,
            kind: if w[5] & 1 == 0 {
                BucketKind::TokenBucket
            } else {
                BucketKind::LeakyBucket
            },
        }
    }

    /// The largest lead with which `n` permits are still admitted.
    #[inline]
    const fn admit_lead(&self, n: u32) -> u64 {
        match self.kind {
            // n ≤ capacity, so n·T ≤ max_lead (saturating all the same)
            BucketKind::TokenBucket => self
                .max_lead
                .saturating_sub((n as u64).saturating_mul(self.interval)),
            BucketKind::LeakyBucket => 0,
        }
    }

    /// The snapshot of a bucket whose TAT is `lead` nanoseconds ahead of
    /// `now` (0 for a full bucket). This is how a bucket stored elsewhere
    /// (the Redis store runs the same step in a Lua script and returns the
    /// lead) reports exactly the fields an in-process bucket would.
    #[inline]
    #[must_use]
    pub(crate) fn snapshot_for_lead(&self, lead: u64) -> Snapshot {
        let slack = match self.kind {
            BucketKind::TokenBucket => self.max_lead.saturating_sub(lead),
            BucketKind::LeakyBucket if lead == 0 => self.max_lead,
            BucketKind::LeakyBucket => 0,
        };
        Snapshot::from_slack(self.capacity, slack, self.interval, lead)
    }

    #[inline]
    fn exceeded(&self, n: u32) -> CapacityExceeded {
        CapacityExceeded {
            requested: n,
            capacity: self.capacity,
        }
    }

    /// The lead of a stored TAT at `now`, healed if it is beyond what a
    /// monotonic clock can leave.
    #[inline]
    fn lead_at(&self, tat: u64, now: u64) -> u64 {
        let lead = tat.saturating_sub(now);
        if lead > self.heal_limit {
            self.empty_lead
        } else {
            lead
        }
    }

    /// GCRA as a pure function of a stored TAT: the decision for `n`
    /// permits at `now`, and the TAT to store (`None`: leave it unchanged).
    ///
    /// This is [`Algorithm::check_n`] without the atomic: for stores that
    /// keep the TAT elsewhere (a lock-free keyed slot) and install the new
    /// value with their own compare-and-swap. `n = 0` is a peek.
    #[inline]
    pub(crate) fn step(
        &self,
        tat: u64,
        n: u32,
        now: u64,
    ) -> Result<(Decision, Option<u64>), CapacityExceeded> {
        if n > self.capacity {
            return Err(self.exceeded(n));
        }
        let raw_lead = tat.saturating_sub(now);
        let healed = raw_lead > self.heal_limit;
        let lead = if healed { self.empty_lead } else { raw_lead };
        if n == 0 {
            return Ok((Decision::Allowed(self.snapshot_for_lead(lead)), None));
        }
        let admit_lead = self.admit_lead(n);
        if lead > admit_lead {
            let retry = lead - admit_lead;
            let decision =
                Decision::Denied(Denied::from_nanos(retry, self.snapshot_for_lead(lead)));
            // Persist a heal so the bucket recovers instead of re-healing
            // forever.
            let store = healed.then(|| now.saturating_add(self.empty_lead));
            return Ok((decision, store));
        }
        let new_lead = lead + (n as u64) * self.interval; // ≤ max_lead
        Ok((
            Decision::Allowed(self.snapshot_for_lead(new_lead)),
            Some(now.saturating_add(new_lead)),
        ))
    }

    /// The TAT after refunding `n` permits at `now` (`None`: unchanged).
    /// Never before `now`, so a refund cannot lift capacity above the burst.
    #[inline]
    #[must_use]
    pub(crate) fn refunded(&self, tat: u64, n: u32, now: u64) -> Option<u64> {
        let give_back = (n as u64).saturating_mul(self.interval);
        if give_back == 0 || tat <= now {
            return None;
        }
        Some(core::cmp::max(tat.saturating_sub(give_back), now))
    }

    /// The snapshot of a bucket with stored `tat` at `now`.
    #[inline]
    #[must_use]
    pub(crate) fn snapshot_of(&self, tat: u64, now: u64) -> Snapshot {
        self.snapshot_for_lead(self.lead_at(tat, now))
    }

    /// Nanoseconds until `n` permits would be admitted by a bucket with
    /// stored `tat` (0 if now).
    ///
    /// # Errors
    /// [`CapacityExceeded`] if `n` can never be granted.
    #[inline]
    pub(crate) fn wait_of(&self, tat: u64, n: u32, now: u64) -> Result<u64, CapacityExceeded> {
        if n > self.capacity {
            return Err(self.exceeded(n));
        }
        if n == 0 {
            return Ok(0);
        }
        Ok(self.lead_at(tat, now).saturating_sub(self.admit_lead(n)))
    }
}

/// `carried`, moved off `tat` where that changes nothing: a lock-free check
/// that read `tat` before a conversion froze it must not be able to install
/// its result over the converted value (its compare-and-swap expects
/// `tat`). A full bucket (`tat ≤ now`) moves to another TAT that is just as
/// full. A busy bucket keeps its exact TAT (any other value would change
/// its room); for it the check's last look at the change counter just
/// before its swap is what keeps the old quota out (see [`crate::live`]).
#[inline]
const fn distinct_from(tat: u64, now: u64, carried: u64) -> u64 {
    if carried != tat || tat > now {
        carried
    } else if tat > 0 {
        tat - 1
    } else if now > 0 {
        1
    } else {
        tat // the clock's origin: no other full value exists
    }
}

impl Gcra {
    /// The TAT that carries a bucket kept under `old` over to `self`, per
    /// `how`, at `now`: the whole of a live reconfiguration for one bucket
    /// (see [`crate::live`]). Exact arithmetic in `u128`, rounded so that
    /// the bucket never ends up with more room than the inheritance rule
    /// gives it.
    pub(crate) fn inherit_tat(&self, old: &Gcra, tat: u64, now: u64, how: Inheritance) -> u64 {
        distinct_from(tat, now, self.inherit_tat_exact(old, tat, now, how))
    }

    /// [`Gcra::inherit_tat`] before [`distinct_from`].
    fn inherit_tat_exact(&self, old: &Gcra, tat: u64, now: u64, how: Inheritance) -> u64 {
        let lead = old.lead_at(tat, now);
        if lead == 0 {
            return tat; // full under any quota: nothing to carry
        }
        let new_lead: u128 = match how {
            Inheritance::Reset => return now,
            // permits used = lead / T_old, charged again at T_new
            Inheritance::UsedAmount => {
                (u128::from(lead) * u128::from(self.interval)).div_ceil(u128::from(old.interval))
            }
            // fraction used = lead / max_lead_old, of the new max lead
            Inheritance::UsedFraction => (u128::from(lead) * u128::from(self.max_lead))
                .div_ceil(u128::from(old.max_lead.max(1))),
        };
        // More used than the new bucket holds: it is empty, no debt beyond.
        let new_lead = u64::try_from(new_lead)
            .unwrap_or(u64::MAX)
            .min(self.max_lead);
        now.saturating_add(new_lead)
    }
}

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

    /// A state holding `tat` (for computing on a TAT stored elsewhere).
    pub(crate) fn from_tat(tat: u64) -> Self {
        Self {
            tat: AtomicU64::new(tat),
        }
    }

    /// The theoretical arrival time: when the bucket is full again.
    #[must_use]
    pub fn tat(&self) -> Timestamp {
        Timestamp::from_nanos(self.tat.load(Ordering::Relaxed))
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
        self.capacity
    }

    #[inline]
    fn check_n(
        &self,
        state: &GcraState,
        n: u32,
        now: Timestamp,
    ) -> Result<Decision, CapacityExceeded> {
        let now = now.as_nanos();
        let mut tat = state.tat.load(Ordering::Relaxed);
        loop {
            let (decision, store) = self.step(tat, n, now)?;
            let Some(new_tat) = store else {
                return Ok(decision);
            };
            // A lost race means someone else moved the TAT: decide again on
            // their value.
            match state.tat.compare_exchange_weak(
                tat,
                new_tat,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(decision),
                Err(current) => tat = current,
            }
        }
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
    ) -> Result<Duration, CapacityExceeded> {
        self.wait_of(state.tat.load(Ordering::Relaxed), n, now.as_nanos())
            .map(Duration::from_nanos)
    }

    #[inline]
    fn is_idle(&self, state: &GcraState, now: Timestamp) -> bool {
        state.tat.load(Ordering::Relaxed) <= now.as_nanos()
    }

    #[inline]
    fn required_resolution(&self) -> Duration {
        Duration::from_nanos(self.interval)
    }

    fn carry_over(&self, next: &Self, state: &GcraState, how: Inheritance, now: Timestamp) {
        let tat = state.tat.load(Ordering::Relaxed);
        let carried = next.inherit_tat(self, tat, now.as_nanos(), how);
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
        if n > self.capacity {
            return None;
        }
        let lead = state
            .tat
            .load(Ordering::Relaxed)
            .saturating_sub(now.as_nanos());
        let lead = if lead > self.heal_limit {
            self.empty_lead
        } else {
            lead
        };
        let ahead_cost = ahead.saturating_mul(self.interval);
        Some(Duration::from_nanos(match self.kind {
            BucketKind::TokenBucket => lead
                .saturating_add(ahead_cost)
                .saturating_add((n as u64) * self.interval)
                .saturating_sub(self.max_lead),
            BucketKind::LeakyBucket if n == 0 && ahead == 0 => 0,
            BucketKind::LeakyBucket => lead.saturating_add(ahead_cost),
        }))
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
