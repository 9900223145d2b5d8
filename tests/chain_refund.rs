//! Chains: a request refused by a later limiter costs the earlier ones
//! nothing, and the chain's refusal reports the longest member wait.

use proptest::prelude::*;
use tollgate::{
    Bucket, Chain, ConcurrencyLimiter, Decision, FixedWindow, Limiter, Quota, SlidingWindow,
    WithStats,
};

/// A member limiter, built twice from the same description so that two
/// chains start identical.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Token {
        permits: u32,
        period: u64,
        burst: u32,
    },
    Leaky {
        permits: u32,
        period: u64,
        weight: u32,
    },
    Fixed {
        limit: u32,
        window: u64,
    },
    Sliding {
        limit: u32,
        segment: u64,
    },
    Concurrency {
        limit: u32,
    },
}

impl Kind {
    fn build(self) -> Box<dyn Limiter> {
        match self {
            Kind::Token {
                permits,
                period,
                burst,
            } => Box::new(Bucket::token_bucket(
                Quota::from_nanos(permits, period)
                    .and_then(|q| q.allow_burst(burst))
                    .unwrap(),
            )),
            Kind::Leaky {
                permits,
                period,
                weight,
            } => Box::new(Bucket::leaky_bucket(
                Quota::from_nanos(permits, period)
                    .and_then(|q| q.max_weight(weight))
                    .unwrap(),
            )),
            Kind::Fixed { limit, window } => {
                Box::new(Bucket::new(FixedWindow::from_nanos(limit, window).unwrap()))
            }
            Kind::Sliding { limit, segment } => Box::new(Bucket::new(
                SlidingWindow::<4>::from_nanos(limit, segment * 4).unwrap(),
            )),
            Kind::Concurrency { limit } => Box::new(ConcurrencyLimiter::new(limit).unwrap()),
        }
    }

    fn is_timed(self) -> bool {
        !matches!(self, Kind::Concurrency { .. })
    }
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        (1u32..6, 10u64..200, 1u32..6).prop_map(|(permits, period, burst)| Kind::Token {
            permits,
            period: period * permits as u64,
            burst
        }),
        (1u32..6, 10u64..200, 1u32..4).prop_map(|(permits, period, weight)| Kind::Leaky {
            permits,
            period: period * permits as u64,
            weight
        }),
        (1u32..8, 16u64..300).prop_map(|(limit, window)| Kind::Fixed { limit, window }),
        (1u32..8, 1u64..80).prop_map(|(limit, segment)| Kind::Sliding { limit, segment }),
        (1u32..6).prop_map(|limit| Kind::Concurrency { limit }),
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

fn apply(chain: &Chain<Box<dyn Limiter>, Box<dyn Limiter>>, op: &Op, now: &mut u64) {
    match *op {
        Op::Advance(d) => *now += d,
        Op::Chain(n) => drop(chain.check_n(n, *now)),
        Op::First(n) => drop(chain.first().check_n(n, *now)),
        Op::Second(n) => drop(chain.second().check_n(n, *now)),
        Op::RefundFirst(n) => chain.first().refund(n, *now),
    }
}

/// Everything observable about a limiter at `now`, without changing it.
fn observe(l: &dyn Limiter, now: u64) -> (tollgate::Snapshot, bool, Vec<Option<u64>>) {
    let waits = (0..=l.capacity() + 1)
        .map(|k| l.time_until_ready(k, now).ok())
        .collect();
    (l.snapshot(now), l.is_idle(now), waits)
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
        prop_assume!(n <= x.capacity());
        // load the second limiter (on both chains) until it refuses `n`
        for _ in 0..16 {
            if x.second().time_until_ready(n, now) == Ok(0) {
                let _ = x.second().check_n(n, now);
                let _ = y.second().check_n(n, now);
            }
        }
        // only the case under test: the first would admit, the second refuses
        let first_admits = x.first().time_until_ready(n, now) == Ok(0);
        let second_refuses = matches!(x.second().time_until_ready(n, now), Ok(w) if w > 0);
        prop_assume!(first_admits && second_refuses);

        let before = observe(y.first().as_ref(), now);
        prop_assert!(x.check_n(n, now).unwrap().is_denied());
        prop_assert_eq!(observe(x.first().as_ref(), now), before);
        prop_assert_eq!(observe(x.second().as_ref(), now), observe(y.second().as_ref(), now));
        for (dt, k) in future {
            now += dt;
            prop_assert_eq!(x.first().check_n(k, now), y.first().check_n(k, now));
            prop_assert_eq!(x.check_n(k, now), y.check_n(k, now));
        }
    }

    /// A chain's refusal reports the longest wait of its members (measured
    /// before the call); for time-based members, waiting exactly that long
    /// admits the request and waiting 1 ns less does not.
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
        prop_assume!(n <= chain.capacity());
        let waits = [
            chain.first().first().time_until_ready(n, now).unwrap(),
            chain.first().second().time_until_ready(n, now).unwrap(),
            chain.second().time_until_ready(n, now).unwrap(),
        ];
        let longest = *waits.iter().max().unwrap();
        prop_assert_eq!(chain.time_until_ready(n, now), Ok(longest));
        let remaining_before = chain.snapshot(now).remaining();
        match chain.check_n(n, now).unwrap() {
            Decision::Allowed(s) => {
                prop_assert_eq!(longest, 0);
                prop_assert!(s.remaining() <= remaining_before - n);
            }
            Decision::Denied(d) => {
                prop_assert_eq!(d.retry_after_nanos(), longest);
                prop_assert_eq!(d.snapshot().remaining(), remaining_before);
                if a.is_timed() && b.is_timed() && c.is_timed() {
                    prop_assert!(chain.check_n(n, now + longest - 1).unwrap().is_denied());
                    prop_assert!(chain.check_n(n, now + longest).unwrap().is_allowed());
                }
            }
        }
    }
}

#[test]
fn a_refused_request_costs_nothing_unlike_dotnet_113314() {
    // first: 10 per window; second: 1 per window. 100 attempts: the first
    // must still have 9 left, not 0.
    let chain = Chain::new(
        Bucket::new(FixedWindow::from_nanos(10, 1_000).unwrap()),
        Bucket::new(FixedWindow::from_nanos(1, 1_000).unwrap()),
    );
    let admitted = (0..100).filter(|_| chain.check(5).is_allowed()).count();
    assert_eq!(admitted, 1);
    assert_eq!(chain.first().snapshot(5).remaining(), 9);
    assert_eq!(chain.snapshot(5).remaining(), 0);
}

#[test]
fn statistics_see_the_refund() {
    let chain = Chain::new(
        WithStats::new(ConcurrencyLimiter::new(10).unwrap()),
        WithStats::new(Bucket::new(FixedWindow::from_nanos(2, 64).unwrap())),
    );
    for _ in 0..5 {
        let _ = chain.check(0);
    }
    let first = chain.first().statistics(0);
    let second = chain.second().statistics(0);
    assert_eq!((first.admitted, first.refunded, first.refused), (5, 3, 0));
    assert_eq!((second.admitted, second.refused), (2, 3));
    assert_eq!((first.available, second.available), (8, 0));
}
