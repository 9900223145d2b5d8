//! The fixed window against a reference model that keeps a log of every
//! admission and counts the log entries of `now`'s aligned window.

use core::time::Duration;

use proptest::prelude::*;
use tollgate::{
    Algorithm, Bucket, Clock, ConfigError, FixedWindow, ManualClock, Quota, Timestamp, valid,
};

fn t(ns: u64) -> Timestamp {
    Timestamp::from_nanos(ns)
}

/// `limit` per window of `window` nanoseconds.
fn fixed(limit: u32, window: u64) -> Result<FixedWindow, ConfigError> {
    FixedWindow::new(limit, Duration::from_nanos(window))
}

/// The reference: a log of admissions `(instant, permits)`. A window is
/// `[start, start + w)` with `start = now − now mod w`, in `u128` so that
/// the last window before `u64::MAX` needs no special case.
struct Model {
    limit: u64,
    window: u128,
    log: Vec<(u64, u64)>,
}

impl Model {
    fn start(&self, now: u64) -> u128 {
        let now = now as u128;
        now - now % self.window
    }

    fn used(&self, now: u64) -> u64 {
        let start = self.start(now);
        self.log
            .iter()
            .filter(|(t, _)| self.start(*t) == start)
            .map(|(_, n)| n)
            .sum()
    }

    fn wait(&self, now: u64) -> u64 {
        let wait = self.start(now) + self.window - now as u128;
        u64::try_from(wait).unwrap_or(u64::MAX)
    }

    /// `Some(remaining)` when admitted, `Err(retry_after)` when refused.
    fn check(&mut self, n: u64, now: u64) -> Result<u64, u64> {
        let used = self.used(now);
        if used + n <= self.limit {
            if n > 0 {
                self.log.push((now, n));
            }
            Ok(self.limit - used - n)
        } else {
            Err(self.wait(now))
        }
    }

