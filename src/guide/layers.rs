//! The layers: async waiting on firmware with embassy, queued acquisition
//! on tokio, a fleet on Redis, the HTTP middleware.
//!
//! ## Embassy: async waiting on firmware
//!
//! With feature `embassy`, `embassy::EmbassyClock` reads embassy-time's
//! tick counter as a [`Timestamp`] (its resolution is one tick, so a limiter
//! finer than a tick is refused), and `embassy::acquire(&limiter, &key,
//! n).await` (wait, then take) and `embassy::until_ready(..).await` (wait,
//! take nothing) wait on any limiter whose permits are spent when granted,
//! direct (`&()` as the key) or per key: the one [`Wait`](wait::Wait)
//! future, over `EmbassyClock`'s [`Sleep`](wait::Sleep) (any clock that can
//! sleep waits the same way). It sleeps until the refusal's `retry_after`,
//! rounded up to the next tick, then checks again; `n` above the burst is
//! an error at once; `.with_timeout(..)` / `.with_deadline(..)` bound it.
//! It resolves to the admission instant, the [`Timestamp`] of the check
//! that granted the permits: a task that paces itself measures from it,
//! not from a clock read after the `.await` (which may come later); the
//! limiter's state then, if wanted, is `limiter.snapshot(&key, at)`:
//!
//! ```
//! # #[cfg(feature = "embassy")] {
//! use tollgate::embassy::{self, WaitError};
//! use tollgate::{valid, Bucket, Gcra, Quota};
//!
//! static UPLINK: Bucket<Gcra> = Bucket::token_bucket(valid!(Quota::per_second(20)));
//!
//! async fn publish() -> Result<(), WaitError> {
//!     let at = embassy::acquire(&UPLINK, &(), 1).await?;
//!     // ... send one telemetry frame, stamped `at` ...
//!     # let _ = UPLINK.snapshot(at);
//!     Ok(())
//! }
//! # embassy_futures::block_on(publish()).unwrap();
//! # }
//! ```
//!
//! The radio duty cycle waits the same way: a
//! [`DutyCycleLimiter`](duty_cycle::DutyCycleLimiter) is a limiter per
//! sub-band (the key is the sub-band's index, the permits are the frame's
//! airtime in microseconds, [`duty_cycle::airtime_permits`]), so
//! `embassy::acquire` waits for a transmission slot and returns the instant
//! the frame was admitted; a frame longer than the sub-band ever allows is
//! `CapacityExceeded` at once:
//!
//! ```
//! # #[cfg(feature = "embassy")] {
//! use core::time::Duration;
//! use tollgate::duty_cycle::{airtime_permits, eu868::Eu868, DutyCycleLimiter};
//! use tollgate::embassy::{self, WaitError};
//!
//! static RADIO: DutyCycleLimiter<6> = DutyCycleLimiter::eu868();
//!
//! async fn uplink(airtime: Duration) -> Result<(), WaitError> {
//!     let band = Eu868::M.index(); // from the channel: RADIO.band_index(hz, bw)
//!     let at = embassy::acquire(&RADIO, &band, airtime_permits(airtime)).await?;
//!     // ... transmit now: the sub-band's time-off runs from `at` ...
//!     # let _ = at;
//!     Ok(())
//! }
//! # embassy_futures::block_on(uplink(Duration::from_millis(500))).unwrap();
//! # }
//! ```
//!
//! The firmware picks the time driver and tick rate. `examples/firmware` runs
//! the buckets on three Cortex-M machines under QEMU, checking each admission.
//!
//! ## Queued acquisition on tokio (feature `tokio`)
//!
//! A server that would rather delay a request a little than refuse it puts
//! a `queue::Queue` in front of any limiter — a bucket, a keyed table, a
//! chain with an in-flight limit, a partitioned limiter — and awaits
//! `queue.acquire(&key, n)`: each key that has waiters gets its own line,
//! served in order (oldest first by default, or newest first with .NET's
//! semantics) and bounded in permits; a request that would wait longer
//! than `max_wait` is refused at once; a rate's waiter is woken by a timer
//! at its exact turn, an in-flight limit's by the release of a permit;
//! dropping the future gives its place (and any permit already granted)
//! back. No background task, one wake-up per admission.
//!
#![cfg_attr(feature = "tokio", doc = "```")]
#![cfg_attr(not(feature = "tokio"), doc = "```text")]
//! use std::time::Duration;
//! use tollgate::queue::{Queue, WaitError};
//! use tollgate::{Bucket, Quota};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // 5 per second, no burst beyond 1; at most 3 permits may wait.
//! let bucket = Bucket::token_bucket(Quota::per_second(5)?.with_burst(1)?);
//! let queue = Queue::builder(bucket).queue_limit(3).build();
//!
//! let start = tokio::time::Instant::now();
//! queue.acquire(&(), 1).await?; // capacity available: at once
//! queue.acquire(&(), 1).await?; // waits its turn: 200 ms
//! assert_eq!(start.elapsed(), Duration::from_millis(200));
//!
//! // Too big for the bucket: refused at once, never queued.
//! assert!(matches!(queue.acquire(&(), 2).await, Err(WaitError::CapacityExceeded(_))));
//! // Would have to wait: try_acquire refuses with the wait.
//! let err = queue.try_acquire(&(), 1).unwrap_err();
//! assert_eq!(err.retry_after(), Some(Duration::from_millis(200)));
//! # Ok(())
//! # }
//! ```
//!
//! See the `queue` module for the full semantics, the costs, and a comparison with
//! .NET's `System.Threading.RateLimiting`.
//!
//! ## Running on a fleet (feature `redis`)
//!
//! Per-process limits multiply with the number of replicas. With feature
//! `redis`, `redis::RedisStore` runs the same GCRA step (or a fixed
//! window) atomically inside Redis, Valkey or a Redis Cluster, in one Lua
//! script on the server's clock: every replica pointing at the same server
//! and key prefix shares one limit per key, with the same [`Refusal`] and
//! [`Snapshot`] fields as an in-process bucket (the store keeps TATs in whole
//! nanoseconds: a fractional interval is rounded up there, see
//! [`Gcra::rounded`]). One round trip per decision; a key
//! expires once its bucket has refilled; each call has a timeout (50 ms by
//! default) after which a `redis::FailurePolicy` decides
//! (fail-open, fail-open under a local ceiling, or fail-closed), flagged by
//! the answer's path ([`keyed::KeyedPath::Fallback`]); a local refusal cache
//! answers for keys already refused until their `retry_after` passes.
//!
//! ```no_run
//! # #[cfg(feature = "redis")]
//! # mod demo {
//! use tollgate::redis::{FailurePolicy, RedisConfig, RedisStore};
//! use tollgate::Quota;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let per_client = Quota::per_minute(600)?.with_burst(50)?;
//! let store = RedisStore::connect(
//!     "redis://10.0.0.5:6379/",
//!     RedisConfig::token_bucket(per_client)
//!         .prefix(b"shop:api:")
//!         .failure_policy(FailurePolicy::fail_open_with_ceiling(
//!             Quota::per_second(100)?, // this replica's share while Redis is away
//!         )),
//! )
//! .await?;
//! match store.check(b"client-7").await {
//!     Ok(permit) => println!("ok, {} left", permit.snapshot().remaining()),
//!     Err(refused) => println!("429, Retry-After: {}", refused.retry_after_secs_ceil()),
//! }
//! # Ok(()) }
//! # }
//! ```
//!
//! The answer has the shape of every acquire: a permit (here the bucket's
//! state after the admission) or a [`Refusal`]. An HTTP route policy keeps
//! its buckets in the store with
//! `http::Policy::backend(Arc::new(store))`, or from the config file with
//! `backend = "redis"` and `redis_url` (see `http::config`); a decision the
//! failure policy made is marked on the response by the
//! `http::StoreUnavailable` extension.
//!
//! ## HTTP middleware (feature `http`)
//!
//! `http::RateLimitLayer` is a tower layer for axum, hyper and tonic. As in
//! ASP.NET Core, a global limiter and the matching route policy must both
//! admit a request, and the global permit is refunded when the route
//! refuses. Route policies match path prefixes (segment-bounded,
//! case-insensitive, longest wins, optional method filter) or are attached
//! to axum routes by name; keys are a shared bucket, the peer IP, the
//! client IP behind trusted proxies (right-most untrusted address), a
//! header or a closure, stored in fixed-capacity keyed tables at a fixed
//! size per key whatever the client sends (header and custom keys as a
//! 128-bit keyed digest, IPv6 clients by their /64 by default). Refusals are
//! 429 with `Retry-After` rounded up to whole seconds and the IETF
//! `RateLimit-Policy` / `RateLimit` fields (a gRPC call's refusal is a
//! trailers-only RESOURCE_EXHAUSTED, its wait in a `google.rpc.RetryInfo`
//! with feature `grpc`); policies can queue instead of
//! refusing, run in dry-run mode, keep their buckets in Redis
//! (`Policy::backend`, feature `redis`), be read from TOML or JSON (feature
//! `config`), and be
//! reloaded from the file without losing the buckets of unchanged rules.
//!
//! ```
//! # #[cfg(feature = "axum")] {
//! use tollgate::http::{KeySource, Policy, RateLimitLayer};
//! use tollgate::Quota;
//!
//! let layer = RateLimitLayer::builder()
//!     .global(Policy::token_bucket("global", Quota::per_second(1000)?))
//!     .policy(Policy::token_bucket("api", Quota::per_minute(100)?).prefix("/api").key(KeySource::PeerIp))
//!     .policy(Policy::token_bucket("login", Quota::per_minute(5)?).prefix("/api/login").key(KeySource::PeerIp))
//!     .exempt("/health")
//!     .build()?;
//! let app: axum::Router = axum::Router::new()
//!     .route("/api/items", axum::routing::get(|| async { "items" }))
//!     // axum's own Body in the responses: the router need not box them
//!     .layer(layer.for_axum());
//! # let _ = app;
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! `cargo run --example server --features axum,config,tracing` serves
//! `examples/tollgate.toml` on 127.0.0.1:3000; the `http` module docs
//! describe every option.

// The guide's links name the crate root's items as the root does.
#[allow(unused_imports)]
use crate::*;
