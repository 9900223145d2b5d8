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
//!   missing key is a full bucket), so Redis memory is bounded by the keys
//!   that are actually throttled. Fixed-window counters (windows aligned on
//!   the server's clock, as in-process) always carry an expiry and vanish
//!   with their window.
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
//!   store errs or times out, [`FailurePolicy`] decides: fail-open admits
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
//! # Fail-open or fail-closed
//!
//!  Every call waits at most the timeout (50 ms
//! by default). If Redis errs, is unreachable or does not answer in time
//! (including a hung server with the TCP connection still open), the failure
//! policy answers and the answer's path is `KeyedPath::Fallback`
//! (`permit.store_unavailable()` on an admission):
//!
//! | policy | during an outage |
//! |---|---|
//! | `FailurePolicy::fail_open()` (default) | every request is admitted: availability first |
//! | `FailurePolicy::fail_open_with_ceiling(q)` | admitted up to a local token bucket `q` per store instance (all keys together); use your per-replica share of the global quota |
//! | `FailurePolicy::fail_closed(retry_after)` | every request is refused with that `retry_after`: protection first |
//!
//! The connection is re-established in the background with exponential
//! backoff (10 ms to 1 s by default, `reconnect_backoff`); the store resumes
//! by itself when Redis is back, without restarting the application (tested
//! by killing and restarting `redis-server` on the same port). `connect`
//! succeeds even while Redis is down.
//!
//! # What is and is not guaranteed
//!
//! - While Redis answers: across the whole fleet, admissions for a key never
//!   exceed `burst + rate·t` over any interval `t` (tested with 4 instances on
//!   separate connections hammering one key for 3 s: within one permit).
//! - During an outage: only the failure policy holds. Fail-open admits without
//!   the shared limit (with a ceiling: at most replicas × ceiling);
//!   fail-closed refuses everything. Keys refused just before the outage stay
//!   refused locally until their `retry_after`.
//! - After a failover to a replica or a restart without persistence: buckets
//!   may be lost (a lost key is a full bucket), so clients can get up to one
//!   extra burst; writes not yet replicated are lost the same way (Redis
//!   replication is asynchronous). A new primary whose clock is behind is
//!   handled like a clock that went back: never extra capacity; leads beyond
//!   the heal threshold (1 s) are reset to "empty at now".
//! - A refund ([`RedisStore::refund`]) is best effort: if Redis is
//!   unreachable, the permits stay taken.
//!
//! # Valkey and Redis Cluster
//!
//!  The scripts use only `TIME`, `GET`, `SET PX`,
//! `DEL` and `PEXPIREAT` and touch exactly one key,
//! declared in `KEYS`, so they run unchanged on Valkey and on a cluster. For
//! a cluster use `RedisStore::connect_cluster([node urls], config)`: each call
//! goes to the shard owning its key, redirections are followed, and a
//! `SCRIPT FLUSH` on the shards is survived (tested on a real 3-shard
//! `redis-server` cluster). `hash_tag(b"...")` makes all of one limiter's keys
//! `prefix{tag}key`, putting them in one slot (one shard) when you need them
//! together, e.g. for `SCAN`-based inspection or a single-shard deployment.
//! Redis ≥ 5 is needed (effects replication of scripts that read `TIME`).
//! Tested against Redis 7.0; Valkey keeps the same scripting API but was not
//! available on the test machine.
//!
//! # Tests
//!
//! The store's tests run against a real `redis-server`: each starts its own
//! on an ephemeral port and fails, with a message saying so, if none is on
//! PATH (`scripts/test.sh` installs it). Figures: `cargo bench --bench
//! redis`, collected in the repository's BENCHMARKS.md.

#![forbid(unsafe_code)]
#![warn(missing_debug_implementations)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc(test(attr(deny(unused_imports))))]

mod breaker;
mod cache;
mod config;
#[cfg(fuzzing)]
pub mod fuzzing;
pub mod script;
pub(crate) mod store;

pub use config::{ConfigError, FailurePolicy, KEY_DIGEST_LEN, RedisConfig, RemoteAlgorithm};
pub use store::{RedisStore, StoreError, StorePermit, StoreReply};
