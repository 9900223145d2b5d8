//! Host tests: simulated RTIC timebases whose `delay_until` jumps the
//! simulated time to the wake-up (or parks, for the cancel test).

extern crate std;

use core::future::Future;
use core::pin::pin;
use core::task::{Context, Poll, Waker};
use core::time::Duration;

use proptest::prelude::*;
use rtic_time::{Monotonic, Timebase, fugit};
use tollgate_core::clock::Clock;
use tollgate_core::tick::{TickGcra, TickState};
use tollgate_core::time::Timestamp;
use tollgate_core::{Bucket, BucketKind, ConfigError, Gcra, Quota, RateLimiter, valid};

use crate::{RticClock, WaitError};

/// A simulated RTIC timebase in its own module: `TICKS` is the true
/// (unwrapped) tick count; `now()` shows it at the instant's width;
/// `delay_until` jumps `TICKS` forward to the wake-up (an instant within
/// half a wrap ahead, as RTIC's timer queue reads it), records the longest
/// jump, or never completes while `PARK` is set.
macro_rules! sim_timebase {
    ($module:ident, $instant:ty, $duration:ty, $bits:expr) => {
        mod $module {
            use core::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
            use rtic_time::{Timebase, TimeoutError, fugit};

            pub static TICKS: AtomicU64 = AtomicU64::new(0);
            pub static PARK: AtomicBool = AtomicBool::new(false);
            pub static LONGEST_SLEEP: AtomicU64 = AtomicU64::new(0);
            const BITS: u32 = $bits;

            pub struct Mono;

            impl Timebase for Mono {
                type Instant = $instant;
                type Duration = $duration;
                #[allow(clippy::cast_possible_truncation)]
                fn now() -> Self::Instant {
                    <$instant>::from_ticks(TICKS.load(SeqCst) as _)
                }
                // the waiters sleep with `delay_until`; `delay` moves the
                // simulated time on the same way, `d` ticks from now
                #[allow(clippy::cast_possible_truncation)]
                async fn delay(d: Self::Duration) {
                    let at = TICKS.load(SeqCst) + u64::from(d.as_ticks());
                    Self::delay_until(<$instant>::from_ticks(at as _)).await;
                }
                async fn delay_until(at: Self::Instant) {
                    if PARK.load(SeqCst) {
                        core::future::pending::<()>().await;
                    }
                    let now = TICKS.load(SeqCst);
                    let raw = u64::from(at.as_ticks());
                    let target = if BITS == 64 {
                        raw
                    } else {
                        let ahead = (raw as u32).wrapping_sub(now as u32);
                        if ahead < 1 << 31 {
                            now + u64::from(ahead)
                        } else {
                            now
                        }
                    };
                    if target > now {
                        TICKS.store(target, SeqCst);
                        LONGEST_SLEEP.fetch_max(target - now, SeqCst);
                    }
                }
                async fn timeout_at<F: core::future::Future>(
                    _: Self::Instant,
                    f: F,
                ) -> Result<F::Output, TimeoutError> {
                    Ok(f.await)
                }
                async fn timeout_after<F: core::future::Future>(
                    _: Self::Duration,
                    f: F,
                ) -> Result<F::Output, TimeoutError> {
                    Ok(f.await)
                }
            }
        }
    };
}

