//! An interrupt handler and thread mode hammer one bucket: no deadlock, and
//! exactly the admissions a correct limiter gives.
//!
//! SysTick fires every 16–31 core cycles on lm3s6965evb (32–63 on
//! mps2-an386; the reload is re-drawn at every interrupt so that its phase
//! against thread mode keeps moving): under QEMU's `-icount` that is one
//! interrupt every 650–1 300 instructions. Each interrupt advances the
//! 32-bit tick count (which starts 3 001 ticks before it wraps, so the run
//! crosses the wrap) and checks the bucket at that tick 0, 1 or 2 times
//! (pseudo-random). Meanwhile thread mode loops: it reads the tick (stale
//! by the time it checks if an interrupt comes in between) and alternately
//! checks (keeping what it gets) and checks then refunds at once, as a
//! chain whose later member refused would, pausing a random few hundred
//! instructions after each call. The calls during which an interrupt ran
//! (and checked the same bucket) are counted, in total and among the calls
//! that took a permit, which load the state, compute and compare-and-swap:
//! an interrupt in between makes that swap fail and the call decide again.
//!
//! The bucket is a `TickGcra` token bucket, one permit per `T = 2` ticks,
//! burst `B = 8`, in a 4-byte `TickState`. After `RUN` ticks both stop;
//! thread mode drains what is left at the last tick. With `t₀` the tick of
//! the first admission and `t₁` the last tick, a correct bucket that is
//! never left full admits exactly `B + ⌊(t₁ − t₀)/T⌋` (every unit of
//! capacity is taken within its tick, and the drain takes the rest), and
//! never more than `B + ⌊(max − min)/T⌋` over the ticks of the admissions
//! it actually made; the firmware checks both.
//!
//! With feature `hammer-gcra64` the bucket is the 64-bit `Gcra` instead
//! (ticks as nanoseconds), whose `AtomicU64` is a critical section on
//! these chips. `run-qemu.sh` runs both versions on all three machines.
//! (With the `portable-atomic` lock table that tollgate used before, the
//! 64-bit version hung on thumbv7m: the interrupt spun on a lock that the
//! thread it interrupted held.)
#![no_std]
#![no_main]

use core::cell::RefCell;
use core::sync::atomic::{AtomicU32, Ordering::Relaxed};

use cortex_m::peripheral::syst::SystClkSource;
use cortex_m::peripheral::SYST;
use cortex_m_rt::{entry, exception};
use cortex_m_semihosting::hprintln;
use critical_section::Mutex;
use tollgate_firmware as board;

/// Emission interval in ticks.
const T: u32 = 2;
/// Burst: large enough that the bucket never refills while either side
/// still wants permits (a full bucket would waste capacity, and the count
/// would not be exact).
const B: u32 = 8;
/// First tick of the run: 3 001 ticks before the 32-bit count wraps.
const START: u32 = 0u32.wrapping_sub(3_001);
/// Ticks in the run.
const RUN: u32 = 100_000;
/// Thread mode pauses `0..PAUSE` spins after each call, so that its calls
/// land at every phase of the tick (capacity appears at tick boundaries:
/// without the pause the thread would take it right after the interrupt,
/// never while the next one comes in).
const PAUSE: u32 = 256;
/// Last tick of the run (after the wrap).
const END: u32 = START.wrapping_add(RUN);
/// SysTick reload range, in core cycles: every `BASE..2·BASE` cycles.
const BASE: u32 = (board::CORE_HZ / 750_000) as u32; // 16 at 12 MHz, 33 at 25 MHz

/// The bucket under test, behind the two calls the hammer makes.
trait Hammered: Sync {
    fn check(&self, now: u32) -> bool;
    fn refund(&self, now: u32);
}

#[cfg(not(feature = "hammer-gcra64"))]
mod bucket {
    use tollgate::tick::{TickGcra, TickState};
    use tollgate::{valid, Bucket, BucketKind};

    /// The mean interrupt rate is about 500 kHz; the rate only matters for
    /// timestamps, which this test does not use.
    pub static BUCKET: Bucket<TickGcra> = Bucket::from_parts(
        valid!(TickGcra::from_ticks(
            BucketKind::TokenBucket,
            super::T,
            super::B,
            500_000
        )),
        TickState::new(),
    );
    pub const NAME: &str = "TickGcra (32-bit, TickState)";
    pub const STATE_BYTES: usize = core::mem::size_of::<TickState>();
    pub const LOCK_FREE: bool = <Bucket<TickGcra> as tollgate::LockFreedom>::IS_LOCK_FREE;
    pub const INTERRUPT_SAFE: bool = <Bucket<TickGcra> as tollgate::LockFreedom>::IS_INTERRUPT_SAFE;
    // The whole point: this build must never pick a bucket that can deadlock.
    const _: () = assert!(INTERRUPT_SAFE);

