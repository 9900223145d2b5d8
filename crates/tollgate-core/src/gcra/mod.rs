//! The lazy-timestamp bucket: GCRA for token and leaky buckets.
//!
//! One atomic `u64` per bucket holds the *theoretical arrival time* (TAT):
//! the instant at which the bucket would be full again. Nothing runs in the
//! background; every operation computes from the TAT and `now`.
//!
//! With emission interval `T` and capacity `c` (the burst for a token
//! bucket, the largest weight for a leaky bucket), let
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
//! `n = 0` is a peek; `n > c` is refused [`never`](Refusal::is_never) (it can never
//! succeed). A [`refund`](crate::Algorithm::refund) moves the TAT back by `n·T` but
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
//!
//! # Exact arithmetic
//!
//! `T = period / permits` is a rational number of nanoseconds, `P / d` in
//! lowest terms (see [`crate::quota`]). A bucket whose `T` is a whole
//! number of nanoseconds (`d = 1`) keeps its TAT in nanoseconds. A bucket
//! with `2 ≤ d ≤ 16` (and a largest lead `c·T` under `2^60/d` ns) keeps it
//! in **units of `1/d` ns**: `now` is multiplied by `d` on the way in,
//! every admission adds exactly `n·P` units (`n·T` exactly), and the TAT,
//! the lead, `τ + T`, the heal limit and the refund are all whole numbers
//! of units. So every decision is the exact rational GCRA: after exactly
//! `k` periods exactly `k · permits` permits are back, and an admission is
//! never a unit early or late. Times reported in nanoseconds are rounded
//! up: a `retry_after` of `r` means the retry at `now + r` succeeds and one
//! a nanosecond earlier does not (`r = ⌈exact wait⌉`); `reset_after` and
//! [`GcraState::tat`] likewise. `remaining` is exact (`⌊slack / P⌋`).
//!
//! The cost: a quota with `d = 1` pays one predictable branch per
//! operation, on a flag in the configuration, and one comparison of `now`
//! with its horizon (below); its code is otherwise the whole-nanosecond
//! GCRA, unchanged. A quota with `d > 1` continues out of
//! line: one multiplication and one comparison to scale `now`, and one
//! division by `d` for each time reported in nanoseconds (`reset_after` on
//! every decision, `retry_after` on a refusal).
//!
//! Every bucket serves clock readings up to its **horizon**, `(2^64 − 2 −
//! c·P) / d` ns: just under 584 years for whole nanoseconds (`d = 1`); the
//! units shrink it to at least 34 years (194 years for `per_second(3)`).
//! Past it, `now` stops at the horizon: the bucket no longer refills, so it
//! never admits more than promised (it fails closed).
//! Quotas with `d > 16`, or a larger lead, use `T` rounded **up** to whole
//! nanoseconds, as before: they never admit more than promised, and may
//! admit a permit later than the exact rate would (`per_second(17)` has 16
//! permits back after exactly one second, the 17th 10 ns later).
//! Reconfiguration between quotas of different `d` converts the TAT
//! exactly and rounds so the bucket never gains room.

use core::num::NonZeroU32;
use core::time::Duration;

use crate::quota::Quota;
use crate::refusal::Refusal;
use crate::snapshot::units_to_nanos_ceil;
use crate::time::duration_to_nanos;

mod inheritance;
mod report;
mod state;
mod step;
mod units;