// conversions
sim_timebase!(
    khz32,
    fugit::MonotonicTimerInstantU64<32_768>,
    fugit::TimerDurationU64<32_768>,
    64
);
sim_timebase!(
    mhz1_u32,
    fugit::MonotonicTimerInstantU32<1_000_000>,
    fugit::TimerDurationU32<1_000_000>,
    32
);
// a tick of 3/7 of a second: fugit allows any ratio
sim_timebase!(odd, fugit::MonotonicInstant<u64, 3, 7>, fugit::Duration<u64, 3, 7>, 64);
// rtic-monotonics' SysTick at 1 kHz without `systick-64bit`, one per test
sim_timebase!(
    systick_clock,
    fugit::MonotonicTimerInstantU32<1_000>,
    fugit::TimerDurationU32<1_000>,
    32
);
sim_timebase!(
    systick_leaky,
    fugit::MonotonicTimerInstantU32<1_000>,
    fugit::TimerDurationU32<1_000>,
    32
);
sim_timebase!(
    systick_token,
    fugit::MonotonicTimerInstantU32<1_000>,
    fugit::TimerDurationU32<1_000>,
    32
);
sim_timebase!(
    systick_errors,
    fugit::MonotonicTimerInstantU32<1_000>,
    fugit::TimerDurationU32<1_000>,
    32
);
sim_timebase!(
    systick_cancel,
    fugit::MonotonicTimerInstantU32<1_000>,
    fugit::TimerDurationU32<1_000>,
    32
);
sim_timebase!(
    systick_tick_bucket,
    fugit::MonotonicTimerInstantU32<1_000>,
    fugit::TimerDurationU32<1_000>,
    32
);
sim_timebase!(
    systick_prop,
    fugit::MonotonicTimerInstantU32<1_000>,
    fugit::TimerDurationU32<1_000>,
    32
);
// a 32-bit timebase whose instants are fugit's wrapping kind
sim_timebase!(
    wrap32,
    fugit::WrappingTimerInstantU32<1_000>,
    fugit::TimerDurationU32<1_000>,
    32
);
// a 1 MHz 32-bit timer: wraps every 71.6 minutes
sim_timebase!(
    mhz1_long,
    fugit::MonotonicTimerInstantU32<1_000_000>,
    fugit::TimerDurationU32<1_000_000>,
    32
);
// a 64-bit driver (the timer monotonics, or SysTick with `systick-64bit`)
sim_timebase!(
    khz1_u64,
    fugit::MonotonicTimerInstantU64<1_000>,
    fugit::TimerDurationU64<1_000>,
    64
);

use core::sync::atomic::Ordering::SeqCst;

/// Polls `f` once: the simulated timebases never block (but when parked).
fn run<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("the simulated time never blocks"),
    }
}

fn assert_monotonic<M: Monotonic>() {}

/// 2^32: one wrap of a 32-bit tick count.
const WRAP: u64 = 1 << 32;

#[test]
fn a_monotonic_is_a_clock_with_exact_conversion() {
    assert_monotonic::<khz32::Mono>();
    type C = RticClock<khz32::Mono>;
    let clock = C::new();
    khz32::TICKS.store(0, SeqCst);
    assert_eq!(clock.now(), Timestamp::ZERO);
    khz32::TICKS.store(1, SeqCst);
    assert_eq!(clock.now(), Timestamp::from_nanos(30_517)); // 30 517.578 ns, floor
    khz32::TICKS.store(32_768 * 3_600, SeqCst);
    assert_eq!(clock.now(), Timestamp::from_secs(3_600));
    assert_eq!(clock.resolution(), Duration::from_nanos(30_518));
    assert_eq!(C::RESOLUTION, Duration::from_nanos(30_518));
    assert_eq!(C::MAX_READ_GAP, None); // 64 bits: no read rule
    // back: the first tick at or after
    assert_eq!(C::instant_at(Timestamp::from_nanos(30_518)).as_ticks(), 2);
    assert_eq!(C::instant_at(Timestamp::from_nanos(30_517)).as_ticks(), 1);
    // durations both ways
    let d = fugit::TimerDurationU64::<32_768>::from_ticks(16_384);
    assert_eq!(C::duration(d), Duration::from_millis(500));
    let back: fugit::TimerDurationU64<32_768> = C::fugit_duration(Duration::from_nanos(1));
    assert_eq!(back.as_ticks(), 1);
    let ms: fugit::MillisDurationU32 = C::fugit_duration(Duration::MAX);
    assert_eq!(ms.as_ticks(), u32::MAX);
    assert_eq!(
        C::duration(fugit::MinutesDurationU32::from_ticks(2)),
        Duration::from_secs(120)
    );
}

