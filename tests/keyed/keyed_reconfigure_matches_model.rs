//! Reconfiguration against a reference model: random checks (n in 0..=3,
//! keys from a small set, time never going back) interleaved with
//! reconfigurations (`reconfigure`, `update_key_quota`: random quotas and
//! `Inheritance` rules), refunds and sweeps, on a table smaller than the
//! key set (so eviction and the overflow policies take part), compared
//! step by step with an independent model of the definition.
//!
//! The model keeps two TATs per bucket, both rationals (nanoseconds):
//!
//! - the *table's* one: GCRA with the interval the quota documents it
//!   enforces — `T = period / permits` exactly in the exact regime (its
//!   denominator `d` at most 16, see `tollgate::quota`), `T` rounded up to
//!   whole nanoseconds otherwise — and at each change of quota the lead
//!   carried over by the rule — used amount: `lead / T_old` permits,
//!   charged again at `T_new`; used fraction: `lead / (burst_old × T_old)`
//!   of the new `burst × T`; reset: nothing — capped at the new
//!   `burst × T_new` (more used than the new quota holds is an empty
//!   bucket, no debt), rounded up to the new quota's grid, the next
//!   `1/d_new` of a nanosecond (rounding leaves less room, never more).
//!   Every decision, snapshot and `retry_after` of the table must equal
//!   this model's, times reported in whole nanoseconds rounded up.
//! - an *exact* one, with no rounding at all and every quota's exact
//!   `T = period / permits`: every admission the table makes must also be
//!   admissible there, that is within the old quota before a change and
//!   within the new one after it (the exact model only ever leaves as much
//!   room as the rules give, or more).
//!
//! Quotas are drawn from whole-nanosecond intervals (with a period), from
//! fractional exact ones (`3 per 7 ms`) and from rounded ones (`17 per
//! 5 ms`), so changes cross between units and regimes.
//!
//! Which keys hold a slot is modelled too: a new key takes a free slot; a
//! full table first evicts every refilled key (TAT ≤ now), and a key that
//! still finds no slot goes to the overflow policy.
#![cfg(feature = "std")] // every table, the std ones included (keyed_support)

use crate::keyed_support;

use std::collections::BTreeMap;
use std::time::Duration;

use keyed_support::{QuotaMap, Quotas, Spec, t};
use proptest::prelude::*;
use tollgate::keyed::{KeyedPath, KeyedTable, OverflowPolicy};
use tollgate::{BucketKind, Gcra, Grant, Inheritance, Quota, Refusal, Snapshot, Timestamp};

/// Keys 0..KEYS, for a table of MAX_KEYS.
const KEYS: u64 = 8;
const MAX_KEYS: usize = 4;
/// Exact TATs whose denominator grows past this are rounded down (more
/// room: the exact model stays an upper bound on what may be admitted).
const MAX_DENOMINATOR: i128 = 1 << 62;

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
    const ZERO: Self = Self::int(0);

    const fn int(x: i128) -> Self {
        Self { p: x, q: 1 }
    }

    fn new(p: i128, q: i128) -> Self {
        let g = gcd(p, q).max(1);
        Self { p: p / g, q: q / g }
    }

    fn mul_int(x: i128, y: i128) -> i128 {
        x.checked_mul(y).expect("the model's rationals fit i128")
    }

    fn add(self, x: Self) -> Self {
        Self::new(
            Self::mul_int(self.p, x.q) + Self::mul_int(x.p, self.q),
            Self::mul_int(self.q, x.q),
        )
    }

    fn sub(self, x: Self) -> Self {
        self.add(Self { p: -x.p, q: x.q })
    }

    fn times(self, x: i128) -> Self {
        Self::new(Self::mul_int(self.p, x), self.q)
    }

    /// `self × num / den`
    fn scale(self, num: Self, den: Self) -> Self {
        Self::new(
            Self::mul_int(Self::mul_int(self.p, num.p), den.q),
            Self::mul_int(Self::mul_int(self.q, num.q), den.p),
        )
    }

    /// `⌊self / x⌋`, `x > 0`
    fn div_floor(self, x: Self) -> i128 {
        Self::mul_int(self.p, x.q).div_euclid(Self::mul_int(self.q, x.p))
    }

    fn le(self, x: Self) -> bool {
        Self::mul_int(self.p, x.q) <= Self::mul_int(x.p, self.q)
    }

    fn is_zero(self) -> bool {
        self.p == 0
    }

    fn max(self, x: Self) -> Self {
        if self.le(x) { x } else { self }
    }

    fn min(self, x: Self) -> Self {
        if self.le(x) { self } else { x }
    }

    fn floor(self) -> i128 {
        self.p.div_euclid(self.q)
    }

    /// Rounded up to a whole number of `1/grid` ns.
    fn ceil_to(self, grid: i128) -> Self {
        Self::new(-(-Self::mul_int(self.p, grid)).div_euclid(self.q), grid)
    }

    /// Whole nanoseconds, rounded up.
    fn ceil_nanos(self) -> u64 {
        u64::try_from(self.ceil_to(1).p).expect("whole nanoseconds")
    }
}

