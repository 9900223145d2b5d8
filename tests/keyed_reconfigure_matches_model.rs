//! Reconfiguration against a reference model: random checks (n in 0..=3,
//! keys from a small set, time never going back) interleaved with
//! reconfigurations (`reconfigure`, `update_key_quota`: random quotas and
//! `Inheritance` rules), refunds and sweeps, on a table smaller than the
//! key set (so eviction and the overflow policies take part), compared
//! step by step with an independent model of the definition.
//!
//! The model keeps two TATs per bucket:
//!
//! - a *rounded* one, in whole nanoseconds: GCRA, and at each change of
//!   quota the lead carried over by the rule — used amount: `lead / T_old`
//!   permits, charged again at `T_new`; used fraction: `lead / (burst_old ×
//!   T_old)` of the new `burst × T`; reset: nothing — capped at the new
//!   `burst × T_new` (more used than the new quota holds is an empty
//!   bucket, no debt), rounded up to the next nanosecond (rounding leaves
//!   less room, never more). Every decision, snapshot and `retry_after` of
//!   the table must equal this model's.
//! - an *exact* one, a rational with no rounding at all: every admission
//!   the table makes must also be admissible there, that is within the old
//!   quota before a change and within the new one after it (the exact
//!   model only ever leaves as much room as the rules give, or more).
//!
//! Which keys hold a slot is modelled too: a new key takes a free slot; a
//! full table first evicts every refilled key (TAT ≤ now), and a key that
//! still finds no slot goes to the overflow policy.

mod keyed_support;

use std::collections::BTreeMap;
use std::time::Duration;

use keyed_support::{t, QuotaMap, Quotas, Spec};
use proptest::prelude::*;
use tollgate::keyed::{KeyedLimiter, KeyedPath, OverflowPolicy};
use tollgate::{Algorithm, BucketKind, Decision, Gcra, Inheritance, Quota, Snapshot};

/// Keys 0..KEYS, for a table of MAX_KEYS.
const KEYS: u64 = 8;
const MAX_KEYS: usize = 4;
/// Exact TATs whose denominator grows past this are rounded down (more
/// room: the exact model stays an upper bound on what may be admitted).
const MAX_DENOMINATOR: i128 = 1 << 62;

/// A quota as the model sees it.
#[derive(Debug, Clone, Copy)]
struct Rule {
    /// The emission interval T, in nanoseconds.
    t: i128,
    burst: i128,
    leaky: bool,
}

impl Rule {
    fn of(gcra: &Gcra) -> Self {
        Self {
            t: i128::from(gcra.interval_nanos()),
            burst: i128::from(gcra.capacity()),
            leaky: gcra.kind() == BucketKind::LeakyBucket,
        }
    }

    /// `burst × T`: the lead of an empty bucket.
    fn max_lead(&self) -> i128 {
        self.burst * self.t
    }

    /// The snapshot of a bucket `lead` ns ahead: (limit, remaining,
    /// reset_after).
    fn snapshot(&self, lead: i128) -> (u32, u32, u64) {
        let remaining = if self.leaky {
            if lead == 0 {
                self.burst
            } else {
                0
            }
        } else {
            ((self.max_lead() - lead).max(0) / self.t).min(self.burst)
        };
        (
            self.burst as u32,
            remaining as u32,
            u64::try_from(lead).expect("lead"),
        )
    }
}

