//! 32-bit tick buckets: GCRA in ticks of your timer, in one `u32`, safe to
//! share between an interrupt handler and the code it interrupts on every
//! target.
//!
//! A [`Gcra`](crate::Gcra) bucket keeps its TAT in an `AtomicU64`, which
//! chips without native 64-bit atomics (every 32-bit microcontroller) run
//! as a critical section: interrupt-safe, but not lock-free, and 64-bit
//! arithmetic (see [`crate::lock_freedom`]). A [`TickGcra`]
//! applied to a [`TickState`] is the same token or leaky bucket with its
//! TAT in **ticks** of a clock you name (`tick_hz`), stored in 32 bits:
//!
//! | target | the state's one `u32` is changed by | [`IS_LOCK_FREE`](crate::LockFreedom::IS_LOCK_FREE) | [`IS_INTERRUPT_SAFE`](crate::LockFreedom::IS_INTERRUPT_SAFE) |
//! |---|---|---|---|
//! | thumbv7m, thumbv7em | `LDREX`/`STREX` loop (native compare-and-swap) | yes | yes |
//! | riscv32imac (and any RISC-V with `A`) | `LR.W`/`SC.W` loop | yes | yes |
//! | x86_64, i686, aarch64, wasm32 | native compare-and-swap | yes | yes |
//! | thumbv6m, riscv32imc (no compare-and-swap) | `critical_section::with` around a plain cell | no | yes |
//!
//! The choice is `cfg(target_has_atomic = "32")`. On thumbv6m and riscv32imc the firmware must provide a
//! `critical-section` implementation (on a single-core Cortex-M, cortex-m's
//! `critical-section-single-core`), as the `no_std` keyed table already
//! requires. The state is 4 bytes, `const`-constructible.
//!
//! # Two ways in
//!
//! - **Tick-native**, for interrupt handlers: [`TickGcra::check_ticks`],
//!   [`check_n_ticks`](TickGcra::check_n_ticks), [`refund_ticks`](TickGcra::refund_ticks)
//!   take `now` as a `u32` tick count straight from a wrapping hardware
//!   timer and answer `Ok(())` or `Err(ticks)`: the exact number of ticks
//!   until the same request would be admitted (a refusal, in the timer's
//!   own unit). 32-bit arithmetic only: no 64-bit division, no
//!   multiplication wider than 32 bits.
//! - **[`Timestamp`]s**, through [`Algorithm`]: `Bucket<TickGcra>` is a
//!   [`Limiter`](crate::Limiter) like any other, so chains, statistics,
//!   embassy's `acquire(n).await` and the keyed tables work with it. A
//!   timestamp is read as the last tick `t` whose start `⌊t · 10⁹ /
//!   tick_hz⌋` ns is at or before it (modulo 2³²): a tick clock at the
//!   same rate that rounds its timestamps down (embassy's `EmbassyClock`)
//!   maps back to its exact ticks (for `tick_hz` up to 1 GHz; above, a
//!   nanosecond holds several ticks and is read as the last), and any other
//!   clock is read at most 1 ns early. A `retry_after` is the exact time
//!   until the start of the tick at which the request would be admitted.
//!
//! ```
//! use tollgate::tick::{TickGcra, TickState};
//! use tollgate::{valid, Quota};
//!
//! // 50 per second with bursts of 4, on a 32 768 Hz timer (656 ticks apart).
//! static RADIO: TickGcra = valid!(TickGcra::token_bucket(
//!     valid!(valid!(Quota::per_second(50)).with_burst(4)),
//!     32_768
//! ));
//! static RADIO_STATE: TickState = TickState::new(); // 4 bytes of RAM
//!
//! // in the interrupt handler: `now` is the timer's 32-bit count
//! let now: u32 = 0xFFFF_FF00; // about to wrap: nothing special happens
//! for _ in 0..4 {
//!     assert!(RADIO.check_ticks(&RADIO_STATE, now).is_ok());
//! }
//! assert_eq!(RADIO.check_ticks(&RADIO_STATE, now), Err(656)); // ticks to wait
//! // 656 ticks later, across the wrap, the next permit is due
//! assert!(RADIO.check_ticks(&RADIO_STATE, now.wrapping_add(656)).is_ok());
//! ```
//!
//! # Arithmetic
//!
//! As [`crate::gcra`], with `T` the emission interval in whole ticks
//! (rounded **up** from the quota, so a tick bucket is never faster than
//! its quota), `max_lead = burst · T` and `lead` the work still queued
//! ahead of `now`: a token bucket admits `n` permits iff `lead + n·T ≤
//! max_lead`, a leaky bucket iff `lead = 0` (then occupies `n·T`). A
//! refusal's `retry_after` is `lead − (max_lead − n·T)` ticks (token) or
//! `lead` (leaky): exactly when the same request would be admitted.
//!
//! # The wrap: how a 32-bit TAT stays exact
//!
//! The state stores `tat mod 2³²` and `now` arrives `mod 2³²`. Let `H =
//! max_lead + heal_threshold`, which construction keeps below 2³¹ (else
//! [`ConfigError::TickHorizonExceeded`]). The bucket reads
//!
//! ```text
//! ahead = tat.wrapping_sub(now)          (equivalently (tat − now) as i32, since H < 2³¹)
//! lead  = 0      if tat = 0              the sentinel: full at every tick
//!         ahead  if 0 < ahead ≤ H        a throttled bucket
//!         0      otherwise               full: ahead = 0, "negative" (idle), or beyond H
//! ```
//!
//! A fresh state holds the sentinel 0; [`TickGcra::refresh_ticks`] stores
//! it in a bucket that has been full for at least the heal threshold (so no
//! caller within the threshold could read it as busy). A write that would
//! store a busy TAT of exactly 0 stores 1 instead: one tick less room, once
//! in 2³² ticks, never more.
//!
//! **Rule.** Let `w` be the tick (on the unwrapped time line) that the
//! last write used as its `now`, `L₀ ∈ [0, max_lead]` the lead it stored
//! (every write stores `now + lead'` with `lead' ≤ max_lead`, or the
//! sentinel), and `e` the ticks from `w` to a reader's `now` (negative for
//! a reader whose `now` is older than the writer's). The true lead is `L =
//! L₀ − e`.
//!
//! 1. *A throttled bucket reads exactly.* If `0 < L ≤ H` then `ahead = L`
//!    (no wrap: `L < 2³¹`), so `lead = L`. Under a monotonic clock `L ≤
//!    max_lead`; a reader whose `now` is stale by `s ≤ heal_threshold`
//!    ticks sees `L ≤ max_lead + s ≤ H`: only a fuller bucket than there is
//!    (it refuses, and it never stores a smaller TAT). (Right after the
//!    once-in-2³² nudge of a TAT from 0 to 1, `L` can be `max_lead + 1`:
//!    keep the threshold a tick above the staleness.)
//! 2. *An idle bucket reads full for `2³² − H` ticks after its last write,
//!    and forever once it holds the sentinel.* If `L ≤ 0` and `e < 2³² −
//!    H`, then `−L = e − L₀ < 2³² − H`, so `ahead = 2³² + L` lies in `(H,
//!    2³²)`, or `ahead = 0`: `lead = 0`, full. At 1 MHz `2³² − H` is more
//!    than 71 minutes minus `H` (never less than 2³¹ ticks, 35.8 minutes);
//!    at 32 768 Hz, more than 36 hours.
//! 3. *Beyond that horizon it can only refuse, never over-admit.* A bucket
//!    whose last write is `2³² − H` ticks old or older, and which does not
//!    hold the sentinel, may read a lead in `(0, H]` for at most `H` ticks
//!    in every 2³² (a full bucket read as throttled: the reading is never
//!    fuller than the truth, which is full), then reads full again. Any
//!    admission writes a fresh TAT, so a bucket in use never gets there;
//!    for one that may sit idle that long after its last admission, call
//!    [`TickGcra::refresh_ticks`] once it is full (it stores the sentinel
//!    and changes nothing else), or keep it in a keyed table, whose
//!    eviction drops idle states.
//!
//! The price of (2): a `now` that goes **back** by more than the heal
//! threshold (a clock that really jumps back, or a caller stale by that
//! much) reads the bucket as full, and can admit up to a burst. In a
//! modular tick domain a step back of `J` ticks is a step forward of `2³² −
//! J`; the 64-bit [`Gcra`](crate::Gcra) can tell them apart and heals to
//! "empty at now" instead. Keep the heal threshold (default one second,
//! [`TickGcra::with_heal_threshold`]) above the longest time a caller can
//! hold its `now` before checking.
//!
//! # Verification
//!
//! Unit and property tests pin the arithmetic against the 64-bit
//! [`Gcra`](crate::Gcra) and against a wrapping reference (every tick
//! offset, across the wrap, idle up to the horizon); loom models check
//! racing checks and refunds, near the horizon too
//! (`loom-tests/tests/tick_bucket_never_over_admits.rs`); the firmware in
//! `examples/firmware` hammers one bucket from SysTick and thread mode on
//! thumbv6m, thumbv7m and thumbv7em under QEMU and checks the exact count.

#[cfg(doc)]
use crate::error::ConfigError;
#[cfg(doc)]
use crate::limiter::Algorithm;
#[cfg(doc)]
use crate::time::Timestamp;

mod algorithm;
mod config;
mod conversions;
mod native;
mod state;
mod step;
#[cfg(test)]
mod tests;

pub use config::{MAX_SPAN_TICKS, TickGcra};
pub use state::TickState;

/// The stored TAT that reads as full at every tick: fresh states hold it,
/// and [`TickGcra::refresh_ticks`] stores it in a bucket that has been full
/// for the heal threshold.
const FULL: u32 = 0;

/// A busy bucket's TAT, moved off the sentinel: a TAT that would be exactly
/// 0 is stored as 1, one tick later (one tick less room, once per 2³²
/// ticks; never more room).
#[inline(always)]
const fn busy_tat(tat: u32) -> u32 {
    if tat == FULL { 1 } else { tat }
}