/// A quota as the model sees it.
#[derive(Debug, Clone, Copy)]
struct Rule {
    /// The emission interval the table enforces: exact, or rounded up.
    t: Ratio,
    /// The table's unit of time, `1/grid` ns: `T`'s denominator if exact,
    /// else 1.
    grid: i128,
    /// `period / permits`, with no rounding.
    exact_t: Ratio,
    burst: i128,
    leaky: bool,
}

/// The regime the quota documentation promises: `T = P/d` in lowest terms
/// is exact for `d = 1`, or `d ≤ 16` with `burst × P ≤ 2^60`.
fn documented_exact(quota: &Quota) -> bool {
    let exact = Ratio::new(
        i128::from(quota.period_nanos()),
        i128::from(quota.permits()),
    );
    exact.q == 1 || (exact.q <= 16 && exact.p * i128::from(quota.burst()) <= 1 << 60)
}

impl Rule {
    fn new(quota: &Quota, leaky: bool) -> Self {
        assert_eq!(quota.is_exact(), documented_exact(quota), "{quota:?}");
        let exact_t = Ratio::new(
            i128::from(quota.period_nanos()),
            i128::from(quota.permits()),
        );
        let (t, grid) = if documented_exact(quota) {
            (exact_t, exact_t.q)
        } else {
            (Ratio::int(i128::from(quota.interval_nanos())), 1)
        };
        Self {
            t,
            grid,
            exact_t,
            burst: i128::from(quota.burst()),
            leaky,
        }
    }

    /// `burst × T`: the lead of an empty bucket.
    fn max_lead(&self) -> Ratio {
        self.t.times(self.burst)
    }

    fn exact_max_lead(&self) -> Ratio {
        self.exact_t.times(self.burst)
    }

    /// The snapshot of a bucket `lead` ahead: (limit, remaining,
    /// reset_after in ns rounded up).
    fn snapshot(&self, lead: Ratio) -> (u32, u32, u64) {
        let remaining = if self.leaky {
            if lead.is_zero() { self.burst } else { 0 }
        } else {
            self.max_lead()
                .sub(lead)
                .max(Ratio::ZERO)
                .div_floor(self.t)
                .min(self.burst)
        };
        (self.burst as u32, remaining as u32, lead.ceil_nanos())
    }
}

/// A table's bucket configuration and the rule the model applies to it.
#[derive(Debug, Clone, Copy)]
struct Algo {
    gcra: Gcra,
    rule: Rule,
}

impl Algo {
    fn new(quota: Quota, leaky: bool) -> Self {
        let gcra = if leaky {
            Gcra::leaky_bucket(quota)
        } else {
            Gcra::token_bucket(quota)
        };
        assert_eq!(gcra.kind() == BucketKind::LeakyBucket, leaky);
        Self {
            gcra,
            rule: Rule::new(&quota, leaky),
        }
    }
}

/// A bucket of the model: the table's TAT and the exact one.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    table: Ratio,
    exact: Ratio,
}

impl Bucket {
    const FRESH: Self = Self {
        table: Ratio::ZERO,
        exact: Ratio::ZERO,
    };