fn gcd(a: i128, b: i128) -> i128 {
    let (mut a, mut b) = (a.abs(), b.abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// `p / q` nanoseconds, `q > 0`, reduced.
#[derive(Debug, Clone, Copy)]
struct Ratio {
    p: i128,
    q: i128,
}

impl Ratio {
    const fn int(x: i128) -> Self {
        Self { p: x, q: 1 }
    }

    fn new(p: i128, q: i128) -> Self {
        let g = gcd(p, q).max(1);
        Self { p: p / g, q: q / g }
    }

    fn mul(x: i128, y: i128) -> i128 {
        x.checked_mul(y).expect("the model's rationals fit i128")
    }

    /// `self ≤ x`
    fn le(self, x: i128) -> bool {
        self.p <= Self::mul(x, self.q)
    }

    fn add(self, x: i128) -> Self {
        Self::new(self.p + Self::mul(x, self.q), self.q)
    }

    /// `self × num / den`
    fn scale(self, num: i128, den: i128) -> Self {
        Self::new(Self::mul(self.p, num), Self::mul(self.q, den))
    }

    fn max(self, x: i128) -> Self {
        if self.le(x) {
            Self::int(x)
        } else {
            self
        }
    }

    fn min(self, x: i128) -> Self {
        if self.le(x) {
            self
        } else {
            Self::int(x)
        }
    }

    fn floor(self) -> i128 {
        self.p.div_euclid(self.q)
    }
}

/// A bucket of the model: its rounded and exact TATs.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    rounded: i128,
    exact: Ratio,
}

impl Bucket {
    const FRESH: Self = Self {
        rounded: 0,
        exact: Ratio::int(0),
    };

    fn lead(&self, now: i128) -> i128 {
        (self.rounded - now).max(0)
    }

    fn idle(&self, now: i128) -> bool {
        self.rounded <= now
    }

    /// GCRA on the rounded TAT: what the table must answer.
    fn decide(&self, rule: Rule, n: u32, now: i128) -> Seen {
        let lead = self.lead(now);
        let cost = i128::from(n) * rule.t;
        if n == 0 {
            return Seen::allowed(rule.snapshot(lead));
        }
        let admitted = if rule.leaky {
            lead == 0
        } else {
            lead + cost <= rule.max_lead()
        };
        if admitted {
            Seen::allowed(rule.snapshot(lead + cost))
        } else {
            let retry = if rule.leaky {
                lead
            } else {
                lead + cost - rule.max_lead()
            };
            Seen {
                allowed: false,
                snapshot: rule.snapshot(lead),
                retry_after: Some(u64::try_from(retry).expect("retry")),
            }
        }
    }

    /// Records an admission of `n` the table made, after checking that the
    /// exact bucket admits it too.
    fn admit(&mut self, rule: Rule, n: u32, now: i128) -> Result<(), TestCaseError> {
        let cost = i128::from(n) * rule.t;
        let exact_lead = self.exact.add(-now).max(0);
        let admissible = if rule.leaky {
            exact_lead.le(0)
        } else {
            exact_lead.add(cost).le(rule.max_lead())
        };
        prop_assert!(
            admissible,
            "admitted {} beyond the exact quota {:?}: exact lead {:?}",
            n,
            rule,
            exact_lead
        );
        self.rounded = self.rounded.max(now) + cost;
        self.exact = self.exact.max(now).add(cost);
        Ok(())
    }

    /// Gives `n` permits back (never before `now`).
    fn refund(&mut self, rule: Rule, n: u32, now: i128) {
        let back = i128::from(n) * rule.t;
        if back > 0 && self.rounded > now {
            self.rounded = (self.rounded - back).max(now);
        }
        if back > 0 && !self.exact.le(now) {
            self.exact = self.exact.add(-back).max(now);
        }
    }

    /// Carries the bucket from `old` over to `new` by `how`. Returns true
    /// if the exact TAT had to be rounded down (see `MAX_DENOMINATOR`).
    fn convert(&mut self, old: Rule, new: Rule, how: Inheritance, now: i128) -> bool {
        let lead = self.lead(now);
        if lead > 0 {
            let carried = match how {
                Inheritance::UsedAmount => div_ceil(lead * new.t, old.t),
                Inheritance::UsedFraction => div_ceil(lead * new.max_lead(), old.max_lead()),
                _ => 0,
            };
            self.rounded = now + carried.min(new.max_lead());
        }
        let exact_lead = self.exact.add(-now);
        if exact_lead.le(0) {
            return false;
        }
        let carried = match how {
            Inheritance::UsedAmount => exact_lead.scale(new.t, old.t),
            Inheritance::UsedFraction => exact_lead.scale(new.max_lead(), old.max_lead()),
            _ => Ratio::int(0),
        };
        self.exact = carried.min(new.max_lead()).add(now);
        if self.exact.q > MAX_DENOMINATOR {
            self.exact = Ratio::int(self.exact.floor());
            return true;
        }
        false
    }

    /// The model's own invariant: the exact TAT never leaves less room
    /// than the rounded one.
    fn consistent(&self) -> bool {
        self.exact.le(self.rounded)
    }
}

fn div_ceil(a: i128, b: i128) -> i128 {
    (a + b - 1).div_euclid(b)
}

/// What a decision shows.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Seen {
    allowed: bool,
    /// (limit, remaining, reset_after)
    snapshot: (u32, u32, u64),
    retry_after: Option<u64>,
}

impl Seen {
    fn allowed(snapshot: (u32, u32, u64)) -> Self {
        Self {
            allowed: true,
            snapshot,
            retry_after: None,
        }
    }

