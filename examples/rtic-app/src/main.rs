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

use core::time::Duration;

use cortex_m_semihosting::{debug, hprintln};
use rtic::Mutex;
use rtic_monotonics::systick::prelude::*;
use tollgate::rtic::{RticClock, WaitError};
use tollgate::tick::{TickGcra, TickState};
use tollgate::{valid, Bucket, BucketKind, Clock, Gcra, LockFreedom, Quota, Timestamp};

systick_monotonic!(SysTickMono, 1_000);

/// Ticks per second.
const HZ: u32 = 1_000;
/// lm3s6965evb's core clock, which QEMU feeds SysTick.
const CORE_HZ: u32 = 12_000_000;
/// `Mono` at boot: 2 005 ticks before the wrap.
const OFFSET: u32 = 0u32.wrapping_sub(2_005);
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

type Instant = <SysTickMono as Timebase>::Instant;

/// rtic-monotonics' 32-bit SysTick monotonic, numbered from `OFFSET`:
/// every call goes to `SysTickMono`, with instants shifted by `OFFSET`.
pub struct Mono;

impl Mono {
    fn at(ticks: u32) -> Instant {
        Instant::from_ticks(ticks)
    }

    /// The same instant on `SysTickMono`.
    fn unshift(instant: Instant) -> Instant {
        Instant::from_ticks(instant.as_ticks().wrapping_sub(OFFSET))
    }
}

impl Timebase for Mono {
    type Instant = Instant;
    type Duration = <SysTickMono as Timebase>::Duration;

    fn now() -> Instant {
        Instant::from_ticks(SysTickMono::now().as_ticks().wrapping_add(OFFSET))
    }

    async fn delay(duration: Self::Duration) {
        SysTickMono::delay(duration).await;
    }

    async fn delay_until(instant: Instant) {
        SysTickMono::delay_until(Self::unshift(instant)).await;
    }

    async fn timeout_at<F: core::future::Future>(
        instant: Instant,
        future: F,
    ) -> Result<F::Output, rtic_monotonics::rtic_time::TimeoutError> {
        SysTickMono::timeout_at(Self::unshift(instant), future).await
    }

    async fn timeout_after<F: core::future::Future>(
        duration: Self::Duration,
        future: F,
    ) -> Result<F::Output, rtic_monotonics::rtic_time::TimeoutError> {
        SysTickMono::timeout_after(duration, future).await
    }
}

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

/// Ticks from the start of the run (wrapping).
fn offset(ticks: u32) -> u32 {
    ticks.wrapping_sub(S)
}

fn in_run(ticks: u32) -> bool {
    offset(ticks) <= RUN
}

fn millis(t: Timestamp) -> u64 {
    t.as_nanos() / 1_000_000
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "FAIL"
    }
}

/// A bucket's admissions, as the tasks saw them.
struct Admissions {
    count: u32,
    per_task: [u32; 3],
    /// Offsets from `S` of the first and last admission.
    first: u32,
    last: u32,
    /// The smallest and largest ticks between two consecutive admissions.
    min_gap: u32,
    max_gap: u32,
    /// Admissions outside the run.
    outside: u32,
    /// Tasks that ended with the deadline's `Timeout`, and with anything else.
    timeouts: u32,
    errors: u32,
}

impl Admissions {
    const fn new() -> Self {
        Self {
            count: 0,
            per_task: [0; 3],
            first: u32::MAX,
            last: 0,
            min_gap: u32::MAX,
            max_gap: 0,
            outside: 0,
            timeouts: 0,
            errors: 0,
        }
    }

    fn admitted(&mut self, task: usize, ticks: u32) {
        if self.count > 0 {
            let gap = offset(ticks).wrapping_sub(self.last);
            self.min_gap = self.min_gap.min(gap);
            self.max_gap = self.max_gap.max(gap);
        }
        self.count += 1;
        self.per_task[task] += 1;
        if in_run(ticks) {
            self.first = self.first.min(offset(ticks));
            self.last = self.last.max(offset(ticks));
        } else {
            self.outside += 1;
        }
    }

    fn ended(&mut self, err: WaitError) {
        match err {
            WaitError::Timeout { .. } => self.timeouts += 1,
            _ => self.errors += 1,
        }
    }
}

/// What the clock task saw at every tick of the run.
struct ClockSeen {
    ticks: u32,
    /// Ticks at which the clock did not advance by exactly the ticks that
    /// passed (1 ms each).
    bad_steps: u32,
    /// Times `Mono::now()` went back to a smaller count.
    wraps: u32,
    first: Timestamp,
    last: Timestamp,
    first_raw: u32,
    last_raw: u32,
    /// How far back the plain conversion of the tick count went at the wrap.
    plain_back_ms: u64,
}