    fn lead(&self, now: i128) -> Ratio {
        self.table.sub(Ratio::int(now)).max(Ratio::ZERO)
    }

    fn idle(&self, now: i128) -> bool {
        self.table.le(Ratio::int(now))
    }

    /// GCRA on the table's TAT: what the table must answer.
    fn decide(&self, rule: Rule, n: u32, now: i128) -> Seen {
        let lead = self.lead(now);
        let cost = rule.t.times(i128::from(n));
        if n == 0 {
            return Seen::allowed(rule.snapshot(lead));
        }
        let admitted = if rule.leaky {
            lead.is_zero()
        } else {
            lead.add(cost).le(rule.max_lead())
        };
        if admitted {
            Seen::allowed(rule.snapshot(lead.add(cost)))
        } else {
            let retry = if rule.leaky {
                lead
            } else {
                lead.add(cost).sub(rule.max_lead())
            };
            Seen {
                allowed: false,
                snapshot: rule.snapshot(lead),
                retry_after: Some(retry.ceil_nanos()),
            }
        }
    }

    /// Records an admission of `n` the table made, after checking that the
    /// exact bucket admits it too.
    fn admit(&mut self, rule: Rule, n: u32, now: i128) -> Result<(), TestCaseError> {
        let now = Ratio::int(now);
        let exact_cost = rule.exact_t.times(i128::from(n));
        let exact_lead = self.exact.sub(now).max(Ratio::ZERO);
        let admissible = if rule.leaky {
            exact_lead.is_zero()
        } else {
            exact_lead.add(exact_cost).le(rule.exact_max_lead())
        };
        prop_assert!(
            admissible,
            "admitted {} beyond the exact quota {:?}: exact lead {:?}",
            n,
            rule,
            exact_lead
        );
        self.table = self.table.max(now).add(rule.t.times(i128::from(n)));
        self.exact = self.exact.max(now).add(exact_cost);
        Ok(())
    }

    /// Gives `n` permits back (never before `now`).
    fn refund(&mut self, rule: Rule, n: u32, now: i128) {
        let now = Ratio::int(now);
        if n > 0 && !self.table.le(now) {
            self.table = self.table.sub(rule.t.times(i128::from(n))).max(now);
        }
        if n > 0 && !self.exact.le(now) {
            self.exact = self.exact.sub(rule.exact_t.times(i128::from(n))).max(now);
        }
    }

    /// Carries the bucket from `old` over to `new` by `how`. Returns true
    /// if the exact TAT had to be rounded down (see `MAX_DENOMINATOR`).
    fn convert(&mut self, old: Rule, new: Rule, how: Inheritance, now: i128) -> bool {
        let lead = self.lead(now);
        if !lead.is_zero() {
            let carried = match how {
                Inheritance::UsedAmount => lead.scale(new.t, old.t),
                Inheritance::UsedFraction => lead.scale(new.max_lead(), old.max_lead()),
                _ => Ratio::ZERO,
            };
            // on the new quota's grid, rounded up; no debt beyond empty
            self.table = Ratio::int(now).add(carried.ceil_to(new.grid).min(new.max_lead()));
        }
        let exact_lead = self.exact.sub(Ratio::int(now));
        if exact_lead.le(Ratio::ZERO) {
            return false;
        }
        let carried = match how {
            Inheritance::UsedAmount => exact_lead.scale(new.exact_t, old.exact_t),
            Inheritance::UsedFraction => {
                exact_lead.scale(new.exact_max_lead(), old.exact_max_lead())
            }
            _ => Ratio::ZERO,
        };
        self.exact = carried.min(new.exact_max_lead()).add(Ratio::int(now));
        if self.exact.q > MAX_DENOMINATOR {
            self.exact = Ratio::int(self.exact.floor());
            return true;
        }
        false
    }

    /// The model's own invariant: the exact TAT never leaves less room
    /// than the table's.
    fn consistent(&self) -> bool {
        self.exact.le(self.table)
    }
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

