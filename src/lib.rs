//! # tollgate
//!
//! Rate limiting that runs the same admission logic on a Cortex-M, on a
//! multi-core server and across a fleet that shares one Redis. The core is
//! `#![no_std]` and allocation-free: one atomic word per bucket, no timers,
//! no background task, lock-free wherever the chip's atomics are
//! ([`lock_freedom`] says which, per type and target).
//!
//! ## Quick start
//!
//! ```
//! use tollgate::{ManualClock, Quota, RateLimiter};
//! use core::time::Duration;
//!
//! // 10 per second, bursts of up to 3.
//! let clock = ManualClock::new();
//! let quota = Quota::per_second(10)?.with_burst(3)?;
//! let limiter = RateLimiter::token_bucket(quota, &clock)?;
//!
//! assert!(limiter.try_acquire().is_ok());
//! assert!(limiter.try_acquire().is_ok());
//! assert!(limiter.try_acquire().is_ok());
//! let refusal = limiter.try_acquire().unwrap_err();
//! assert_eq!(refusal.retry_after(), Duration::from_millis(100));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! On a real system use [`StdClock`] (feature `std`) or your own [`Clock`].
//! Per client, the same in three types:
//!
//! ```
//! use std::net::IpAddr;
//! use tollgate::{Quota, RateLimiter, StdClock};
//!
//! let per_client = RateLimiter::keyed(Quota::per_second(10)?, StdClock::new())?;
//! let client: IpAddr = "192.0.2.7".parse()?;
//! if per_client.try_acquire_key(&client).is_ok() {
//!     // serve the request
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Concepts
//!
//! | module | concept |
//! |---|---|
//! | [`time`] | [`Timestamp`]: a point on a monotonic clock; lengths of time are [`Duration`](core::time::Duration)s |
//! | [`clock`] | [`Clock`]: reads a `Timestamp`, reports its resolution; [`ManualClock`], [`StdClock`], [`CoarseClock`] |
//! | [`quota`] | [`Quota`]: permits per period and a burst |
//! | [`error`] | [`ConfigError`] (cannot build); the [`valid!`] macro for `static`s |
//! | [`gcra`] | [`Gcra`] + [`GcraState`]: the token and leaky buckets |
//! | [`tick`] | [`TickGcra`] + [`TickState`]: the same buckets in 32-bit ticks of your timer, lock-free on Armv7-M and RISC-V `A`, interrupt-safe everywhere |
//! | [`lock_freedom`] | [`LockFreedom`]: which types are lock-free / interrupt-safe on the target you build for |
//! | [`refusal`] | [`Refusal`]: what every acquisition returns when it says no (when to retry, the quota, who refused) |
//! | [`snapshot`] | [`Snapshot`]: a limiter's state (limit, remaining, reset), computed when asked |
//! | [`limiter`] | the [`Algorithm`] trait, the one [`Limiter`] trait (direct, per key, per resource) and its rate permit [`Grant`], [`Bucket`], [`BucketRef`] |
//! | [`rate_limiter`] | [`RateLimiter`]: a limiter or a keyed table bundled with its clock |
//! | [`window`] | [`FixedWindow`], [`SlidingWindow`]: permits per window |
//! | [`concurrency`] | [`ConcurrencyLimiter`]: permits in flight, handed out only as guards |
//! | [`chain`] | [`Chain`] (from [`Limiter::and`]): all must allow, refused requests cost nothing |
//! | [`stats`] | [`WithStats`]: opt-in admitted / refused / refunded counters |
//! | [`keyed`] | fixed-capacity tables, each a [`Limiter<K>`](Limiter) and a [`KeyedTable`]: [`keyed::HeaplessKeyedTable`] (`no_std`), [`keyed::ShardedKeyedTable`] and [`keyed::LockFreeGcraTable`] (`std`) |
//! | [`live`] | changing a running limiter's quota: [`LiveBucket`], [`Inheritance`] |
//! | [`wait`] | [`Sleep`](wait::Sleep): a clock that can sleep; then [`RateLimiter::acquire`] awaits any limiter |
//! | `queue` (feature `tokio`) | `Queue`: ordered, bounded async waiting in front of any limiter |
//! | `http` (feature `http`) | `RateLimitLayer`: tower middleware for axum/hyper/tonic |
//! | `redis` (feature `redis`) | `RedisStore`: the same GCRA for a fleet |
//! | `embassy` (feature `embassy`) | `EmbassyClock` and `acquire(n).await` on firmware |
//! | [`wrapping_clock`] | [`WrappingClock`]: a 16- or 32-bit hardware counter that wraps, extended to a `Timestamp` (lock-free, interrupt-safe, with a documented read rule) |
//! | [`duty_cycle`] | [`DutyCycleLimiter`](duty_cycle::DutyCycleLimiter): radio airtime per sub-band (ETSI EN 300 220, the EU868 table), saved and restored across resets; a limiter per sub-band, so the waiters wait for a slot |
//! | `rtic` (feature `rtic`) | `RticClock`: an RTIC monotonic as a `Clock`, and waiting on it |
//!
//! The core's modules come from the `no_std` crate `tollgate-core`;
//! `duty_cycle`, `rtic`, `embassy`, `partitioned`, `queue`, `redis` and
//! `http` from crates of their own (`tollgate-duty-cycle`, ...), each built
//! on the public API of the crates below it only. All are re-exported under
//! these paths: add `tollgate`, not the crates behind it.
//!
//! ## The guide
//!
//! The [`guide`] walks through the rest, one topic per section: time as
//! a type, buckets in `static`s and interrupt handlers, what a
//! microcontroller needs and what each bucket costs, token or leaky
//! bucket, windows, in-flight limits, chains and statistics, refusals
//! and snapshots, keyed limiters, changing quotas while running, clocks
//! that go backwards, embassy, queued waiting on tokio, a fleet on Redis,
//! the HTTP middleware, what is hand-written and why, and how the crate
//! is verified.
//!
//! ## Features
//!
//! | feature | default | adds |
//! |---|---|---|
//! | `std` | yes | [`StdClock`], [`CoarseClock`], `Clock`/`Limiter` for `Arc` and `Box`, [`keyed::ShardedKeyedTable`], [`keyed::LockFreeGcraTable`], `RateLimiter::keyed` |
//! | `quanta` | no | `QuantaClock` (in [`clock`]): a TSC clock through the `quanta` crate |
//! | `embassy` | no | `embassy::EmbassyClock`, async `acquire(n).await` / `until_ready(n).await` with deadlines (module `embassy`) |
//! | `tokio` | no | `queue`: async queued acquisition; `TokioClock` (implies `std`) |
//! | `http` | no | `http::RateLimitLayer`: tower middleware (global + per-route policies, keys, 429 + `Retry-After` + IETF `RateLimit` headers, queueing, reload), built in code; no serde (implies `std`, `tokio`) |
//! | `axum` | no | `http::RateLimitLayer::for_axum`: the layer answering with axum's own `Body`, which axum's router takes as it is instead of boxing each response body again (axum-core; implies `http`) |
//! | `grpc` | no | a refused gRPC call's `grpc-status-details-bin`: a `google.rpc.Status` with `RetryInfo` (the wait) and `QuotaFailure` (the policy), encoded with prost; without it a refused gRPC call still gets `grpc-status: 8` (RESOURCE_EXHAUSTED) and `grpc-message` (implies `http`) |
//! | `config` | no | `http::config`: `LayerConfig` reads the layer's rules from TOML or JSON, durations such as `"500ms"`, `"1m30s"` (implies `http`) |
//! | `tracing` | no | `tracing` events: the HTTP layer's refusals (debug), dry-run decisions (info) and missing keys (warn), the Redis store's circuit breaker opening (warn) and closing (info) and memory pressure (warn, at most once per 10 s) (implies `std`) |
//! | `metrics` | no | `metrics` counters, gauge and histogram of the HTTP layer, named in `http::metrics`; without it the names do not exist, so nothing reads zeros (implies `std`) |
//! | `redis` | no | `redis::RedisStore`: distributed GCRA and fixed window on Redis/Valkey, with tokio (implies `std`) |
//! | `rtic` | no | `rtic::RticClock`: any RTIC monotonic (rtic-time 3) as a [`Clock`], exact tick conversion, a 32-bit tick count's wraps counted; `CLOCK.acquire(&limiter, &key, n).await`, resolving to the admission instant (`no_std`) |
//!
//! Without default features the crate is `no_std` and allocation-free;
//! [On a microcontroller](guide#on-a-microcontroller) says what a chip without
//! 64-bit atomics needs from the final binary.
//!
//! Features only add: each brings its own dependencies and nothing else
//! (CI checks every combination of up to two features with `cargo hack`),
//! and the core's tests also run without `std`.

