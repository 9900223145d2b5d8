//! tollgate on embassy, checked from inside the firmware.
//!
//! Three "sensor" tasks share one token bucket (telemetry: 200/s, bursts of
//! 5) and two "radio" tasks share one strict-pacing leaky bucket (one frame
//! per 3.25 ms). Time runs at 32 768 ticks per second, the common embassy
//! rate, so neither interval nor the tick itself (30 517.578 ns) is a whole
//! number of the other. Every task waits with
//! `embassy::acquire(&bucket, &(), 1).await`, which returns the instant of
//! its admission. When all are done the firmware checks, with the `now` of
//! each admission as the limiter saw it, that
//!
//! - the instants the waits returned are exactly those admissions (each
//!   task keeps what its waits returned; sorted, the two lists are equal);
//! - no window of the token bucket's admissions holds more than
//!   `burst + ⌊t / T⌋` permits, and each admission came no more than one
//!   tick after the earliest time the quota allows it;
//! - leaky-bucket admissions are never closer than `T` and never more than
//!   `T` plus one tick apart;
//! - every task got all its permits;
//! - a request above the burst is `CapacityExceeded` at once, and a
//!   timeout shorter than the wait is `Timeout` while a long enough one
//!   is admitted on the tick the permit is due (the instant it returns).
//!
//! Three "peer" tasks share a keyed limiter (a `HeaplessKeyedTable` of 4
//! slots, one bucket per peer id, eight peers): see [`keyed`] for what is
//! checked there (per-peer quotas, lossless eviction, throttled keys never
//! evicted, the overflow path when the table is full of throttled keys).
//!
//! It prints the results over semihosting and exits 0 when all hold,
//! 1 otherwise (a panic exits 1 too).
#![no_std]
#![no_main]

use core::cell::{Cell, RefCell};

use cortex_m_semihosting::hprintln;
use critical_section::Mutex;
use embassy_executor::Spawner;
use embassy_time::{Duration, Instant, Timer, TICK_HZ};
use tollgate::embassy::{self, EmbassyClock, WaitError};
use tollgate::{
    valid, BucketRef, Clock, Gcra, GcraState, Grant, Limiter, Quota, Refusal, Snapshot, Timestamp,
};
use tollgate_firmware as board;

/// A quota that the tick can resolve, checked at compile time (a quota
/// finer than one tick does not build).
macro_rules! tick_checked {
    ($quota:expr) => {
        tollgate::valid!($quota.check_resolution(tollgate::embassy::EmbassyClock::RESOLUTION))
    };
}

mod keyed;

const BURST: u32 = 5;
const TELEMETRY_QUOTA: Quota =
    tick_checked!(valid!(valid!(Quota::per_second(200)).with_burst(BURST)));
// Configuration in flash, 8 bytes of state in RAM.
static TELEMETRY_CONFIG: Gcra = Gcra::token_bucket(TELEMETRY_QUOTA);
static TELEMETRY_STATE: GcraState = GcraState::new();
static TELEMETRY: Recorded<TELEMETRY_N> = Recorded {
    bucket: BucketRef::new(&TELEMETRY_CONFIG, &TELEMETRY_STATE),
    log: &TELEMETRY_LOG,
};

const RADIO_QUOTA: Quota = tick_checked!(valid!(Quota::new(
    1,
    core::time::Duration::from_nanos(3_250_000)
)));
static RADIO_CONFIG: Gcra = Gcra::leaky_bucket(RADIO_QUOTA);
static RADIO_STATE: GcraState = GcraState::new();
static RADIO: Recorded<RADIO_N> = Recorded {
    bucket: BucketRef::new(&RADIO_CONFIG, &RADIO_STATE),
    log: &RADIO_LOG,
};

const SENSORS: usize = 3;
const PER_SENSOR: usize = 10;
const RADIOS: usize = 2;
const PER_RADIO: usize = 10;
const TELEMETRY_N: usize = SENSORS * PER_SENSOR;
const RADIO_N: usize = RADIOS * PER_RADIO;

