//! tollgate on RTIC 2, on QEMU's lm3s6965evb, across the 32-bit wrap of
//! rtic-monotonics' SysTick monotonic; every count is checked here, against
//! the exact formula.
//!
//! The monotonic is rtic-monotonics' SysTick at 1 kHz with 32-bit ticks
//! (`systick_monotonic!`, no `systick-64bit`), which wraps after 2^32
//! ticks: 49.7 days. Its counter starts at 0 and cannot be preset, so the
//! app's monotonic [`Mono`] is that one seen through a fixed offset: the
//! same 32-bit instants, the same timer queue and interrupt, numbered so
//! that the app boots 2 005 ticks before the wrap. The run, from `S` to
//! `E = S + 3 010` ticks, crosses it 1 505 ticks in.
//!
//! - Three tasks (priority 1) wait on a `static` token bucket (100/s, burst
//!   5: `T` = 10 ticks) with `CLOCK.acquire_by(&TOKEN, &(), 1, E)`, where
//!   `CLOCK` is the `static RticClock<Mono>`, until the deadline refuses
//!   them. They get exactly `burst + ⌊(t1 − t0)/T⌋`, `t0` the first
//!   admission, `t1 = E` (all to the first task: waiters are not queued,
//!   and RTIC polls the tasks of one priority in a fixed order).
//! - Two tasks (priority 2) wait on a leaky bucket (50/s: `T` = 20 ticks)
//!   the same way: `1 + ⌊(t1 − t0)/T⌋` admissions, and the admission
//!   instants that `acquire_by` returns are exactly `T` apart, to the tick,
//!   across the wrap.
//! - A task (priority 3) wakes at every tick of the run, reads `CLOCK` and
//!   `Mono::now()`, and pends `UART0`. The clock must advance by exactly
//!   the ticks that passed, 1 ms each, across the wrap (where the tick
//!   count goes back to 0).
//! - The `UART0` hardware task (priority 4) checks a 32-bit tick bucket
//!   (`TickGcra`, token, `T` = 7 ticks, burst 3) on `Mono`'s own `u32`
//!   ticks, once per tick: `burst + ⌊(t1 − t0 − nudge)/T⌋`. The core stores
//!   a busy TAT of 0 as 1 (one tick less room, once per 2^32 ticks): here
//!   the TAT `t0 + 215·T` is 0 mod 2^32, and as `(t1 − t0)` is a multiple
//!   of `T` that costs this bucket one admission (432, not 433).
//! - Before the run, one task checks what `acquire` answers at once: a
//!   request above the burst (`CapacityExceeded`), a limiter finer than a
//!   tick (`ClockTooCoarse`), a deadline one tick early (`Timeout`) and on
//!   the due tick (served on it), and that an `acquire` dropped by
//!   `Mono::timeout_after` took nothing.
//!
//! Each check prints one line with its figures and PASS or FAIL through
//! semihosting; the firmware exits 0 only when all pass.
#![no_std]
#![no_main]

mod checks;
mod mono;

use core::time::Duration;

use cortex_m_semihosting::{debug, hprintln};
use rtic::Mutex;
use rtic_monotonics::systick::prelude::*;
use tollgate::rtic::RticClock;
use tollgate::tick::{TickGcra, TickState};
use tollgate::{valid, Bucket, BucketKind, Clock, Gcra, LockFreedom, Quota};

use checks::{check_results, early_checks, in_run, millis, offset};
use checks::{Admissions, ClockSeen, Radio, Results};
use mono::{Mono, SysTickMono, OFFSET};

/// Ticks per second.
const HZ: u32 = 1_000;
/// lm3s6965evb's core clock, which QEMU feeds SysTick.
const CORE_HZ: u32 = 12_000_000;
/// The first tick of the run.
const S: u32 = OFFSET.wrapping_add(500);
/// Ticks in the run.
const RUN: u32 = 3_010;
/// The last tick of the run: after the wrap.
const E: u32 = S.wrapping_add(RUN);
/// When the results are checked.
const REPORT: u32 = E.wrapping_add(50);

