//! Chains: a request refused by a later limiter costs the earlier ones
//! nothing, and the chain's refusal reports the longest member wait.
//!
//! Since API 13 the concurrency limiter is not a `Limiter` (its permits
//! exist only as guards), so it is no longer a chain member here: every
//! member is time-based.

#![cfg(feature = "std")] // proptest

use std::time::Duration;

use proptest::prelude::*;
use tollgate::{
    Algorithm, Bucket, Chain, FixedWindow, Gcra, Grant, Limiter, Quota, Refusal, SlidingWindow,
    Snapshot, Timestamp, WithStats,
};

fn t(ns: u64) -> Timestamp {
    Timestamp::from_nanos(ns)
}

fn quota(permits: u32, period: u64) -> Quota {
    Quota::new(permits, Duration::from_nanos(period)).unwrap()
}

/// A member limiter, built twice from the same description so that two
/// chains start identical.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Token {
        permits: u32,
        period: u64,
        burst: u32,
    },
    /// `burst` is the largest request (was a separate max weight)
    Leaky {
        permits: u32,
        period: u64,
        burst: u32,
    },
    Fixed {
        limit: u32,
        window: u64,
    },
    Sliding {
        limit: u32,
        segment: u64,
    },
}

/// A chain member of any kind. It was a `Box<dyn Limiter>`; the merged
/// `Limiter` is not dyn compatible (its `acquire_in_line` returns an
/// `impl Future`), so the members are an enum that forwards to its bucket.
#[derive(Debug)]
enum Member {
    Gcra(Bucket<Gcra>),
    Fixed(Bucket<FixedWindow>),
    Sliding(Bucket<SlidingWindow<4>>),
}

macro_rules! each {
    ($member:expr, $b:ident => $e:expr) => {
        match $member {
            Member::Gcra($b) => $e,
            Member::Fixed($b) => $e,
            Member::Sliding($b) => $e,
        }
    };
}

impl Member {
    /// `Limiter::is_idle` is gone: the bucket's inherent one.
    fn is_idle(&self, now: Timestamp) -> bool {
        each!(self, b => b.is_idle(now))
    }
}

impl Limiter for Member {
    type Permit = Grant;
    fn capacity(&self, key: &()) -> u32 {
        each!(self, b => Limiter::capacity(b, key))
    }
    fn try_acquire_n(&self, _: &(), n: u32, now: Timestamp) -> Result<Grant, Refusal<'static>> {
        each!(self, b => b
            .algorithm()
            .check_n(b.state(), n, now)
            .map(|full_at| Grant::new(n, full_at)))
    }
    fn cancel(&self, key: &(), grant: Grant, now: Timestamp) {
        each!(self, b => Limiter::cancel(b, key, grant, now))
    }
    fn refund(&self, key: &(), n: u32, now: Timestamp) {
        each!(self, b => Limiter::refund(b, key, n, now))
    }
    fn snapshot(&self, key: &(), now: Timestamp) -> Snapshot {
        each!(self, b => Limiter::snapshot(b, key, now))
    }
    fn time_until_ready(
        &self,
        _: &(),
        n: u32,
        now: Timestamp,
    ) -> Result<Duration, Refusal<'static>> {
        each!(self, b => b.time_until_ready(n, now))
    }
    fn time_until_ready_after(
        &self,
        key: &(),
        ahead: u64,
        n: u32,
        now: Timestamp,
    ) -> Option<Duration> {
        each!(self, b => Limiter::time_until_ready_after(b, key, ahead, n, now))
    }
    fn required_resolution(&self) -> Duration {
        each!(self, b => Limiter::required_resolution(b))
    }
}