    /// What a check at `at` shows. An admission carries no snapshot:
    /// `after` is the admitting state's, taken right after at the same
    /// `at` (the key's own, or the shared one); the instant the admission
    /// says the state is full again must be `at` plus its `reset_after`.
    /// A refusal carries its own; one that can never succeed is not a
    /// decision the model makes here (`n` is within the burst).
    fn of(
        got: &Result<Grant, Refusal<'_>>,
        at: Timestamp,
        after: Snapshot,
    ) -> Result<Self, TestCaseError> {
        Ok(match got {
            Ok(grant) => {
                let full_at = grant.full_at();
                prop_assert_eq!(
                    full_at.as_nanos() - at.as_nanos(),
                    after.reset_after_nanos(),
                    "full again at {:?}, snapshot after {:?}",
                    full_at,
                    after
                );
                Self::allowed(fields(&after))
            }
            Err(refusal) => {
                prop_assert!(!refusal.is_never(), "{:?}", refusal);
                Self {
                    allowed: false,
                    snapshot: fields(refusal.snapshot()),
                    retry_after: Some(refusal.retry_after_nanos()),
                }
            }
        })
    }
}

fn fields(s: &Snapshot) -> (u32, u32, u64) {
    (s.limit(), s.remaining(), s.reset_after_nanos())
}

/// The reference model of one table.
struct Model {
    default: Algo,
    per_key: BTreeMap<u64, Algo>,
    tracked: BTreeMap<u64, Bucket>,
    shared: Bucket,
    policy: OverflowPolicy,
    /// Exact TATs rounded down so far.
    relaxed: usize,
}

impl Model {
    fn algorithm(&self, key: u64) -> Algo {
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
        next: Algo,
        how: Inheritance,
    },
    UpdateKey {
        key: u64,
        quota: Option<Algo>,
        how: Inheritance,
    },
}

/// One check against the model; `Ok` if the table agreed.
fn check<T: KeyedTable<u64, Algorithm = Gcra>>(
    table: &T,
    model: &mut Model,
    key: u64,
    n: u32,
    now: i128,
) -> Result<(), TestCaseError> {
    let at = t(u64::try_from(now).expect("now"));
    let algorithm = model.algorithm(key);
    let rule = algorithm.rule;
    let got = table.try_acquire_n(&key, n, at);
    if i128::from(n) > rule.burst {
        prop_assert!(
            matches!(got, Err(r) if r.is_never() && r.requested() == n),
            "n {} above the burst of key {}: {:?}",
            n,
            key,
            got
        );
        return Ok(());
    }
    let context = format!("key {key} n {n} at {now}");
    // an admission holds the permits it took
    if let Ok(grant) = got {
        prop_assert_eq!(grant.permits(), n, "{}", context);
    }
    // the path that answered: a refusal says it; an admission shows it by
    // whose state it took from (the snapshots below) and by the slots
    let path = got.err().map(|r| r.path());
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
            // a peek of an untracked key: a fresh bucket's answer (an
            // admission: no path reported; the key gets no slot)
            prop_assert_eq!(path, None, "{}", context);
            let seen = Seen::of(&got, at, table.snapshot(&key, at))?;
            prop_assert_eq!(seen, Bucket::FRESH.decide(rule, 0, now), "{}", context);
            prop_assert!(!table.contains(&key), "{}", context);
            return Ok(());
        }
        // no slot for the key, whatever the policy
        prop_assert!(!table.contains(&key), "{}", context);
        // full of busy keys: the earliest a slot frees up (the first whole
        // nanosecond)
        let first_free = model
            .tracked
            .values()
            .map(|b| b.lead(now).ceil_nanos())
            .min()
            .expect("a full table");
        let within_first_free =
            |retry: Option<u64>| retry.is_some_and(|r| r >= 1 && r <= first_free.max(1));
        match model.policy {
            OverflowPolicy::SharedBucket => {
                // a refusal reports the shared path; an admission shows
                // it by the shared state's snapshot right after, which
                // must be the model's shared bucket after taking `n`
                prop_assert!(
                    path.is_none_or(|p| p == KeyedPath::SharedOverflow),
                    "{} {:?}",
                    context,
                    path
                );
                let seen = Seen::of(&got, at, table.shared_snapshot(at))?;
                let default = model.default.rule;
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
                prop_assert_eq!(path, Some(KeyedPath::OverflowDenied), "{}", context);
                let seen = Seen::of(&got, at, table.shared_snapshot(at))?;
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
                let expected = Bucket::FRESH.decide(rule, n, now);
                match got {
                    Err(_) => {
                        prop_assert_eq!(path, Some(KeyedPath::OverflowAllowed), "{}", context);
                        let seen = Seen::of(&got, at, table.shared_snapshot(at))?;
                        prop_assert_eq!(seen, expected, "{}", context);
                    }
                    // An admission as a fresh key: the fresh state it
                    // took from is not kept, so its limit and remaining
                    // are not observable any more; its full-again instant
                    // is (a fresh state's after `n`), and the key got no
                    // slot (checked above).
                    Ok(grant) => {
                        prop_assert!(expected.allowed, "{}", context);
                        prop_assert_eq!(
                            grant.full_at().as_nanos() - at.as_nanos(),
                            expected.snapshot.2,
                            "{} (fresh state after n)",
                            context
                        );
                    }
                }
            }
        }
        return Ok(());
    };
    // the key's own state: a refusal reports it; an admission took from
    // it (its snapshot right after is the model's bucket after `n`)
    prop_assert!(
        path.is_none_or(|p| p == KeyedPath::Own),
        "{} {:?}",
        context,
        path
    );
    prop_assert!(table.contains(&key), "{}", context);
    let seen = Seen::of(&got, at, table.snapshot(&key, at))?;
    prop_assert_eq!(seen, bucket.decide(rule, n, now), "{}", context);
    if seen.allowed && n > 0 {
        bucket.admit(rule, n, now)?;
    }
    Ok(())
}

