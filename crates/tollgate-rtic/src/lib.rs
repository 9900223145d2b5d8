//! # tollgate-rtic
//!
//! RTIC integration: any RTIC monotonic as a tollgate [`Clock`], and async
//! waiting for permits on it. `no_std`, no allocation. Use it as
//! `tollgate::rtic` with feature `rtic` of `tollgate` (which re-exports
//! this crate; add `tollgate`, not this crate).
//!
//! - [`RticClock<M>`] reads `M::now()` of an RTIC timebase (rtic-time 3:
//!   every `rtic_monotonics` driver) and converts its ticks to a
//!   [`Timestamp`] exactly (rounded down to the nanosecond, for any tick
//!   length, without overflow). Its [`resolution`](Clock::resolution) is
//!   one tick rounded up, so a limiter finer than a tick is refused
//!   wherever it meets the clock
//!   ([`ConfigError::ClockTooCoarse`](tollgate_core::ConfigError::ClockTooCoarse)).
//!   A 32-bit tick count wraps; the clock counts the wraps ([the
//!   wrap](#the-wrap-32-bit-monotonics)).
//! - [`CLOCK.acquire(&limiter, &key, n).await`](RticClock::acquire) waits
//!   on `M::delay_until` until `n` permits are granted, takes them and
//!   resolves to the **instant of `M` at which they were granted**;
//!   [`acquire_by`](RticClock::acquire_by) gives up at a deadline. Errors
//!   are [`WaitError`]s. Cancel-safe.
//! - [`RticClock::instant_at`] goes back from a [`Timestamp`] to an instant
//!   (rounded up: a wake-up for `M::delay_until` is never early), and
//!   [`RticClock::duration`] / [`RticClock::fugit_duration`] convert
//!   durations both ways. Conversions go through the [`TickCount`] trait,
//!   implemented for fugit's instants and durations (`u32` and `u64`
//!   ticks).
//!
//! ```
//! use tollgate::rtic::{RticClock, WaitError};
//! use tollgate::{valid, Bucket, Clock, Gcra, Quota};
//! # use tollgate::rtic::rtic_time::{fugit, Timebase, TimeoutError};
//! # use core::sync::atomic::{AtomicU32, Ordering};
//! # static TICKS: AtomicU32 = AtomicU32::new(0);
//! # /// rtic-monotonics' SysTick monotonic at 1 kHz, 32-bit (a stand-in).
//! # struct Mono;
//! # impl Timebase for Mono {
//! #     type Instant = fugit::MonotonicTimerInstantU32<1_000>;
//! #     type Duration = fugit::TimerDurationU32<1_000>;
//! #     fn now() -> Self::Instant { Self::Instant::from_ticks(TICKS.load(Ordering::SeqCst)) }
//! #     async fn delay(_: Self::Duration) {}
//! #     async fn delay_until(i: Self::Instant) { TICKS.store(i.as_ticks(), Ordering::SeqCst) }
//! #     async fn timeout_at<F: core::future::Future>(_: Self::Instant, f: F) -> Result<F::Output, TimeoutError> { Ok(f.await) }
//! #     async fn timeout_after<F: core::future::Future>(_: Self::Duration, f: F) -> Result<F::Output, TimeoutError> { Ok(f.await) }
//! # }
//!
//! // The application's monotonic: `systick_monotonic!(Mono, 1_000);`
//! // (rtic-monotonics, SysTick at 1 kHz, 32-bit ticks). One clock for it:
//! static CLOCK: RticClock<Mono> = RticClock::new();
//!
//! // 100 messages a second, bursts of 5: checked at compile time, also
//! // against one tick of `Mono` (1 ms)
//! const RATE: Quota = valid!(valid!(Quota::per_second(100)).with_burst(5));
//! static UPLINK: Bucket<Gcra> =
//!     Bucket::token_bucket(valid!(RATE.check_resolution(RticClock::<Mono>::RESOLUTION)));
//!
//! // an RTIC software task: `#[task(priority = 1)] async fn uplink(_: uplink::Context)`
//! async fn uplink() -> Result<(), WaitError> {
//!     for _ in 0..7 {
//!         let granted = CLOCK.acquire(&UPLINK, &(), 1).await?; // `Mono::Instant`
//!         // ... send; `Mono::delay_until(granted + ..)` paces from the admission ...
//!     }
//!     Ok(())
//! }
//! # let mut f = core::pin::pin!(uplink());
//! # let mut cx = core::task::Context::from_waker(core::task::Waker::noop());
//! # assert!(matches!(f.as_mut().poll(&mut cx), core::task::Poll::Ready(Ok(()))));
//! // the burst of 5 at tick 0, then one every 10 ms
//! assert_eq!(Mono::now().as_ticks(), 20);
//! assert_eq!(CLOCK.now(), tollgate::Timestamp::from_millis(20));
//! ```
//!
//! # Which monotonic
//!
//! Any: the clock takes whatever `M::Instant` is (a [`TickCount`]). Two
//! things to pick:
//!
//! - **The tick rate** bounds the limits: one tick is the clock's
//!   resolution, and a limiter whose finest step (`period / permits` for
//!   a bucket) is shorter than a tick is refused. rtic-monotonics' SysTick
//!   monotonic at its default 1 kHz enforces steps of 1 ms or more (up to
//!   1 000 permits per second, exactly, to the tick); a chip timer
//!   monotonic (the STM32, nRF, RP2040, i.MX RT, ... drivers) counts at up
//!   to MHz rates, for steps down to a microsecond. The SysTick monotonic
//!   takes an interrupt every tick; the timer drivers only when a wake-up
//!   is due.
//! - **The width**: the timer drivers' instants are 64-bit and never wrap.
//!   The SysTick monotonic's are 32-bit unless its feature `systick-64bit`
//!   is on: they wrap, which this clock handles under one condition (next
//!   section).
//!
//! # The wrap: 32-bit monotonics
//!
//! A 32-bit tick count goes from `2^32 − 1` back to 0: after 49.7 days at
//! 1 kHz, 71.6 minutes at 1 MHz. Read as it is, time would jump back by a
//! whole wrap period there. `RticClock` counts the wraps instead (it is
//! a [`WrappingClock`](tollgate_core::WrappingClock) inside, the same
//! lock-free extension from the readings alone, safe from every priority),
//! so its timestamps go on growing, exactly, across the wrap. That holds
//! on one condition:
//!
//! **The clock must be read at least once every
//! [`MAX_READ_GAP`](RticClock::MAX_READ_GAP)**: 15/16 of the wrap period
//! (46.6 days at 1 kHz, 67.1 minutes at 1 MHz). Every limiter check and
//! every [`acquire`](RticClock::acquire) reads it, and a task waiting in
//! `acquire` re-reads it at least every quarter wrap, so a system in use
//! obeys the rule by itself; where it may sit idle that long, read
//! `CLOCK.now()` from a task that wakes at least that often. A wrap missed
//! between two readings cannot be seen from the count: the clock then
//! reads whole wrap periods *behind* (never ahead), which only makes
//! limiters refill later, never admit more.
//!
//! So keep **one** `static` clock per monotonic and share `&CLOCK`
//! (`RateLimiter::token_bucket(quota, &CLOCK)`, `CLOCK.acquire(..)`):
//! every reading by anyone counts, and two clocks first read in different
//! wrap periods would disagree by whole periods. The
//! [`instant`](RticClock::acquire) that `acquire` returns is `M`'s own,
//! modulo `2^32`: compare such instants as RTIC does (within half a
//! wrap); fugit's 32-bit *monotonic* instants panic on `+`, `-` across the
//! wrap in debug builds, so take `as_ticks().wrapping_sub(..)` there.
//!
//! # Waiting
//!
//! [`acquire`](RticClock::acquire) checks; on a refusal it sleeps with
//! `M::delay_until` until the refusal's `retry_after` (rounded up to a
//! tick) and checks again. No polling loop, no allocation, no queue: every
//! admission respects the quota exactly, and whichever waiter checks first
//! after capacity returns gets it: waiters of a higher priority first, and
//! RTIC polls the tasks of one priority in a fixed order, so under demand
//! above the rate the first of them can take every permit (for shares,
//! give each task its own bucket, or a key in a keyed table). It
//! resolves to the instant of the admitting check, so pacing from it is
//! exact however late the task resumes. A request that can never succeed
//! (`n` above the burst) is [`WaitError::CapacityExceeded`] at once, never a
//! wait forever; a limiter finer than a tick is
//! [`WaitError::ClockTooCoarse`] at once; a deadline that cannot be met is
//! [`WaitError::Timeout`] as soon as the limiter's answer shows it. Dropping
//! the future takes nothing, so `M::timeout_after(d, CLOCK.acquire(..))`
//! is safe too.
//!
//! A limiter bundled with this clock in a `RateLimiter` waits with
//! `CLOCK.acquire(limiter.limiter(), &(), n)`; make every direct check of
//! a limiter that is also awaited on the same clock, or the two callers
//! would disagree about what time it is.
//!
//! # Priorities and critical sections
//!
//! RTIC tasks of different priorities preempt each other as interrupt
//! handlers do, so a limiter used from more than one priority must be
//! [`IS_INTERRUPT_SAFE`](tollgate_core::LockFreedom::IS_INTERRUPT_SAFE)
//! (see [`lock_freedom`](tollgate_core::lock_freedom)). Without `std`
//! every limiter but the sliding window is: a 32-bit
//! [`tick`](tollgate_core::tick) bucket by native compare-and-swap (or a
//! critical section on thumbv6m / riscv32imc), a 64-bit `Gcra` bucket by a
//! critical section on a 32-bit microcontroller. Assert it where a limiter
//! is shared across priorities:
//! `const _: () = assert!(<Bucket<Gcra> as LockFreedom>::IS_INTERRUPT_SAFE);`.
//! The clock itself is one `AtomicU32`, interrupt-safe everywhere.
//!
//! The firmware needs a `critical-section` implementation: RTIC's timer
//! queue takes short critical sections, and so do tollgate's 64-bit states
//! on a 32-bit microcontroller, its tick buckets and this clock's wrap
//! counter on chips without compare-and-swap (thumbv6m, riscv32imc), and
//! the `no_std` keyed table everywhere. On a single-core Cortex-M that is
//! cortex-m's feature `critical-section-single-core` (one implementation
//! per image).
//!
//! # A whole application
//!
//! `examples/rtic-app` in the repository is an RTIC 2 application for
//! QEMU's lm3s6965evb (`examples/rtic-app/run-qemu.sh`): tasks wait on
//! `static` buckets through this clock on the 32-bit SysTick monotonic,
//! started just before its wrap, and an interrupt handler checks a tick
//! bucket on the same ticks; the firmware checks every count against the
//! exact formula.

#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_debug_implementations)]
#![doc(test(attr(deny(unused_imports))))]

mod acquire;
mod clock;
#[cfg(all(test, not(loom)))]
mod tests;
mod tick_count;

pub use rtic_time;
pub use tollgate_core::wait::WaitError;

pub use clock::RticClock;
pub use tick_count::TickCount;

#[cfg(doc)]
use tollgate_core::{clock::Clock, time::Timestamp};