pub use state::GcraState;
pub(crate) use step::Outcome;

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
/// Apply it to a [`GcraState`] (8 bytes) through the
/// [`Algorithm`](crate::Algorithm) trait, or use
/// [`Bucket::token_bucket`](crate::Bucket::token_bucket) /
/// [`Bucket::leaky_bucket`](crate::Bucket::leaky_bucket) for both together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Gcra {
    /// `T`, in the bucket's units of `1/scale` ns (exactly `P` for an
    /// exact quota with `d > 1`). Every time below is in these units except
    /// `heal_threshold`.
    interval: u64,
    /// The horizon `u64::MAX − 2 − max_lead` (see `Gcra::units`), where
    /// `max_lead = capacity × interval` is the largest lead a monotonic
    /// clock can leave: stored rather than `max_lead` because every check
    /// compares `now` with it (`Gcra::max_lead` gives it back exactly,
    /// as a validated quota's `max_lead` is below 2⁶⁰).
    horizon: u64,
    /// `max_lead + heal_threshold`, saturating.
    heal_limit: u64,
    /// The largest lead with which one permit is admitted: `τ` for a token
    /// bucket, 0 for a leaky bucket (the lead of a bucket "empty at now",
    /// `Gcra::empty_lead`, is this plus `T`).
    admit_one: u64,
    /// In nanoseconds, as configured.
    heal_threshold: u64,
    /// At least 1 (a validated quota's burst), which lets a check of one
    /// permit skip its capacity test.
    capacity: NonZeroU32,
    kind: BucketKind,
    /// Units per nanosecond: `d` for an exact quota with `d > 1`, else 1.
    scale: u8,
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
        let (interval, scale) = quota.scaled_interval();
        Self::build(
            kind,
            interval,
            scale as u8,
            quota.burst(),
            DEFAULT_HEAL_THRESHOLD_NANOS,
        )
    }

    /// Every field from the interval (in units of `1/scale` ns), the
    /// capacity and the heal threshold (ns).
    const fn build(
        kind: BucketKind,
        interval: u64,
        scale: u8,
        capacity: u32,
        heal_threshold: u64,
    ) -> Self {
        // A validated quota guarantees capacity × interval fits; saturate anyway.
        let max_lead = interval.saturating_mul(capacity as u64);
        let empty_lead = match kind {
            BucketKind::TokenBucket => max_lead,
            BucketKind::LeakyBucket => interval,
        };
        Self {
            interval,
            horizon: (u64::MAX - 2).saturating_sub(max_lead),
            heal_limit: max_lead.saturating_add(heal_threshold.saturating_mul(scale as u64)),
            admit_one: empty_lead.saturating_sub(interval),
            heal_threshold,
            capacity: at_least_one(capacity),
            kind,
            scale,
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
        Self::build(
            self.kind,
            self.interval,
            self.scale,
            self.capacity.get(),
            duration_to_nanos(threshold),
        )
    }

    /// The same bucket with its emission interval rounded **up** to whole
    /// nanoseconds (the rounded regime of [`crate::quota`]), whatever its
    /// quota. Unchanged if the interval already is whole nanoseconds.
    ///
    /// This is what a store that keeps TATs in whole nanoseconds enforces
    /// (a shared store running the step in a script, say): build an
    /// in-process bucket with it to decide exactly as such a store does.
    ///
    /// ```
    /// use tollgate::{Gcra, Quota};
    ///
    /// let exact = Gcra::token_bucket(Quota::per_second(3)?);
    /// assert_eq!(exact.interval_nanos(), 333_333_334); // reported rounded up
    /// assert_ne!(exact.rounded(), exact); // enforced exactly
    /// let ten = Gcra::token_bucket(Quota::per_second(10)?);
    /// assert_eq!(ten.rounded(), ten);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub const fn rounded(self) -> Self {
        if self.scale == 1 {
            return self;
        }
        Self::build(
            self.kind,
            self.interval_nanos(),
            1,
            self.capacity.get(),
            self.heal_threshold,
        )
    }

    /// The emission interval `T`, rounded up to whole nanoseconds (the
    /// bucket itself may keep it exactly; see the [module docs](self)).
    #[must_use]
    pub const fn interval(&self) -> Duration {
        Duration::from_nanos(self.interval_nanos())
    }

    /// The emission interval `T` in nanoseconds, rounded up.
    #[must_use]
    pub const fn interval_nanos(&self) -> u64 {
        units_to_nanos_ceil(self.interval, self.scale as u32)
    }

    /// The tolerance `τ` (zero for a leaky bucket), rounded up to whole
    /// nanoseconds.
    #[must_use]
    pub const fn tolerance(&self) -> Duration {
        Duration::from_nanos(match self.kind {
            BucketKind::TokenBucket => {
                units_to_nanos_ceil(self.max_lead() - self.interval, self.scale as u32)
            }
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

    /// The configuration as six words, for [`crate::live`]'s atomic cell
    /// (the last one packs the kind, the capacity and the scale).
    pub(crate) const fn to_words(self) -> [u64; 6] {
        let kind = match self.kind {
            BucketKind::TokenBucket => 0,
            BucketKind::LeakyBucket => 1,
        };
        [
            self.interval,
            self.horizon,
            self.heal_limit,
            self.admit_one,
            self.heal_threshold,
            (self.scale as u64) << 40 | (self.capacity.get() as u64) << 1 | kind,
        ]
    }

    /// The configuration back from [`Gcra::to_words`].
    #[inline]
    pub(crate) const fn from_words(w: [u64; 6]) -> Self {
        Self {
            interval: w[0],
            horizon: w[1],
            heal_limit: w[2],
            admit_one: w[3],
            heal_threshold: w[4],
            capacity: at_least_one((w[5] >> 1) as u32),
            kind: if w[5] & 1 == 0 {
                BucketKind::TokenBucket
            } else {
                BucketKind::LeakyBucket
            },
            scale: (w[5] >> 40) as u8,
        }
    }

    /// `capacity × interval`: the largest lead a monotonic clock can leave
    /// (exact: see the `horizon` field).
    #[inline(always)]
    const fn max_lead(&self) -> u64 {
        (u64::MAX - 2) - self.horizon
    }

    /// The lead of a bucket that is "empty at `now`": `τ + T` (the
    /// capacity's whole lead for a token bucket, `T` for a leaky bucket).
    #[inline(always)]
    const fn empty_lead(&self) -> u64 {
        self.admit_one + self.interval
    }

    /// A raw lead (`TAT − now`, saturating) healed if it is beyond what a
    /// monotonic clock can leave.
    #[inline(always)]
    const fn lead_of(&self, raw_lead: u64) -> u64 {
        if raw_lead > self.heal_limit {
            self.empty_lead()
        } else {
            raw_lead
        }
    }

    /// The lead of a stored TAT at `now` (both in the bucket's units),
    /// healed if it is beyond what a monotonic clock can leave.
    #[inline]
    fn lead_at(&self, tat: u64, now: u64) -> u64 {
        self.lead_of(tat.saturating_sub(now))
    }

    #[cold]
    #[inline(never)]
    fn exceeded(&self, n: u32) -> Refusal<'static> {
        Refusal::above(n, self.capacity.get())
    }
}

/// `capacity` as a [`NonZeroU32`]: every quota's burst is at least 1
/// (validated), so the fallback is never taken.
const fn at_least_one(capacity: u32) -> NonZeroU32 {
    match NonZeroU32::new(capacity) {
        Some(c) => c,
        None => NonZeroU32::MIN,
    }
}