/// The token bucket's burst and emission interval (ticks).
const TOKEN_BURST: u32 = 5;
const TOKEN_T: u32 = 10;
/// The leaky bucket's emission interval (ticks).
const LEAKY_T: u32 = 20;
/// The interrupt's tick bucket.
const RADIO_BURST: u32 = 3;
const RADIO_T: u32 = 7;

/// The one clock of `Mono`, read from priorities 1 to 3.
static CLOCK: RticClock<Mono> = RticClock::new();

const TOKEN_RATE: Quota = valid!(valid!(Quota::per_second(100)).with_burst(TOKEN_BURST));
static TOKEN: Bucket<Gcra> = Bucket::token_bucket(valid!(
    TOKEN_RATE.check_resolution(RticClock::<Mono>::RESOLUTION)
));
static LEAKY: Bucket<Gcra> = Bucket::leaky_bucket(valid!(Quota::per_second(50)));
/// The interrupt's bucket, in `Mono`'s ticks.
static RADIO: Bucket<TickGcra> = Bucket::from_parts(
    valid!(TickGcra::from_ticks(
        BucketKind::TokenBucket,
        RADIO_T,
        RADIO_BURST,
        HZ
    )),
    TickState::new(),
);
/// For the checks before the run.
static SMALL: Bucket<Gcra> = Bucket::token_bucket(TOKEN_RATE);
static PACED: Bucket<Gcra> = Bucket::leaky_bucket(valid!(Quota::per_second(50)));
static FINE: Bucket<Gcra> = Bucket::token_bucket(valid!(Quota::per_second(2_000)));

// Priorities 1 and 2 share 64-bit buckets' lock table otherwise: see Cargo.toml.
const _: () = assert!(<Bucket<Gcra> as LockFreedom>::IS_INTERRUPT_SAFE);
const _: () = assert!(<Bucket<TickGcra> as LockFreedom>::IS_INTERRUPT_SAFE);

#[rtic::app(device = lm3s6965, dispatchers = [SSI0, QEI0, GPIOA])]
mod app {
    use super::*;

    #[shared]
    struct Shared {
        results: Results,
    }

    #[local]
    struct Local {}

    #[init]
    fn init(cx: init::Context) -> (Shared, Local) {
        SysTickMono::start(cx.core.SYST, CORE_HZ);
        hprintln!(
            "tollgate rtic-app on {}: rtic-monotonics SysTick at {} Hz, 32-bit ticks, from tick {} ({} before the wrap); RticClock resolution {:?}, MAX_READ_GAP {:?}; run ticks {}..={} (across the wrap); Bucket<Gcra> IS_INTERRUPT_SAFE={}",
            env!("FIRMWARE_TARGET"),
            HZ,
            Mono::now().as_ticks(),
            0u32.wrapping_sub(Mono::now().as_ticks()),
            RticClock::<Mono>::RESOLUTION,
            RticClock::<Mono>::MAX_READ_GAP,
            S,
            E,
            <Bucket<Gcra> as LockFreedom>::IS_INTERRUPT_SAFE
        );
        early::spawn().ok();
        token_a::spawn().ok();
        token_b::spawn().ok();
        token_c::spawn().ok();
        leaky_a::spawn().ok();
        leaky_b::spawn().ok();
        clock::spawn().ok();
        report::spawn().ok();
        let results = Results {
            token: Admissions::new(),
            leaky: Admissions::new(),
            clock: None,
            early: None,
            radio: Radio {
                admitted: 0,
                denied: 0,
                first: u32::MAX,
                last: 0,
                outside: 0,
            },
        };
        (Shared { results }, Local {})
    }

    #[task(priority = 1, shared = [results])]
    async fn early(mut cx: early::Context) {
        let figures = early_checks().await;
        cx.shared.results.lock(|r| r.early = Some(figures));
    }

    #[task(priority = 1, shared = [results])]
    async fn token_a(cx: token_a::Context) {
        worker(&TOKEN, 0, cx.shared.results, |r| &mut r.token).await;
    }

    #[task(priority = 1, shared = [results])]
    async fn token_b(cx: token_b::Context) {
        worker(&TOKEN, 1, cx.shared.results, |r| &mut r.token).await;
    }

