//! Exact rates against an independent rational model.
//!
//! The model is a textbook token counter, not a TAT: a *credit* of banked
//! refill time and the instant it was last updated, counted in units of
//! `1/permits` ns (so `T = period / permits` is exactly `period` units,
//! whatever its denominator) in `i128`. Waits it reports are rounded up to
//! whole nanoseconds, the first nanosecond at which they hold.
//!
//! - Exact regime (`T`'s denominator in ns at most 16): a bucket, a
//!   `LiveBucket` and a lock-free keyed table decide exactly as the model:
//!   every allow/deny, `retry_after`, `remaining`, `reset_after`, wait, wait
//!   behind a queue, idleness and TAT, under checks, peeks and refunds at
//!   times that step forward, land on the exact nanosecond a permit comes
//!   back (and one before), and go back (stale callers, and clocks going
//!   back far enough to heal).
//! - Rounded regime: the model is fed what the bucket admitted and refunded;
//!   on a monotonic clock the bucket never admits what the model refuses
//!   and never shows more permits than it. (At a stale `now` it may: its
//!   tolerance `(burst − 1) × ⌈T⌉` is larger than the exact one, so a
//!   caller presenting an earlier instant gets the rounded bucket's
//!   tolerance. `tests/model.rs` bounds stale callers in presented and in
//!   true time.)
//! - Both: over every span of length `t`, a bucket admits at most
//!   `burst + ⌊t / T⌋` permits, `T` exact.
#![cfg(feature = "std")]

use core::time::Duration;

use proptest::prelude::*;
use tollgate::keyed::{KeyedTable, LockFreeGcraTable};
use tollgate::live::LiveBucket;
use tollgate::{Bucket, BucketKind, Gcra, Limiter, Quota, Refusal, Snapshot, Timestamp};