/// The early checks' figures.
struct Early {
    capacity_ok: bool,
    coarse_ok: bool,
    deadline_ok: bool,
    deadline_ready_ms: u64,
    cancel_ok: bool,
    cancel_after: u32,
    cancel_next: u32,
}

/// The hardware task's checks.
struct Radio {
    admitted: u32,
    denied: u32,
    first: u32,
    last: u32,
    outside: u32,
}

pub struct Results {
    token: Admissions,
    leaky: Admissions,
    clock: Option<ClockSeen>,
    early: Option<Early>,
    radio: Radio,
}

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

/// What `acquire` answers at once, and that a dropped `acquire` took
/// nothing. Before the run.
async fn early_checks() -> Early {
    let t = Mono::now().as_ticks();
    let capacity_ok = matches!(
        CLOCK.acquire(&SMALL, &(), TOKEN_BURST + 1).await,
        Err(WaitError::CapacityExceeded(r)) if r.requested() == TOKEN_BURST + 1
    );
    let coarse_ok = CLOCK.acquire(&FINE, &(), 1).await
        == Err(WaitError::ClockTooCoarse {
            step: Duration::from_micros(500),
            resolution: Duration::from_millis(1),
        });
    let capacity_ok = capacity_ok && Mono::now().as_ticks() == t; // no wait

    // a leaky bucket: the next permit is due `LEAKY_T` ticks after the first
    let first = CLOCK.acquire(&PACED, &(), 1).await.map(|i| i.as_ticks());
    let early = CLOCK
        .acquire_by(&PACED, &(), 1, Mono::at(t.wrapping_add(LEAKY_T - 1)))
        .await;
    // `ready_at`, from now
    let deadline_ready_ms = match early {
        Err(WaitError::Timeout { ready_at, .. }) => millis(ready_at) - millis(CLOCK.now()),
        _ => 0,
    };
    let timed_out_at_once = matches!(early, Err(WaitError::Timeout { .. }))
        && Mono::now().as_ticks() == t
        && deadline_ready_ms == u64::from(LEAKY_T);
    let due = t.wrapping_add(LEAKY_T);
    let on_due = CLOCK.acquire_by(&PACED, &(), 1, Mono::at(due)).await;
    let deadline_ok = first == Ok(t)
        && timed_out_at_once
        && on_due.map(|i| i.as_ticks()) == Ok(due)
        && Mono::now().as_ticks() == due;

    // dropped while it sleeps: takes nothing
    let dropped = Mono::timeout_after(5.millis(), CLOCK.acquire(&PACED, &(), 1)).await;
    let cancel_after = Mono::now().as_ticks().wrapping_sub(due);
    let next = CLOCK.acquire(&PACED, &(), 1).await.map(|i| i.as_ticks());
    let cancel_next = next.map_or(u32::MAX, |n| n.wrapping_sub(t));
    let cancel_ok = dropped.is_err() && cancel_after < LEAKY_T && cancel_next == 2 * LEAKY_T;
    Early {
        capacity_ok,
        coarse_ok,
        deadline_ok,
        deadline_ready_ms,
        cancel_ok,
        cancel_after,
        cancel_next,
    }
}

