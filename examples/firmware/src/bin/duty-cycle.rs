//! tollgate's EU868 duty-cycle limiter and `WrappingClock`, checked from
//! inside the firmware under QEMU.
//!
//! A separate image from `tollgate-firmware`: it owns SysTick (no embassy
//! here) and runs it as a **16-bit wrapping counter** at the core clock
//! (reload 0xFFFF: 65 536 ticks, a wrap every 5.5 ms on the lm3s6965evb's
//! 12 MHz, 2.6 ms on the mps2-an386's 25 MHz). `WrappingClock` extends it
//! to a `Timestamp`, read at once from thread mode (a tight loop) and from
//! the SysTick handler (once per wrap, which alone satisfies the clock's
//! read rule); the handler also counts the wraps, the reference. It checks:
//!
//! - wrapping clock: every reading, in thread mode and in the handler,
//!   lies between the reference just before and just after it, and each
//!   context's readings never go back, across tens of wraps;
//! - duty cycle, on a `ManualClock` (simulated hours): the regulation's
//!   arithmetic per sub-band (1 % = 36 s, 0.1 % = 3.6 s, 10 % = 360 s of
//!   airtime per hour with back-to-back frames), save → 36 bytes → reset →
//!   restore keeps the obligations, bad input is a typed error;
//! - duty cycle across a **real system reset**: the first boot saves the
//!   36 bytes into RAM that cortex-m-rt leaves uninitialised (`.uninit`)
//!   and requests a reset (`SCB::sys_reset`, SYSRESETREQ); QEMU resets the
//!   core and the firmware boots again from the reset vector, finds the
//!   bytes, restores with an unknown downtime on a clock that starts at
//!   zero again, and checks each sub-band's wait;
//! - duty cycle, live on the wrapping clock: frames of 2 ms in the 10 %
//!   sub-band P start exactly 20 ms apart (to within the loop's latency).
//!
//! It prints the results over semihosting and exits 0 when all hold, 1
//! otherwise (a panic exits 1 too).
#![no_std]
#![no_main]

use core::cell::Cell;
use core::num::NonZeroU64;
use core::sync::atomic::{AtomicU32, AtomicU8, Ordering::Relaxed};
use core::time::Duration;

use cortex_m::peripheral::syst::SystClkSource;
use cortex_m::peripheral::{SCB, SYST};
use cortex_m_rt::{entry, exception};
use cortex_m_semihosting::{debug, hprintln};
use critical_section::Mutex;
use tollgate::duty_cycle::eu868::Eu868;
use tollgate::duty_cycle::{
    Downtime, DutyCycleLimiter, RestoreError, SavedState, Transmit, TransmitError,
};
use tollgate::{Clock, ManualClock, Timestamp, WrappingClock};

/// The core clock that QEMU feeds SysTick on each machine.
#[cfg(target_abi = "eabihf")]
const CORE_HZ: u64 = 25_000_000; // mps2-an386
#[cfg(not(target_abi = "eabihf"))]
const CORE_HZ: u64 = 12_000_000; // lm3s6965evb

/// SysTick counts down from 0xFFFF; this counts up and wraps at 2^16.
fn systick_up() -> u16 {
    (0xFFFF - SYST::get_current()) as u16
}

static CLOCK: WrappingClock<fn() -> u16> =
    WrappingClock::new(systick_up, NonZeroU64::new(CORE_HZ).unwrap());

/// Wraps of the counter, counted by the SysTick handler.
static WRAPS: Mutex<Cell<u64>> = Mutex::new(Cell::new(0));

/// What the SysTick handler saw: readings, the last one, failures.
#[derive(Clone, Copy)]
struct HandlerReads {
    reads: u32,
    last: u64,
    failures: u32,
}

static HANDLER: Mutex<Cell<HandlerReads>> = Mutex::new(Cell::new(HandlerReads {
    reads: 0,
    last: 0,
    failures: 0,
}));

