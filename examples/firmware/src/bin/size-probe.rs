//! Size probe: the cost of one tollgate token bucket in a firmware image.
//!
//! Built twice per target (release, opt-level "s", LTO): as is,
//! one task checks a token bucket (configuration in a read-only `static`,
//! 8-byte `GcraState` in RAM) against `EmbassyClock` time; with feature
//! `noop-limiter` the bucket is swapped for a no-op that admits everything,
//! and tollgate drops out of the image. The difference in `.text` and in
//! `.data + .bss` is what the token bucket costs
//! (`scripts/firmware-sizes.py`, which builds every variant below). With
//! feature `probe-acquire` both variants wait instead:
//! `embassy::acquire(&bucket, &(), 1).await` on the bucket against a plain
//! `Timer` for the no-op, which prices the async waiter too.
//! With feature `probe-keyed` the check goes to a keyed table instead: a
//! `static HeaplessKeyedTable<u8, Gcra, 8>` with 16 keys taking turns, so
//! inserting, sweeping and the overflow bucket are all linked in.
//! With feature `probe-tick` the bucket is the 32-bit tick bucket instead:
//! a `TickGcra` configuration in flash, a 4-byte `TickState` in RAM, and
//! `check_ticks` on the low 32 bits of embassy's tick count (what an
//! interrupt handler would call).
//! With feature `probe-static` the bucket is one `static Bucket<Gcra>`
//! (configuration and state together in one `static`) checked with
//! `check(now)`.
//! It also runs: `cargo run --release --bin size-probe --target ...`.
#![no_std]
#![no_main]

use cortex_m_semihosting::hprintln;
use embassy_executor::Spawner;
use tollgate_firmware as board;

#[cfg(all(
    not(feature = "noop-limiter"),
    not(feature = "probe-keyed"),
    not(feature = "probe-tick"),
    not(feature = "probe-static")
))]
mod limiter {
    use embassy_time::Instant;
    use tollgate::embassy::EmbassyClock;
    #[cfg(feature = "probe-acquire")]
    use tollgate::{embassy, BucketRef};
    use tollgate::{valid, Algorithm, Gcra, GcraState, Quota};

    const QUOTA: Quota = valid!(valid!(Quota::per_second(100)).with_burst(3));
    static CONFIG: Gcra = Gcra::token_bucket(QUOTA); // flash
    static STATE: GcraState = GcraState::new(); // RAM: 8 bytes

    /// Waits for one permit.
    #[cfg(feature = "probe-acquire")]
    pub async fn wait() -> bool {
        let bucket = BucketRef::new(&CONFIG, &STATE);
        embassy::acquire(&bucket, &(), 1).await.is_ok()
    }

    /// One token-bucket check at embassy time `ticks`.
    #[cfg_attr(feature = "probe-acquire", allow(dead_code))]
    pub fn admit(ticks: u64) -> bool {
        CONFIG
            .check_n(
                &STATE,
                1,
                EmbassyClock::timestamp(Instant::from_ticks(ticks)),
            )
            .is_ok()
    }
}

#[cfg(all(feature = "probe-keyed", not(feature = "noop-limiter")))]
mod limiter {
    use embassy_time::Instant;
    use tollgate::embassy::EmbassyClock;
    use tollgate::keyed::HeaplessKeyedTable;
    use tollgate::{valid, Gcra, Limiter, Quota};

    const QUOTA: Quota = valid!(valid!(Quota::per_second(100)).with_burst(3));
    /// Eight keys; the table (its map, configuration and overflow bucket)
    /// is one `static` in RAM.
    static TABLE: HeaplessKeyedTable<u8, Gcra, 8> =
        HeaplessKeyedTable::builder(Gcra::token_bucket(QUOTA)).build();

    /// One check for one of 16 peers at embassy time `ticks`.
    pub fn admit(ticks: u64) -> bool {
        let peer = (ticks % 16) as u8;
        TABLE
            .try_acquire(&peer, EmbassyClock::timestamp(Instant::from_ticks(ticks)))
            .is_ok()
    }
}

#[cfg(all(feature = "probe-static", not(feature = "noop-limiter")))]
mod limiter {
    use embassy_time::Instant;
    use tollgate::embassy::EmbassyClock;
    use tollgate::{valid, Bucket, Gcra, Quota};

    const QUOTA: Quota = valid!(valid!(Quota::per_second(100)).with_burst(3));
    /// The whole bucket (configuration and state) in one `static`, in RAM.
    static BUCKET: Bucket<Gcra> = Bucket::token_bucket(QUOTA);

    /// One token-bucket check at embassy time `ticks`.
    pub fn admit(ticks: u64) -> bool {
        BUCKET
            .check(EmbassyClock::timestamp(Instant::from_ticks(ticks)))
            .is_ok()
    }
}

#[cfg(all(feature = "probe-tick", not(feature = "noop-limiter")))]
mod limiter {
    use tollgate::tick::{TickGcra, TickState};
    use tollgate::{valid, Quota};

    const QUOTA: Quota = valid!(valid!(Quota::per_second(100)).with_burst(3));
    static CONFIG: TickGcra = valid!(TickGcra::token_bucket(QUOTA, embassy_time::TICK_HZ as u32)); // flash
    static STATE: TickState = TickState::new(); // RAM: 4 bytes

    /// One token-bucket check at tick `ticks` (its low 32 bits: the tick
    /// bucket works modulo 2³²).
    pub fn admit(ticks: u64) -> bool {
        CONFIG.check_ticks(&STATE, ticks as u32).is_ok()
    }
}

#[cfg(feature = "noop-limiter")]
mod limiter {
    /// The baseline of `wait`: a plain timer.
    #[cfg(feature = "probe-acquire")]
    pub async fn wait() -> bool {
        embassy_time::Timer::after_ticks(100).await;
        core::hint::black_box(true)
    }

    /// The baseline: admits everything, stores nothing.
    #[cfg_attr(feature = "probe-acquire", allow(dead_code))]
    pub fn admit(ticks: u64) -> bool {
        core::hint::black_box(ticks);
        core::hint::black_box(true)
    }
}

/// SysTick drives embassy's clock.
#[cortex_m_rt::exception]
fn SysTick() {
    board::embassy_systick();
}

#[embassy_executor::main]
async fn main(_spawner: Spawner) {
    let peripherals = cortex_m::Peripherals::take().expect("peripherals taken once");
    board::start_time_driver(peripherals.SYST);
    let mut admitted = 0u32;
    for _ in 0..200 {
        #[cfg(feature = "probe-acquire")]
        if limiter::wait().await {
            admitted += 1;
        }
        #[cfg(not(feature = "probe-acquire"))]
        {
            let now = core::hint::black_box(embassy_time::Instant::now().as_ticks());
            if limiter::admit(now) {
                admitted += 1;
            }
            embassy_time::Timer::after_ticks(100).await;
        }
    }
    hprintln!("size-probe: admitted {} of 200", admitted);
    board::exit(true);
}