/// One tick in nanoseconds, rounded up: the "within one tick" tolerance.
const TICK_NS: u64 = EmbassyClock::RESOLUTION.as_nanos() as u64;

/// The tick at which `ns` nanoseconds (a timestamp) are reached: the first
/// tick at or after it.
fn tick_at(ns: u64) -> u64 {
    EmbassyClock::instant_at(Timestamp::from_nanos(ns)).as_ticks()
}

/// Admission times, the timestamps the limiter itself was given.
struct Log<const N: usize> {
    at: [Timestamp; N],
    len: usize,
}

impl<const N: usize> Log<N> {
    const fn new() -> Self {
        Self {
            at: [Timestamp::ZERO; N],
            len: 0,
        }
    }
}

static TELEMETRY_LOG: Mutex<RefCell<Log<TELEMETRY_N>>> = Mutex::new(RefCell::new(Log::new()));
static RADIO_LOG: Mutex<RefCell<Log<RADIO_N>>> = Mutex::new(RefCell::new(Log::new()));
/// What the tasks' waits returned: the admission instants as the tasks
/// know them.
static TELEMETRY_RETURNED: Mutex<RefCell<Log<TELEMETRY_N>>> = Mutex::new(RefCell::new(Log::new()));
static RADIO_RETURNED: Mutex<RefCell<Log<RADIO_N>>> = Mutex::new(RefCell::new(Log::new()));
static SENSOR_COUNTS: Mutex<RefCell<[usize; SENSORS]>> = Mutex::new(RefCell::new([0; SENSORS]));
static RADIO_COUNTS: Mutex<RefCell<[usize; RADIOS]>> = Mutex::new(RefCell::new([0; RADIOS]));
static FINISHED: Mutex<Cell<usize>> = Mutex::new(Cell::new(0));
static FAILED: Mutex<Cell<bool>> = Mutex::new(Cell::new(false));

/// A bucket that logs the exact `now` of every admission: the waiters
/// work on any `Limiter`, and this one lets the firmware check the times
/// the limiter saw rather than when a task happened to resume.
struct Recorded<const N: usize> {
    bucket: BucketRef<'static, Gcra>,
    log: &'static Mutex<RefCell<Log<N>>>,
}

impl<const N: usize> Limiter for Recorded<N> {
    type Permit = Grant;

    fn capacity(&self, _: &()) -> u32 {
        self.bucket.capacity(&())
    }
    fn try_acquire_n(&self, _: &(), n: u32, now: Timestamp) -> Result<Grant, Refusal<'static>> {
        let verdict = self.bucket.try_acquire_n(&(), n, now);
        if n > 0 && verdict.is_ok() {
            critical_section::with(|cs| {
                let mut log = self.log.borrow_ref_mut(cs);
                // Full once the tasks are done; later checks go unlogged.
                for _ in 0..n {
                    let i = log.len;
                    if i < N {
                        log.at[i] = now;
                        log.len = i + 1;
                    }
                }
            });
        }
        verdict
    }
    fn cancel(&self, _: &(), permit: Grant, now: Timestamp) {
        self.bucket.cancel(&(), permit, now);
    }
    fn refund(&self, _: &(), n: u32, now: Timestamp) {
        self.bucket.refund(n, now);
    }
    fn snapshot(&self, _: &(), now: Timestamp) -> Snapshot {
        self.bucket.snapshot(now)
    }
    fn time_until_ready(
        &self,
        _: &(),
        n: u32,
        now: Timestamp,
    ) -> Result<core::time::Duration, Refusal<'static>> {
        self.bucket.time_until_ready(n, now)
    }
    fn required_resolution(&self) -> core::time::Duration {
        self.bucket.required_resolution()
    }
}

/// Appends `at` to `log` (full: dropped, and the count check fails).
fn push<const N: usize>(log: &Mutex<RefCell<Log<N>>>, at: Timestamp) {
    critical_section::with(|cs| {
        let mut log = log.borrow_ref_mut(cs);
        let i = log.len;
        if i < N {
            log.at[i] = at;
            log.len = i + 1;
        }
    });
}

