//! What the tasks record, the checks made before the run, and the report:
//! one line per check, with its figures.

use core::time::Duration;

use cortex_m_semihosting::hprintln;
use rtic_monotonics::systick::prelude::*;
use tollgate::rtic::WaitError;
use tollgate::{Clock, Timestamp};

use crate::mono::Mono;
use crate::{
    CLOCK, FINE, LEAKY_T, PACED, RADIO_BURST, RADIO_T, RUN, S, SMALL, TOKEN_BURST, TOKEN_T,
};

/// Ticks from the start of the run (wrapping).
pub fn offset(ticks: u32) -> u32 {
    ticks.wrapping_sub(S)
}

pub fn in_run(ticks: u32) -> bool {
    offset(ticks) <= RUN
}

pub fn millis(t: Timestamp) -> u64 {
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
pub struct Admissions {
    pub(crate) count: u32,
    pub(crate) per_task: [u32; 3],
    /// Offsets from `S` of the first and last admission.
    pub(crate) first: u32,
    pub(crate) last: u32,
    /// The smallest and largest ticks between two consecutive admissions.
    pub(crate) min_gap: u32,
    pub(crate) max_gap: u32,
    /// Admissions outside the run.
    pub(crate) outside: u32,
    /// Tasks that ended with the deadline's `Timeout`, and with anything else.
    pub(crate) timeouts: u32,
    pub(crate) errors: u32,
}

impl Admissions {
    pub const fn new() -> Self {
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

    pub fn admitted(&mut self, task: usize, ticks: u32) {
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

    pub fn ended(&mut self, err: WaitError) {
        match err {
            WaitError::Timeout { .. } => self.timeouts += 1,
            _ => self.errors += 1,
        }
    }
}

/// What the clock task saw at every tick of the run.
pub struct ClockSeen {
    pub(crate) ticks: u32,
    /// Ticks at which the clock did not advance by exactly the ticks that
    /// passed (1 ms each).
    pub(crate) bad_steps: u32,
    /// Times `Mono::now()` went back to a smaller count.
    pub(crate) wraps: u32,
    pub(crate) first: Timestamp,
    pub(crate) last: Timestamp,
    pub(crate) first_raw: u32,
    pub(crate) last_raw: u32,
    /// How far back the plain conversion of the tick count went at the wrap.
    pub(crate) plain_back_ms: u64,
}

/// The early checks' figures.
pub struct Early {
    pub(crate) capacity_ok: bool,
    pub(crate) coarse_ok: bool,
    pub(crate) deadline_ok: bool,
    pub(crate) deadline_ready_ms: u64,
    pub(crate) cancel_ok: bool,
    pub(crate) cancel_after: u32,
    pub(crate) cancel_next: u32,
}

/// The hardware task's checks.
pub struct Radio {
    pub(crate) admitted: u32,
    pub(crate) denied: u32,
    pub(crate) first: u32,
    pub(crate) last: u32,
    pub(crate) outside: u32,
}

pub struct Results {
    pub(crate) token: Admissions,
    pub(crate) leaky: Admissions,
    pub(crate) clock: Option<ClockSeen>,
    pub(crate) early: Option<Early>,
    pub(crate) radio: Radio,
}

/// What `acquire` answers at once, and that a dropped `acquire` took
/// nothing. Before the run.
pub async fn early_checks() -> Early {
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
pub fn check_results(r: &Results) -> bool {
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