    fn of(decision: &Decision) -> Self {
        Self {
            allowed: decision.is_allowed(),
            snapshot: fields(decision.snapshot()),
            retry_after: decision
                .denied()
                .map(|d| u64::try_from(d.retry_after().as_nanos()).expect("retry")),
        }
    }
}

fn fields(s: &Snapshot) -> (u32, u32, u64) {
    (s.limit(), s.remaining(), s.reset_after_nanos())
}

/// The reference model of one table.
struct Model {
    default: Gcra,
    per_key: BTreeMap<u64, Gcra>,
    tracked: BTreeMap<u64, Bucket>,
    shared: Bucket,
    policy: OverflowPolicy,
    /// Exact TATs rounded down so far.
    relaxed: usize,
}

impl Model {
    fn algorithm(&self, key: u64) -> Gcra {
        self.per_key.get(&key).copied().unwrap_or(self.default)
    }

    fn evict_idle(&mut self, now: i128) -> usize {
        let before = self.tracked.len();
        self.tracked.retain(|_, b| !b.idle(now));
        before - self.tracked.len()
    }
}

#[derive(Debug, Clone)]
enum Op {
    Check {
        key: u64,
        n: u32,
    },
    Refund {
        key: u64,
        n: u32,
    },
    Sweep,
    Reconfigure {
        next: Gcra,
        how: Inheritance,
    },
    UpdateKey {
        key: u64,
        quota: Option<Gcra>,
        how: Inheritance,
    },
}

/// One check against the model; `Ok` if the table agreed.
fn check<T: KeyedLimiter<u64, Algorithm = Gcra>>(
    table: &T,
    model: &mut Model,
    key: u64,
    n: u32,
    now: i128,
) -> Result<(), TestCaseError> {
    let at = t(u64::try_from(now).expect("now"));
    let algorithm = model.algorithm(key);
    let rule = Rule::of(&algorithm);
    let got = table.check_n(&key, n, at);
    if i128::from(n) > rule.burst {
        prop_assert!(got.is_err(), "n {} above the burst of key {}", n, key);
        return Ok(());
    }
    let got = got.map_err(|e| TestCaseError::fail(format!("key {key} n {n}: {e:?}")))?;
    let seen = Seen::of(got.decision());
    let context = format!("key {key} n {n} at {now}");
    if !model.tracked.contains_key(&key) && n > 0 {
        if model.tracked.len() >= MAX_KEYS {
            model.evict_idle(now);
        }
        if model.tracked.len() < MAX_KEYS {
            model.tracked.insert(key, Bucket::FRESH);
        }
    }
    let Some(bucket) = model.tracked.get_mut(&key) else {
        if n == 0 {
            // a peek of an untracked key: a fresh bucket's answer
            prop_assert_eq!(got.path(), KeyedPath::Own, "{}", context);
            prop_assert_eq!(seen, Bucket::FRESH.decide(rule, 0, now), "{}", context);
            return Ok(());
        }
        // full of busy keys: the earliest a slot frees up
        let first_free = model
            .tracked
            .values()
            .map(|b| b.lead(now))
            .min()
            .expect("a full table");
        let within_first_free = |retry: Option<u64>| {
            retry.is_some_and(|r| r >= 1 && i128::from(r) <= first_free.max(1))
        };
        match model.policy {
            OverflowPolicy::SharedBucket => {
                prop_assert_eq!(got.path(), KeyedPath::SharedOverflow, "{}", context);
                let default = Rule::of(&model.default);
                if i128::from(n) > default.burst {
                    // the key's quota allows n, the default never does
                    prop_assert!(!seen.allowed, "{}", context);
                    prop_assert!(within_first_free(seen.retry_after), "{}", context);
                } else {
                    let expected = model.shared.decide(default, n, now);
                    prop_assert_eq!(seen, expected, "{} (shared)", context);
                    if seen.allowed {
                        model.shared.admit(default, n, now)?;
                    }
                }
            }
            OverflowPolicy::Deny => {
                prop_assert_eq!(got.path(), KeyedPath::OverflowDenied, "{}", context);
                prop_assert!(!seen.allowed, "{}", context);
                prop_assert!(within_first_free(seen.retry_after), "{}", context);
                prop_assert_eq!(
                    (seen.snapshot.0, seen.snapshot.1),
                    (rule.burst as u32, 0),
                    "{}",
                    context
                );
            }
            _ => {
                prop_assert_eq!(got.path(), KeyedPath::OverflowAllowed, "{}", context);
                prop_assert_eq!(seen, Bucket::FRESH.decide(rule, n, now), "{}", context);
            }
        }
        return Ok(());
    };
    prop_assert_eq!(got.path(), KeyedPath::Own, "{}", context);
    prop_assert_eq!(seen, bucket.decide(rule, n, now), "{}", context);
    if seen.allowed && n > 0 {
        bucket.admit(rule, n, now)?;
    }
    Ok(())
}