#[test]
fn u32_instants_and_odd_tick_lengths() {
    type C = RticClock<mhz1_u32::Mono>;
    let clock = C::default();
    mhz1_u32::TICKS.store(u64::from(u32::MAX), SeqCst);
    assert_eq!(clock.now(), Timestamp::from_micros(u64::from(u32::MAX)));
    assert_eq!(clock.resolution(), Duration::from_micros(1));
    // 15/16 of 2^32 µs
    assert_eq!(
        C::MAX_READ_GAP,
        Some(Duration::from_micros(WRAP - (1 << 28)))
    );
    // a 32-bit instant wraps as the count does: 10^12 µs is 10^12 mod 2^32
    let far = C::instant_at(Timestamp::from_secs(1_000_000));
    assert_eq!(u64::from(far.as_ticks()), 1_000_000_000_000 % WRAP);

    let odd = RticClock::<odd::Mono>::new();
    odd::TICKS.store(7, SeqCst);
    assert_eq!(odd.now(), Timestamp::from_secs(3));
    odd::TICKS.store(1, SeqCst);
    assert_eq!(odd.now(), Timestamp::from_nanos(428_571_428)); // 3/7 s, floor
    assert_eq!(odd.resolution(), Duration::from_nanos(428_571_429));
    assert_eq!(
        RticClock::<odd::Mono>::instant_at(Timestamp::from_secs(3)).as_ticks(),
        7
    );
    let text = std::format!("{odd:?}");
    assert!(text.contains("odd"), "{text}");
}

#[test]
fn a_limiter_finer_than_a_tick_is_refused() {
    let fine = Quota::per_second(10).unwrap(); // 100 ms < 3/7 s
    assert!(matches!(
        RateLimiter::token_bucket(fine, RticClock::<odd::Mono>::new()),
        Err(ConfigError::ClockTooCoarse { .. })
    ));
    let ok = Quota::per_minute(60).unwrap();
    assert!(RateLimiter::token_bucket(ok, RticClock::<odd::Mono>::new()).is_ok());
}

/// rtic-monotonics' 32-bit SysTick at 1 kHz, read every tick from 1 500
/// ticks before its wrap to 1 500 after: +1 ms at every tick, exactly,
/// where the count itself (and its plain conversion) goes back 49.7 days.
#[test]
fn a_32_bit_systick_monotonic_is_extended_across_its_wrap_exactly() {
    use systick_clock::{Mono, TICKS};
    assert_monotonic::<Mono>();
    type C = RticClock<Mono>;
    static CLOCK: C = C::new();
    assert_eq!(C::RESOLUTION, Duration::from_millis(1));
    // 15/16 of 49.7 days
    assert_eq!(C::MAX_READ_GAP, Some(Duration::from_millis(4_026_531_840)));
    let start = WRAP - 1_500;
    TICKS.store(start, SeqCst);
    let mut last = CLOCK.now();
    assert_eq!(last, Timestamp::from_millis(start));
    for t in start + 1..=start + 3_000 {
        TICKS.store(t, SeqCst);
        let now = CLOCK.now();
        assert_eq!(now - last, Duration::from_millis(1), "at tick {t}");
        assert_eq!(now, Timestamp::from_millis(t));
        last = now;
    }
    // the count wrapped, and read as it is it went back a whole period
    assert_eq!(Mono::now().as_ticks(), 1_500);
    assert_eq!(C::timestamp(Mono::now()), Timestamp::from_millis(1_500));
    // the instant of a timestamp past the wrap is the wrapped count
    assert_eq!(
        C::instant_at(Timestamp::from_millis(WRAP + 7)).as_ticks(),
        7
    );
    // read every 40 days for 98 years, over 700 wraps (the rule: 46.6 days)
    let mut t = start + 3_000;
    for _ in 0..900 {
        t += 40 * 86_400_000;
        TICKS.store(t, SeqCst);
        assert_eq!(CLOCK.now(), Timestamp::from_millis(t));
    }
    assert!(t > 700 * WRAP);
}

#[test]
fn a_wrapping_kind_timebase_is_a_clock_too() {
    use wrap32::TICKS;
    let clock = RticClock::<wrap32::Mono>::new();
    let text = std::format!("{clock:?}");
    assert!(text.contains("wrap32"), "{text}");
    assert_eq!(clock.resolution(), Duration::from_millis(1));
    let mut t = 0u64;
    for _ in 0..20 {
        t += 40 * 86_400_000;
        TICKS.store(t, SeqCst);
        assert_eq!(clock.now(), Timestamp::from_millis(t));
    }
    assert!(t > 16 * WRAP);
}