    #[task(priority = 1, shared = [results])]
    async fn token_c(cx: token_c::Context) {
        worker(&TOKEN, 2, cx.shared.results, |r| &mut r.token).await;
    }

    #[task(priority = 2, shared = [results])]
    async fn leaky_a(cx: leaky_a::Context) {
        worker(&LEAKY, 0, cx.shared.results, |r| &mut r.leaky).await;
    }

    #[task(priority = 2, shared = [results])]
    async fn leaky_b(cx: leaky_b::Context) {
        worker(&LEAKY, 1, cx.shared.results, |r| &mut r.leaky).await;
    }

    /// Every tick of the run: read the clock and the tick count, pend the
    /// hardware task.
    #[task(priority = 3, shared = [results])]
    async fn clock(mut cx: clock::Context) {
        Mono::delay_until(Mono::at(S)).await;
        let (first_raw, first) = (Mono::now().as_ticks(), CLOCK.now());
        let mut seen = ClockSeen {
            ticks: 0,
            bad_steps: 0,
            wraps: 0,
            first,
            last: first,
            first_raw,
            last_raw: first_raw,
            plain_back_ms: 0,
        };
        rtic::pend(lm3s6965::Interrupt::UART0);
        for t in 1..=RUN {
            Mono::delay_until(Mono::at(S.wrapping_add(t))).await;
            let (raw, now) = (Mono::now().as_ticks(), CLOCK.now());
            let passed = raw.wrapping_sub(seen.last_raw);
            if now - seen.last != Duration::from_millis(u64::from(passed)) || passed == 0 {
                seen.bad_steps += 1;
            }
            if raw < seen.last_raw {
                seen.wraps += 1;
                let plain = RticClock::<Mono>::timestamp(Mono::at(raw));
                let before = RticClock::<Mono>::timestamp(Mono::at(seen.last_raw));
                seen.plain_back_ms = millis(before) - millis(plain);
            }
            seen.ticks += passed;
            seen.last = now;
            seen.last_raw = raw;
            rtic::pend(lm3s6965::Interrupt::UART0);
        }
        cx.shared.results.lock(|r| r.clock = Some(seen));
    }

    /// The hardware task: one check of the tick bucket at `Mono`'s tick.
    #[task(binds = UART0, priority = 4, shared = [results])]
    fn radio(mut cx: radio::Context) {
        let now = Mono::now().as_ticks();
        let admitted = RADIO.check_ticks(now).is_ok();
        cx.shared.results.lock(|r| {
            let radio = &mut r.radio;
            if !in_run(now) {
                radio.outside += 1;
            } else if admitted {
                radio.admitted += 1;
                radio.first = radio.first.min(offset(now));
                radio.last = radio.last.max(offset(now));
            } else {
                radio.denied += 1;
            }
        });
    }

    #[task(priority = 1, shared = [results])]
    async fn report(mut cx: report::Context) {
        Mono::delay_until(Mono::at(REPORT)).await;
        let ok = cx.shared.results.lock(|r| check_results(r));
        debug::exit(if ok {
            debug::EXIT_SUCCESS
        } else {
            debug::EXIT_FAILURE
        });
    }
}

/// One waiting task: from `S`, `acquire_by(bucket, E)` until the deadline
/// refuses; each admission instant is recorded.
///
/// Waiters are not queued: all of them wake when capacity returns, and RTIC
/// polls tasks of one priority in a fixed order, so the first task, which
/// asks again at once, takes every permit (the per-task counts show it).
/// The totals are what the quota allows either way.
async fn worker(
    bucket: &'static Bucket<Gcra>,
    task: usize,
    mut results: impl Mutex<T = Results>,
    pick: fn(&mut Results) -> &mut Admissions,
) {
    Mono::delay_until(Mono::at(S)).await;
    loop {
        match CLOCK.acquire_by(bucket, &(), 1, Mono::at(E)).await {
            Ok(granted) => results.lock(|r| pick(r).admitted(task, granted.as_ticks())),
            Err(e) => {
                results.lock(|r| pick(r).ended(e));
                return;
            }
        }
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    hprintln!("PANIC: {}", info);
    debug::exit(debug::EXIT_FAILURE);
    loop {
        cortex_m::asm::wfi();
    }
}