/// Runs `ops` on a table and the model, comparing after every step.
fn matches_model<T: KeyedLimiter<u64, Algorithm = Gcra>>(
    make: impl Fn(Spec) -> T,
    case: &Case,
) -> Result<usize, TestCaseError> {
    let quotas = QuotaMap::leak(case.per_key.iter().copied());
    let table = make(
        Spec::new(case.default, MAX_KEYS)
            .overflow(case.policy)
            .quotas(Quotas::Map(quotas)),
    );
    prop_assert_eq!(table.max_keys(), MAX_KEYS);
    let mut model = Model {
        default: case.default,
        per_key: case.per_key.iter().copied().collect(),
        tracked: BTreeMap::new(),
        shared: Bucket::FRESH,
        policy: case.policy,
        relaxed: 0,
    };
    let mut now: i128 = 1_000_000;
    for (step, (op, dt)) in case.ops.iter().enumerate() {
        now += i128::from(*dt);
        let at = t(u64::try_from(now).expect("now"));
        match *op {
            Op::Check { key, n } => check(&table, &mut model, key, n, now)?,
            Op::Refund { key, n } => {
                table.refund(&key, n, at);
                let rule = Rule::of(&model.algorithm(key));
                let default = Rule::of(&model.default);
                match model.tracked.get_mut(&key) {
                    Some(bucket) => bucket.refund(rule, n, now),
                    None if model.policy == OverflowPolicy::SharedBucket => {
                        model.shared.refund(default, n, now);
                    }
                    None => {}
                }
            }
            Op::Sweep => {
                let evicted = table.evict_refilled(at);
                prop_assert_eq!(evicted, model.evict_idle(now), "step {}", step);
            }
            Op::Reconfigure { next, how } => {
                table.reconfigure(next, how, at);
                let (old, new) = (Rule::of(&model.default), Rule::of(&next));
                for (key, bucket) in &mut model.tracked {
                    if !model.per_key.contains_key(key) && bucket.convert(old, new, how, now) {
                        model.relaxed += 1;
                    }
                }
                if model.shared.convert(old, new, how, now) {
                    model.relaxed += 1;
                }
                model.default = next;
            }
            Op::UpdateKey { key, quota, how } => {
                let old = Rule::of(&model.algorithm(key));
                let mut calls = 0;
                table.update_key_quota(&key, how, at, &mut || {
                    calls += 1;
                    quotas.set(key, quota);
                });
                prop_assert_eq!(calls, 1);
                match quota {
                    Some(gcra) => model.per_key.insert(key, gcra),
                    None => model.per_key.remove(&key),
                };
                let new = Rule::of(&model.algorithm(key));
                if let Some(bucket) = model.tracked.get_mut(&key) {
                    if bucket.convert(old, new, how, now) {
                        model.relaxed += 1;
                    }
                }
            }
        }
        // after every step, everything observable agrees
        prop_assert_eq!(table.default_algorithm(), model.default, "step {}", step);
        prop_assert_eq!(table.len(), model.tracked.len(), "step {} {:?}", step, op);
        let default = Rule::of(&model.default);
        prop_assert_eq!(
            fields(&table.shared_snapshot(at)),
            default.snapshot(model.shared.lead(now)),
            "step {} shared",
            step
        );
        prop_assert!(model.shared.consistent());
        for key in 0..KEYS {
            let rule = Rule::of(&model.algorithm(key));
            let tracked = model.tracked.get(&key);
            prop_assert_eq!(
                table.contains(&key),
                tracked.is_some(),
                "step {} key {}",
                step,
                key
            );
            prop_assert_eq!(table.capacity_of(&key), rule.burst as u32);
            let lead = tracked.map_or(0, |b| b.lead(now));
            prop_assert_eq!(
                fields(&table.snapshot(&key, at)),
                rule.snapshot(lead),
                "step {} key {} {:?}",
                step,
                key,
                op
            );
            prop_assert!(tracked.is_none_or(Bucket::consistent));
        }
    }
    Ok(model.relaxed)
}

#[derive(Debug, Clone)]
struct Case {
    default: Gcra,
    per_key: Vec<(u64, Gcra)>,
    policy: OverflowPolicy,
    ops: Vec<(Op, u64)>,
}