/// A leaky bucket of one permit per 20 ms, awaited across the wrap: every
/// admission instant is exactly 20 ticks after the one before, and is what
/// `Mono::now()` showed when it was granted.
#[test]
fn acquire_paces_a_leaky_bucket_to_the_tick_across_the_wrap() {
    use systick_leaky::{Mono, TICKS};
    static CLOCK: RticClock<Mono> = RticClock::new();
    static LEAKY: Bucket<Gcra> = Bucket::leaky_bucket(valid!(Quota::per_second(50)));
    let start = WRAP - 100;
    TICKS.store(start, SeqCst);
    let mut last: Option<u32> = None;
    for k in 0..12u64 {
        let granted = run(CLOCK.acquire(&LEAKY, &(), 1)).unwrap();
        assert_eq!(granted, Mono::now());
        assert_eq!(u64::from(granted.as_ticks()), (start + 20 * k) % WRAP);
        assert_eq!(CLOCK.now(), Timestamp::from_millis(start + 20 * k));
        if let Some(last) = last {
            assert_eq!(granted.as_ticks().wrapping_sub(last), 20);
        }
        last = Some(granted.as_ticks());
    }
    assert_eq!(TICKS.load(SeqCst), start + 220); // 120 ticks past the wrap
    // n = 0 resolves at once
    assert_eq!(run(CLOCK.acquire(&LEAKY, &(), 0)).unwrap(), Mono::now());
    assert_eq!(TICKS.load(SeqCst), start + 220);
}

/// Tasks that want permits all the time get exactly `burst + ⌊(t1 −
/// t0)/T⌋` by the deadline `t1`, across the wrap, the last one on the
/// deadline's own tick; then the deadline is a timeout at once.
#[test]
fn acquire_by_takes_exactly_the_token_buckets_capacity_until_the_deadline() {
    use systick_token::{Mono, TICKS};
    static CLOCK: RticClock<Mono> = RticClock::new();
    const BURST: u64 = 5;
    const T: u64 = 10;
    static TOKEN: Bucket<Gcra> = Bucket::token_bucket(valid!(
        valid!(Quota::per_second(100)).with_burst(BURST as u32)
    ));
    let t0 = WRAP - 55;
    let t1 = t0 + 100;
    TICKS.store(t0, SeqCst);
    let deadline = RticClock::<Mono>::instant_at(Timestamp::from_millis(t1));
    assert_eq!(u64::from(deadline.as_ticks()), 45); // past the wrap
    let mut granted = std::vec::Vec::new();
    let err = loop {
        match run(CLOCK.acquire_by(&TOKEN, &(), 1, deadline)) {
            Ok(at) => granted.push(at.as_ticks()),
            Err(e) => break e,
        }
    };
    assert_eq!(granted.len() as u64, BURST + (t1 - t0) / T);
    assert_eq!(granted.len(), 15);
    assert!(granted[..5].iter().all(|&g| u64::from(g) == t0 % WRAP));
    assert_eq!(u64::from(*granted.last().unwrap()), t1 % WRAP);
    assert_eq!(
        err,
        WaitError::Timeout {
            ready_at: Timestamp::from_millis(t0 + 110),
            deadline: Timestamp::from_millis(t1),
        }
    );
    // it gave up without sleeping until the deadline: still on t1
    assert_eq!(TICKS.load(SeqCst), t1);
}

