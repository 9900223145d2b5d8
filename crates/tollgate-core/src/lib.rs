//! # tollgate-core
//!
//! The `#![no_std]`, allocation-free core of [tollgate]: the buckets,
//! windows, in-flight limits and keyed tables, over a clock you choose.
//! One atomic word per bucket, no timers, no background task, lock-free
//! wherever the chip's atomics are ([`lock_freedom`] says which, per type
//! and target).
//!
//! Add `tollgate`, not this crate: `tollgate` re-exports everything here
//! under the same paths, and its features turn on the layers built on this
//! one (for firmware: the embassy and RTIC clocks and waiting, the LoRa duty
//! cycle; and the server layers). This crate knows none of them;
//! they use its public API only. The examples below are written the way a
//! user writes them, against `tollgate`.
//!
//! [tollgate]: https://docs.rs/tollgate
//!
//! ```
//! use tollgate::{ManualClock, Quota, RateLimiter};
//! use core::time::Duration;
//!
//! // 10 per second, bursts of up to 3.
//! let clock = ManualClock::new();
//! let limiter = RateLimiter::token_bucket(Quota::per_second(10)?.with_burst(3)?, &clock)?;
//! for _ in 0..3 {
//!     assert!(limiter.try_acquire().is_ok());
//! }
//! assert_eq!(limiter.try_acquire().unwrap_err().retry_after(), Duration::from_millis(100));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Concepts
//!
//! | module | concept |
//! |---|---|
//! | [`time`] | [`Timestamp`]: a point on a monotonic clock; lengths of time are [`Duration`](core::time::Duration)s |
//! | [`clock`] | [`Clock`]: reads a `Timestamp`, reports its resolution; [`ManualClock`], `StdClock`, `CoarseClock`, `QuantaClock` |
//! | [`wrapping_clock`] | [`WrappingClock`]: a 16- or 32-bit hardware counter that wraps, extended to a `Timestamp` |
//! | [`quota`] | [`Quota`]: permits per period and a burst |
//! | [`error`] | [`ConfigError`] (cannot build); the [`valid!`] macro for `static`s |
//! | [`gcra`] | [`Gcra`] + [`GcraState`]: the token and leaky buckets |
//! | [`tick`] | [`TickGcra`] + [`TickState`]: the same buckets in 32-bit ticks of your timer |
//! | [`window`] | [`FixedWindow`], [`SlidingWindow`]: permits per window |
//! | [`concurrency`] | [`ConcurrencyLimiter`]: permits in flight, handed out only as guards |
//! | [`limiter`] | the [`Algorithm`] trait, the one [`Limiter`] trait, [`Grant`], [`Bucket`], [`BucketRef`] |
//! | [`chain`] | [`Chain`] (from [`Limiter::and`]): all must allow, refused requests cost nothing |
//! | [`refusal`] | [`Refusal`]: when to retry, the quota, who refused |
//! | [`snapshot`] | [`Snapshot`]: a limiter's state, computed when asked |
//! | [`stats`] | [`WithStats`]: opt-in admitted / refused / refunded counters |
//! | [`keyed`] | fixed-capacity tables, each a [`Limiter<K>`](Limiter) and a [`KeyedTable`] |
//! | [`rate_limiter`] | [`RateLimiter`]: a limiter or a keyed table bundled with its clock |
//! | [`wait`] | [`Sleep`](wait::Sleep): a clock that can sleep; then [`RateLimiter::acquire`] and [`Wait`](wait::Wait) await any limiter |
//! | [`live`] | changing a running limiter's quota: [`LiveBucket`], [`Inheritance`] |
//! | [`lock_freedom`] | [`LockFreedom`]: which types are lock-free / interrupt-safe on the target |
//! | [`sync`] | the atomics and locks every tollgate crate builds on (loom's under `--cfg loom`) |
//!
//! ## Features
//!
//! | feature | default | adds |
//! |---|---|---|
//! | `std` | yes | `StdClock`, `CoarseClock`, the std keyed tables, `RateLimiter::keyed`, `Clock`/`Limiter` for `Arc` and `Box` |
//! | `quanta` | no | `QuantaClock`: a TSC clock through the `quanta` crate (implies `std`) |
//!
//! Without default features the crate is `no_std` and allocation-free.

#![no_std]
// The library never uses unsafe code. (Cargo.toml only denies it, so that
// a test binary can install a counting global allocator.)
#![forbid(unsafe_code)]
#![warn(missing_debug_implementations)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc(test(attr(deny(unused_imports))))]
// Without `std`, links to the std-only items have nothing to point at and
// render as text; every other broken link is still an error in the
// all-features build.
#![cfg_attr(not(feature = "std"), allow(rustdoc::broken_intra_doc_links))]

#[cfg(feature = "std")]
extern crate std;

pub mod clock;
pub mod concurrency;
pub mod error;
pub mod gcra;
pub mod keyed;
pub mod limiter;
pub use limiter::chain;
pub mod live;
pub mod lock_freedom;
pub mod quota;
pub mod rate_limiter;
pub mod refusal;
pub mod snapshot;
pub mod stats;
pub mod sync;
pub mod tick;
pub mod time;
pub mod wait;
pub mod window;
pub mod wrapping_clock;

mod ticks;
mod wakers;

pub use chain::Chain;
#[cfg(feature = "quanta")]
pub use clock::QuantaClock;
pub use clock::{Clock, ManualClock};
#[cfg(feature = "std")]
pub use clock::{CoarseClock, StdClock};
pub use concurrency::{ConcurrencyLimiter, ConcurrencyPermit};
pub use error::ConfigError;
pub use gcra::{BucketKind, Gcra, GcraState};
pub use keyed::KeyedTable;
pub use limiter::{Algorithm, Bucket, BucketRef, Grant, Limiter};
pub use live::{Inheritance, LiveBucket};
pub use lock_freedom::LockFreedom;
pub use quota::Quota;
pub use rate_limiter::RateLimiter;
pub use refusal::Refusal;
pub use snapshot::Snapshot;
pub use stats::{Statistics, WithStats};
pub use tick::{TickGcra, TickState};
pub use time::Timestamp;
pub use window::{FixedWindow, FixedWindowState, SlidingWindow, SlidingWindowState};
pub use wrapping_clock::WrappingClock;
