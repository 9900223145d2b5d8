//! Property tests: both GCRA buckets against a plain reference model.
//!
//! The model is written differently from the implementation on purpose: it
//! keeps a *credit* (nanoseconds of capacity banked, as a signed integer)
//! and the time it was last updated, like a textbook token counter, in
//! `i128` so nothing can overflow. The implementation keeps a single
//! theoretical arrival time in a saturating `u64`. Equal decisions mean the
//! GCRA formulation, its rounding and its heal rule are what the contract
//! (the `gcra` module docs) says.
//!
//! Rates are exact where the quota documents it: the model counts time in
//! units of `1/permits` ns, so that `T = period / permits` is exactly
//! `period` units, and reports waits in whole nanoseconds rounded up. For
//! a quota in the rounded regime (the denominator of `T` above 16, see
//! `tollgate::quota`) it uses `T` rounded up to whole nanoseconds instead.

use core::time::Duration;

use proptest::prelude::*;
use tollgate::{Algorithm, BucketKind, Gcra, GcraState, Quota, Refusal, Snapshot, Timestamp};

fn t(ns: u64) -> Timestamp {
    Timestamp::from_nanos(ns)
}

/// Whether the quota is in the exact regime, decided from the quota's
/// documentation: `T = P / d` in lowest terms is kept exact if `d = 1`, or
/// `d ≤ 16` with `burst × P ≤ 2^60`.
fn documented_exact(quota: &Quota) -> bool {
    let period = quota.period_nanos();
    let permits = u64::from(quota.permits());
    let (mut a, mut b) = (period, permits);
    while b != 0 {
        (a, b) = (b, a % b);
    }
    let (p, d) = (period / a, permits / a);
    d == 1 || (d <= 16 && u128::from(p) * u128::from(quota.burst()) <= 1 << 60)
}

/// `T` as a fraction `(num, den)` of nanoseconds: exactly `period /
/// permits` in the exact regime, else the interval rounded up.
fn interval_fraction(quota: &Quota) -> (i128, i128) {
    if documented_exact(quota) {
        (
            i128::from(quota.period_nanos()),
            i128::from(quota.permits()),
        )
    } else {
        (i128::from(quota.interval_nanos()), 1)
    }
}

#[derive(Debug, Clone, Copy)]
struct Model {
    kind: BucketKind,
    /// Units of time per nanosecond: every time below is in units.
    unit: i128,
    interval: i128,
    capacity: u32,
    heal_threshold: i128,
    credit: i128,
    last: i128,
}

#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    TooLarge,
    Allowed {
        remaining: u32,
        reset_after: u64,
    },
    Denied {
        retry_after: u64,
        remaining: u32,
        reset_after: u64,
    },
}

impl Model {
    fn new(kind: BucketKind, quota: Quota, heal_threshold: u64) -> Self {
        // the most permits one request can take: the burst, for both kinds
        // (a leaky bucket's largest request is its burst since API 13)
        let capacity = quota.burst();
        let (interval, unit) = interval_fraction(&quota);
        assert_eq!(quota.is_exact(), documented_exact(&quota), "{quota:?}");
        Self {
            kind,
            unit,
            interval,
            capacity,
            heal_threshold: i128::from(heal_threshold) * unit,
            // a fresh bucket is full at any time: bank "infinitely" old credit
            credit: i128::from(capacity) * interval,
            last: 0,
        }
    }

    fn full(&self) -> i128 {
        i128::from(self.capacity) * self.interval
    }

    /// Credit available at `now`, capped at full; may be negative when `now`
    /// is behind the last update (a stale or backwards clock).
    fn available(&self, now: i128) -> i128 {
        (self.credit + (now - self.last)).min(self.full())
    }

    /// Credit after healing: a debt deeper than the threshold means the
    /// clock went back, and the bucket restarts as "just emptied at now".
    fn healed(&self, now: i128) -> (i128, bool) {
        let avail = self.available(now);
        if avail < -self.heal_threshold {
            let empty = match self.kind {
                BucketKind::TokenBucket => 0,
                BucketKind::LeakyBucket => self.full() - self.interval,
            };
            (empty, true)
        } else {
            (avail, false)
        }
    }