#![no_std]
// The library never uses unsafe code. (Cargo.toml only denies it, so that
// a test binary can install a counting global allocator.)
#![forbid(unsafe_code)]
#![warn(missing_debug_implementations)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc(test(attr(deny(unused_imports))))]
// Without `std`, links to the std-only items (the std clocks and tables,
// partitioned limiters) have nothing to point at and render as text; every
// other broken link is still an error in the all-features build.
#![cfg_attr(not(feature = "std"), allow(rustdoc::broken_intra_doc_links))]

#[cfg(feature = "std")]
extern crate std;

#[doc(inline)]
pub use tollgate_core::{
    chain, clock, concurrency, error, gcra, keyed, limiter, live, lock_freedom, quota,
    rate_limiter, refusal, snapshot, stats, tick, time, valid, wait, window, wrapping_clock,
};

#[doc(inline)]
pub use tollgate_duty_cycle as duty_cycle;
#[cfg(feature = "embassy")]
#[doc(inline)]
pub use tollgate_embassy as embassy;
pub mod guide;
#[cfg(feature = "http")]
#[doc(inline)]
pub use tollgate_http as http;
#[cfg(feature = "std")]
#[doc(inline)]
pub use tollgate_partitioned as partitioned;
#[cfg(feature = "tokio")]
#[doc(inline)]
pub use tollgate_queue as queue;
#[cfg(feature = "redis")]
#[doc(inline)]
pub use tollgate_redis as redis;
#[cfg(feature = "rtic")]
#[doc(inline)]
pub use tollgate_rtic as rtic;

#[cfg(feature = "tokio")]
pub use queue::TokioClock;
#[cfg(feature = "quanta")]
#[doc(inline)]
pub use tollgate_core::QuantaClock;
#[doc(inline)]
pub use tollgate_core::{
    Algorithm, Bucket, BucketKind, BucketRef, Chain, Clock, ConcurrencyLimiter, ConcurrencyPermit,
    ConfigError, FixedWindow, FixedWindowState, Gcra, GcraState, Grant, Inheritance, KeyedTable,
    Limiter, LiveBucket, LockFreedom, ManualClock, Quota, RateLimiter, Refusal, SlidingWindow,
    SlidingWindowState, Snapshot, Statistics, TickGcra, TickState, Timestamp, WithStats,
    WrappingClock,
};
#[cfg(feature = "std")]
#[doc(inline)]
pub use tollgate_core::{CoarseClock, StdClock};

/// The README's Rust examples, compiled and run as doctests so they stay true
/// (they need the features their sections name).
#[cfg(all(doctest, feature = "axum", feature = "config", feature = "redis"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