/// A token bucket (three in four) or a leaky one, burst 1..=4, interval a
/// whole number of milliseconds (three in four) or any 0.1..25 ms.
fn gcra() -> impl Strategy<Value = Gcra> {
    let interval = prop_oneof![
        3 => (1u64..=25).prop_map(|ms| ms * 1_000_000),
        1 => 100_000u64..=25_000_000,
    ];
    (interval, 1u32..=4, prop::bool::weighted(0.25)).prop_map(|(ns, burst, leaky)| {
        let quota = Quota::with_period(Duration::from_nanos(ns))
            .and_then(|q| q.with_burst(burst))
            .expect("valid quota");
        if leaky {
            Gcra::leaky_bucket(quota)
        } else {
            Gcra::token_bucket(quota)
        }
    })
}

fn inheritance() -> impl Strategy<Value = Inheritance> {
    prop_oneof![
        Just(Inheritance::UsedAmount),
        Just(Inheritance::UsedFraction),
        Just(Inheritance::Reset),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => (0..KEYS, 0u32..=3).prop_map(|(key, n)| Op::Check { key, n }),
        1 => (0..KEYS, 1u32..=3).prop_map(|(key, n)| Op::Refund { key, n }),
        1 => Just(Op::Sweep),
        2 => (gcra(), inheritance()).prop_map(|(next, how)| Op::Reconfigure { next, how }),
        2 => (0..KEYS, prop::option::weighted(0.7, gcra()), inheritance())
            .prop_map(|(key, quota, how)| Op::UpdateKey { key, quota, how }),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    let policy = prop_oneof![
        Just(OverflowPolicy::SharedBucket),
        Just(OverflowPolicy::Deny),
        Just(OverflowPolicy::Allow),
    ];
    // mostly short steps (keys stay busy, the table fills and overflows),
    // some up to 50 ms (buckets refill, keys are evicted)
    let ops = prop::collection::vec(
        (
            op(),
            prop_oneof![3 => Just(0u64), 4 => 0u64..3_000_000, 1 => 0u64..50_000_000],
        ),
        0..150,
    );
    let per_key = prop::collection::vec(prop::option::weighted(0.3, gcra()), KEYS as usize)
        .prop_map(|quotas| {
            (0..KEYS)
                .zip(quotas)
                .filter_map(|(key, quota)| quota.map(|q| (key, q)))
                .collect::<Vec<_>>()
        });
    (gcra(), per_key, policy, ops).prop_map(|(default, per_key, policy, ops)| Case {
        default,
        per_key,
        policy,
        ops,
    })
}

const CASES: u32 = 1_000;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn sharded_reconfiguration_matches_the_model(case in case()) {
        matches_model(keyed_support::sharded, &case)?;
    }

    #[test]
    fn lock_free_reconfiguration_matches_the_model(case in case()) {
        matches_model(keyed_support::lock_free, &case)?;
    }

    #[test]
    fn heapless_reconfiguration_matches_the_model(case in case()) {
        matches_model(keyed_support::heapless::<MAX_KEYS>, &case)?;
    }
}

/// The model itself: the worked example of the documentation, by rule, on
/// the rounded and the exact TAT alike.
#[test]
fn the_model_keeps_what_each_rule_says() {
    let ten = Rule::of(&keyed_support::per_second(10, 10));
    let twenty = Rule::of(&keyed_support::per_second(20, 20));
    let now = 5_000_000_000;
    for (how, remaining) in [
        (Inheritance::UsedAmount, 14),
        (Inheritance::UsedFraction, 8),
        (Inheritance::Reset, 20),
    ] {
        let mut bucket = Bucket::FRESH;
        bucket.admit(ten, 6, now).expect("6 of 10");
        assert!(!bucket.convert(ten, twenty, how, now));
        assert_eq!(twenty.snapshot(bucket.lead(now)).1, remaining, "{how:?}");
        assert!(bucket.consistent());
        assert_eq!(bucket.exact.p, bucket.rounded, "{how:?}: exact here");
    }
    // a third of a nanosecond: rounded up, exactly a third in the exact TAT
    let three = Rule {
        t: 3,
        burst: 4,
        leaky: false,
    };
    let one = Rule {
        t: 1,
        burst: 4,
        leaky: false,
    };
    let mut bucket = Bucket::FRESH;
    bucket.admit(three, 1, 10).expect("fresh");
    bucket.convert(three, one, Inheritance::UsedFraction, 11);
    // lead 2 of 12 → 2/12 of 4 = 2/3 ns
    assert_eq!(bucket.rounded, 12);
    assert_eq!((bucket.exact.p, bucket.exact.q), (35, 3));
    assert!(bucket.consistent());
}