#[test]
fn requests_that_cannot_succeed_fail_at_once_and_deadlines_are_exact() {
    use systick_errors::{Mono, TICKS};
    static CLOCK: RticClock<Mono> = RticClock::new();
    static TOKEN: Bucket<Gcra> =
        Bucket::token_bucket(valid!(valid!(Quota::per_second(100)).with_burst(5)));
    static LEAKY: Bucket<Gcra> = Bucket::leaky_bucket(valid!(Quota::per_second(50)));
    static FINE: Bucket<Gcra> = Bucket::token_bucket(valid!(Quota::per_second(2_000)));
    let t = WRAP - 10;
    TICKS.store(t, SeqCst);

    match run(CLOCK.acquire(&TOKEN, &(), 6)) {
        Err(WaitError::CapacityExceeded(refusal)) => assert_eq!(refusal.requested(), 6),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        run(CLOCK.acquire(&FINE, &(), 1)),
        Err(WaitError::ClockTooCoarse {
            step: Duration::from_micros(500),
            resolution: Duration::from_millis(1),
        })
    );
    assert_eq!(TICKS.load(SeqCst), t); // no wait for either

    // the leaky bucket's next permit is due 20 ticks (past the wrap) after this one
    assert_eq!(
        u64::from(run(CLOCK.acquire(&LEAKY, &(), 1)).unwrap().as_ticks()),
        t % WRAP
    );
    let early = RticClock::<Mono>::instant_at(Timestamp::from_millis(t + 19));
    assert_eq!(
        run(CLOCK.acquire_by(&LEAKY, &(), 1, early)),
        Err(WaitError::Timeout {
            ready_at: Timestamp::from_millis(t + 20),
            deadline: Timestamp::from_millis(t + 19),
        })
    );
    assert_eq!(TICKS.load(SeqCst), t);
    let due = RticClock::<Mono>::instant_at(Timestamp::from_millis(t + 20));
    assert_eq!(run(CLOCK.acquire_by(&LEAKY, &(), 1, due)), Ok(due));
    assert_eq!(TICKS.load(SeqCst), t + 20);
    // a deadline already passed still gets a permit that is there
    let passed = RticClock::<Mono>::instant_at(Timestamp::from_millis(t));
    assert!(run(CLOCK.acquire_by(&TOKEN, &(), 1, passed)).is_ok());
}

/// Dropping a waiting `acquire` takes nothing.
#[test]
fn acquire_is_cancel_safe() {
    use systick_cancel::{Mono, PARK, TICKS};
    static CLOCK: RticClock<Mono> = RticClock::new();
    static LEAKY: Bucket<Gcra> = Bucket::leaky_bucket(valid!(Quota::per_second(50)));
    let t = WRAP - 5;
    TICKS.store(t, SeqCst);
    run(CLOCK.acquire(&LEAKY, &(), 1)).unwrap();
    PARK.store(true, SeqCst);
    {
        let mut waiting = pin!(CLOCK.acquire(&LEAKY, &(), 1));
        for _ in 0..3 {
            let poll = waiting
                .as_mut()
                .poll(&mut Context::from_waker(Waker::noop()));
            assert!(poll.is_pending());
        }
        TICKS.store(t + 10, SeqCst);
    } // dropped while asleep
    PARK.store(false, SeqCst);
    // the permit due at t + 20 is still there, and nothing later was taken
    let granted = run(CLOCK.acquire(&LEAKY, &(), 1)).unwrap();
    assert_eq!(u64::from(granted.as_ticks()), (t + 20) % WRAP);
    assert_eq!(TICKS.load(SeqCst), t + 20);
}

/// A wait longer than half a wrap of a 32-bit timebase (RTIC would read
/// its instant as past) sleeps in quarter wraps and ends on its tick.
#[test]
fn a_long_wait_on_a_32_bit_timebase_sleeps_in_quarter_wraps() {
    use mhz1_long::{LONGEST_SLEEP, Mono, TICKS};
    static CLOCK: RticClock<Mono> = RticClock::new();
    // one permit per two hours on a 1 MHz counter that wraps every 71.6 minutes
    static SLOW: Bucket<Gcra> =
        Bucket::leaky_bucket(valid!(Quota::new(1, Duration::from_secs(7_200))));
    let t = 1_000;
    TICKS.store(t, SeqCst);
    run(CLOCK.acquire(&SLOW, &(), 1)).unwrap();
    let granted = run(CLOCK.acquire(&SLOW, &(), 1)).unwrap();
    let due = t + 7_200_000_000;
    assert_eq!(u64::from(granted.as_ticks()), due % WRAP);
    assert_eq!(TICKS.load(SeqCst), due);
    assert_eq!(CLOCK.now(), Timestamp::from_micros(due));
    assert_eq!(LONGEST_SLEEP.load(SeqCst), 1 << 30);
}