/// The true tick count, from the handler's wrap count and the counter.
///
/// SysTick pends its exception when the down-counter reaches 0 (up =
/// 0xFFFF) and reloads one tick later (up wraps to 0); the handler counts
/// a wrap only once the reload happened. Inside the critical section the
/// handler cannot run, so a pending exception means a wrap that is not
/// counted yet, unless the counter still shows 0xFFFF.
fn reference() -> u64 {
    critical_section::with(|cs| {
        let wraps = WRAPS.borrow(cs).get();
        let up = systick_up();
        if !SCB::is_pendst_pending() {
            return (wraps << 16) + u64::from(up);
        }
        let up = systick_up();
        if up == 0xFFFF {
            (wraps << 16) + 0xFFFF
        } else {
            ((wraps + 1) << 16) + u64::from(up)
        }
    })
}

fn wraps() -> u64 {
    critical_section::with(|cs| WRAPS.borrow(cs).get())
}

#[exception]
fn SysTick() {
    // Pended at 0; count the wrap once the counter has reloaded.
    while SYST::get_current() == 0 {}
    critical_section::with(|cs| {
        let w = WRAPS.borrow(cs);
        w.set(w.get() + 1);
    });
    // A reader in an interrupt handler, racing the thread-mode reader it
    // may have interrupted in the middle of a reading.
    let before = reference();
    let t = CLOCK.ticks();
    let after = reference();
    critical_section::with(|cs| {
        let cell = HANDLER.borrow(cs);
        let mut h = cell.get();
        if t < before || t > after || t < h.last {
            h.failures += 1;
        }
        h.reads += 1;
        h.last = t;
        cell.set(h);
    });
}

fn start_systick(mut syst: SYST) {
    syst.set_clock_source(SystClkSource::Core);
    syst.set_reload(0xFFFF);
    syst.clear_current();
    syst.enable_interrupt();
    syst.enable_counter();
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "FAIL"
    }
}

/// Thread-mode readings against the reference, for `n` wraps.
fn check_wrapping_clock(n: u64) -> bool {
    let first = wraps();
    let (mut last, mut reads, mut failures) = (0u64, 0u32, 0u32);
    while wraps() < first + n {
        let before = reference();
        let t = CLOCK.ticks();
        let after = reference();
        if t < before || t > after || t < last {
            if failures < 3 {
                hprintln!(
                    "FAIL wrapping-clock: {} <= {} <= {}, last {}",
                    before,
                    t,
                    after,
                    last
                );
            }
            failures += 1;
        }
        last = t;
        reads += 1;
    }
    let handler = critical_section::with(|cs| HANDLER.borrow(cs).get());
    let ok = failures == 0 && handler.failures == 0 && u64::from(handler.reads) >= n;
    hprintln!(
        "wrapping-clock: 16-bit SysTick counter at {} Hz, {} wraps, thread-mode reads={} handler reads={} (failures {}), exact and monotonic {}",
        CORE_HZ,
        wraps(),
        reads,
        handler.reads,
        handler.failures,
        verdict(ok)
    );
    hprintln!(
        "  max read gap {} us (3/4 of the {} us wrap), now {:?}",
        CLOCK.max_read_gap().as_micros(),
        CLOCK.wrap_period().as_micros(),
        CLOCK.now()
    );
    ok
}

/// Frames of `airtime` back to back in `band` for one hour of a manual
/// clock: (frames, airtime sent in ms).
fn one_hour(band: Eu868, airtime: Duration) -> (u32, u64) {
    let radio = DutyCycleLimiter::eu868();
    let clock = ManualClock::new();
    let end = Timestamp::from_secs(3_600);
    let (mut frames, mut sent) = (0u32, Duration::ZERO);
    while clock.now() < end {
        match radio.try_transmit(band.index(), airtime, clock.now()) {
            Ok(Transmit::Allowed { .. }) => {
                frames += 1;
                sent += airtime;
                clock.advance(airtime);
            }
            Ok(Transmit::Wait { retry_after }) => clock.advance(retry_after),
            Err(_) => return (0, 0),
        }
    }
    (frames, sent.as_millis() as u64)
}