impl Kind {
    fn build(self) -> Member {
        match self {
            Kind::Token {
                permits,
                period,
                burst,
            } => Member::Gcra(Bucket::token_bucket(
                quota(permits, period).with_burst(burst).unwrap(),
            )),
            Kind::Leaky {
                permits,
                period,
                burst,
            } => Member::Gcra(Bucket::leaky_bucket(
                quota(permits, period).with_burst(burst).unwrap(),
            )),
            Kind::Fixed { limit, window } => Member::Fixed(Bucket::new(
                FixedWindow::new(limit, Duration::from_nanos(window)).unwrap(),
            )),
            Kind::Sliding { limit, segment } => Member::Sliding(Bucket::new(
                SlidingWindow::<4>::new(limit, Duration::from_nanos(segment * 4)).unwrap(),
            )),
        }
    }
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        (1u32..6, 10u64..200, 1u32..6).prop_map(|(permits, period, burst)| Kind::Token {
            permits,
            period: period * permits as u64,
            burst
        }),
        (1u32..6, 10u64..200, 1u32..4).prop_map(|(permits, period, burst)| Kind::Leaky {
            permits,
            period: period * permits as u64,
            burst
        }),
        (1u32..8, 16u64..300).prop_map(|(limit, window)| Kind::Fixed { limit, window }),
        (1u32..8, 1u64..80).prop_map(|(limit, segment)| Kind::Sliding { limit, segment }),
    ]
}

#[derive(Debug, Clone)]
enum Op {
    Advance(u64),
    Chain(u32),
    First(u32),
    Second(u32),
    RefundFirst(u32),
}

fn history() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![
            3 => (0u64..150).prop_map(Op::Advance),
            3 => (0u32..4).prop_map(Op::Chain),
            2 => (0u32..4).prop_map(Op::First),
            2 => (0u32..4).prop_map(Op::Second),
            1 => (0u32..3).prop_map(Op::RefundFirst),
        ],
        0..40,
    )
}

fn apply(chain: &Chain<Member, Member>, op: &Op, now: &mut u64) {
    match *op {
        Op::Advance(d) => *now += d,
        Op::Chain(n) => drop(chain.try_acquire_n(&(), n, t(*now))),
        Op::First(n) => drop(chain.first().try_acquire_n(&(), n, t(*now))),
        Op::Second(n) => drop(chain.second().try_acquire_n(&(), n, t(*now))),
        Op::RefundFirst(n) => chain.first().refund(&(), n, t(*now)),
    }
}

