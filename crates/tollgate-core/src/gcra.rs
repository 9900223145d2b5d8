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

use crate::limiter::{Algorithm, Bucket, Inheritance};
use crate::quota::Quota;
use crate::refusal::Refusal;
use crate::snapshot::{Snapshot, units_to_nanos_ceil};
use crate::sync::{AtomicU64, Ordering};
use crate::time::{Timestamp, duration_to_nanos};

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
    /// This is what the Redis store (`tollgate::redis::RedisStore`, feature
    /// `redis`) enforces, its Lua script keeping TATs in nanoseconds: build
    /// an in-process bucket with it to decide exactly as the store does.
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

    /// `now` (ns) in the bucket's units. For `d = 1` it is `now` itself;
    /// else `now × d`, stopped at the horizon `u64::MAX − 2 − max_lead`
    /// so that every TAT the bucket stores (at most `now + max_lead`) fits,
    /// below the values the keyed tables and [`crate::live`] reserve.
    #[inline(always)]
    pub(crate) const fn units(&self, now: u64) -> u64 {
        if self.scale == 1 {
            self.clamped(now)
        } else {
            self.scaled(now)
        }
    }

    /// `now` (ns) for a whole-nanosecond bucket (`d = 1`), stopped at its
    /// horizon `u64::MAX − 2 − max_lead`, as [`Gcra::scaled`] stops a
    /// scaled one: past it, a TAT `now + lead` would saturate at
    /// `u64::MAX` and the next check at the same instant would see an
    /// empty lead (over-admission), or land on a value the keyed tables
    /// reserve. Stopped there, the bucket no longer refills: it fails
    /// closed. One compare, predicted not taken.
    #[inline(always)]
    const fn clamped(&self, now: u64) -> u64 {
        let horizon = self.horizon;
        if now < horizon { now } else { horizon }
    }

    #[inline]
    const fn scaled(&self, now: u64) -> u64 {
        let horizon = self.horizon;
        let units = now.saturating_mul(self.scale as u64);
        if units < horizon { units } else { horizon }
    }

    /// `units` of the bucket in whole nanoseconds, rounded up.
    #[inline(always)]
    const fn nanos_ceil(&self, units: u64) -> u64 {
        units_to_nanos_ceil(units, self.scale as u32)
    }

    /// [`Gcra::units`] for a scale known to be 1 (`SCALED` false) or not.
    #[inline(always)]
    const fn units_in<const SCALED: bool>(&self, now: u64) -> u64 {
        if SCALED {
            self.scaled(now)
        } else {
            self.clamped(now)
        }
    }

    /// [`Gcra::nanos_ceil`] for a scale known to be 1 (`SCALED` false) or
    /// not.
    #[inline(always)]
    const fn nanos_in<const SCALED: bool>(&self, units: u64) -> u64 {
        if SCALED {
            units.div_ceil(self.scale as u64)
        } else {
            units
        }
    }

    /// True if a bucket with stored `tat` is full at `now` (ns): `TAT ≤
    /// now`, in the bucket's units. Such a bucket is indistinguishable from
    /// a fresh one (eviction is lossless).
    #[inline]
    pub(crate) const fn is_idle_at(&self, tat: u64, now: u64) -> bool {
        tat <= self.units(now)
    }

    /// The largest lead with which `n` permits are still admitted.
    #[inline]
    const fn admit_lead(&self, n: u32) -> u64 {
        match self.kind {
            // n ≤ capacity, so n·T ≤ max_lead (saturating all the same)
            BucketKind::TokenBucket => self
                .max_lead()
                .saturating_sub((n as u64).saturating_mul(self.interval)),
            BucketKind::LeakyBucket => 0,
        }
    }

    /// The snapshot of this bucket when its theoretical arrival time lies
    /// `lead` ahead of the present (zero for a full bucket): what
    /// [`Algorithm::check_n`] would report for such a bucket. For a store
    /// that keeps the state elsewhere and runs the same step there (the
    /// Redis store runs it in a Lua script and returns the lead), so that
    /// it reports exactly the fields an in-process bucket would.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{Gcra, Quota};
    ///
    /// let gcra = Gcra::token_bucket(Quota::per_second(10)?.with_burst(5)?);
    /// let full = gcra.snapshot_for_lead(Duration::ZERO);
    /// assert_eq!((full.remaining(), full.reset_after()), (5, Duration::ZERO));
    /// // two permits spent: 200 ms until full again
    /// let spent = gcra.snapshot_for_lead(Duration::from_millis(200));
    /// assert_eq!((spent.remaining(), spent.reset_after()), (3, Duration::from_millis(200)));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[inline]
    #[must_use]
    pub fn snapshot_for_lead(&self, lead: Duration) -> Snapshot {
        let lead = duration_to_nanos(lead);
        if self.scale == 1 {
            self.snapshot_in::<false>(lead)
        } else {
            self.snapshot_in::<true>(lead.saturating_mul(u64::from(self.scale)))
        }
    }

    /// [`Gcra::snapshot_for_lead`]; `SCALED` is false exactly when the
    /// scale is 1 (then nothing is converted).
    #[inline(always)]
    fn snapshot_in<const SCALED: bool>(&self, lead: u64) -> Snapshot {
        let slack = match self.kind {
            BucketKind::TokenBucket => self.max_lead().saturating_sub(lead),
            BucketKind::LeakyBucket if lead == 0 => self.max_lead(),
            BucketKind::LeakyBucket => 0,
        };
        let scale = if SCALED { self.scale as u32 } else { 1 };
        let reset_after = self.nanos_in::<SCALED>(lead);
        Snapshot::from_slack(
            self.capacity.get(),
            slack,
            self.interval,
            reset_after,
            scale,
        )
    }

    #[cold]
    #[inline(never)]
    fn exceeded(&self, n: u32) -> Refusal<'static> {
        Refusal::above(n, self.capacity.get())
    }

    /// The lead of a stored TAT at `now` (both in the bucket's units),
    /// healed if it is beyond what a monotonic clock can leave.
    #[inline]
    fn lead_at(&self, tat: u64, now: u64) -> u64 {
        self.lead_of(tat.saturating_sub(now))
    }

    /// GCRA as a pure function of a stored TAT: the decision for `n`
    /// permits at `now` (ns), and the TAT to store (`None`: leave it
    /// unchanged). TATs are in the bucket's units.
    ///
    /// This is [`Algorithm::check_n`] without the atomic: for stores that
    /// keep the TAT elsewhere (a lock-free keyed slot) and install the new
    /// value with their own compare-and-swap. `n = 0` is a peek. (The live
    /// bucket, which holds the decision across its swap, uses the two
    /// halves instead: [`Gcra::step_outcome`] and [`Gcra::decision`].)
    #[cfg(feature = "std")]
    #[inline]
    pub(crate) fn step(
        &self,
        tat: u64,
        n: u32,
        now: u64,
    ) -> (Result<Timestamp, Refusal<'static>>, Option<u64>) {
        // The one branch a whole-nanosecond quota pays: it then runs the
        // unscaled code with the scale a constant 1, inline; a scaled
        // bucket calls the scaled code (out of line, so that callers stay
        // small enough to inline the unscaled path).
        if self.scale != 1 {
            return self.step_scaled(tat, n, now);
        }
        self.step_in::<false>(tat, n, self.clamped(now), now)
    }

    /// [`Gcra::step`] before its decision is built: the [`Outcome`] (two
    /// words) and the TAT to store. A store that loops on a
    /// compare-and-swap (the live bucket) steps inside the loop and builds
    /// the decision with [`Gcra::decision`] once, after the swap stands, so
    /// that nothing but two words is held across it.
    #[inline]
    pub(crate) fn step_outcome(
        &self,
        tat: u64,
        n: u32,
        now: u64,
    ) -> Result<(Outcome, Option<u64>), Refusal<'static>> {
        if n > self.capacity.get() {
            return Err(self.exceeded(n));
        }
        let now = if self.scale != 1 {
            self.scaled(now)
        } else {
            self.clamped(now)
        };
        Ok(self.outcome_in(tat, n, now))
    }

    /// The verdict of an [`Outcome`] of [`Gcra::step_outcome`].
    #[inline(always)]
    pub(crate) fn decision(
        &self,
        outcome: Outcome,
        now: u64,
    ) -> Result<Timestamp, Refusal<'static>> {
        if self.scale != 1 {
            return self.decision_of::<true>(outcome, now);
        }
        self.decision_of::<false>(outcome, now)
    }

    /// [`Gcra::step`] of a bucket in units of `1/d` ns, `d > 1`.
    #[cfg(feature = "std")]
    #[inline(never)]
    fn step_scaled(
        &self,
        tat: u64,
        n: u32,
        now: u64,
    ) -> (Result<Timestamp, Refusal<'static>>, Option<u64>) {
        self.step_in::<true>(tat, n, self.scaled(now), now)
    }

    /// [`Gcra::step`] with `now` already in the bucket's units; `SCALED`
    /// is false exactly when the scale is 1.
    #[cfg(feature = "std")]
    #[inline(always)]
    fn step_in<const SCALED: bool>(
        &self,
        tat: u64,
        n: u32,
        now: u64,
        now_nanos: u64,
    ) -> (Result<Timestamp, Refusal<'static>>, Option<u64>) {
        if n > self.capacity.get() {
            return (Err(self.exceeded(n)), None);
        }
        let (outcome, store) = self.outcome_in(tat, n, now);
        (self.decision_of::<SCALED>(outcome, now_nanos), store)
    }

    /// The GCRA step for `n ≤ capacity` as scalars: what was decided and
    /// the TAT to store (`None`: leave it unchanged), in the bucket's
    /// units. `n = 0` is a peek.
    ///
    /// Ordered for the common cases: an admission is decided by one
    /// compare, a refusal by two (the second rules out a clock that went
    /// back), and only a lead beyond the heal limit takes the third path.
    /// The largest lead with which `n ≥ 1` permits are admitted is `τ + T −
    /// n·T` for a token bucket and 0 for a leaky bucket; both are
    /// `empty_lead − n·T`, saturating (a leaky bucket's `empty_lead` is
    /// `T`), so no branch on the kind is needed.
    #[inline(always)]
    fn outcome_in(&self, tat: u64, n: u32, now: u64) -> (Outcome, Option<u64>) {
        let raw_lead = tat.saturating_sub(now);
        if n == 0 {
            return (
                Outcome {
                    retry: 0,
                    lead: self.lead_of(raw_lead),
                },
                None,
            );
        }
        // n ≤ capacity, so n·T ≤ max_lead (saturating all the same)
        let cost = (n as u64).saturating_mul(self.interval);
        let admit_lead = if n == 1 {
            self.admit_one
        } else {
            self.empty_lead().saturating_sub(cost)
        };
        if raw_lead <= admit_lead {
            // admit_lead ≤ max_lead ≤ heal_limit: not a clock gone back
            let new_lead = raw_lead + cost; // ≤ max_lead
            return (
                Outcome {
                    retry: 0,
                    lead: new_lead,
                },
                Some(now.saturating_add(new_lead)),
            );
        }
        if raw_lead <= self.heal_limit {
            return (
                Outcome {
                    retry: raw_lead - admit_lead,
                    lead: raw_lead,
                },
                None,
            );
        }
        self.healed_refusal(admit_lead, now)
    }

    /// The refusal of a bucket whose lead is beyond what a monotonic clock
    /// can leave (the clock went back): its lead is taken as "empty at
    /// `now`", which refuses every request (`empty_lead` exceeds the
    /// largest admitting lead of any `n ≥ 1`), and that TAT is stored so
    /// the bucket recovers instead of healing again on every check.
    #[cold]
    #[inline(never)]
    fn healed_refusal(&self, admit_lead: u64, now: u64) -> (Outcome, Option<u64>) {
        (
            Outcome {
                retry: self.empty_lead() - admit_lead,
                lead: self.empty_lead(),
            },
            Some(now.saturating_add(self.empty_lead())),
        )
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

    /// The verdict of an [`Outcome`] at `now` (ns): on an admission, the
    /// instant the bucket is full again (a caller that does not read it
    /// pays nothing for it; the snapshot is computed when asked); on a
    /// refusal, its wait and snapshot.
    #[inline(always)]
    fn decision_of<const SCALED: bool>(
        &self,
        outcome: Outcome,
        now: u64,
    ) -> Result<Timestamp, Refusal<'static>> {
        if outcome.retry == 0 {
            Ok(Timestamp::from_nanos(
                now.saturating_add(self.nanos_in::<SCALED>(outcome.lead)),
            ))
        } else {
            // the exact wait in whole nanoseconds rounded up: the first
            // instant at which the retry succeeds
            Err(Refusal::from_nanos(
                self.nanos_in::<SCALED>(outcome.retry),
                self.snapshot_in::<SCALED>(outcome.lead),
            ))
        }
    }

    /// The TAT after refunding `n` permits at `now` (ns; `None`:
    /// unchanged). Never before `now`, so a refund cannot lift capacity
    /// above the burst.
    #[inline]
    #[must_use]
    pub(crate) fn refunded(&self, tat: u64, n: u32, now: u64) -> Option<u64> {
        let now = self.units(now);
        let give_back = (n as u64).saturating_mul(self.interval);
        if give_back == 0 || tat <= now {
            return None;
        }
        Some(core::cmp::max(tat.saturating_sub(give_back), now))
    }

    /// The snapshot of a bucket with stored `tat` at `now` (ns).
    #[inline]
    #[must_use]
    pub(crate) fn snapshot_of(&self, tat: u64, now: u64) -> Snapshot {
        if self.scale != 1 {
            return self.snapshot_scaled(tat, now);
        }
        self.snapshot_of_in::<false>(tat, now)
    }

    #[inline(never)]
    fn snapshot_scaled(&self, tat: u64, now: u64) -> Snapshot {
        self.snapshot_of_in::<true>(tat, now)
    }

    #[inline(always)]
    fn snapshot_of_in<const SCALED: bool>(&self, tat: u64, now: u64) -> Snapshot {
        self.snapshot_in::<SCALED>(self.lead_at(tat, self.units_in::<SCALED>(now)))
    }

    /// Nanoseconds (rounded up) until `n` permits would be admitted by a
    /// bucket with stored `tat` (0 if now).
    ///
    /// # Errors
    /// A refusal that [`is_never`](Refusal::is_never) if `n` can never be
    /// granted.
    #[inline]
    pub(crate) fn wait_of(&self, tat: u64, n: u32, now: u64) -> Result<u64, Refusal<'static>> {
        if n > self.capacity.get() {
            return Err(self.exceeded(n));
        }
        if n == 0 {
            return Ok(0);
        }
        if self.scale != 1 {
            return Ok(self.wait_scaled(tat, n, now));
        }
        Ok(self.wait_in::<false>(tat, n, now))
    }

    #[inline(never)]
    fn wait_scaled(&self, tat: u64, n: u32, now: u64) -> u64 {
        self.wait_in::<true>(tat, n, now)
    }

    #[inline(always)]
    fn wait_in<const SCALED: bool>(&self, tat: u64, n: u32, now: u64) -> u64 {
        let wait = self
            .lead_at(tat, self.units_in::<SCALED>(now))
            .saturating_sub(self.admit_lead(n));
        self.nanos_in::<SCALED>(wait)
    }

    /// Nanoseconds (rounded up) until a bucket with stored `tat` could
    /// admit the last of `ahead + n` permits, `ahead` of them queued first
    /// in requests of at most the capacity each (see
    /// [`Algorithm::time_until_ready_after`]). `None` if `n` can never be
    /// granted.
    pub(crate) fn wait_after_of(&self, tat: u64, ahead: u64, n: u32, now: u64) -> Option<u64> {
        if n > self.capacity.get() {
            return None;
        }
        let lead = self.lead_at(tat, self.units(now));
        let ahead_cost = ahead.saturating_mul(self.interval);
        let wait = match self.kind {
            BucketKind::TokenBucket => lead
                .saturating_add(ahead_cost)
                .saturating_add((n as u64) * self.interval)
                .saturating_sub(self.max_lead()),
            BucketKind::LeakyBucket if n == 0 && ahead == 0 => 0,
            BucketKind::LeakyBucket => lead.saturating_add(ahead_cost),
        };
        Some(self.nanos_ceil(wait))
    }

    /// A stored TAT as a time in nanoseconds, rounded up (the first
    /// nanosecond at which the bucket is full).
    #[inline]
    pub(crate) const fn tat_nanos(&self, tat: u64) -> u64 {
        self.nanos_ceil(tat)
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

/// `carried` (a TAT in the new quota's units, `now_new` is `now` in them),
/// moved off `tat` (the stored word) where that changes nothing: a
/// lock-free check that read `tat` before a conversion froze it must not be
/// able to install its result over the converted value (its
/// compare-and-swap expects `tat`). A bucket full since before `now`
/// (`before_now`) moves one unit later: still full at `now` and after, and
/// one unit less room for a caller stale before it — never more room (an
/// earlier value would give a stale caller credit). A busy bucket, or one
/// whose TAT is exactly `now`, keeps its exact TAT (any other value would
/// change its room at `now`); for it the check's last look at the change
/// counter just before its swap is what keeps the old quota out (see
/// [`crate::live`]).
#[inline]
const fn distinct_from(tat: u64, before_now: bool, carried: u64) -> u64 {
    if carried == tat && before_now {
        carried.saturating_add(1)
    } else {
        carried
    }
}

impl Gcra {
    /// The TAT that carries a bucket kept under `old` over to `self`, per
    /// `how`, at `now` (ns): the whole of a live reconfiguration for one
    /// bucket (see [`crate::live`]). `tat` is in `old`'s units, the result
    /// in `self`'s. Exact arithmetic in `u128`, rounded so that the bucket
    /// never ends up with more room than the inheritance rule gives it.
    ///
    /// For a word that lock-free checks compare-and-swap on (a
    /// [`LiveBucket`](crate::LiveBucket), the lock-free table's slot): never
    /// the very word it replaces when that can be avoided (see
    /// [`distinct_from`]). Tables that convert under a lock use
    /// [`Gcra::inherit_tat_exact`].
    pub(crate) fn inherit_tat(&self, old: &Gcra, tat: u64, now: u64, how: Inheritance) -> u64 {
        let before_now = tat < old.units(now);
        let carried = self.inherit_tat_exact(old, tat, now, how);
        distinct_from(tat, before_now, carried)
    }

    /// The carried-over TAT, exactly (see [`Gcra::inherit_tat`]).
    pub(crate) fn inherit_tat_exact(
        &self,
        old: &Gcra,
        tat: u64,
        now: u64,
        how: Inheritance,
    ) -> u64 {
        let now_old = old.units(now);
        let now_new = self.units(now);
        let lead = old.lead_at(tat, now_old);
        if lead == 0 {
            // full under any quota: nothing to carry; the same instant in
            // the new units, rounded down (still full at now)
            let same = if old.scale == self.scale {
                tat
            } else {
                let same = u128::from(tat) * u128::from(self.scale) / u128::from(old.scale);
                u64::try_from(same).unwrap_or(u64::MAX)
            };
            return same.min(now_new);
        }
        let new_lead: u128 = match how {
            Inheritance::Reset => return now_new,
            // permits used = lead / T_old, charged again at T_new
            Inheritance::UsedAmount => {
                (u128::from(lead) * u128::from(self.interval)).div_ceil(u128::from(old.interval))
            }
            // fraction used = lead / max_lead_old, of the new max lead
            Inheritance::UsedFraction => (u128::from(lead) * u128::from(self.max_lead()))
                .div_ceil(u128::from(old.max_lead().max(1))),
        };
        // More used than the new bucket holds: it is empty, no debt beyond.
        let new_lead = u64::try_from(new_lead)
            .unwrap_or(u64::MAX)
            .min(self.max_lead());
        now_new.saturating_add(new_lead)
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

/// What one GCRA step decided, in the bucket's units, before it is turned
/// into a verdict: two words, so that it travels in registers.
#[derive(Clone, Copy)]
pub(crate) struct Outcome {
    /// 0 if admitted (or a peek); else the wait until the request fits
    /// (a refusal always has one of at least 1 unit).
    retry: u64,
    /// The TAT's lead after the step (after the admission, or unchanged).
    lead: u64,
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

    /// The theoretical arrival time of this state under `gcra` (the
    /// configuration that keeps it): when the bucket is full again, in
    /// nanoseconds rounded up (an exact bucket keeps it in units of `1/d`
    /// ns; see the [module docs](self)).
    #[must_use]
    pub fn tat(&self, gcra: &Gcra) -> Timestamp {
        Timestamp::from_nanos(gcra.tat_nanos(self.tat.load(Ordering::Relaxed)))
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