fn count<const T: usize>(counts: &Mutex<RefCell<[usize; T]>>, task: u8) {
    critical_section::with(|cs| {
        if let Some(c) = counts.borrow_ref_mut(cs).get_mut(usize::from(task)) {
            *c += 1;
        }
    });
}

/// Records a failure seen by a task (reported with the results).
fn fail() {
    critical_section::with(|cs| FAILED.borrow(cs).set(true));
}

fn finished() {
    critical_section::with(|cs| {
        let f = FINISHED.borrow(cs);
        f.set(f.get() + 1);
    });
}

#[embassy_executor::task(pool_size = 3)]
async fn sensor(id: u8) {
    for _ in 0..PER_SENSOR {
        match embassy::acquire(&TELEMETRY, &(), 1).await {
            Ok(at) => {
                push(&TELEMETRY_RETURNED, at);
                count(&SENSOR_COUNTS, id);
            }
            Err(e) => {
                hprintln!("FAIL sensor {}: {}", id, e);
                fail();
            }
        }
    }
    finished();
}

#[embassy_executor::task(pool_size = 2)]
async fn radio(id: u8) {
    for _ in 0..PER_RADIO {
        match embassy::acquire(&RADIO, &(), 1).await {
            Ok(at) => {
                push(&RADIO_RETURNED, at);
                count(&RADIO_COUNTS, id);
            }
            Err(e) => {
                hprintln!("FAIL radio {}: {}", id, e);
                fail();
            }
        }
    }
    finished();
}

/// The admission times in nanoseconds, sorted.
fn sorted<const N: usize>(log: &Log<N>) -> [u64; N] {
    let mut at = log.at.map(Timestamp::as_nanos);
    at[..log.len].sort_unstable();
    at
}

/// How many of the instants the waits returned are admissions the limiter
/// logged, each matched once (both lists sorted); the caller requires all.
fn returned_matches<const N: usize>(returned: &Log<N>, logged: &Log<N>) -> usize {
    let (r, l) = (sorted(returned), sorted(logged));
    if returned.len != logged.len {
        return 0;
    }
    let matches = r[..returned.len]
        .iter()
        .zip(&l[..logged.len])
        .filter(|(a, b)| a == b)
        .count();
    if matches != returned.len {
        hprintln!(
            "FAIL: returned instants {:?} differ from the admissions {:?}",
            &r[..returned.len],
            &l[..logged.len]
        );
    }
    matches
}

/// Token bucket: the `burst + ⌊t/T⌋` bound over every window, and each
/// admission at most one tick after the earliest time the quota allows;
/// the waits returned exactly these admissions.
fn check_token_bucket(log: &Log<TELEMETRY_N>, returned: &Log<TELEMETRY_N>) -> bool {
    let at = sorted(log);
    let t_ns = TELEMETRY_QUOTA.interval_nanos();
    let matched = returned_matches(returned, log);
    let mut ok = log.len == TELEMETRY_N && matched == TELEMETRY_N;
    let mut max_late_ticks = 0;
    for i in 0..log.len {
        for j in i..log.len {
            let window_ns = at[j] - at[i];
            let bound = u64::from(BURST) + window_ns / t_ns;
            if (j - i + 1) as u64 > bound {
                hprintln!(
                    "FAIL token-bucket: {} admitted in {} ns",
                    j - i + 1,
                    window_ns
                );
                ok = false;
            }
        }
        // Demand was waiting from the first admission on: admission k is
        // due at start + max(0, k + 1 - burst)·T, rounded up to a tick.
        let due_ns = at[0] + (i as u64 + 1).saturating_sub(u64::from(BURST)) * t_ns;
        let due_tick = tick_at(due_ns);
        let tick = tick_at(at[i]);
        if tick > due_tick + 1 {
            hprintln!(
                "FAIL token-bucket: admission {} at tick {}, due {}",
                i,
                tick,
                due_tick
            );
            ok = false;
        }
        max_late_ticks = max_late_ticks.max(tick.saturating_sub(due_tick));
    }
    let counts = critical_section::with(|cs| *SENSOR_COUNTS.borrow_ref(cs));
    ok &= counts == [PER_SENSOR; SENSORS];
    hprintln!(
        "token-bucket: admitted={} tasks={} per-task={}/{}/{} burst={} interval_us={} max_late_ticks={} returned-instants={}/{} {}",
        log.len,
        SENSORS,
        counts[0],
        counts[1],
        counts[2],
        BURST,
        t_ns / 1_000,
        max_late_ticks,
        matched,
        log.len,
        if ok { "PASS" } else { "FAIL" }
    );
    print_times("token-bucket", &at[..log.len]);
    ok
}

