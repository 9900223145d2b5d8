//! # tollgate-embassy
//!
//! Embassy integration: a [`Clock`] on `embassy-time` and async waiting on
//! any [`Limiter`]. `no_std`, no allocation. Use it as `tollgate::embassy`
//! with feature `embassy` of `tollgate` (which re-exports this crate; add
//! `tollgate`, not this crate).
//!
//! - [`EmbassyClock`] reads [`embassy_time::Instant::now`] and converts its
//!   ticks to a [`Timestamp`] exactly (floor) for any `TICK_HZ`, without
//!   overflow ([`EmbassyClock::timestamp`] does the same for any instant).
//!   Its [`resolution`](Clock::resolution) is one tick
//!   rounded up to whole nanoseconds, so a limiter finer than a tick is
//!   refused wherever it meets this clock: [`ConfigError::ClockTooCoarse`](tollgate_core::ConfigError::ClockTooCoarse)
//!   from [`RateLimiter::new`](tollgate_core::RateLimiter::new), and
//!   [`WaitError::ClockTooCoarse`] from `acquire` on a `static` bucket.
//! - [`acquire`]`(&limiter, &key, n)` waits until `n` permits are granted
//!   and takes them; [`until_ready`] waits until they *could* be taken,
//!   without taking them (`&()` is the key of a direct limiter; a keyed
//!   table waits per key); a `RateLimiter<EmbassyClock, _>` has the same as
//!   [`acquire(n)`](tollgate_core::RateLimiter::acquire). Each resolves to
//!   the admission instant (the [`Timestamp`] of the check that granted
//!   the permits), so a task that paces itself measures from when it was
//!   admitted, not from when it resumed. All are the crate's one
//!   [`Wait`] future over [`EmbassyClock`]'s [`Sleep`]: they sleep on
//!   [`embassy_time::Timer::at`] (no polling loop, no allocation): check;
//!   on a refusal sleep until the refusal's `retry_after`, rounded **up**
//!   to the next tick; check again. A request that can never succeed (`n`
//!   above the burst or largest weight) is [`WaitError::CapacityExceeded`]
//!   at once instead of a wait forever. [`Wait::with_deadline`] /
//!   [`Wait::with_timeout`] bound the wait with [`WaitError::Timeout`]
//!   (a deadline is a [`Timestamp`]: [`EmbassyClock::timestamp`] of an
//!   `Instant`).
//!
//! The library chooses no time driver and no tick rate: the application
//! enables one `embassy-time` driver and its `tick-hz-*` feature. A board
//! with a HAL gets the driver from it (embassy-stm32, embassy-nrf,
//! embassy-rp); a board without one can take `systick-timer` (feature
//! `embassy-time-driver`: embassy-time on SysTick, for any Cortex-M), as
//! the README's firmware does under QEMU on thumbv6m, thumbv7m and
//! thumbv7em.
//!
//! On a 32-bit microcontroller a bucket's 64-bit state is a critical
//! section, which the firmware provides (one implementation per image: on
//! a single-core Cortex-M, `cortex-m` with feature
//! `critical-section-single-core`; a multi-core chip's HAL has its own).
//! What waiting adds to an image (flash and RAM per target, measured in
//! CI) is in `tollgate`'s guide, "On a microcontroller".
//!
//! # On a desktop, and the tests
//!
//! `examples/embassy-host` (its own crate) runs four tasks sharing one
//! limiter on embassy-executor's `platform-std`, printing each admission
//! with its time: `cargo run --manifest-path examples/embassy-host/Cargo.toml`.
//! The host tests run on embassy-time's mock driver in the workspace member
//! `embassy-tests` (its own crate so that the mock driver and the `std`
//! driver of the example are never unified into one build; the tests share
//! one global mock clock, so they are serialised): `cargo test -p
//! tollgate-embassy-tests`.
//!
//! # Time domain
//!
//! The waiters pass `EmbassyClock::now()` (the time since embassy's tick 0)
//! to the limiter. Make any direct `check` on the same limiter with the
//! same clock (for example through a `RateLimiter<EmbassyClock, _>`), or the
//! two callers would disagree about what time it is.
//!
//! # Fairness
//!
//! Waiters do not queue: each sleeps until its own retry time and re-checks,
//! and whichever checks first after capacity returns gets it. Every
//! admission still respects the quota exactly, and every waiter is served
//! as the quota allows when demand is below the rate. Under sustained
//! overload a large request can be overtaken repeatedly by smaller ones;
//! cap such demand upstream or use `n = 1` permits.
//!
//! # Example
//!
//! ```
//! use tollgate::embassy::{self, EmbassyClock, WaitError};
//! use tollgate::{valid, Bucket, Gcra, Quota};
//!
//! // checked at compile time, also against one tick of the application's TICK_HZ
//! const RATE: Quota = valid!(Quota::per_second(50));
//! static RADIO: Bucket<Gcra> =
//!     Bucket::leaky_bucket(valid!(RATE.check_resolution(EmbassyClock::RESOLUTION)));
//!
//! async fn send_frame() -> Result<(), WaitError> {
//!     let at = embassy::acquire(&RADIO, &(), 1).await?; // sleeps until the radio may transmit
//!     // ... transmit; `at` is when the frame was admitted (an `Instant`:
//!     // `EmbassyClock::instant_at(at)`) ...
//!     # let _ = at;
//!     Ok(())
//! }
//! # embassy_futures::block_on(send_frame()).unwrap();
//! ```

