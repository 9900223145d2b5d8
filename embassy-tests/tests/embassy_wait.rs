//! Async waiting on tollgate limiters, driven by embassy-time's mock driver.
//!
//! The mock driver's clock is process-global, so every test takes `SERIAL`
//! and resets the driver first. Futures are polled by hand with a waker
//! that counts its wake-ups: a test advances time tick by tick and checks
//! both that the waiter is woken (no lost wake-up, no busy polling) and
//! that it completes at the exact tick the quota allows.

use core::time::Duration as StdDuration;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

use embassy_time::{Instant, TICK_HZ};
use tollgate::embassy::{self, EmbassyClock, WaitError};
use tollgate::{Bucket, Clock, ConfigError, Gcra, Quota, RateLimiter, Timestamp};

mod support;
use support::{Poller, advance_ticks, fresh_time, now_ticks};

/// The time of embassy's millisecond `ms` on the waiters' clock.
fn at_ms(ms: u64) -> Timestamp {
    EmbassyClock::timestamp(Instant::from_millis(ms))
}

const MS: u64 = 1_000_000;

/// `n` nanoseconds (a `core::time::Duration`, as tollgate's waits are).
fn ns(n: u64) -> StdDuration {
    StdDuration::from_nanos(n)
}

#[test]
fn mock_driver_runs_at_one_megahertz() {
    // The tick arithmetic in these tests assumes embassy's test rate.
    assert_eq!(TICK_HZ, 1_000_000);
    assert_eq!(EmbassyClock::RESOLUTION, StdDuration::from_micros(1));
}

#[test]
fn waiter_completes_at_the_exact_tick_not_one_earlier() {
    let _t = fresh_time();
    // 10 per second, burst 1: T = 100 ms = 100 000 ticks.
    let bucket = Bucket::token_bucket(Quota::per_second(10).unwrap().with_burst(1).unwrap());
    let p = Poller::new();

    let first = p.poll(&mut embassy::acquire(&bucket, &(), 1));
    assert!(
        matches!(first, Poll::Ready(Ok(_))),
        "a full bucket admits at once"
    );

    let mut second = embassy::acquire(&bucket, &(), 1);
    assert!(p.poll(&mut second).is_pending());
    advance_ticks(99_999);
    assert_eq!(p.wakes(), 0, "woken a tick early");
    assert!(p.poll(&mut second).is_pending());
    advance_ticks(1);
    assert_eq!(p.wakes(), 1, "not woken when the quota allows");
    let Poll::Ready(Ok(at)) = p.poll(&mut second) else {
        panic!("not admitted at 100 ms");
    };
    assert_eq!(now_ticks(), 100_000);
    assert_eq!(at, at_ms(100), "the admission instant");
    assert_eq!(bucket.snapshot(at).remaining(), 0);
    // It took the permit: the next one is 100 ms away again.
    assert_eq!(
        bucket.time_until_ready(1, EmbassyClock.now()),
        Ok(ns(100 * MS))
    );
}

#[test]
fn interval_between_ticks_rounds_the_wake_up_to_the_next_tick() {
    let _t = fresh_time();
    // One per 1 500 500 ns: the second admission is due 1 500.5 ticks in,
    // so the first tick that reaches it is 1 501.
    let quota = Quota::new(1, ns(1_500_500)).unwrap();
    let bucket = Bucket::leaky_bucket(quota);
    let p = Poller::new();
    assert!(p.poll(&mut embassy::acquire(&bucket, &(), 1)).is_ready());

    let mut next = embassy::acquire(&bucket, &(), 1);
    assert!(p.poll(&mut next).is_pending());
    advance_ticks(1_500);
    assert_eq!(p.wakes(), 0);
    assert!(
        p.poll(&mut next).is_pending(),
        "admitted before 1 500 500 ns"
    );
    advance_ticks(1);
    assert_eq!(p.wakes(), 1);
    assert_eq!(
        p.poll(&mut next),
        Poll::Ready(Ok(Timestamp::from_micros(1_501)))
    );
    assert_eq!(now_ticks(), 1_501);
}