fn t(ns: u64) -> Timestamp {
    Timestamp::from_nanos(ns)
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// GCRA as a credit counter over rationals (units of `1/permits` ns).
#[derive(Debug, Clone, Copy)]
struct Rational {
    kind: BucketKind,
    /// Units per nanosecond: the quota's permits.
    unit: i128,
    /// `T` in units: the quota's period in nanoseconds.
    t: i128,
    capacity: i128,
    /// The heal threshold in units.
    heal: i128,
    credit: i128,
    last: i128,
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
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

impl Outcome {
    /// The outcome of a check; `after` is the limiter's snapshot taken
    /// right after it, at the same instant (an admission no longer carries
    /// one).
    fn of(r: Result<(), Refusal<'_>>, after: impl FnOnce() -> Snapshot) -> Self {
        match r {
            Err(d) if d.is_never() => Self::TooLarge,
            Ok(()) => {
                let s = after();
                Self::Allowed {
                    remaining: s.remaining(),
                    reset_after: s.reset_after_nanos(),
                }
            }
            Err(d) => Self::Denied {
                retry_after: d.retry_after_nanos(),
                remaining: d.snapshot().remaining(),
                reset_after: d.snapshot().reset_after_nanos(),
            },
        }
    }

    fn allowed(self) -> bool {
        matches!(self, Self::Allowed { .. })
    }
}

impl Rational {
    fn new(kind: BucketKind, quota: &Quota, heal_nanos: u64) -> Self {
        let unit = i128::from(quota.permits());
        let t = i128::from(quota.period_nanos());
        let capacity = i128::from(quota.burst());
        Self {
            kind,
            unit,
            t,
            capacity,
            heal: i128::from(heal_nanos) * unit,
            // a fresh bucket is full at any time
            credit: capacity * t,
            last: 0,
        }
    }

    fn full(&self) -> i128 {
        self.capacity * self.t
    }

    fn units(&self, now: u64) -> i128 {
        i128::from(now) * self.unit
    }

    /// Whole nanoseconds, rounded up.
    fn nanos(&self, units: i128) -> u64 {
        u64::try_from((units.max(0) + self.unit - 1) / self.unit).expect("fits")
    }

    /// Banked credit at `now` (capped at full; negative for a stale now).
    fn available(&self, now: i128) -> i128 {
        (self.credit + (now - self.last)).min(self.full())
    }

    /// Credit after healing: a debt deeper than the heal threshold is a
    /// clock that went back; the bucket restarts as "just emptied at now".
    fn healed(&self, now: i128) -> (i128, bool) {
        let avail = self.available(now);
        if avail < -self.heal {
            let empty = match self.kind {
                BucketKind::TokenBucket => 0,
                BucketKind::LeakyBucket => self.full() - self.t,
            };
            (empty, true)
        } else {
            (avail, false)
        }
    }

    fn remaining(&self, avail: i128) -> u32 {
        let r = match self.kind {
            BucketKind::TokenBucket => (avail.max(0) / self.t).min(self.capacity),
            BucketKind::LeakyBucket if avail >= self.full() => self.capacity,
            BucketKind::LeakyBucket => 0,
        };
        u32::try_from(r).expect("remaining")
    }

    /// What `n` permits need banked: their cost, or (leaky) a drained
    /// bucket.
    fn needed(&self, n: u32) -> i128 {
        match self.kind {
            BucketKind::TokenBucket => i128::from(n) * self.t,
            BucketKind::LeakyBucket => self.full(),
        }
    }

    fn check(&mut self, n: u32, now: u64) -> Outcome {
        if i128::from(n) > self.capacity {
            return Outcome::TooLarge;
        }
        let now = self.units(now);
        let (avail, healed) = self.healed(now);
        if n == 0 {
            return Outcome::Allowed {
                remaining: self.remaining(avail),
                reset_after: self.nanos(self.full() - avail),
            };
        }
        if avail >= self.needed(n) {
            self.credit = avail - i128::from(n) * self.t;
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
                retry_after: self.nanos(self.needed(n) - avail),
                remaining: self.remaining(avail),
                reset_after: self.nanos(self.full() - avail),
            }
        }
    }

    /// Would `n` be admitted at `now`? (No heal: used only where none can
    /// happen.)
    fn admits(&self, n: u32, now: u64) -> bool {
        self.available(self.units(now)) >= self.needed(n)
    }

    /// Records an admission of `n` at `now` made elsewhere.
    fn take(&mut self, n: u32, now: u64) {
        let now = self.units(now);
        self.credit = self.available(now) - i128::from(n) * self.t;
        self.last = now;
    }

    fn refund(&mut self, n: u32, now: u64) {
        let now = self.units(now);
        let avail = self.available(now);
        if avail >= self.full() {
            return;
        }
        self.credit = (avail + i128::from(n) * self.t).min(self.full());
        self.last = now;
    }

    fn time_until_ready(&self, n: u32, now: u64) -> Option<u64> {
        if i128::from(n) > self.capacity {
            return None;
        }
        if n == 0 {
            return Some(0);
        }
        let (avail, _) = self.healed(self.units(now));
        Some(self.nanos(self.needed(n) - avail))
    }

    /// The wait for the last of `ahead + n` permits, `ahead` queued first.
    fn time_until_ready_after(&self, ahead: u64, n: u32, now: u64) -> Option<u64> {
        if i128::from(n) > self.capacity {
            return None;
        }
        let (avail, _) = self.healed(self.units(now));
        let ahead = i128::from(ahead) * self.t;
        Some(match self.kind {
            BucketKind::TokenBucket => self.nanos(ahead + i128::from(n) * self.t - avail),
            BucketKind::LeakyBucket if n == 0 && ahead == 0 => 0,
            BucketKind::LeakyBucket => self.nanos(self.full() - avail + ahead),
        })
    }

    /// Full again at `now`: banked credit (uncapped, unhealed) ≥ full.
    fn idle(&self, now: u64) -> bool {
        self.credit + (self.units(now) - self.last) >= self.full()
    }

    /// When the bucket is full again, in nanoseconds rounded up.
    fn tat(&self) -> u64 {
        self.nanos(self.last + self.full() - self.credit)
    }
}

/// The regime the quota documentation promises: `T = P/d` in lowest terms
/// is exact for `d = 1`, or `d ≤ 16` with `burst × P ≤ 2^60`.
fn documented_exact(quota: &Quota) -> bool {
    let g = gcd(quota.period_nanos(), u64::from(quota.permits()));
    let (p, d) = (quota.period_nanos() / g, u64::from(quota.permits()) / g);
    d == 1 || (d <= 16 && u128::from(p) * u128::from(quota.burst()) <= 1 << 60)
}

/// `T = p/d` ns in lowest terms, scaled by `g`: `g·d` permits per `g·p` ns.
fn quota_of(p: u64, d: u64, g: u64, burst: u32) -> Quota {
    // T ≥ 1 ns (the smallest quota), and p coprime with d, so that d is
    // the denominator
    let mut p = p.max(d);
    while gcd(p, d) != 1 {
        p += 1;
    }
    let permits = u32::try_from(d * g).expect("permits");
    Quota::new(permits, Duration::from_nanos(p * g))
        .and_then(|q| q.with_burst(burst))
        .expect("valid quota")
}

/// Exact quotas: denominators 1 to 16, `T` from a fraction of a
/// nanosecond to about a minute, and the familiar ones.
fn exact_quota() -> impl Strategy<Value = Quota> {
    prop_oneof![
        4 => (1u64..=60_000_000_000, 1u64..=16, 1u64..=6, 1u32..=40)
            .prop_map(|(p, d, g, burst)| quota_of(p, d, g, burst)),
        2 => (1u64..=5_000, 2u64..=16, 1u64..=3, 1u32..=40)
            .prop_map(|(p, d, g, burst)| quota_of(p, d, g, burst)),
        1 => (
            prop::sample::select(vec![3u32, 6, 7, 9, 11, 12, 13, 14, 15, 24, 48]),
            prop::sample::select(vec![1_000_000_000u64, 60_000_000_000, 3_600_000_000_000]),
            1u32..=4,
        )
            .prop_map(|(permits, period, k)| {
                Quota::new(permits, Duration::from_nanos(period))
                    .and_then(|q| q.with_burst(permits * k))
                    .expect("valid quota")
            }),
    ]
}

/// Rounded quotas: denominators above 16, or an exact denominator whose
/// largest lead passes 2^60 units.
fn rounded_quota() -> impl Strategy<Value = Quota> {
    prop_oneof![
        4 => (1u64..=60_000_000_000, 17u64..=5_000, 1u64..=3, 1u32..=40)
            .prop_map(|(p, d, g, burst)| quota_of(p, d, g, burst)),
        1 => (2u64..=16, 1u32..=8, 0u64..1 << 58).prop_map(|(d, burst, extra)| {
            let p = ((1u64 << 60) / u64::from(burst)) + 1 + extra;
            quota_of(p, d, 1, burst)
        }),
        1 => prop::sample::select(vec![17u32, 999, 7_001, 1_000_003]).prop_map(|permits| {
            Quota::per_second(permits).expect("valid quota")
        }),
    ]
}

fn kind() -> impl Strategy<Value = BucketKind> {
    prop_oneof![Just(BucketKind::TokenBucket), Just(BucketKind::LeakyBucket)]
}

#[derive(Debug, Clone)]
enum Op {
    Check(u32),
    Refund(u32),
    Peek,
    /// Forward by `x / 1000` of an interval.
    Forward(u64),
    /// Forward a few nanoseconds.
    Nudge(u64),
    /// Forward to the first nanosecond `n` permits are ready (the model's
    /// wait), or (`true`) one nanosecond before.
    ToReady(u32, bool),
    /// Back by `x / 1000` of an interval (a stale caller, or a clock that
    /// went back).
    Back(u64),
    /// Back an hour: beyond any heal threshold here.
    BackHour,
}

fn op(max_n: u32) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..=max_n).prop_map(Op::Check),
        1 => (0..=max_n).prop_map(Op::Refund),
        1 => Just(Op::Peek),
        3 => (0u64..3_000).prop_map(Op::Forward),
        1 => (0u64..4).prop_map(Op::Nudge),
        3 => ((1..=max_n), any::<bool>()).prop_map(|(n, before)| Op::ToReady(n, before)),
        1 => (0u64..2_000).prop_map(Op::Back),
        1 => Just(Op::BackHour),
    ]
}