/// Runs `ops` on a table and the model, comparing after every step.
fn matches_model<T: KeyedTable<u64, Algorithm = Gcra>>(
    make: impl Fn(Spec) -> T,
    case: &Case,
) -> Result<usize, TestCaseError> {
    let quotas = QuotaMap::leak(case.per_key.iter().map(|&(key, algo)| (key, algo.gcra)));
    let table = make(
        Spec::new(case.default.gcra, MAX_KEYS)
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
                let rule = model.algorithm(key).rule;
                let default = model.default.rule;
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
                table.reconfigure(next.gcra, how, at);
                let (old, new) = (model.default.rule, next.rule);
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
                let old = model.algorithm(key).rule;
                let mut calls = 0;
                table.update_key_quota(&key, how, at, &mut || {
                    calls += 1;
                    quotas.set(key, quota.map(|algo| algo.gcra));
                });
                prop_assert_eq!(calls, 1);
                match quota {
                    Some(algo) => model.per_key.insert(key, algo),
                    None => model.per_key.remove(&key),
                };
                let new = model.algorithm(key).rule;
                if let Some(bucket) = model.tracked.get_mut(&key)
                    && bucket.convert(old, new, how, now)
                {
                    model.relaxed += 1;
                }
            }
        }
        // after every step, everything observable agrees
        prop_assert_eq!(
            table.default_algorithm(),
            model.default.gcra,
            "step {}",
            step
        );
        prop_assert_eq!(table.len(), model.tracked.len(), "step {} {:?}", step, op);
        let default = model.default.rule;
        prop_assert_eq!(
            fields(&table.shared_snapshot(at)),
            default.snapshot(model.shared.lead(now)),
            "step {} shared",
            step
        );
        prop_assert!(model.shared.consistent());
        for key in 0..KEYS {
            let rule = model.algorithm(key).rule;
            let tracked = model.tracked.get(&key);
            prop_assert_eq!(
                table.contains(&key),
                tracked.is_some(),
                "step {} key {}",
                step,
                key
            );
            prop_assert_eq!(table.capacity(&key), rule.burst as u32);
            let lead = tracked.map_or(Ratio::ZERO, |b| b.lead(now));
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
    default: Algo,
    per_key: Vec<(u64, Algo)>,
    policy: OverflowPolicy,
    ops: Vec<(Op, u64)>,
}