#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_debug_implementations)]
#![doc(test(attr(deny(unused_imports))))]

use embassy_time::{Instant, TICK_HZ, Timer};

use tollgate_core::clock::{Clock, TickRate};
use tollgate_core::limiter::Limiter;
use tollgate_core::time::Timestamp;
use tollgate_core::wait::Sleep;
pub use tollgate_core::wait::{Wait, WaitError};

/// The application's tick rate as a reduced fraction of nanoseconds per
/// tick, computed at compile time (the conversions are shared with the other
/// tick clocks: exact, saturating, no run-time division by the rate).
const TICK_RATIO: TickRate = TickRate::from_hz(TICK_HZ);

/// The embassy time driver as a tollgate [`Clock`]: the time since
/// embassy's tick 0.
///
/// Conversion is exact (rounded down to the nanosecond) for any `TICK_HZ`
/// and saturates instead of overflowing. The resolution is one tick, rounded
/// up to whole nanoseconds (30 518 ns at 32 768 Hz, 1 000 ns at 1 MHz).
///
/// ```
/// use core::time::Duration;
/// use tollgate::embassy::EmbassyClock;
/// use tollgate::{Clock, ConfigError, Quota, RateLimiter, Timestamp};
///
/// let clock = EmbassyClock::new();
/// assert_eq!(clock.resolution(), EmbassyClock::RESOLUTION);
/// // Ticks and timestamps convert both ways at the application's TICK_HZ.
/// let one_sec = EmbassyClock::instant_at(Timestamp::from_secs(1));
/// assert_eq!(one_sec.as_ticks(), embassy_time::TICK_HZ);
/// assert_eq!(EmbassyClock::timestamp(one_sec), Timestamp::from_secs(1));
///
/// // A quota finer than one tick is refused, never silently clamped.
/// let too_fine = Quota::new(1, EmbassyClock::RESOLUTION - Duration::from_nanos(1))?;
/// assert!(matches!(
///     RateLimiter::token_bucket(too_fine, clock),
///     Err(ConfigError::ClockTooCoarse { .. })
/// ));
/// # Ok::<(), ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct EmbassyClock;

impl EmbassyClock {
    /// One tick of the application's `TICK_HZ`, rounded up to whole
    /// nanoseconds: what [`Clock::resolution`] reports, usable in `const`
    /// quota checks ([`Quota::check_resolution`](tollgate_core::Quota::check_resolution)).
    pub const RESOLUTION: core::time::Duration =
        core::time::Duration::from_nanos(TICK_RATIO.resolution_nanos());

    /// The clock (it has no state: the driver is global).
    #[must_use]
    pub const fn new() -> Self {
        Self
    }