/// Leaky bucket: consecutive admissions at least `T` and at most `T` plus
/// one tick apart; the waits returned exactly these admissions.
fn check_leaky_bucket(log: &Log<RADIO_N>, returned: &Log<RADIO_N>) -> bool {
    let at = sorted(log);
    let t_ns = RADIO_QUOTA.interval_nanos();
    let matched = returned_matches(returned, log);
    let mut ok = log.len == RADIO_N && matched == RADIO_N;
    let (mut min_gap, mut max_gap) = (u64::MAX, 0);
    for w in at[..log.len].windows(2) {
        let gap_ns = w[1] - w[0];
        min_gap = min_gap.min(gap_ns);
        max_gap = max_gap.max(gap_ns);
        if gap_ns < t_ns || gap_ns > t_ns + TICK_NS {
            hprintln!(
                "FAIL leaky-bucket: gap of {} ns, interval {} ns",
                gap_ns,
                t_ns
            );
            ok = false;
        }
    }
    let counts = critical_section::with(|cs| *RADIO_COUNTS.borrow_ref(cs));
    ok &= counts == [PER_RADIO; RADIOS];
    hprintln!(
        "leaky-bucket: admitted={} tasks={} per-task={}/{} interval_us={}.{:03} min_gap_us={} max_gap_us={} returned-instants={}/{} {}",
        log.len,
        RADIOS,
        counts[0],
        counts[1],
        t_ns / 1_000,
        t_ns % 1_000,
        min_gap / 1_000,
        max_gap / 1_000,
        matched,
        log.len,
        if ok { "PASS" } else { "FAIL" }
    );
    print_times("leaky-bucket", &at[..log.len]);
    ok
}

/// Prints admission times in microseconds from the first one, ten a line.
fn print_times(name: &str, at: &[u64]) {
    for (row, chunk) in at.chunks(10).enumerate() {
        let mut line = [0u64; 10];
        for (slot, &t) in line.iter_mut().zip(chunk) {
            *slot = (t - at[0]) / 1_000;
        }
        let l = &line[..chunk.len()];
        hprintln!("  {} t_us[{}..]: {:?}", name, row * 10, l);
    }
}