/// A token bucket (three in four) or a leaky one, burst 1..=4, with an
/// interval of a whole number of milliseconds, any 0.1..25 ms in whole
/// nanoseconds, or 2..=24 permits per 1..=25 ms: fractions of a nanosecond
/// kept exact (`3 per 7 ms`, `d` ≤ 16) or rounded up (`17 per 5 ms`).
fn algo() -> impl Strategy<Value = Algo> {
    let quota = prop_oneof![
        3 => (1u64..=25).prop_map(|ms| Quota::with_period(Duration::from_millis(ms))),
        1 => (100_000u64..=25_000_000).prop_map(|ns| Quota::with_period(Duration::from_nanos(ns))),
        2 => (2u32..=24, 1u64..=25).prop_map(|(permits, ms)| Quota::new(permits, Duration::from_millis(ms))),
    ];
    (quota, 1u32..=4, prop::bool::weighted(0.25)).prop_map(|(quota, burst, leaky)| {
        let quota = quota
            .and_then(|q| q.with_burst(burst))
            .expect("valid quota");
        Algo::new(quota, leaky)
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
        2 => (algo(), inheritance()).prop_map(|(next, how)| Op::Reconfigure { next, how }),
        2 => (0..KEYS, prop::option::weighted(0.7, algo()), inheritance())
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
    let per_key = prop::collection::vec(prop::option::weighted(0.3, algo()), KEYS as usize)
        .prop_map(|quotas| {
            (0..KEYS)
                .zip(quotas)
                .filter_map(|(key, quota)| quota.map(|q| (key, q)))
                .collect::<Vec<_>>()
        });
    (algo(), per_key, policy, ops).prop_map(|(default, per_key, policy, ops)| Case {
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
    let per_second = |permits, burst| {
        let quota = Quota::per_second(permits).and_then(|q| q.with_burst(burst));
        Rule::new(&quota.expect("valid quota"), false)
    };
    let ten = per_second(10, 10);
    let twenty = per_second(20, 20);
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
        let (exact, table) = (bucket.exact, bucket.table);
        assert_eq!(
            (exact.p, exact.q),
            (table.p, table.q),
            "{how:?}: exact here"
        );
    }
    let quota = |permits, ns| {
        let quota = Quota::new(permits, Duration::from_nanos(ns)).and_then(|q| q.with_burst(4));
        Rule::new(&quota.expect("valid quota"), false)
    };
    // a third of a nanosecond: rounded up on a whole-nanosecond grid,
    // exactly a third in the exact TAT
    let three = quota(1, 3);
    let one = quota(1, 1);
    let mut bucket = Bucket::FRESH;
    bucket.admit(three, 1, 10).expect("fresh");
    bucket.convert(three, one, Inheritance::UsedFraction, 11);
    // lead 2 of 12 → 2/12 of 4 = 2/3 ns
    assert_eq!((bucket.table.p, bucket.table.q), (12, 1));
    assert_eq!((bucket.exact.p, bucket.exact.q), (35, 3));
    assert!(bucket.consistent());
    // onto a grid of thirds (T = 7/3 ns): 2/12 of 28/3 = 14/9 ns, rounded
    // up to 5/3 ns; the snapshot reports 2 ns
    let sevenths = quota(3, 7);
    assert_eq!((sevenths.t.p, sevenths.t.q, sevenths.grid), (7, 3, 3));
    let mut bucket = Bucket::FRESH;
    bucket.admit(three, 1, 10).expect("fresh");
    bucket.convert(three, sevenths, Inheritance::UsedFraction, 11);
    assert_eq!((bucket.table.p, bucket.table.q), (38, 3));
    assert_eq!((bucket.exact.p, bucket.exact.q), (113, 9));
    assert_eq!(sevenths.snapshot(bucket.lead(11)), (4, 3, 2));
    assert!(bucket.consistent());
    // a rounded quota: the table charges T rounded up, the exact TAT the
    // exact 7/17 ns fraction
    let rounded = quota(17, 1_000);
    assert_eq!((rounded.t.p, rounded.t.q, rounded.grid), (59, 1, 1));
    assert_eq!((rounded.exact_t.p, rounded.exact_t.q), (1_000, 17));
}