    /// The timestamp of an embassy instant (its ticks since tick 0, rounded
    /// down to the nanosecond, saturating).
    #[must_use]
    pub const fn timestamp(instant: Instant) -> Timestamp {
        Timestamp::from_nanos(TICK_RATIO.ticks_to_nanos(instant.as_ticks()))
    }

    /// The first [`Instant`] at which this clock reads at least `at`: the
    /// time rounded **up** to a whole tick, saturating.
    #[must_use]
    pub const fn instant_at(at: Timestamp) -> Instant {
        Instant::from_ticks(TICK_RATIO.nanos_to_ticks_ceil(at.as_nanos()))
    }
}

impl Clock for EmbassyClock {
    #[inline]
    fn now(&self) -> Timestamp {
        Self::timestamp(Instant::now())
    }

    fn resolution(&self) -> core::time::Duration {
        Self::RESOLUTION
    }
}

impl Sleep for EmbassyClock {
    type Timer = Timer;

    /// An embassy [`Timer`] at the first tick at or after `at`
    /// ([`instant_at`](Self::instant_at)).
    fn sleep_until(&self, at: Timestamp) -> Timer {
        Timer::at(Self::instant_at(at))
    }
}

/// Waits until `n` permits of `limiter` for `key` (`&()` for a direct
/// limiter) are granted and takes them; resolves to the admission instant:
/// the [`Timestamp`] on [`EmbassyClock`] of the check that took them (it
/// does not move if the task resumes later). `n = 0` resolves at once.
/// Sleeps on embassy timers; time is read from [`EmbassyClock`]. Any
/// [`Limiter`] whose permits are spent when granted (`Copy`): a bucket, a
/// window, a chain of them, a keyed table — a limiter per key. (A
/// [`ConcurrencyLimiter`](tollgate_core::ConcurrencyLimiter) waits with its
/// own `acquire(n)`, woken by the release.)
///
/// Nothing else is computed on an admission: the limiter's state then is
/// `limiter.snapshot(&key, at)` ([`Limiter::snapshot`]; a bucket's own
/// `snapshot(at)`), asked for when needed.
///
/// ```
/// use core::time::Duration;
/// use tollgate::{embassy, valid, Bucket, Gcra, Quota};
///
/// static RADIO: Bucket<Gcra> = Bucket::leaky_bucket(valid!(Quota::per_second(50)));
/// embassy_futures::block_on(async {
///     let at = embassy::acquire(&RADIO, &(), 1).await?; // the radio may transmit
///     // the next frame may start 20 ms after this admission
///     assert_eq!(RADIO.snapshot(at).reset_after(), Duration::from_millis(20));
///     Ok::<(), embassy::WaitError>(())
/// })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// The future resolves to [`WaitError::CapacityExceeded`] at once if `n`
/// can never be granted, to [`WaitError::ClockTooCoarse`] at once if the
/// limiter's step is finer than one tick, and to [`WaitError::Timeout`] if
/// a deadline set with [`Wait::with_deadline`] / [`Wait::with_timeout`]
/// cannot be met.
pub fn acquire<'a, L, K>(limiter: &'a L, key: &'a K, n: u32) -> Wait<'a, EmbassyClock, L, K>
where
    L: Limiter<K, Permit: Copy> + ?Sized,
    K: ?Sized,
{
    Wait::new(&EmbassyClock, limiter, key, n, true)
}

/// Waits until `n` permits of `limiter` for `key` *could* be taken, without
/// taking them (a peek); resolves to the instant they were found
/// available (a check at that instant would have been admitted). Use it to
/// wait for capacity before preparing work, then take it with a check.
/// Unlike governor's `until_ready`, this takes nothing: the taking version
/// is [`acquire`].
///
/// # Errors
/// As [`acquire`].
pub fn until_ready<'a, L, K>(limiter: &'a L, key: &'a K, n: u32) -> Wait<'a, EmbassyClock, L, K>
where
    L: Limiter<K, Permit: Copy> + ?Sized,
    K: ?Sized,
{
    Wait::new(&EmbassyClock, limiter, key, n, false)
}