fn check_regulation() -> bool {
    let mut ok = true;
    let cases = [
        ("1%", Eu868::M, 1_000, 36, 36_000),
        ("0.1%", Eu868::N, 100, 36, 3_600),
        ("10%", Eu868::P, 1_000, 360, 360_000),
    ];
    for (duty, band, airtime_ms, frames, sent_ms) in cases {
        let got = one_hour(band, Duration::from_millis(airtime_ms));
        let pass = got == (frames, sent_ms);
        hprintln!(
            "duty-cycle: {} sub-band {:?}: {} frames of {} ms back to back in one hour = {} ms of airtime {}",
            duty,
            band,
            got.0,
            airtime_ms,
            got.1,
            verdict(pass)
        );
        ok &= pass;
    }
    ok
}

/// Three transmissions at 5 000 s (M 2 s: a 200 s cycle, N 3 s: 3 000 s,
/// P 1 s: 10 s), saved 50 s later into 36 bytes (the "flash"); whether all
/// three were allowed.
fn saved_state() -> ([u8; SavedState::<6>::ENCODED_LEN], usize, bool) {
    let radio = DutyCycleLimiter::eu868();
    let t0 = Timestamp::from_secs(5_000);
    let s = Duration::from_secs;
    let allowed = |band: Eu868, airtime| {
        radio
            .try_transmit(band.index(), airtime, t0)
            .is_ok_and(|d| d.is_allowed())
    };
    let ok = allowed(Eu868::M, s(2)) && allowed(Eu868::N, s(3)) && allowed(Eu868::P, s(1));
    let mut flash = [0u8; SavedState::<6>::ENCODED_LEN];
    let len = radio.save(t0 + s(50)).encode(&mut flash).unwrap_or(0);
    (flash, len, ok)
}

fn check_save_restore() -> bool {
    let (m, n, p) = (Eu868::M.index(), Eu868::N.index(), Eu868::P.index());
    let s = Duration::from_secs;
    let (flash, len, mut ok) = saved_state();
    // reset: a new clock starting at zero, the downtime unknown
    let restored = match SavedState::<6>::decode(&flash) {
        Ok(saved) => DutyCycleLimiter::restore(
            DutyCycleLimiter::eu868(),
            &saved,
            Timestamp::ZERO,
            Downtime::Unknown,
        ),
        Err(_) => DutyCycleLimiter::after_unknown_reset(
            tollgate::duty_cycle::eu868::SUB_BANDS,
            Timestamp::ZERO,
        ),
    };
    let wait = |band| {
        restored
            .time_until_allowed(band, Duration::from_millis(1), Timestamp::ZERO)
            .map_or(u64::MAX, |d| d.as_secs())
    };
    let (wm, wn, wp) = (wait(m), wait(n), wait(p));
    ok &= len == 36 && wm == 150 && wn == 2_950 && wp == 0;
    // not a nanosecond early
    ok &= !restored
        .try_transmit(m, s(1), Timestamp::from_secs(150) - Duration::from_nanos(1))
        .is_ok_and(|d| d.is_allowed());
    ok &= restored
        .try_transmit(m, s(1), Timestamp::from_secs(150))
        .is_ok_and(|d| d.is_allowed());
    hprintln!(
        "duty-cycle: save {} bytes -> reset -> restore: M waits {} s, N waits {} s, P free after {} s {}",
        len,
        wm,
        wn,
        wp,
        verdict(ok)
    );
    ok
}

