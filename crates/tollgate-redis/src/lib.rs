//! Distributed limiting on Redis or Valkey (feature `redis`).
//!
//! [`RedisStore`] runs tollgate's own GCRA step (token or leaky bucket, the
//! same rules as [`Gcra`](tollgate_core::Gcra)) or a fixed window atomically inside
//! plain Redis, Valkey or a Redis Cluster, in one Lua script per algorithm:
//! no server module needed. Every replica of a service that points at the
//! same server and prefix shares one limit per key.
//!
//! The store keeps TATs in whole nanoseconds: a quota whose emission
//! interval is not a whole number of nanoseconds (`per_second(3)`) runs
//! with it rounded up ([`Gcra::rounded`](tollgate_core::Gcra::rounded)), where an
//! in-process bucket keeps it exact (see [`tollgate_core::quota`]).
//!
//! - **Server time.** The script reads the server's `TIME`, so application
//!   clocks never matter. Decisions carry the same fields as in-process:
//!   `remaining`, `reset_after`, exact `retry_after` in nanoseconds.
//! - **One round trip** per decision (`EVALSHA`; the script is loaded once
//!   and re-loaded automatically after `NOSCRIPT`, e.g. a `SCRIPT FLUSH` or
//!   a failover to a fresh server).
//! - **Idle keys vanish.** A key expires when its bucket has refilled (a
//!   missing key is a full bucket). Fixed-window counters (windows aligned
//!   on the server's clock, as in-process) always carry an expiry and
//!   vanish with their window.
//! - **Memory is bounded per rule.** Each store instance creates at most
//!   [`new_keys_per_second`](RedisConfig::new_keys_per_second) new keys
//!   (default 1,000/s, burst one second's worth); past that, new keys share
//!   the rule's one overflow key (path
//!   [`KeyedPath::SharedOverflow`](tollgate_core::keyed::KeyedPath::SharedOverflow)),
//!   so a flood of new keys fills at most `replicas × (burst + rate × L)`
//!   keys (`L` the longest a key lives), about 150–200 bytes each. Run
//!   Redis with `maxmemory` and `maxmemory-policy volatile-ttl`. A server at
//!   its `maxmemory` is reported like an unavailable one (the failure
//!   policy answers; counted by [`RedisStore::memory_pressure`]; the
//!   breaker stays closed). The arithmetic, the measured figures and a
//!   worked example: [Memory](guide#memory).
//! - **Keys** are `prefix ++ {hash_tag}? ++ digest`, where `digest` is 32
//!   hex digits of the caller's key's SHA-256 (its first 128 bits): a key
//!   of any bytes and any length (CR/LF, `*`, non-UTF-8, a megabyte) costs
//!   the server one fixed-size name, and nothing is interpolated into Lua.
//!   The digest is the same on every replica, and a client cannot craft a
//!   key whose digest is another's. A hash tag puts all of one limiter's
//!   keys in one cluster slot.
//! - **Single node or cluster.** [`RedisStore::connect`] takes one server
//!   (a URL); [`RedisStore::connect_cluster`] takes cluster nodes and routes
//!   each call to the shard owning its key.
//! - **Failure policy.** Each call has a timeout (default 50 ms). When the
//!   store errs (at its `maxmemory` too) or times out, [`FailurePolicy`] decides: fail-open admits
//!   (optionally under a local per-replica ceiling), fail-closed refuses with
//!   a fixed `retry_after`. Either way the answer's path is
//!   [`KeyedPath::Fallback`](tollgate_core::keyed::KeyedPath::Fallback) and the
//!   caller never waits longer than the timeout. The connection is
//!   re-established in the background with exponential backoff.
//! - **Circuit breaker.** After 3 consecutive calls that could not reach
//!   the server (refused, dropped, timed out), the breaker opens: the
//!   failure policy answers every call at once, without waiting the
//!   timeout, while a background task pings the server every 200 ms; its
//!   first answer closes the breaker (see [`RedisConfig::circuit_breaker`]).
//!   Both transitions are counted ([`RedisStore::circuit_openings`],
//!   [`RedisStore::circuit_closings`]) and, with feature `tracing`, logged:
//!   the opening at WARN with its cause, the closing at INFO with how long
//!   the breaker was open and how many calls the failure policy answered
//!   meanwhile.
//! - **Refusal cache.** A refused key is refused locally until its
//!   `retry_after` passes, without asking the store (on by default, fixed
//!   memory).
//!
//! ```no_run
//! use tollgate::redis::{FailurePolicy, RedisConfig, RedisStore};
//! use tollgate::Quota;
//! use std::time::Duration;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let config = RedisConfig::token_bucket(Quota::per_second(100)?.with_burst(20)?)
//!     .prefix(b"myapp:api:")
//!     .timeout(Duration::from_millis(50))
//!     .failure_policy(FailurePolicy::fail_open());
//! let store = RedisStore::connect("redis://127.0.0.1:6379/", config).await?;
//!
//! match store.check(b"client-42").await {
//!     Ok(permit) if permit.store_unavailable() => {
//!         eprintln!("redis unavailable: admitted without the shared limit");
//!     }
//!     Ok(permit) => println!("ok, {} left", permit.snapshot().remaining()),
//!     Err(denied) => println!("429, retry after {} s", denied.retry_after_secs_ceil()),
//! }
//! # Ok(()) }
//! ```
//!
//! # Guide
//!
//! The [`guide`] has one section each on
//! [fail-open or fail-closed](guide#fail-open-or-fail-closed),
//! [memory](guide#memory) (the new-key budget, the bound, `maxmemory`),
//! [what is and is not guaranteed](guide#what-is-and-is-not-guaranteed),
//! [Valkey and Redis Cluster](guide#valkey-and-redis-cluster) and
//! [the tests](guide#tests).

#![forbid(unsafe_code)]
#![warn(missing_debug_implementations)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc(test(attr(deny(unused_imports))))]

mod breaker;
mod cache;
mod config;
#[cfg(fuzzing)]
pub mod fuzzing;
pub mod guide;
mod pressure;
pub mod script;
pub(crate) mod store;

pub use config::{ConfigError, FailurePolicy, KEY_DIGEST_LEN, RedisConfig, RemoteAlgorithm};
pub use store::{RedisStore, StoreError, StorePermit, StoreReply};