#[test]
fn weighted_leaky_request_waits_for_the_previous_work_to_drain() {
    let _t = fresh_time();
    // 1 per ms, weights up to 4 (a leaky bucket's burst).
    let quota = Quota::new(1, ns(MS)).unwrap().with_burst(4).unwrap();
    let bucket = Bucket::leaky_bucket(quota);
    let p = Poller::new();
    assert!(p.poll(&mut embassy::acquire(&bucket, &(), 3)).is_ready()); // occupies 3 ms
    let mut heavy = embassy::acquire(&bucket, &(), 4);
    assert!(p.poll(&mut heavy).is_pending());
    advance_ticks(2_999);
    assert!(p.poll(&mut heavy).is_pending());
    advance_ticks(1);
    assert_eq!(p.poll(&mut heavy), Poll::Ready(Ok(at_ms(3))));
    assert_eq!(now_ticks(), 3_000);
}

#[test]
fn until_ready_waits_without_taking() {
    let _t = fresh_time();
    let bucket = Bucket::token_bucket(Quota::per_second(10).unwrap().with_burst(2).unwrap());
    let p = Poller::new();
    // Ready at once on a full bucket, and takes nothing.
    let Poll::Ready(Ok(at)) = p.poll(&mut embassy::until_ready(&bucket, &(), 2)) else {
        panic!("a full bucket is ready");
    };
    assert_eq!(at, Timestamp::ZERO);
    assert_eq!(bucket.snapshot(at).remaining(), 2);
    assert!(bucket.check_n(2, EmbassyClock.now()).is_ok());

    let mut ready = embassy::until_ready(&bucket, &(), 1);
    assert!(p.poll(&mut ready).is_pending());
    advance_ticks(99_999);
    assert!(p.poll(&mut ready).is_pending());
    advance_ticks(1);
    let Poll::Ready(Ok(at)) = p.poll(&mut ready) else {
        panic!("not ready at 100 ms");
    };
    assert_eq!(at, at_ms(100), "the instant the permit was found available");
    assert_eq!(bucket.snapshot(at).remaining(), 1);
    // Still there: until_ready took nothing.
    assert_eq!(bucket.snapshot(EmbassyClock.now()).remaining(), 1);
}

