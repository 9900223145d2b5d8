//! The sliding window against a reference model that keeps a log of every
//! admission and lets each permit expire when its segment leaves the window.

use core::time::Duration;

use proptest::prelude::*;
use tollgate::{
    Algorithm, Bucket, Clock, ConfigError, FixedWindow, ManualClock, Quota, SlidingWindow,
    Timestamp,
};

fn t(ns: u64) -> Timestamp {
    Timestamp::from_nanos(ns)
}

/// `limit` per window of `window` nanoseconds, in `S` segments.
fn sliding<const S: usize>(limit: u32, window: u64) -> Result<SlidingWindow<S>, ConfigError> {
    SlidingWindow::<S>::new(limit, Duration::from_nanos(window))
}

/// The reference: admissions `(instant, permits)`; a permit taken at `t`
/// stops counting at `segment_start(t) + w` (in `u128`, no overflow).
struct Model {
    limit: u64,
    window: u128,
    segment: u128,
    log: Vec<(u64, u64)>,
}

impl Model {
    fn expires_at(&self, t: u64) -> u128 {
        let t = t as u128;
        t - t % self.segment + self.window
    }

    fn live(&self, now: u64) -> impl Iterator<Item = &(u64, u64)> + '_ {
        self.log
            .iter()
            .filter(move |(t, n)| *n > 0 && self.expires_at(*t) > now as u128)
    }

    fn used(&self, now: u64) -> u64 {
        self.live(now).map(|(_, n)| n).sum()
    }

    fn wait(&self, n: u64, now: u64) -> u64 {
        let mut need = (self.used(now) + n).saturating_sub(self.limit);
        if need == 0 {
            return 0;
        }
        for (t, count) in self.live(now) {
            // the log is in time order, so this is oldest first
            if *count >= need {
                let wait = self.expires_at(*t) - now as u128;
                return u64::try_from(wait).unwrap_or(u64::MAX);
            }
            need -= count;
        }
        unreachable!("n ≤ limit always fits once everything expired")
    }

    fn reset(&self, now: u64) -> u64 {
        self.live(now)
            .map(|(t, _)| u64::try_from(self.expires_at(*t) - now as u128).unwrap_or(u64::MAX))
            .max()
            .unwrap_or(0)
    }

    fn check(&mut self, n: u64, now: u64) -> Result<u64, u64> {
        let used = self.used(now);
        if used + n <= self.limit {
            self.log.push((now, n));
            Ok(self.limit - used - n)
        } else {
            Err(self.wait(n, now))
        }
    }

    fn refund(&mut self, mut n: u64, now: u64) {
        let (window, segment) = (self.window, self.segment);
        for (t, count) in self.log.iter_mut().rev() {
            let t = *t as u128;
            if t - t % segment + window <= now as u128 {
                break; // older entries have expired too
            }
            let take = (*count).min(n);
            *count -= take;
            n -= take;
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    Advance(u64),
    Check(u32),
    Refund(u32),
    Ready(u32),
}

fn scenario(segments: u64) -> impl Strategy<Value = (u32, u64, u64, Vec<Op>)> {
    (
        1u32..=12,
        1u64..=40,
        prop_oneof![Just(0u64), Just(u64::MAX - 2_000)],
    )
        .prop_flat_map(move |(limit, segment, start)| {
            let window = segment * segments;
            let op = prop_oneof![
                3 => (0..=segment * 2).prop_map(Op::Advance),
                1 => (0..=window * 2).prop_map(Op::Advance),
                6 => (0..=limit + 1).prop_map(Op::Check),
                1 => (0..=limit).prop_map(Op::Refund),
                1 => (0..=limit + 1).prop_map(Op::Ready),
            ];
            (
                Just(limit),
                Just(window),
                Just(start),
                prop::collection::vec(op, 1..150),
            )
        })
}

fn run<const S: usize>(
    limit: u32,
    window: u64,
    start: u64,
    ops: Vec<Op>,
) -> Result<(), TestCaseError> {
    let clock = ManualClock::starting_at(t(start));
    let alg = sliding::<S>(limit, window).unwrap();
    let segment = alg.segment().as_nanos() as u64;
    let limiter = Bucket::new(alg);
    let mut model = Model {
        limit: limit as u64,
        window: window as u128,
        segment: segment as u128,
        log: vec![],
    };
    for op in ops {
        let now = clock.now().as_nanos();
        match op {
            Op::Advance(d) => clock.advance(Duration::from_nanos(d)),
            Op::Check(n) => {
                let got = limiter.check_n(n, t(now));
                if n > limit {
                    let e = got.unwrap_err();
                    prop_assert!(e.is_never());
                    prop_assert_eq!(e.limit(), limit);
                    continue;
                }
                match (got, model.check(n as u64, now)) {
                    (Ok(()), Ok(remaining)) => {
                        // the state right after the admission
                        let s = limiter.snapshot(t(now));
                        prop_assert_eq!(s.remaining() as u64, remaining);
                        prop_assert_eq!(s.reset_after_nanos(), model.reset(now));
                    }
                    (Err(d), Err(retry)) => {
                        prop_assert!(!d.is_never());
                        prop_assert_eq!(d.retry_after_nanos(), retry);
                        prop_assert!(retry <= window);
                    }
                    (got, want) => prop_assert!(false, "at {now}: {got:?} vs model {want:?}"),
                }
            }
            Op::Refund(n) => {
                limiter.refund(n, t(now));
                model.refund(n as u64, now);
            }
            Op::Ready(n) => {
                let got = limiter.time_until_ready(n, t(now));
                if n > limit {
                    prop_assert!(got.unwrap_err().is_never());
                } else {
                    prop_assert_eq!(
                        got.unwrap(),
                        Duration::from_nanos(model.wait(n as u64, now))
                    );
                }
            }
        }
        let now = clock.now().as_nanos();
        let snap = limiter.snapshot(t(now));
        prop_assert_eq!(snap.remaining() as u64, limit as u64 - model.used(now));
        prop_assert_eq!(snap.reset_after_nanos(), model.reset(now));
        prop_assert_eq!(limiter.is_idle(t(now)), model.used(now) == 0);
    }
    // safety at segment resolution: any S consecutive segments hold ≤ limit
    let seg = |t: u64| t as u128 / segment as u128;
    for &(t0, _) in &model.log {
        let first = seg(t0);
        let total: u64 = model
            .log
            .iter()
            .filter(|(t, _)| (first..first + S as u128).contains(&seg(*t)))
            .map(|(_, n)| n)
            .sum();
        prop_assert!(total <= limit as u64, "segments {first}..+{S}: {total}");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Identical decisions (allowed / refused, remaining, reset_after,
    /// retry_after, time_until_ready, idle) and the safety bound, for several
    /// segment counts.
    #[test]
    fn one_segment_matches_the_log_model((l, w, s, ops) in scenario(1)) { run::<1>(l, w, s, ops)?; }
    #[test]
    fn two_segments_match_the_log_model((l, w, s, ops) in scenario(2)) { run::<2>(l, w, s, ops)?; }
    #[test]
    fn three_segments_match_the_log_model((l, w, s, ops) in scenario(3)) { run::<3>(l, w, s, ops)?; }
    #[test]
    fn eight_segments_match_the_log_model((l, w, s, ops) in scenario(8)) { run::<8>(l, w, s, ops)?; }

    /// One segment is exactly a fixed window.
    #[test]
    fn one_segment_is_a_fixed_window(
        limit in 1u32..10,
        times in prop::collection::vec((0u64..50, 0u32..11), 1..60),
    ) {
        let sliding = Bucket::new(sliding::<1>(limit, 16).unwrap());
        let fixed = Bucket::new(FixedWindow::new(limit, Duration::from_nanos(16)).unwrap());
        let mut now = 0u64;
        for (dt, n) in times {
            now += dt;
            prop_assert_eq!(sliding.check_n(n, t(now)), fixed.check_n(n, t(now)));
            // and the same state after it (an admission no longer carries it)
            prop_assert_eq!(sliding.snapshot(t(now)), fixed.snapshot(t(now)));
        }
    }

    /// Arbitrary, non-monotonic instants and sizes never panic.
    #[test]
    fn extreme_inputs_never_panic(
        limit in prop_oneof![Just(1u32), Just(u32::MAX), any::<u32>()],
        segment in prop_oneof![Just(1u64), Just(u64::MAX / 4), 1..u64::MAX / 4],
        steps in prop::collection::vec(
            (prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>()], any::<u32>()), 1..40),
    ) {
        let Ok(alg) = sliding::<4>(limit, segment * 4) else {
            prop_assert_eq!(limit, 0);
            return Ok(());
        };
        let limiter = Bucket::new(alg);
        for (now, n) in steps {
            let now = t(now);
            match limiter.check_n(n, now) {
                Err(e) if e.is_never() => prop_assert!(e.requested() > limit),
                Err(d) => prop_assert!(d.retry_after_nanos() >= 1),
                Ok(()) => prop_assert!(limiter.snapshot(now).remaining() <= limit),
            }
            limiter.refund(n / 2, now);
            let _ = limiter.time_until_ready(n, now);
            prop_assert!(limiter.snapshot(now).remaining() <= limit);
        }
    }
}

#[test]
fn a_permit_counts_until_its_segment_leaves_the_window() {
    // 3 per 300 ns in 3 segments of 100 ns
    let limiter = Bucket::new(sliding::<3>(3, 300).unwrap());
    assert!(limiter.check(t(50)).is_ok()); // segment 0
    assert!(limiter.check_n(2, t(250)).is_ok()); // segment 2

    // at 299 the window (segments 0..=2) is full; segment 0 leaves at 300
    assert_eq!(limiter.check(t(299)).unwrap_err().retry_after_nanos(), 1);
    assert!(limiter.check(t(300)).is_ok());
    // 2 more need segment 2 to leave, at 500
    assert_eq!(
        limiter.check_n(2, t(320)).unwrap_err().retry_after_nanos(),
        180
    );
}

#[test]
fn rejected_configurations_are_typed_errors() {
    assert_eq!(sliding::<4>(0, 8), Err(ConfigError::ZeroLimit));
    assert_eq!(sliding::<0>(1, 8), Err(ConfigError::ZeroSegments));
    assert_eq!(
        sliding::<3>(2, 10),
        Err(ConfigError::WindowNotDivisible {
            window: Duration::from_nanos(10),
            segments: 3
        })
    );
}

/// New in API 13: a window has no burst of its own, so a quota with one is
/// refused instead of the burst being silently ignored.
#[test]
fn from_quota_takes_permits_per_period_and_refuses_a_burst() {
    let w = SlidingWindow::<4>::from_quota(Quota::per_minute(100).unwrap()).unwrap();
    assert_eq!(
        (w.limit(), w.window(), w.segment()),
        (100, Duration::from_secs(60), Duration::from_secs(15))
    );
    // the segment is its finest step: what a clock must resolve
    assert_eq!(w.required_resolution(), Duration::from_secs(15));
    assert_eq!(
        SlidingWindow::<4>::from_quota(Quota::per_minute(100).unwrap().with_burst(101).unwrap()),
        Err(ConfigError::BurstNotSupported {
            burst: 101,
            permits: 100
        })
    );
}

#[test]
fn concurrent_checks_never_exceed_the_limit() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let limiter = Bucket::new(sliding::<4>(100, 4_000).unwrap());
    let admitted = AtomicU64::new(0);
    // every thread checks at instants inside one window (segments 0..=3)
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (limiter, admitted) = (&limiter, &admitted);
            s.spawn(move || {
                for i in 0..2_000u64 {
                    let now = Timestamp::from_nanos((i * 7 + t * 13) % 4_000);
                    if limiter.check(now).is_ok() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                    if i % 50 == 0 {
                        let _ = limiter.snapshot(now);
                    }
                }
            });
        }
    });
    let admitted = admitted.load(Ordering::Relaxed);
    assert_eq!(admitted, 100, "exactly the limit over one window");
    assert_eq!(limiter.snapshot(t(3_999)).remaining(), 0);
}