    /// `units` in whole nanoseconds, rounded up.
    fn nanos(&self, units: i128) -> u64 {
        u64::try_from((units + self.unit - 1).div_euclid(self.unit)).expect("a wait")
    }

    fn remaining(&self, avail: i128) -> u32 {
        match self.kind {
            BucketKind::TokenBucket => {
                let r = avail.max(0) / self.interval;
                r.min(i128::from(self.capacity)) as u32
            }
            BucketKind::LeakyBucket if avail >= self.full() => self.capacity,
            BucketKind::LeakyBucket => 0,
        }
    }

    fn check(&mut self, n: u32, now: u64) -> Outcome {
        if n > self.capacity {
            return Outcome::TooLarge;
        }
        let now = i128::from(now) * self.unit;
        let (avail, healed) = self.healed(now);
        if n == 0 {
            return Outcome::Allowed {
                remaining: self.remaining(avail),
                reset_after: self.nanos(self.full() - avail),
            };
        }
        let cost = i128::from(n) * self.interval;
        let needed = match self.kind {
            BucketKind::TokenBucket => cost,
            BucketKind::LeakyBucket => self.full(),
        };
        if avail >= needed {
            self.credit = avail - cost;
            self.last = now;
            Outcome::Allowed {
                remaining: self.remaining(self.credit),
                reset_after: self.nanos(self.full() - self.credit),
            }
        } else {
            if healed {
                self.credit = avail;
                self.last = now;
            }
            Outcome::Denied {
                retry_after: self.nanos(needed - avail),
                remaining: self.remaining(avail),
                reset_after: self.nanos(self.full() - avail),
            }
        }
    }

    fn refund(&mut self, n: u32, now: u64) {
        let now = i128::from(now) * self.unit;
        let avail = self.available(now);
        if avail >= self.full() {
            return;
        }
        self.credit = (avail + i128::from(n) * self.interval).min(self.full());
        self.last = now;
    }

    fn time_until_ready(&self, n: u32, now: u64) -> Option<u64> {
        if n > self.capacity {
            return None;
        }
        if n == 0 {
            return Some(0);
        }
        let (avail, _) = self.healed(i128::from(now) * self.unit);
        let needed = match self.kind {
            BucketKind::TokenBucket => i128::from(n) * self.interval,
            BucketKind::LeakyBucket => self.full(),
        };
        Some(self.nanos((needed - avail).max(0)))
    }
}

/// An admission, described by the state right after it.
fn allowed(s: Snapshot) -> Outcome {
    Outcome::Allowed {
        remaining: s.remaining(),
        reset_after: s.reset_after_nanos(),
    }
}

/// The outcome of `gcra.check_n(&state, n, now)`: an admission (`Ok`, the
/// instant the state is full again) is described by the snapshot taken
/// right after it at the same `now`, which must agree with that instant.
fn outcome(
    r: Result<Timestamp, Refusal<'_>>,
    gcra: &Gcra,
    state: &GcraState,
    now: u64,
) -> Result<Outcome, TestCaseError> {
    Ok(match r {
        Err(d) if d.is_never() => Outcome::TooLarge,
        Ok(full) => {
            let s = gcra.snapshot(state, t(now));
            prop_assert_eq!(
                full,
                t(now + s.reset_after_nanos()),
                "an admission at {} answers when the state is full again",
                now
            );
            allowed(s)
        }
        Err(d) => Outcome::Denied {
            retry_after: d.retry_after_nanos(),
            remaining: d.snapshot().remaining(),
            reset_after: d.snapshot().reset_after_nanos(),
        },
    })
}

#[derive(Debug, Clone)]
enum Op {
    Check(u32),
    Refund(u32),
    Peek,
}

fn kind() -> impl Strategy<Value = BucketKind> {
    prop_oneof![Just(BucketKind::TokenBucket), Just(BucketKind::LeakyBucket)]
}