    /// Takes back `n` permits of the current window, newest first.
    fn refund(&mut self, mut n: u64, now: u64) {
        let start = self.start(now);
        let window = self.window;
        for entry in self.log.iter_mut().rev() {
            if n == 0 || entry.0 as u128 - entry.0 as u128 % window != start {
                break;
            }
            let take = entry.1.min(n);
            entry.1 -= take;
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

fn ops(window: u64, limit: u32) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        3 => (0..=window.saturating_mul(2)).prop_map(Op::Advance),
        5 => (0..=limit.saturating_add(1)).prop_map(Op::Check),
        1 => (0..=limit).prop_map(Op::Refund),
        1 => (0..=limit.saturating_add(1)).prop_map(Op::Ready),
    ];
    prop::collection::vec(op, 1..120)
}

fn config() -> impl Strategy<Value = (u32, u64, u64, Vec<Op>)> {
    (
        1u32..=12,
        0u64..200,
        prop_oneof![Just(0u64), Just(u64::MAX - 1_000)],
    )
        .prop_flat_map(|(limit, extra, start)| {
            let min = 1u64 << (32 - limit.leading_zeros());
            let window = min + extra;
            (Just(limit), Just(window), Just(start), ops(window, limit))
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Same decisions as the model (allowed / refused, remaining,
    /// retry_after, time_until_ready), and never more than `limit` per
    /// aligned window, on monotonic clocks starting at 0 or near u64::MAX.
    #[test]
    fn matches_the_log_model_and_never_exceeds_the_limit_per_window(
        (limit, window, start, ops) in config()
    ) {
        let clock = ManualClock::starting_at(t(start));
        let limiter = Bucket::new(fixed(limit, window).unwrap());
        let mut model = Model { limit: limit as u64, window: window as u128, log: vec![] };
        let mut admitted: Vec<(u64, u64)> = vec![];
        for op in ops {
            let now = clock.now().as_nanos();
            match op {
                Op::Advance(d) => clock.advance(Duration::from_nanos(d)),
                Op::Check(n) => {
                    let got = limiter.check_n(n, t(now));
                    if n > limit {
                        let e = got.unwrap_err();
                        prop_assert!(e.is_never());
                        prop_assert_eq!((e.requested(), e.limit()), (n, limit));
                        continue;
                    }
                    match (got, model.check(n as u64, now)) {
                        (Ok(()), Ok(remaining)) => {
                            // the state right after the admission
                            let s = limiter.snapshot(t(now));
                            prop_assert_eq!(s.remaining() as u64, remaining);
                            prop_assert_eq!(s.limit(), limit);
                            admitted.push((now, n as u64));
                        }
                        (Err(d), Err(retry)) => {
                            prop_assert!(!d.is_never());
                            prop_assert_eq!(d.retry_after_nanos(), retry);
                            // retry_after is the next boundary: the request fits then
                            prop_assert!(retry <= window);
                        }
                        (got, want) => prop_assert!(false, "at {now}: {got:?} vs model {want:?}"),
                    }
                }
                Op::Refund(n) => {
                    limiter.refund(n, t(now));
                    model.refund(n as u64, now);
                    let start = model.start(now);
                    let mut left = n as u64;
                    for entry in admitted.iter_mut().rev() {
                        if left == 0 || model.start(entry.0) != start { break; }
                        let take = entry.1.min(left);
                        entry.1 -= take;
                        left -= take;
                    }
                }
                Op::Ready(n) => {
                    let got = limiter.time_until_ready(n, t(now));
                    if n > limit {
                        prop_assert!(got.unwrap_err().is_never());
                    } else {
                        let used = model.used(now);
                        let want = if used + n as u64 <= limit as u64 { 0 } else { model.wait(now) };
                        prop_assert_eq!(got.unwrap(), Duration::from_nanos(want));
                    }
                }
            }
            let now = clock.now().as_nanos();
            prop_assert_eq!(
                limiter.snapshot(t(now)).remaining() as u64,
                limit as u64 - model.used(now)
            );
            prop_assert_eq!(limiter.is_idle(t(now)), model.used(now) == 0);
        }
        // the safety bound, from the limiter's own admissions
        let mut per_window = std::collections::BTreeMap::<u128, u64>::new();
        for (t, n) in admitted {
            *per_window.entry(model.start(t)).or_default() += n;
        }
        for (start, total) in per_window {
            prop_assert!(total <= limit as u64, "window at {start}: {total} > {limit}");
        }
    }

    /// Arbitrary (non-monotonic) instants and sizes never panic, and every
    /// answer is internally consistent.
    #[test]
    fn extreme_inputs_never_panic(
        limit in prop_oneof![Just(1u32), Just(u32::MAX), any::<u32>()],
        window in prop_oneof![Just(u64::MAX), Just(1u64 << 32), any::<u64>()],
        steps in prop::collection::vec(
            (prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>()], any::<u32>()), 1..40),
    ) {
        let Ok(alg) = fixed(limit, window) else {
            prop_assert!(limit == 0 || window < (1u64 << (32 - limit.leading_zeros())));
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
            limiter.refund(n, now);
            let _ = limiter.time_until_ready(n, now);
            prop_assert!(limiter.snapshot(now).remaining() <= limit);
        }
    }
}

#[test]
fn retry_after_is_the_time_to_the_next_boundary_not_a_whole_window() {
    // dotnet/runtime#92557: a refusal late in a window must not wait a whole window.
    let limiter = Bucket::new(fixed(10, 1_000).unwrap());
    assert!(limiter.check_n(10, t(100)).is_ok());
    let refused = limiter.check(t(990));
    assert_eq!(refused.unwrap_err().retry_after_nanos(), 10);
    assert!(limiter.check_n(10, t(1_000)).is_ok());
}

#[test]
fn rejected_configurations_are_typed_errors() {
    assert_eq!(fixed(0, 1), Err(ConfigError::ZeroLimit));
    assert_eq!(fixed(3, 0), Err(ConfigError::ZeroWindow));
    assert_eq!(
        fixed(1_000, 1_000),
        Err(ConfigError::WindowTooShort {
            window: Duration::from_nanos(1_000),
            limit: 1_000,
            min_window: Duration::from_nanos(1_024)
        })
    );
}

/// New in API 13: a window has no burst of its own, so a quota with one is
/// refused instead of the burst being silently ignored.
#[test]
fn from_quota_takes_permits_per_period_and_refuses_a_burst() {
    let w = FixedWindow::from_quota(Quota::per_second(10).unwrap()).unwrap();
    assert_eq!((w.limit(), w.window()), (10, Duration::from_secs(1)));
    assert_eq!(w, FixedWindow::new(10, Duration::from_secs(1)).unwrap());
    assert_eq!(
        FixedWindow::from_quota(Quota::per_second(10).unwrap().with_burst(5).unwrap()),
        Err(ConfigError::BurstNotSupported {
            burst: 5,
            permits: 10
        })
    );
    // the window is its finest step: what a clock must resolve
    assert_eq!(w.required_resolution(), Duration::from_secs(1));
}

#[test]
fn a_static_fixed_window() {
    static LIMIT: Bucket<FixedWindow> =
        Bucket::fixed_window(valid!(FixedWindow::new(2, Duration::from_nanos(64))));
    assert!(LIMIT.check(t(0)).is_ok());
    assert!(LIMIT.check(t(1)).is_ok());
    assert!(LIMIT.check(t(63)).is_err());
    assert!(LIMIT.check(t(64)).is_ok());
}

#[test]
fn concurrent_checks_admit_exactly_the_limit_per_window() {
    use std::sync::Barrier;
    use std::sync::atomic::{AtomicU64, Ordering};
    const THREADS: u64 = 4;
    let limiter = Bucket::new(fixed(100, 1_000).unwrap());
    let per_window = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];
    let barrier = Barrier::new(THREADS as usize);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (limiter, per_window, barrier) = (&limiter, &per_window, &barrier);
            s.spawn(move || {
                // every thread races through window k, then all move on
                for (k, count) in per_window.iter().enumerate() {
                    for i in 0..200u64 {
                        let now = k as u64 * 1_000 + (i * 7 + t * 13) % 1_000;
                        if limiter.check_n(1, Timestamp::from_nanos(now)).is_ok() {
                            count.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    barrier.wait();
                }
            });
        }
    });
    let counts: Vec<u64> = per_window
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .collect();
    assert_eq!(counts, [100, 100, 100]);
}
