//! The concurrency limiter against a plain counter model, and under real
//! threads: never more than `limit` in flight, every dropped permit returns.

use std::sync::atomic::{AtomicU32, Ordering};

use proptest::prelude::*;
use tollgate::{
    AcquireError, Algorithm, Concurrency, ConcurrencyLimiter, ConcurrencyPermit, Decision, Limiter,
};

#[derive(Debug, Clone)]
enum Op {
    /// take `n` behind a guard
    Acquire(u32),
    /// drop the i-th held guard
    Drop(usize),
    /// forget the i-th held guard, then (maybe) release its permits by hand
    Forget(usize, bool),
    /// take `n` without a guard (Limiter::check_n)
    Check(u32),
    /// give back `n` of the unguarded permits (Limiter::refund)
    Refund(u32),
}

fn op(limit: u32) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..=limit + 1).prop_map(Op::Acquire),
        3 => any::<usize>().prop_map(Op::Drop),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(i, r)| Op::Forget(i, r)),
        2 => (0..=limit + 1).prop_map(Op::Check),
        1 => (0..=limit).prop_map(Op::Refund),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Same decisions as a counter, in flight never above the limit, and the
    /// count always equals the permits held (guards + unguarded + leaked).
    #[test]
    fn matches_a_counter_and_never_exceeds_the_limit(
        (limit, ops) in (1u32..=10).prop_flat_map(|l| (Just(l), prop::collection::vec(op(l), 1..100)))
    ) {
        let limiter = ConcurrencyLimiter::new(limit).unwrap();
        let mut held: Vec<ConcurrencyPermit<'_>> = vec![];
        let mut unguarded = 0u32; // taken by check_n, not yet refunded
        let mut leaked = 0u32; // forgotten and never released
        for op in ops {
            let in_flight: u32 = held.iter().map(|p| p.permits()).sum::<u32>() + unguarded + leaked;
            match op {
                Op::Acquire(n) => match limiter.try_acquire(n) {
                    Ok(p) => {
                        prop_assert!(in_flight + n <= limit);
                        prop_assert_eq!(p.permits(), n);
                        held.push(p);
                    }
                    Err(AcquireError::Denied(d)) => {
                        prop_assert!(n <= limit && in_flight + n > limit);
                        prop_assert_eq!(d.snapshot().remaining(), limit - in_flight);
                    }
                    Err(AcquireError::CapacityExceeded(e)) => prop_assert!(e.requested > limit),
                    Err(e) => prop_assert!(false, "unexpected {e:?}"),
                },
                Op::Drop(i) if !held.is_empty() => {
                    let i = i % held.len();
                    drop(held.swap_remove(i));
                }
                Op::Forget(i, release) if !held.is_empty() => {
                    let p = held.swap_remove(i % held.len());
                    let n = p.permits();
                    std::mem::forget(p);
                    if release { limiter.release(n) } else { leaked += n }
                }
                Op::Check(n) => match limiter.check_n(n, 0) {
                    Ok(Decision::Allowed(s)) => {
                        prop_assert!(in_flight + n <= limit);
                        prop_assert_eq!(s.remaining(), limit - in_flight - n);
                        unguarded += n;
                    }
                    Ok(Decision::Denied(_)) => prop_assert!(in_flight + n > limit),
                    Err(e) => prop_assert!(e.requested > limit),
                },
                Op::Refund(n) => {
                    let n = n.min(unguarded);
                    limiter.refund(n, 0);
                    unguarded -= n;
                }
                _ => {}
            }
            let in_flight: u32 = held.iter().map(|p| p.permits()).sum::<u32>() + unguarded + leaked;
            prop_assert_eq!(limiter.in_flight(), in_flight);
            prop_assert!(limiter.in_flight() <= limit);
            prop_assert_eq!(limiter.is_idle(0), in_flight == 0);
            prop_assert_eq!(limiter.time_until_ready(limit - in_flight, 0), Ok(0));
        }
        drop(held);
        prop_assert_eq!(limiter.in_flight(), unguarded + leaked);
    }

    /// Huge requests and releases never panic or wrap.
    #[test]
    fn extreme_inputs_never_panic(limit in prop_oneof![Just(u32::MAX), 1..=u32::MAX], ns in prop::collection::vec(any::<u32>(), 1..30)) {
        let limiter = ConcurrencyLimiter::new(limit).unwrap();
        for n in ns {
            let _ = limiter.check_n(n, u64::MAX);
            prop_assert!(limiter.in_flight() <= limit);
            limiter.release(n / 3);
            let _ = limiter.try_acquire(n).map(ConcurrencyPermit::into_raw);
            prop_assert!(limiter.in_flight() <= limit);
        }
    }
}

#[test]
fn threads_never_exceed_the_limit_and_every_dropped_permit_returns() {
    const LIMIT: u32 = 5;
    let limiter = ConcurrencyLimiter::new(LIMIT).unwrap();
    // counts permits between a successful acquire and the guard's drop, so
    // it never exceeds what the limiter holds
    let observed = AtomicU32::new(0);
    let peak = AtomicU32::new(0);
    let granted = AtomicU32::new(0);
    std::thread::scope(|s| {
        for t in 0..6u32 {
            let (limiter, observed, peak, granted) = (&limiter, &observed, &peak, &granted);
            s.spawn(move || {
                for i in 0..3_000u32 {
                    let n = 1 + (i + t) % 3;
                    if let Ok(permit) = limiter.try_acquire(n) {
                        let now = observed.fetch_add(n, Ordering::SeqCst) + n;
                        peak.fetch_max(now, Ordering::SeqCst);
                        assert!(now <= LIMIT, "{now} in flight");
                        granted.fetch_add(1, Ordering::Relaxed);
                        if i % 7 == 0 {
                            std::thread::yield_now();
                        }
                        observed.fetch_sub(n, Ordering::SeqCst);
                        drop(permit);
                    }
                }
            });
        }
    });
    assert_eq!(limiter.in_flight(), 0, "every dropped permit came back");
    assert!(peak.load(Ordering::SeqCst) <= LIMIT);
    assert!(granted.load(Ordering::Relaxed) > 0);
}

#[test]
fn algorithm_state_can_live_in_a_static() {
    static STATE: tollgate::ConcurrencyState = tollgate::ConcurrencyState::new();
    const ALG: Concurrency = match Concurrency::new(2) {
        Ok(c) => c,
        Err(_) => panic!("bad limit"),
    };
    let a = ALG.try_acquire(&STATE, 2).unwrap();
    assert!(ALG.check_n(&STATE, 1, 0).unwrap().is_denied());
    drop(a);
    assert!(ALG.is_idle(&STATE, 0));
}