/// Random quotas: 1 ns to ~1000 s intervals, bursts up to 64.
///
/// The fourth value was the leaky bucket's separate max weight, gone in
/// API 13 (its largest request is the burst now); it is still drawn so that
/// the seeds in `model.proptest-regressions` replay the same quotas.
fn quota() -> impl Strategy<Value = Quota> {
    (1u32..=1000, 1u64..=1_000_000_000_000, 1u32..=64, 1u32..=64).prop_map(
        |(permits, period, burst, _old_weight)| {
            let period = period.max(u64::from(permits));
            Quota::new(permits, Duration::from_nanos(period))
                .and_then(|q| q.with_burst(burst))
                .expect("generated quota is valid")
        },
    )
}

fn op(max_n: u32) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..=max_n).prop_map(Op::Check),
        1 => (0..=max_n).prop_map(Op::Refund),
        1 => Just(Op::Peek),
    ]
}

/// Time steps: mostly forward, sometimes backwards (small and large).
fn step() -> impl Strategy<Value = i64> {
    prop_oneof![
        8 => 0i64..2_000_000_000,
        2 => -2_000_000_000i64..0,
        1 => Just(-3_600_000_000_000i64),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Every decision, snapshot and wait equals the reference model's, for
    /// monotonic and non-monotonic clocks alike.
    #[test]
    fn decisions_equal_the_model(
        kind in kind(),
        quota in quota(),
        heal in prop_oneof![Just(1_000_000_000u64), 0u64..5_000_000_000],
        start in 0u64..(1 << 50),
        ops in proptest::collection::vec((step(), op(80)), 1..200),
    ) {
        let gcra = Gcra::new(kind, quota).with_heal_threshold(Duration::from_nanos(heal));
        let state = GcraState::new();
        let mut model = Model::new(kind, quota, heal);
        let mut now = start;
        for (dt, op) in ops {
            now = now.saturating_add_signed(dt);
            match op {
                Op::Check(n) => {
                    let got = outcome(gcra.check_n(&state, n, t(now)), &gcra, &state, now)?;
                    let want = model.check(n, now);
                    prop_assert_eq!(got, want, "check_n({}) at {}", n, now);
                }
                Op::Refund(n) => {
                    gcra.refund(&state, n, t(now));
                    model.refund(n, now);
                }
                Op::Peek => {
                    let got = outcome(gcra.check_n(&state, 0, t(now)), &gcra, &state, now)?;
                    prop_assert_eq!(got, model.check(0, now));
                    let snap = gcra.snapshot(&state, t(now));
                    prop_assert_eq!(allowed(snap), model.check(0, now));
                }
            }
            for n in [1, 2, quota.burst()] {
                // Err only for a request that can never succeed
                prop_assert_eq!(
                    gcra.time_until_ready(&state, n, t(now)).map_err(|r| r.is_never()),
                    model.time_until_ready(n, now).map(Duration::from_nanos).ok_or(true)
                );
            }
        }
    }

    /// Safety: over any interval of length t, admitted ≤ capacity + ⌊t/T⌋.
    ///
    /// On a monotonic clock this is checked directly. With callers whose
    /// `now` is stale by less than the heal threshold, each admission is
    /// charged at the time its caller presented: for admissions i ≤ j (in
    /// the order they happened), `Σ n · T ≤ (seen_j − seen_i) + capacity · T`.
    /// A stale caller is never granted more than a caller who really was at
    /// its earlier instant; in true time that is at most `stale / T` extra.
    #[test]
    fn admitted_never_exceeds_capacity_plus_elapsed_over_interval(
        kind in kind(),
        quota in quota(),
        start in 0u64..(1 << 50),
        stale_max in prop_oneof![Just(0u64), 1u64..1_000_000_000],
        ops in proptest::collection::vec(
            (0u64..3_000_000_000, any::<u64>(), 1u32..=64),
            1..300
        ),
    ) {
        let gcra = Gcra::new(kind, quota);
        let state = GcraState::new();
        let capacity = i128::from(gcra.capacity());
        // T = interval / per_ns nanoseconds: exact, or rounded up in the
        // rounded regime (a stronger bound than the exact T)
        let (interval, per_ns) = interval_fraction(&quota);
        let mut true_now = start;
        // (true time, presented time, permits)
        let mut admitted: Vec<(i128, i128, i128)> = Vec::new();
        for (dt, stale, n) in ops {
            true_now += dt;
            let stale = if stale_max == 0 { 0 } else { stale % stale_max };
            let seen = true_now.saturating_sub(stale);
            let n = n.min(gcra.capacity());
            if gcra.check_n(&state, n, t(seen)).is_ok() {
                admitted.push((i128::from(true_now), i128::from(seen), i128::from(n)));
            }
        }
        let stale_slack = i128::from(stale_max);
        for i in 0..admitted.len() {
            let mut sum = 0;
            for j in i..admitted.len() {
                sum += admitted[j].2;
                let presented = admitted[j].1 - admitted[i].1;
                prop_assert!(
                    sum * interval <= presented * per_ns + capacity * interval,
                    "{} permits over presented {} ns (capacity {}, T {}/{})",
                    sum, presented, capacity, interval, per_ns
                );
                let t = admitted[j].0 - admitted[i].0;
                prop_assert!(
                    sum <= capacity + ((t + stale_slack) * per_ns) / interval,
                    "{} permits in {} ns true time (capacity {}, T {}/{}, stale < {})",
                    sum, t, capacity, interval, per_ns, stale_max
                );
            }
        }
    }

    /// Liveness: on a monotonic clock, a request the model admits is admitted.
    #[test]
    fn monotonic_liveness_matches_the_model(
        kind in kind(),
        quota in quota(),
        ops in proptest::collection::vec((0u64..2_000_000_000, 1u32..=64), 1..200),
    ) {
        let gcra = Gcra::new(kind, quota);
        let state = GcraState::new();
        let mut model = Model::new(kind, quota, 1_000_000_000);
        let mut now = 0u64;
        for (dt, n) in ops {
            now += dt;
            let n = n.min(gcra.capacity());
            // None: can never succeed; Some(admitted) otherwise
            let got = match gcra.check_n(&state, n, t(now)) {
                Ok(_) => Some(true),
                Err(r) if r.is_never() => None,
                Err(_) => Some(false),
            };
            let want = matches!(model.check(n, now), Outcome::Allowed { .. });
            prop_assert_eq!(got, Some(want));
        }
    }

    /// Extreme values give errors or decisions, never a panic or a wrap.
    #[test]
    fn extreme_values_never_panic(
        kind in kind(),
        permits in prop_oneof![Just(1u32), Just(u32::MAX), any::<u32>()],
        period in prop_oneof![Just(1u64), Just(u64::MAX), Just(3_155_760_000_000_000_000u64), any::<u64>()],
        burst in prop_oneof![Just(1u32), Just(u32::MAX), any::<u32>()],
        nows in proptest::collection::vec(
            prop_oneof![Just(0u64), Just(u64::MAX), Just(u64::MAX - 1), any::<u64>()], 1..30),
        ns in proptest::collection::vec(prop_oneof![Just(0u32), Just(1u32), Just(u32::MAX), any::<u32>()], 1..30),
    ) {
        let Ok(quota) = Quota::new(permits, Duration::from_nanos(period)) else { return Ok(()) };
        // the burst is also a leaky bucket's largest request
        let quota = quota.with_burst(burst).unwrap_or(quota);
        for heal in [0, 1, u64::MAX] {
            let gcra = Gcra::new(kind, quota).with_heal_threshold(Duration::from_nanos(heal));
            let state = GcraState::new();
            for (&now, &n) in nows.iter().zip(ns.iter().cycle()) {
                let now = t(now);
                match gcra.check_n(&state, n, now) {
                    Ok(full) => {
                        let _ = full;
                        let _ = gcra.snapshot(&state, now).remaining();
                    }
                    Err(d) => {
                        let _ = d.snapshot().remaining();
                        let _ = d.retry_after();
                    }
                }
                gcra.refund(&state, n, now);
                let _ = gcra.snapshot(&state, now).remaining();
                let _ = gcra.time_until_ready(&state, n, now);
                let _ = gcra.is_idle(&state, now);
            }
        }
    }
}