fn check_bad_input() -> bool {
    let radio = DutyCycleLimiter::eu868();
    let t = Timestamp::ZERO;
    let unknown = matches!(
        radio.try_transmit(9, Duration::from_millis(1), t),
        Err(TransmitError::UnknownBand { band: 9, bands: 6 })
    );
    let too_long = matches!(
        radio.try_transmit(Eu868::M.index(), Duration::from_secs(37), t),
        Err(TransmitError::AirtimeTooLong { .. })
    );
    let gap = matches!(
        radio.band_index(868_650_000, 125_000),
        Err(TransmitError::NoSubBand { .. })
    );
    let mut flash = [0u8; SavedState::<6>::ENCODED_LEN];
    let _ = radio.save(t).encode(&mut flash);
    flash[12] ^= 0x10;
    let corrupt = SavedState::<6>::decode(&flash) == Err(RestoreError::Checksum);
    let erased = SavedState::<6>::decode(&[0xFF; 36]) == Err(RestoreError::Version { found: 0xFF });
    let ok = unknown && too_long && gap && corrupt && erased;
    hprintln!(
        "duty-cycle: bad input -> UnknownBand, AirtimeTooLong, NoSubBand, Checksum, Version {}",
        verdict(ok)
    );
    ok
}

/// Frames of 2 ms in the 10 % sub-band, as fast as allowed, timed by the
/// wrapping clock.
fn check_live() -> bool {
    static RADIO: DutyCycleLimiter<6> = DutyCycleLimiter::eu868();
    const FRAMES: usize = 10;
    let p = Eu868::P.index();
    let airtime = Duration::from_millis(2);
    let cycle = Duration::from_millis(20);
    let mut starts = [Timestamp::ZERO; FRAMES];
    let mut sent = 0;
    let w0 = wraps();
    let deadline = CLOCK.now() + Duration::from_millis(300);
    while sent < FRAMES && CLOCK.now() < deadline {
        let now = CLOCK.now();
        match RADIO.try_transmit(p, airtime, now) {
            Ok(Transmit::Allowed { .. }) => {
                starts[sent] = now;
                sent += 1;
                // on the air
                while CLOCK.now() < now + airtime {}
            }
            Ok(Transmit::Wait { .. }) => {}
            Err(e) => {
                hprintln!("FAIL duty-cycle live: {}", e);
                return false;
            }
        }
    }
    let (mut min_gap, mut max_gap) = (Duration::MAX, Duration::ZERO);
    for w in starts[..sent].windows(2) {
        let gap = w[1] - w[0];
        min_gap = min_gap.min(gap);
        max_gap = max_gap.max(gap);
    }
    // the loop re-checks within microseconds of the time-off's end
    let ok = sent == FRAMES && min_gap >= cycle && max_gap <= cycle + Duration::from_micros(200);
    hprintln!(
        "duty-cycle live: sub-band P (10%) {} frames of 2 ms on the 16-bit SysTick clock, starts >= 20 ms apart (min {} us, max {} us) across {} wraps {}",
        sent,
        min_gap.as_micros(),
        max_gap.as_micros(),
        wraps() - w0,
        verdict(ok)
    );
    ok
}

/// The saved duty-cycle state across the real reset: RAM that cortex-m-rt
/// does not initialise (`.uninit`), so it keeps what the first boot wrote.
/// Atomics: any bit pattern is a valid value, and nothing is assumed about
/// it until the checksum in `SavedState::decode` accepts it.
#[link_section = ".uninit.duty_cycle"]
static SAVED_BYTES: [AtomicU8; SavedState::<6>::ENCODED_LEN] =
    [const { AtomicU8::new(0) }; SavedState::<6>::ENCODED_LEN];
/// `RESET_MAGIC` while `SAVED_BYTES` holds a state saved before a reset.
#[link_section = ".uninit.duty_cycle"]
static SAVED_MAGIC: AtomicU32 = AtomicU32::new(0);
const RESET_MAGIC: u32 = 0x7011_6A7E;