/// The largest time the runs reach: far below every horizon.
const TIME_LIMIT: u64 = 1 << 62;

/// `now` after a time op (`None` for other ops). `backwards`: whether the
/// clock may go back (else going back is standing still).
fn step_time(op: &Op, now: u64, interval: u64, model: &Rational, backwards: bool) -> Option<u64> {
    let fwd = |dt: u64| {
        let next = now.saturating_add(dt);
        if next > TIME_LIMIT { now } else { next }
    };
    let back = |dt: u64| {
        if backwards {
            now.saturating_sub(dt)
        } else {
            now
        }
    };
    Some(match *op {
        Op::Forward(x) => {
            fwd(u64::try_from(u128::from(interval) * u128::from(x) / 1000).unwrap_or(u64::MAX))
        }
        Op::Nudge(dt) => fwd(dt),
        Op::ToReady(n, before) => match model.time_until_ready(n, now) {
            Some(w) if w > 0 => fwd(if before { w - 1 } else { w }),
            _ => now,
        },
        Op::Back(x) => {
            back(u64::try_from(u128::from(interval) * u128::from(x) / 1000).unwrap_or(u64::MAX))
        }
        Op::BackHour => back(3_600_000_000_000),
        _ => return None,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_000))]

    /// Exact regime: a bucket, a `LiveBucket` and a lock-free keyed table
    /// decide exactly as the rational model, everything observable equal.
    #[test]
    fn exact_quotas_decide_as_the_rational_model(
        kind in kind(),
        quota in exact_quota(),
        heal in prop_oneof![Just(1_000_000_000u64), 0u64..5_000_000_000],
        start in 0u64..(1 << 50),
        ops in prop::collection::vec(op(40), 1..200),
    ) {
        prop_assert!(quota.is_exact(), "{:?}", quota);
        prop_assert!(documented_exact(&quota));
        let gcra = Gcra::new(kind, quota).with_heal_threshold(Duration::from_nanos(heal));
        let bucket = Bucket::new(gcra);
        let live = LiveBucket::new(gcra);
        let table = LockFreeGcraTable::<u64>::builder(gcra).max_keys(4).build().unwrap();
        let key = 7u64;
        let mut model = Rational::new(kind, &quota, heal);
        let interval = quota.interval_nanos();
        let mut now = start;
        for op in &ops {
            if let Some(next) = step_time(op, now, interval, &model, true) {
                now = next;
                continue;
            }
            let at = t(now);
            match *op {
                Op::Check(n) => {
                    let want = model.check(n, now);
                    prop_assert_eq!(Outcome::of(bucket.check_n(n, at), || bucket.snapshot(at)), want, "check_n({}) at {}", n, now);
                    prop_assert_eq!(Outcome::of(live.check_n(n, at), || live.snapshot(at)), want, "live check_n({}) at {}", n, now);
                    let keyed = table.try_acquire_n(&key, n, at);
                    if let (Ok(grant), Outcome::Allowed { reset_after, .. }) = (keyed, want) {
                        // an admission answers the instant the key is full again
                        prop_assert_eq!(grant.full_at(), t(now + reset_after), "keyed full-again instant of check_n({}) at {}", n, now);
                    }
                    prop_assert_eq!(Outcome::of(keyed.map(|_| ()), || table.snapshot(&key, at)), want, "keyed check_n({}) at {}", n, now);
                }
                Op::Refund(n) => {
                    model.refund(n, now);
                    bucket.refund(n, at);
                    live.refund(n, at);
                    table.refund(&key, n, at);
                }
                _ => {
                    let want = model.check(0, now);
                    prop_assert_eq!(Outcome::of(Ok(()), || bucket.snapshot(at)), want);
                    prop_assert_eq!(Outcome::of(Ok(()), || live.snapshot(at)), want);
                    prop_assert_eq!(Outcome::of(Ok(()), || table.snapshot(&key, at)), want);
                }
            }
            prop_assert_eq!(bucket.is_idle(at), model.idle(now), "idle at {}", now);
            prop_assert_eq!(live.is_idle(at), model.idle(now));
            prop_assert_eq!(bucket.state().tat(bucket.algorithm()), t(model.tat()), "tat at {}", now);
            for n in [1, 2, quota.burst(), quota.burst() + 1] {
                // None (Err) only for a request that can never succeed
                let want = model.time_until_ready(n, now).map(Duration::from_nanos).ok_or(true);
                prop_assert_eq!(bucket.time_until_ready(n, at).map_err(|r| r.is_never()), want, "wait for {} at {}", n, now);
                prop_assert_eq!(live.time_until_ready(n, at).map_err(|r| r.is_never()), want);
                prop_assert_eq!(table.time_until_ready(&key, n, at).map_err(|r| r.is_never()), want);
                for ahead in [0, 1, 5] {
                    let want = model.time_until_ready_after(ahead, n, now).map(Duration::from_nanos);
                    prop_assert_eq!(bucket.time_until_ready_after(&(), ahead, n, at), want, "{} behind {}", n, ahead);
                    prop_assert_eq!(live.time_until_ready_after(&(), ahead, n, at), want);
                }
            }
        }
        // a sweep evicts the key exactly when the model is full again
        let tracked = table.contains(&key);
        let evicted = table.evict_refilled(t(now));
        prop_assert_eq!(evicted, usize::from(tracked && model.idle(now)));
    }

    /// Rounded regime: fed what the bucket did, the rational model admits
    /// every admission the bucket made and never has fewer permits, on a
    /// monotonic clock (see the module documentation for stale callers).
    #[test]
    fn rounded_quotas_never_admit_what_the_rational_model_refuses(
        kind in kind(),
        quota in rounded_quota(),
        start in 0u64..(1 << 50),
        ops in prop::collection::vec(op(40), 1..200),
    ) {
        prop_assert!(!quota.is_exact(), "{:?}", quota);
        prop_assert!(!documented_exact(&quota));
        let heal = 1_000_000_000;
        let bucket = Bucket::new(Gcra::new(kind, quota));
        let mut model = Rational::new(kind, &quota, heal);
        let interval = quota.interval_nanos();
        let mut now = start;
        for op in &ops {
            if let Some(next) = step_time(op, now, interval, &model, false) {
                now = next;
                continue;
            }
            let at = t(now);
            match *op {
                Op::Check(n) => {
                    let got = Outcome::of(bucket.check_n(n, at), || bucket.snapshot(at));
                    if got == Outcome::TooLarge {
                        prop_assert!(n > quota.burst());
                        continue;
                    }
                    if got.allowed() && n > 0 {
                        prop_assert!(
                            model.admits(n, now),
                            "admitted {} at {} where the exact model refuses: {:?}", n, now, model
                        );
                        model.take(n, now);
                    }
                }
                Op::Refund(n) => {
                    model.refund(n, now);
                    bucket.refund(n, at);
                }
                _ => {}
            }
            let shown = bucket.snapshot(at).remaining();
            let exact = model.remaining(model.available(model.units(now)));
            prop_assert!(shown <= exact, "shows {} permits, the exact model {}", shown, exact);
        }
    }

    /// Both regimes, token and leaky: over every span of length `t`
    /// between two admissions, at most `burst + ⌊t / T⌋` permits, `T`
    /// exact; in the exact regime a greedy client gets exactly that many
    /// at period boundaries.
    #[test]
    fn admitted_over_every_span_is_at_most_burst_plus_span_over_t(
        kind in kind(),
        quota in prop_oneof![exact_quota(), rounded_quota()],
        start in 0u64..(1 << 50),
        steps in prop::collection::vec((0u64..2_500, 1u32..=40, any::<bool>()), 1..250),
    ) {
        let bucket = Bucket::new(Gcra::new(kind, quota));
        let permits = u128::from(quota.permits());
        let period = u128::from(quota.period_nanos());
        let burst = u128::from(quota.burst());
        let interval = quota.interval_nanos();
        let mut now = start;
        let mut admitted: Vec<(u128, u128)> = Vec::new();
        for (x, n, wait) in steps {
            let n = n.min(quota.burst());
            let d = bucket.check_n(n, t(now));
            if let Err(r) = d {
                prop_assert!(!r.is_never(), "{} permits of a burst of {}", n, quota.burst());
            }
            if d.is_ok() {
                admitted.push((u128::from(now), u128::from(n)));
            } else if wait && now + (d.unwrap_err().retry_after().as_nanos() as u64) <= TIME_LIMIT {
                // retry at the first nanosecond it is promised
                let at = now + d.unwrap_err().retry_after().as_nanos() as u64;
                prop_assert!(bucket.check_n(n, t(at)).is_ok(), "retry at {}", at);
                admitted.push((u128::from(at), u128::from(n)));
                now = at;
            }
            let dt = u64::try_from(u128::from(interval) * u128::from(x) / 1000).unwrap_or(u64::MAX);
            if now.saturating_add(dt) <= TIME_LIMIT {
                now += dt;
            }
        }
        for i in 0..admitted.len() {
            let mut sum = 0;
            for j in i..admitted.len() {
                sum += admitted[j].1;
                let span = admitted[j].0 - admitted[i].0;
                prop_assert!(
                    sum <= burst + span * permits / period,
                    "{} permits in {} ns: burst {}, T = {}/{} ns", sum, span, burst, period, permits
                );
            }
        }
    }
}