#[test]
fn a_64_bit_monotonic_waits_the_same_way() {
    use khz1_u64::{LONGEST_SLEEP, Mono, TICKS};
    static CLOCK: RticClock<Mono> = RticClock::new();
    static LEAKY: Bucket<Gcra> = Bucket::leaky_bucket(valid!(Quota::per_minute(1)));
    let t = 5 * WRAP;
    TICKS.store(t, SeqCst);
    assert_eq!(run(CLOCK.acquire(&LEAKY, &(), 1)).unwrap().as_ticks(), t);
    assert_eq!(
        run(CLOCK.acquire(&LEAKY, &(), 1)).unwrap().as_ticks(),
        t + 60_000
    );
    assert_eq!(LONGEST_SLEEP.load(SeqCst), 60_000);
}

/// A 32-bit tick bucket checked on the monotonic's own ticks (an
/// interrupt handler's way) and awaited through the clock agree across the
/// wrap.
#[test]
fn a_tick_bucket_on_the_monotonic_ticks_is_awaited_too() {
    use systick_tick_bucket::{Mono, TICKS};
    static CLOCK: RticClock<Mono> = RticClock::new();
    static TICK: Bucket<TickGcra> = Bucket::from_parts(
        valid!(TickGcra::from_ticks(BucketKind::LeakyBucket, 7, 1, 1_000)),
        TickState::new(),
    );
    let t = WRAP - 3;
    TICKS.store(t, SeqCst);
    assert!(TICK.check_ticks(Mono::now().as_ticks()).is_ok());
    assert_eq!(TICK.check_ticks(Mono::now().as_ticks()), Err(7));
    let granted = run(CLOCK.acquire(&TICK, &(), 1)).unwrap();
    assert_eq!(u64::from(granted.as_ticks()), (t + 7) % WRAP);
}

proptest! {
    /// Against the u128 reference, for any tick count.
    #[test]
    fn conversion_matches_reference(ticks in any::<u64>()) {
        let i = fugit::MonotonicTimerInstantU64::<32_768>::from_ticks(ticks);
        let expected = u128::from(ticks) * 1_000_000_000 / 32_768;
        prop_assert_eq!(u128::from(RticClock::<khz32::Mono>::timestamp(i).as_nanos()), expected.min(u128::from(u64::MAX)));
        let i = fugit::MonotonicInstant::<u64, 3, 7>::from_ticks(ticks);
        let expected = u128::from(ticks) * 3_000_000_000 / 7;
        prop_assert_eq!(u128::from(RticClock::<odd::Mono>::timestamp(i).as_nanos()), expected.min(u128::from(u64::MAX)));
    }

    /// The instant for a timestamp is the first tick at or after it.
    #[test]
    fn instant_at_is_the_first_tick_at_or_after(nanos in 0u64..=u64::MAX / 2) {
        let at = Timestamp::from_nanos(nanos);
        let i = RticClock::<odd::Mono>::instant_at(at);
        prop_assert!(RticClock::<odd::Mono>::timestamp(i) >= at);
        if i.as_ticks() > 0 {
            let before = fugit::MonotonicInstant::<u64, 3, 7>::from_ticks(i.as_ticks() - 1);
            prop_assert!(RticClock::<odd::Mono>::timestamp(before) < at);
        }
    }

    /// Read at gaps up to the read rule's, from anywhere, the 32-bit clock
    /// shows the true (unwrapped) time, exactly.
    #[test]
    fn the_32_bit_extension_is_exact_within_the_read_rule(
        start in 0u64..WRAP,
        gaps in proptest::collection::vec(0u64..=WRAP - (1 << 28), 1..40),
    ) {
        use systick_prop::TICKS;
        TICKS.store(start, SeqCst);
        let clock = RticClock::<systick_prop::Mono>::new();
        prop_assert_eq!(clock.now(), Timestamp::from_millis(start));
        let mut t = start;
        for gap in gaps {
            t += gap;
            TICKS.store(t, SeqCst);
            prop_assert_eq!(clock.now(), Timestamp::from_millis(t));
        }
    }
}