    impl super::Hammered for Bucket<TickGcra> {
        #[inline]
        fn check(&self, now: u32) -> bool {
            self.check_ticks(now).is_ok()
        }
        #[inline]
        fn refund(&self, now: u32) {
            self.refund_ticks(1, now);
        }
    }
}

#[cfg(feature = "hammer-gcra64")]
mod bucket {
    use tollgate::{valid, Algorithm, Bucket, Gcra, GcraState, Quota, Timestamp};

    /// One permit per 3 ns, burst 4: ticks as nanoseconds.
    pub static BUCKET: Bucket<Gcra> = Bucket::from_parts(
        Gcra::token_bucket(valid!(valid!(Quota::new(
            1,
            core::time::Duration::from_nanos(super::T as u64)
        ))
        .with_burst(super::B))),
        GcraState::new(),
    );
    pub const NAME: &str = "Gcra (64-bit, GcraState)";
    pub const STATE_BYTES: usize = core::mem::size_of::<GcraState>();
    pub const LOCK_FREE: bool = <Bucket<Gcra> as tollgate::LockFreedom>::IS_LOCK_FREE;
    pub const INTERRUPT_SAFE: bool = <Bucket<Gcra> as tollgate::LockFreedom>::IS_INTERRUPT_SAFE;

    /// A tick as a timestamp, counted from a little before the run.
    fn at(now: u32) -> Timestamp {
        Timestamp::from_nanos(u64::from(
            now.wrapping_sub(super::START).wrapping_add(1 << 20),
        ))
    }

    impl super::Hammered for Bucket<Gcra> {
        #[inline]
        fn check(&self, now: u32) -> bool {
            self.algorithm().check_n(self.state(), 1, at(now)).is_ok()
        }
        #[inline]
        fn refund(&self, now: u32) {
            self.algorithm().refund(self.state(), 1, at(now));
        }
    }
}

use bucket::BUCKET;

// Written only by the interrupt handler (loads and stores: thumbv6m has no
// read-modify-write atomics), read by thread mode.
static TICKS: AtomicU32 = AtomicU32::new(START.wrapping_sub(50));
static ISR_ADMITTED: AtomicU32 = AtomicU32::new(0);
static ISR_DENIED: AtomicU32 = AtomicU32::new(0);
static ISR_CHECKS: AtomicU32 = AtomicU32::new(0);
/// Earliest and latest tick (as offsets from START) of an admission in
/// the handler.
static ISR_FIRST: AtomicU32 = AtomicU32::new(u32::MAX);
static ISR_LAST: AtomicU32 = AtomicU32::new(0);
static RNG: AtomicU32 = AtomicU32::new(0x2545_F491);
static SYSTICK: Mutex<RefCell<Option<SYST>>> = Mutex::new(RefCell::new(None));

/// Whether tick `now` lies in the run (wrapping).
fn in_run(now: u32) -> bool {
    now.wrapping_sub(START) <= RUN
}

fn xorshift(mut x: u32) -> u32 {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    x
}

#[exception]
fn SysTick() {
    let now = TICKS.load(Relaxed).wrapping_add(1);
    TICKS.store(now, Relaxed);
    let r = xorshift(RNG.load(Relaxed));
    RNG.store(r, Relaxed);
    if in_run(now) {
        let (mut admitted, mut denied) = (0, 0);
        // 0 checks (3 in 4 interrupts), 1 or 2
        let checks = u32::from(r & 3 == 0) * (1 + ((r >> 2) & 1));
        for _ in 0..checks {
            if Hammered::check(&BUCKET, now) {
                admitted += 1;
            } else {
                denied += 1;
            }
        }
        if admitted > 0 {
            let offset = now.wrapping_sub(START);
            ISR_FIRST.store(ISR_FIRST.load(Relaxed).min(offset), Relaxed);
            ISR_LAST.store(ISR_LAST.load(Relaxed).max(offset), Relaxed);
        }
        ISR_ADMITTED.store(ISR_ADMITTED.load(Relaxed) + admitted, Relaxed);
        ISR_DENIED.store(ISR_DENIED.load(Relaxed) + denied, Relaxed);
        ISR_CHECKS.store(ISR_CHECKS.load(Relaxed) + admitted + denied, Relaxed);
    }
    // the next period: BASE..2·BASE cycles
    critical_section::with(|cs| {
        if let Some(syst) = SYSTICK.borrow_ref_mut(cs).as_mut() {
            syst.set_reload(BASE + (r >> 8) % BASE - 1);
        }
    });
}