/// Prints one line per check; true if all pass.
fn check_results(r: &Results) -> bool {
    let mut passed = 0;
    let mut checks = 0;
    let mut tally = |ok: bool| {
        checks += 1;
        passed += u32::from(ok);
        verdict(ok)
    };

    match &r.early {
        Some(e) => {
            hprintln!(
                "capacity: acquire({}) on burst {} -> CapacityExceeded at once {}",
                TOKEN_BURST + 1,
                TOKEN_BURST,
                tally(e.capacity_ok)
            );
            hprintln!(
                "coarse: a 500 us step on a 1 ms tick -> ClockTooCoarse at once {}",
                tally(e.coarse_ok)
            );
            hprintln!(
                "deadline: 1 tick early -> Timeout at once (ready_at +{} ms); on the due tick -> served on it {}",
                e.deadline_ready_ms,
                tally(e.deadline_ok)
            );
            hprintln!(
                "cancel: acquire dropped by Mono::timeout_after {} ticks in took nothing; the next one served on its tick (+{}) {}",
                e.cancel_after,
                e.cancel_next,
                tally(e.cancel_ok)
            );
        }
        None => {
            hprintln!("early checks: did not finish {}", tally(false));
        }
    }

    let k = &r.token;
    let expected = TOKEN_BURST + (RUN - k.first) / TOKEN_T;
    let ok = k.count == expected
        && k.first == 0
        && k.last == RUN
        && k.outside == 0
        && k.timeouts == 3
        && k.errors == 0;
    hprintln!(
        "token-bucket: 3 tasks, acquire_by(deadline t1), 100/s burst {} (T={} ticks): admitted={} (per task {}/{}/{}: not queued, RTIC polls one priority in a fixed order) expected=burst+floor((t1-t0)/T)={}+floor(({}-{})/{})={}; first at t0=S+{}, last at t1=S+{}; deadline Timeouts {}/3 {}",
        TOKEN_BURST,
        TOKEN_T,
        k.count,
        k.per_task[0],
        k.per_task[1],
        k.per_task[2],
        TOKEN_BURST,
        RUN,
        k.first,
        TOKEN_T,
        expected,
        k.first,
        k.last,
        k.timeouts,
        tally(ok)
    );

    let k = &r.leaky;
    let expected = 1 + (RUN - k.first) / LEAKY_T;
    let ok = k.count == expected
        && k.first == 0
        && k.min_gap == LEAKY_T
        && k.max_gap == LEAKY_T
        && k.outside == 0
        && k.timeouts == 2
        && k.errors == 0;
    hprintln!(
        "leaky-bucket: 2 tasks, acquire_by(deadline t1), 50/s (T={} ticks): admitted={} (per task {}/{}) expected=1+floor((t1-t0)/T)=1+floor(({}-{})/{})={}; admission instants {}..{} ticks apart (exactly T) {}",
        LEAKY_T,
        k.count,
        k.per_task[0],
        k.per_task[1],
        RUN,
        k.first,
        LEAKY_T,
        expected,
        k.min_gap,
        k.max_gap,
        tally(ok)
    );

    match &r.clock {
        Some(c) => {
            let ok = c.bad_steps == 0
                && c.wraps == 1
                && c.ticks == RUN
                && c.last - c.first == Duration::from_millis(u64::from(RUN))
                && c.plain_back_ms == (1u64 << 32) - 1;
            hprintln!(
                "clock: Mono::now() {} -> {} ({} ticks, wrapped {} time); RticClock {} ms -> {} ms, +1 ms per tick at every tick (bad steps {}); the tick count's own conversion went back {} ms at the wrap {}",
                c.first_raw,
                c.last_raw,
                c.ticks,
                c.wraps,
                millis(c.first),
                millis(c.last),
                c.bad_steps,
                c.plain_back_ms,
                tally(ok)
            );
        }
        None => {
            hprintln!("clock: did not finish {}", tally(false));
        }
    }

    let radio = &r.radio;
    // The busy TATs are t0 + m·T; one that is 0 mod 2^32 is stored as 1.
    let to_zero = 0u32.wrapping_sub(S.wrapping_add(radio.first));
    let nudge = u32::from(
        to_zero > 0 && to_zero.is_multiple_of(RADIO_T) && to_zero <= RUN + RADIO_BURST * RADIO_T,
    );
    let expected = RADIO_BURST + (RUN - radio.first - nudge) / RADIO_T;
    let ok = radio.admitted == expected
        && radio.first == 0
        && radio.admitted + radio.denied == RUN + 1
        && radio.outside == 0;
    hprintln!(
        "hardware task: UART0 pended at each of {} ticks, TickGcra token bucket T={} ticks burst {} on Mono's u32 ticks: admitted={} denied={} expected=burst+floor((t1-t0-nudge)/T)={}+floor(({}-{}-{})/{})={}; nudge={} (the TAT t0+{}*T is 0 mod 2^32, stored as 1) {}",
        RUN + 1,
        RADIO_T,
        RADIO_BURST,
        radio.admitted,
        radio.denied,
        RADIO_BURST,
        RUN,
        radio.first,
        nudge,
        RADIO_T,
        expected,
        nudge,
        to_zero / RADIO_T,
        tally(ok)
    );

    let all = passed == checks;
    if all {
        hprintln!("ALL PASS ({} checks)", checks);
    } else {
        hprintln!("FAILED {} of {} checks", checks - passed, checks);
    }
    all
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    hprintln!("PANIC: {}", info);
    debug::exit(debug::EXIT_FAILURE);
    loop {
        cortex_m::asm::wfi();
    }
}