/// The second boot: restore what the first boot saved, check each wait.
fn check_after_real_reset() -> bool {
    let mut bytes = [0u8; SavedState::<6>::ENCODED_LEN];
    for (b, saved) in bytes.iter_mut().zip(&SAVED_BYTES) {
        *b = saved.load(Relaxed);
    }
    SAVED_MAGIC.store(0, Relaxed);
    let restored = match SavedState::<6>::decode(&bytes) {
        Ok(saved) => DutyCycleLimiter::restore(
            DutyCycleLimiter::eu868(),
            &saved,
            Timestamp::ZERO,
            Downtime::Unknown,
        ),
        Err(e) => {
            hprintln!(
                "FAIL duty-cycle after reset: the saved bytes do not decode: {}",
                e
            );
            return false;
        }
    };
    let wait = |band: Eu868| {
        restored
            .time_until_allowed(band.index(), Duration::from_millis(1), Timestamp::ZERO)
            .map_or(u64::MAX, |d| d.as_secs())
    };
    let (wm, wn, wp) = (wait(Eu868::M), wait(Eu868::N), wait(Eu868::P));
    let ok = wm == 150 && wn == 2_950 && wp == 0;
    hprintln!(
        "duty-cycle: after a real system reset: restored {} bytes from .uninit RAM: M waits {} s, N waits {} s, P free after {} s {}",
        bytes.len(),
        wm,
        wn,
        wp,
        verdict(ok)
    );
    ok
}

#[entry]
fn main() -> ! {
    let peripherals = cortex_m::Peripherals::take().expect("peripherals taken once");
    if SAVED_MAGIC.load(Relaxed) == RESET_MAGIC {
        hprintln!(
            "tollgate duty-cycle firmware on {}: booted again after the reset",
            env!("FIRMWARE_TARGET")
        );
        let ok = check_after_real_reset() && FIRST_BOOT_PASSED.load(Relaxed) == RESET_MAGIC;
        hprintln!("{}", if ok { "ALL PASS" } else { "FAILED" });
        exit(ok)
    }
    hprintln!(
        "tollgate duty-cycle firmware on {}: SysTick as a 16-bit counter at {} Hz",
        env!("FIRMWARE_TARGET"),
        CORE_HZ
    );
    start_systick(peripherals.SYST);
    // Clearing the counter leaves it at 0 (up = 0xFFFF) until its first
    // reload, a wrap that pends no exception: start both the reference and
    // the clock after it. The first reading fixes the clock's origin (the
    // counter's zero).
    while SYST::get_current() == 0 {}
    let _ = CLOCK.ticks();

    let clock = check_wrapping_clock(30);
    let regulation = check_regulation();
    let restore = check_save_restore();
    let bad_input = check_bad_input();
    let live = check_live();

    let ok = clock && regulation && restore && bad_input && live;
    if !ok {
        hprintln!("FAILED");
        exit(false)
    }
    // the real reset: save, then reset the core; the next boot checks
    let (bytes, len, _) = saved_state();
    for (saved, b) in SAVED_BYTES.iter().zip(bytes) {
        saved.store(b, Relaxed);
    }
    SAVED_MAGIC.store(RESET_MAGIC, Relaxed);
    FIRST_BOOT_PASSED.store(RESET_MAGIC, Relaxed);
    hprintln!(
        "duty-cycle: saved {} bytes to .uninit RAM; resetting the core (SYSRESETREQ)",
        len
    );
    SCB::sys_reset()
}

/// Set by the first boot when all its checks passed (kept across the reset).
#[link_section = ".uninit.duty_cycle"]
static FIRST_BOOT_PASSED: AtomicU32 = AtomicU32::new(0);

/// Ends the QEMU run: exit code 0 on success, 1 on failure.
fn exit(success: bool) -> ! {
    debug::exit(if success {
        debug::EXIT_SUCCESS
    } else {
        debug::EXIT_FAILURE
    });
    loop {
        cortex_m::asm::wfi();
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    hprintln!("PANIC: {}", info);
    exit(false)
}