/// What thread mode saw.
#[derive(Default)]
struct Thread {
    kept: u32,
    pairs: u32,
    denied: u32,
    preempted: u32,
    preempted_taking: u32,
    first: u32,
    last: u32,
}

impl Thread {
    fn admitted_at(&mut self, now: u32) {
        let offset = now.wrapping_sub(START);
        self.first = self.first.min(offset);
        self.last = self.last.max(offset);
    }
}

#[entry]
fn main() -> ! {
    let mut p = cortex_m::Peripherals::take().expect("peripherals taken once");
    p.SYST.set_clock_source(SystClkSource::Core);
    p.SYST.set_reload(BASE - 1);
    p.SYST.clear_current();
    p.SYST.enable_interrupt();
    p.SYST.enable_counter();
    critical_section::with(|cs| *SYSTICK.borrow_ref_mut(cs) = Some(p.SYST));

    hprintln!(
        "irq-hammer on {}: bucket {} ({} bytes), IS_LOCK_FREE={} IS_INTERRUPT_SAFE={}; T={} ticks, burst={}, ticks {}..={} (across the wrap), SysTick every {}..{} cycles",
        env!("FIRMWARE_TARGET"),
        bucket::NAME,
        bucket::STATE_BYTES,
        bucket::LOCK_FREE,
        bucket::INTERRUPT_SAFE,
        T,
        B,
        START,
        END,
        BASE,
        2 * BASE - 1
    );

    // wait for the run to start
    while !in_run(TICKS.load(Relaxed)) {}
    let mut th = Thread {
        first: u32::MAX,
        ..Thread::default()
    };
    let mut keep = true;
    let mut rng = 0x9E37_79B9u32;
    loop {
        let now = TICKS.load(Relaxed);
        if !in_run(now) {
            break;
        }
        let before = ISR_CHECKS.load(Relaxed);
        let took = if keep {
            let took = Hammered::check(&BUCKET, now);
            if took {
                th.kept += 1;
                th.admitted_at(now);
            }
            took
        } else {
            let took = Hammered::check(&BUCKET, now);
            if took {
                Hammered::refund(&BUCKET, now);
                th.pairs += 1;
            }
            took
        };
        if !took {
            th.denied += 1;
        }
        if ISR_CHECKS.load(Relaxed) != before {
            th.preempted += 1;
            th.preempted_taking += u32::from(took);
        }
        keep = !keep;
        rng = xorshift(rng);
        for _ in 0..rng % PAUSE {
            cortex_m::asm::nop();
        }
    }
    // the handler stops checking after END; drain what is left at END
    let mut drained = 0;
    while Hammered::check(&BUCKET, END) {
        drained += 1;
        th.admitted_at(END);
    }
    critical_section::with(|cs| {
        if let Some(syst) = SYSTICK.borrow_ref_mut(cs).as_mut() {
            syst.disable_interrupt();
            syst.disable_counter();
        }
    });

    let isr = ISR_ADMITTED.load(Relaxed);
    let admitted = isr + th.kept + drained;
    let first = th.first.min(ISR_FIRST.load(Relaxed));
    let last = th.last.max(ISR_LAST.load(Relaxed));
    // Exact: every unit of capacity from the first admission to END was
    // taken. A busy TAT that would be exactly 0 is stored as 1 (one tick
    // less room, documented); the TATs here are t₀ + k·T, so that happens
    // iff one of them is 0 mod 2³² before END + B·T.
    let to_zero = 0u32.wrapping_sub(START.wrapping_add(first));
    let nudge =
        u32::from(to_zero > 0 && to_zero.is_multiple_of(T) && to_zero <= RUN - first + B * T);
    let expected = B + (RUN - first - nudge) / T;
    let upper = B + (last - first) / T;
    let ok = admitted == expected && admitted <= upper && th.preempted_taking > 0;
    hprintln!(
        "irq-hammer: admitted={} (isr={} thread={} drain={}) expected=burst+floor((t1-t0)/T)={}+floor(({}-{})/{})={} upper=burst+floor((max-min)/T)={} | isr checks={} denied={} | thread kept={} check+refund pairs={} denied={} | thread calls interrupted by a checking isr={} of which took a permit={} {}",
        admitted,
        isr,
        th.kept,
        drained,
        B,
        RUN,
        first + nudge,
        T,
        expected,
        upper,
        ISR_CHECKS.load(Relaxed),
        ISR_DENIED.load(Relaxed),
        th.kept,
        th.pairs,
        th.denied,
        th.preempted,
        th.preempted_taking,
        if ok { "PASS" } else { "FAIL" }
    );
    board::exit(ok)
}