#[test]
fn timeout_too_short_fails_at_once_and_takes_nothing() {
    let _t = fresh_time();
    let bucket = Bucket::token_bucket(Quota::per_second(10).unwrap().with_burst(1).unwrap());
    let p = Poller::new();
    assert!(p.poll(&mut embassy::acquire(&bucket, &(), 1)).is_ready());

    let mut late = embassy::acquire(&bucket, &(), 1).with_timeout(StdDuration::from_millis(50));
    match p.poll(&mut late) {
        Poll::Ready(Err(WaitError::Timeout { ready_at, deadline })) => {
            assert_eq!(ready_at, at_ms(100));
            assert_eq!(deadline, at_ms(50));
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    // Nothing was taken: the permit is still due at 100 ms.
    assert_eq!(
        bucket.time_until_ready(1, EmbassyClock.now()),
        Ok(ns(100 * MS))
    );
}

#[test]
fn deadline_met_exactly_is_granted() {
    let _t = fresh_time();
    let bucket = Bucket::token_bucket(Quota::per_second(10).unwrap().with_burst(1).unwrap());
    let p = Poller::new();
    assert!(p.poll(&mut embassy::acquire(&bucket, &(), 1)).is_ready());

    let mut on_time = embassy::acquire(&bucket, &(), 1).with_deadline(at_ms(100));
    assert!(p.poll(&mut on_time).is_pending());
    advance_ticks(100_000);
    assert_eq!(p.poll(&mut on_time), Poll::Ready(Ok(at_ms(100))));
}

#[test]
fn deadline_expires_when_another_task_takes_the_permit_first() {
    let _t = fresh_time();
    let bucket = Bucket::token_bucket(Quota::per_second(10).unwrap().with_burst(1).unwrap());
    let p = Poller::new();
    assert!(p.poll(&mut embassy::acquire(&bucket, &(), 1)).is_ready());

    // Due at 100 ms, deadline 150 ms.
    let mut waiter = embassy::acquire(&bucket, &(), 1).with_deadline(at_ms(150));
    assert!(p.poll(&mut waiter).is_pending());
    advance_ticks(100_000);
    // Someone else checks first at 100 ms and takes the permit.
    assert!(bucket.check(EmbassyClock.now()).is_ok());
    match p.poll(&mut waiter) {
        Poll::Ready(Err(WaitError::Timeout { ready_at, deadline })) => {
            assert_eq!(ready_at, at_ms(200));
            assert_eq!(deadline, at_ms(150));
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
}

#[test]
fn request_above_burst_is_an_error_not_a_wait() {
    let _t = fresh_time();
    let token = Bucket::token_bucket(Quota::per_second(10).unwrap().with_burst(3).unwrap());
    let leaky = Bucket::leaky_bucket(Quota::per_second(10).unwrap().with_burst(2).unwrap());
    let p = Poller::new();
    for (limiter, n, capacity) in [(&token, 4, 3), (&leaky, 3, 2)] {
        // Even with a deadline far away, and on the first poll.
        let mut never =
            embassy::acquire(limiter, &(), n).with_timeout(StdDuration::from_secs(3600));
        match p.poll(&mut never) {
            Poll::Ready(Err(WaitError::CapacityExceeded(e))) => {
                assert!(e.is_never(), "{e:?}");
                assert_eq!((e.requested(), e.limit()), (n, capacity));
            }
            other => panic!("expected CapacityExceeded, got {other:?}"),
        }
        assert!(matches!(
            p.poll(&mut embassy::until_ready(limiter, &(), n)),
            Poll::Ready(Err(WaitError::CapacityExceeded(e))) if e.is_never()
        ));
    }
    // No timer was armed for them.
    advance_ticks(10_000_000);
    assert_eq!(p.wakes(), 0);
    // And nothing was taken.
    assert_eq!(token.snapshot(EmbassyClock.now()).remaining(), 3);
}

#[test]
fn dropping_a_pending_waiter_takes_nothing() {
    let _t = fresh_time();
    let bucket = Bucket::token_bucket(Quota::per_second(10).unwrap().with_burst(1).unwrap());
    let p = Poller::new();
    assert!(p.poll(&mut embassy::acquire(&bucket, &(), 1)).is_ready());
    {
        let mut cancelled = embassy::acquire(&bucket, &(), 1);
        assert!(p.poll(&mut cancelled).is_pending());
        advance_ticks(50_000);
    } // dropped while waiting
    advance_ticks(50_000);
    // The permit due at 100 ms is still there for a plain check.
    assert!(bucket.check(EmbassyClock.now()).is_ok());
}

/// Two tasks, five permits each, on one token bucket (burst 2, 1 per ms),
/// polled only when woken while time advances one tick at a time. Every
/// admission must land exactly where a plain credit count says the quota
/// allows it, and both tasks must be served.
#[test]
fn two_tasks_on_one_limiter_are_both_served_within_quota() {
    let _t = fresh_time();
    let bucket = Bucket::token_bucket(Quota::new(1, ns(MS)).unwrap().with_burst(2).unwrap());
    let admitted: Mutex<Vec<(u8, u64)>> = Mutex::new(Vec::new());

    let task = |id: u8| {
        let bucket = &bucket;
        let admitted = &admitted;
        async move {
            for _ in 0..5 {
                embassy::acquire(bucket, &(), 1)
                    .await
                    .expect("within capacity");
                admitted.lock().unwrap().push((id, now_ticks()));
            }
        }
    };
    let mut both = Box::pin(embassy_futures::join::join(task(1), task(2)));

    let p = Poller::new();
    let mut polls = 1;
    let mut done = p.poll(&mut both).is_ready();
    let mut seen_wakes = 0;
    let mut ticks = 0u64;
    while !done {
        assert!(ticks < 20_000, "waiters were never served (lost wake-up?)");
        advance_ticks(1);
        ticks += 1;
        if p.wakes() > seen_wakes {
            seen_wakes = p.wakes();
            polls += 1;
            done = p.poll(&mut both).is_ready();
        }
    }

    let admitted = admitted.into_inner().unwrap();
    let mut times: Vec<u64> = admitted.iter().map(|&(_, t)| t).collect();
    times.sort_unstable();
    // Reference: a credit counter (2 at t = 0, +1 per 1 000 ticks, capped
    // at 2) spent greedily whenever demand is waiting.
    let mut expected = Vec::new();
    let (mut credit, mut t) = (2u32, 0u64);
    while expected.len() < 10 {
        while credit > 0 && expected.len() < 10 {
            credit -= 1;
            expected.push(t);
        }
        t += 1_000;
        credit = (credit + 1).min(2);
    }
    assert_eq!(times, expected);
    for id in [1, 2] {
        assert_eq!(admitted.iter().filter(|&&(who, _)| who == id).count(), 5);
    }
    // Woken only when there was something to do: far fewer polls than ticks.
    assert!(
        polls <= 2 * times.len() + 2,
        "{polls} polls for 10 admissions"
    );
}

/// `inner`, but once it is ready `delay` ticks pass before the task gets
/// its output: the task resumes after its admission (an interrupt, other
/// tasks first), as it can on a chip.
struct ResumesLate<F> {
    inner: F,
    delay: u64,
}

impl<F: Future + Unpin> Future for ResumesLate<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let delay = self.delay;
        let Poll::Ready(out) = Pin::new(&mut self.inner).poll(cx) else {
            return Poll::Pending;
        };
        advance_ticks(delay);
        Poll::Ready(out)
    }
}

/// A task that paces itself on a strict leaky bucket (one per 2 ms) and
/// resumes 0 to 1 999 ticks after each admission. The instants the waits
/// return are exactly `T` apart, to the tick, and each is the tick the
/// permit was taken at; the clock read after the `.await` (what a task
/// measured when a wait returned a snapshot) shows gaps far shorter than
/// `T`.
#[test]
fn returned_instant_is_the_admission_even_when_the_task_resumes_late() {
    let _t = fresh_time();
    let t_ticks = 2_000;
    let bucket = Bucket::leaky_bucket(Quota::new(1, ns(2 * MS)).unwrap());
    const DELAYS: [u64; 6] = [0, 1_500, 10, 1_999, 0, 700];
    let seen: Mutex<Vec<(Timestamp, u64)>> = Mutex::new(Vec::new());
    let task = async {
        for delay in DELAYS {
            let inner = embassy::acquire(&bucket, &(), 1);
            let at = ResumesLate { inner, delay }.await.expect("within capacity");
            seen.lock().unwrap().push((at, now_ticks()));
        }
    };
    let mut task = Box::pin(task);
    let p = Poller::new();
    let mut done = p.poll(&mut task).is_ready();
    let (mut seen_wakes, mut ticks) = (0, 0u64);
    while !done {
        assert!(ticks < 20_000, "the task was never served (lost wake-up?)");
        advance_ticks(1);
        ticks += 1;
        if p.wakes() > seen_wakes {
            seen_wakes = p.wakes();
            done = p.poll(&mut task).is_ready();
        }
    }
    drop(task);

    let seen = seen.into_inner().unwrap();
    let returned: Vec<Timestamp> = seen.iter().map(|&(at, _)| at).collect();
    let expected: Vec<Timestamp> = (0..DELAYS.len() as u64)
        .map(|k| EmbassyClock::timestamp(Instant::from_ticks(k * t_ticks)))
        .collect();
    assert_eq!(returned, expected, "admissions exactly T apart");
    for (&(at, resumed), delay) in seen.iter().zip(DELAYS) {
        // the task resumed `delay` ticks after the tick it was admitted at
        assert_eq!(EmbassyClock::instant_at(at).as_ticks() + delay, resumed);
    }
    let resumed_gaps: Vec<u64> = seen.windows(2).map(|w| w[1].1 - w[0].1).collect();
    assert_eq!(resumed_gaps, [3_500, 510, 3_989, 1, 2_700]);
}

#[test]
fn embassy_clock_reads_driver_ticks_as_nanoseconds() {
    let _t = fresh_time();
    let clock = EmbassyClock::new();
    assert_eq!(clock.now(), Timestamp::ZERO);
    advance_ticks(1_234);
    assert_eq!(clock.now(), Timestamp::from_nanos(1_234_000));
    assert_eq!(clock.resolution(), ns(1_000));
    assert_eq!(
        EmbassyClock::instant_at(Timestamp::from_nanos(1_234_001)),
        Instant::from_ticks(1_235)
    );
    // the same conversions through the embassy instant
    assert_eq!(EmbassyClock::timestamp(Instant::now()), clock.now());
    assert_eq!(
        EmbassyClock::timestamp(Instant::from_ticks(7)),
        Timestamp::from_nanos(7_000)
    );
}

#[test]
fn quota_finer_than_a_tick_is_rejected() {
    let _t = fresh_time();
    let too_fine = Quota::new(1, ns(999)).unwrap();
    assert_eq!(
        RateLimiter::token_bucket(too_fine, EmbassyClock::new()).err(),
        Some(ConfigError::ClockTooCoarse {
            step: ns(999),
            resolution: ns(1_000)
        })
    );
    let one_tick = Quota::new(1, ns(1_000)).unwrap();
    assert!(RateLimiter::leaky_bucket(one_tick, EmbassyClock::new()).is_ok());
    // A bucket built without the clock (a `static`): its waiters refuse at
    // once instead of waking a tick early or late.
    let bucket = Bucket::token_bucket(too_fine);
    let p = Poller::new();
    match p.poll(&mut embassy::acquire(&bucket, &(), 1)) {
        Poll::Ready(Err(WaitError::ClockTooCoarse { step, resolution })) => {
            assert_eq!((step, resolution), (ns(999), ns(1_000)));
        }
        other => panic!("expected ClockTooCoarse, got {other:?}"),
    }
    assert!(matches!(
        p.poll(&mut embassy::until_ready(&bucket, &(), 1)),
        Poll::Ready(Err(WaitError::ClockTooCoarse { .. }))
    ));
    // nothing was taken
    assert_eq!(bucket.snapshot(EmbassyClock.now()).remaining(), 1);
}

#[test]
fn rate_limiter_with_embassy_clock_acquires_asynchronously() {
    let _t = fresh_time();
    let limiter: RateLimiter<EmbassyClock, Bucket<Gcra>> =
        RateLimiter::leaky_bucket(Quota::per_second(100).unwrap(), EmbassyClock::new()).unwrap();
    let p = Poller::new();
    assert!(p.poll(&mut limiter.acquire(1)).is_ready());
    assert!(limiter.try_acquire().is_err());
    let mut next = limiter.acquire(1);
    assert!(p.poll(&mut next).is_pending());
    advance_ticks(9_999);
    assert!(p.poll(&mut next).is_pending());
    advance_ticks(1);
    assert_eq!(p.poll(&mut next), Poll::Ready(Ok(at_ms(10))));
    assert_eq!(now_ticks(), 10_000);
}