/// Everything observable about a limiter at `now`, without changing it.
fn observe(l: &Member, now: Timestamp) -> (Snapshot, bool, Vec<Option<Duration>>) {
    let waits = (0..=l.capacity(&()) + 1)
        .map(|k| l.time_until_ready(&(), k, now).ok())
        .collect();
    (l.snapshot(&(), now), l.is_idle(now), waits)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    /// When the second limiter refuses a request the first admitted, the
    /// first is left exactly as before: same observations now, and the same
    /// decisions for any later sequence of requests.
    #[test]
    fn refusal_by_the_second_leaves_the_first_as_before(
        a in kind(), b in kind(), past in history(), n in 1u32..4,
        future in prop::collection::vec((0u64..100, 0u32..4), 1..30),
    ) {
        let x = Chain::new(a.build(), b.build());
        let y = Chain::new(a.build(), b.build());
        let mut now = 0u64;
        let mut now_y = 0u64;
        for op in &past {
            apply(&x, op, &mut now);
            apply(&y, op, &mut now_y);
        }
        prop_assume!(n <= x.capacity(&()));
        let mut now = t(now);
        // load the second limiter (on both chains) until it refuses `n`
        for _ in 0..16 {
            if x.second().time_until_ready(&(), n, now) == Ok(Duration::ZERO) {
                let _ = x.second().try_acquire_n(&(), n, now);
                let _ = y.second().try_acquire_n(&(), n, now);
            }
        }
        // only the case under test: the first would admit, the second refuses
        let first_admits = x.first().time_until_ready(&(), n, now) == Ok(Duration::ZERO);
        let second_refuses = matches!(x.second().time_until_ready(&(), n, now), Ok(w) if !w.is_zero());
        prop_assume!(first_admits && second_refuses);

        let before = observe(y.first(), now);
        prop_assert!(!x.try_acquire_n(&(), n, now).unwrap_err().is_never());
        prop_assert_eq!(observe(x.first(), now), before);
        prop_assert_eq!(observe(x.second(), now), observe(y.second(), now));
        for (dt, k) in future {
            now += Duration::from_nanos(dt);
            prop_assert_eq!(x.first().try_acquire_n(&(), k, now), y.first().try_acquire_n(&(), k, now));
            // and the same state after it
            prop_assert_eq!(x.first().snapshot(&(), now), y.first().snapshot(&(), now));
            prop_assert_eq!(x.try_acquire_n(&(), k, now), y.try_acquire_n(&(), k, now));
            prop_assert_eq!(x.snapshot(&(), now), y.snapshot(&(), now));
        }
    }

    /// A chain's refusal reports the longest wait of its members (measured
    /// before the call); waiting exactly that long admits the request and
    /// waiting 1 ns less does not (every member is time-based).
    #[test]
    fn combined_retry_after_is_the_longest_member_wait(
        a in kind(), b in kind(), c in kind(), past in history(), n in 1u32..4,
    ) {
        let x = Chain::new(a.build(), b.build());
        let mut now = 0u64;
        for op in &past {
            apply(&x, op, &mut now);
        }
        let chain = x.then(c.build());
        prop_assume!(n <= chain.capacity(&()));
        let now = t(now);
        let members: [&Member; 3] = [chain.first().first(), chain.first().second(), chain.second()];
        let waits = members.map(|m| m.time_until_ready(&(), n, now).unwrap());
        let longest = *waits.iter().max().unwrap();
        prop_assert_eq!(chain.time_until_ready(&(), n, now), Ok(longest));
        let snapshots_before = members.map(|m| m.snapshot(&(), now));
        let chain_before = chain.snapshot(&(), now);
        let remaining_before = chain_before.remaining();
        match chain.try_acquire_n(&(), n, now) {
            Ok(_) => {
                prop_assert_eq!(longest, Duration::ZERO);
                // the chain's state right after the admission
                prop_assert!(chain.snapshot(&(), now).remaining() <= remaining_before - n);
            }
            Err(d) => {
                prop_assert!(!d.is_never());
                prop_assert_eq!(d.retry_after(), longest);
                // was: the refusal's snapshot is the chain's (combined)
                // remaining before the call. Now a refusal keeps the
                // refusing member's own snapshot: the first member (in
                // order) that has to wait, as it was before the call ...
                let refusing = waits.iter().position(|w| !w.is_zero()).unwrap();
                prop_assert_eq!(d.stage(), refusing);
                prop_assert_eq!(*d.snapshot(), snapshots_before[refusing]);
                // ... and the refusal took nothing from the chain
                prop_assert_eq!(chain.snapshot(&(), now), chain_before);
                let just_before = now + longest - Duration::from_nanos(1);
                prop_assert!(!chain.try_acquire_n(&(), n, just_before).unwrap_err().is_never());
                prop_assert!(chain.try_acquire_n(&(), n, now + longest).is_ok());
            }
        }
    }
}

#[test]
fn a_refused_request_costs_nothing_unlike_dotnet_113314() {
    // first: 10 per window; second: 1 per window. 100 attempts: the first
    // must still have 9 left, not 0.
    let window = Duration::from_nanos(1_000);
    let chain = Chain::new(
        Bucket::new(FixedWindow::new(10, window).unwrap()),
        Bucket::new(FixedWindow::new(1, window).unwrap()),
    );
    let admitted = (0..100)
        .filter(|_| chain.try_acquire(&(), t(5)).is_ok())
        .count();
    assert_eq!(admitted, 1);
    assert_eq!(chain.first().snapshot(t(5)).remaining(), 9);
    assert_eq!(chain.snapshot(&(), t(5)).remaining(), 0);
}

#[test]
fn statistics_see_the_refund() {
    // The first member was a ConcurrencyLimiter of 10, which is no longer a
    // `Limiter` (API 13); a window of 10 over the whole test shows the same
    // counts (and no time passes, so nothing comes back with time).
    let chain = Chain::new(
        WithStats::new(Bucket::new(
            FixedWindow::new(10, Duration::from_nanos(64)).unwrap(),
        )),
        WithStats::new(Bucket::new(
            FixedWindow::new(2, Duration::from_nanos(64)).unwrap(),
        )),
    );
    for _ in 0..5 {
        let _ = chain.try_acquire(&(), t(0));
    }
    let first = chain.first().statistics(&(), t(0));
    let second = chain.second().statistics(&(), t(0));
    assert_eq!((first.admitted, first.refunded, first.refused), (5, 3, 0));
    assert_eq!((second.admitted, second.refused), (2, 3));
    assert_eq!((first.available, second.available), (8, 0));
}