/// The errors: a request above the burst fails at once; a timeout shorter
/// than the wait fails at once; a long enough one is served on time.
async fn check_errors() -> bool {
    let mut ok = true;
    // Above the burst: an error, not a wait.
    let capacity = matches!(
        embassy::acquire(&TELEMETRY, &(), BURST + 1).await,
        Err(WaitError::CapacityExceeded(e))
            if e.is_never() && e.requested() == BURST + 1 && e.limit() == BURST
    );
    hprintln!(
        "capacity: acquire({}) on burst {} -> CapacityExceeded {}",
        BURST + 1,
        BURST,
        if capacity { "PASS" } else { "FAIL" }
    );
    ok &= capacity;

    // Empty the bucket; the next permit is due in `wait` ns (0 < wait ≤ T).
    let clock = EmbassyClock::new();
    while TELEMETRY.try_acquire(&(), clock.now()).is_ok() {}
    let start_instant = Instant::now();
    let start = start_instant.as_ticks();
    let wait = TELEMETRY
        .time_until_ready(&(), 1, EmbassyClock::timestamp(start_instant))
        .unwrap_or(core::time::Duration::MAX);
    let due = EmbassyClock::instant_at(EmbassyClock::timestamp(start_instant) + wait).as_ticks();
    // A deadline one tick before the permit is due: Timeout, at once.
    let short = embassy::acquire(&TELEMETRY, &(), 1)
        .with_deadline(EmbassyClock::timestamp(Instant::from_ticks(due - 1)))
        .await;
    // It gave up without sleeping until the permit was due.
    let timed_out = matches!(short, Err(WaitError::Timeout { ready_at, .. }) if EmbassyClock::instant_at(ready_at).as_ticks() == due)
        && Instant::now().as_ticks() < due;
    if !timed_out {
        hprintln!(
            "  short deadline: {:?}, start {} due {} now {}",
            short,
            start,
            due,
            Instant::now().as_ticks()
        );
    }
    // A deadline exactly when it is due: admitted at that tick (the
    // instant the wait returns, not when this task resumed).
    let due_at = EmbassyClock::timestamp(Instant::from_ticks(due));
    let long = embassy::acquire(&TELEMETRY, &(), 1)
        .with_deadline(due_at)
        .await;
    let served = long == Ok(due_at);
    if !served {
        hprintln!("  deadline on the due tick: {:?}, due {:?}", long, due_at);
    }
    hprintln!(
        "deadline: permit due in {} us; deadline 1 tick early -> Timeout {}; deadline on the due tick -> served on it {}",
        wait.as_micros(),
        if timed_out { "PASS" } else { "FAIL" },
        if served { "PASS" } else { "FAIL" }
    );
    ok && timed_out && served
}

/// SysTick drives embassy's clock.
#[cortex_m_rt::exception]
fn SysTick() {
    board::embassy_systick();
}

#[embassy_executor::main]
async fn main(spawner: Spawner) {
    let peripherals = cortex_m::Peripherals::take().expect("peripherals taken once");
    board::start_time_driver(peripherals.SYST);
    hprintln!(
        "tollgate firmware on {}: TICK_HZ={} (tick {} ns rounded up), GcraState {} bytes",
        env!("FIRMWARE_TARGET"),
        TICK_HZ,
        TICK_NS,
        core::mem::size_of::<GcraState>()
    );

    for id in 0..SENSORS as u8 {
        spawner.spawn(sensor(id).expect("sensor pool"));
    }
    for id in 0..RADIOS as u8 {
        spawner.spawn(radio(id).expect("radio pool"));
    }
    for task in 0..keyed::TASKS as u8 {
        spawner.spawn(keyed::peer_task(task).expect("peer pool"));
    }

    // Wait for all tasks, with a guard in embassy time.
    let deadline = Instant::now() + Duration::from_secs(5);
    while critical_section::with(|cs| FINISHED.borrow(cs).get()) < SENSORS + RADIOS + keyed::TASKS {
        if Instant::now() > deadline {
            hprintln!("FAIL: tasks did not finish within 5 s");
            board::exit(false);
        }
        Timer::after_millis(1).await;
    }

    let (telemetry, radio) = critical_section::with(|cs| {
        let t = TELEMETRY_LOG.borrow_ref(cs);
        let r = RADIO_LOG.borrow_ref(cs);
        (
            check_token_bucket(&t, &TELEMETRY_RETURNED.borrow_ref(cs)),
            check_leaky_bucket(&r, &RADIO_RETURNED.borrow_ref(cs)),
        )
    });
    let errors = check_errors().await;
    let peers = keyed::check_peers();
    let overflow = keyed::check_overflow().await;
    let failed = critical_section::with(|cs| FAILED.borrow(cs).get());

    let ok = telemetry && radio && errors && peers && overflow && !failed;
    hprintln!("{}", if ok { "ALL PASS" } else { "FAILED" });
    board::exit(ok);
}
