//! # tollgate
//!
//! Rate limiting that runs the same admission logic on a Cortex-M, on a
//! multi-core server and (later) across a fleet. The core is `#![no_std]`,
//! allocation-free and lock-free: one atomic `u64` per bucket, no timers,
//! no background task.
//!
//! ## Quick start
//!
//! ```
//! use tollgate::{ManualClock, Quota, RateLimiter};
//! use core::time::Duration;
//!
//! // 10 per second, bursts of up to 3.
//! let clock = ManualClock::new(0);
//! let quota = Quota::per_second(10)?.allow_burst(3)?;
//! let limiter = RateLimiter::token_bucket(quota, &clock)?;
//!
//! assert!(limiter.try_acquire().is_allowed());
//! assert!(limiter.try_acquire().is_allowed());
//! assert!(limiter.try_acquire().is_allowed());
//! let decision = limiter.try_acquire();
//! assert!(decision.is_denied());
//! assert_eq!(decision.retry_after(), Duration::from_millis(100));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! On a real system use [`StdClock`] (feature `std`) or your own [`Clock`].
//!
//! ## Concepts
//!
//! | module | concept |
//! |---|---|
//! | [`clock`] | [`Clock`]: monotonic `u64` nanoseconds plus resolution; [`ManualClock`], [`StdClock`] |
//! | [`quota`] | [`Quota`]: permits per period, burst, largest weight; [`QuotaError`] |
//! | [`gcra`] | [`Gcra`] + [`GcraState`]: the token and leaky buckets |
//! | [`decision`] | [`Decision`], [`Snapshot`], [`Denied`], [`CapacityExceeded`] |
//! | [`limiter`] | the [`Algorithm`] and [`Limiter`] traits, [`Bucket`] |
//! | [`rate_limiter`] | [`RateLimiter`]: a limiter bundled with its clock |
//! | [`keyed`] | per-key limiters in fixed-capacity tables: [`keyed::HeaplessKeyedTable`] (`no_std`), [`keyed::ShardedKeyedTable`] and [`keyed::LockFreeGcraTable`] (`std`) |
//!
//! Algorithms are small `Copy` configurations; state is a few atomic bytes
//! (8 for a GCRA bucket). An operation is "algorithm applied to state at
//! `now`". That is what lets a bucket be a `static` in firmware:
//!
//! ```
//! use tollgate::{Bucket, Gcra, Limiter, Quota};
//!
//! const QUOTA: Quota = match Quota::per_second(50) {
//!     Ok(q) => q,
//!     Err(_) => panic!("invalid quota"),
//! };
//! static RADIO: Bucket<Gcra> = Bucket::leaky_bucket(QUOTA);
//!
//! let now = 1_000_000; // from your timer, in ns
//! assert!(RADIO.check(now).is_allowed());
//! assert!(RADIO.check(now).is_denied()); // strict pacing: 20 ms apart
//! assert!(RADIO.check(now + 20_000_000).is_allowed());
//! ```
//!
//! ## Token bucket or leaky bucket
//!
//! - A **token bucket** admits up to `burst` permits at once from a full
//!   bucket, then refills at the rate: friendly to bursty clients.
//! - A **leaky bucket** (strict pacing) admits one permit per interval and
//!   never two at the same instant: smooth output for radios, buses and
//!   downstream services that dislike spikes. A request of weight `n` (up
//!   to [`Quota::max_weight`]) waits for the previous work to drain, then
//!   occupies `n` intervals.
//!
//! ```
//! use tollgate::{Bucket, Limiter, Quota};
//!
//! let quota = Quota::per_second(4)?; // T = 250 ms, burst 4
//! let token = Bucket::token_bucket(quota);
//! let leaky = Bucket::leaky_bucket(quota);
//! let token_burst = (0..10).filter(|_| token.check(0).is_allowed()).count();
//! let leaky_burst = (0..10).filter(|_| leaky.check(0).is_allowed()).count();
//! assert_eq!((token_burst, leaky_burst), (4, 1));
//! # Ok::<(), tollgate::QuotaError>(())
//! ```
//!
//! ## Decisions
//!
//! A check returns a [`Decision`]: allowed with a [`Snapshot`] (remaining
//! permits, time until full, limit), or denied with a [`Denied`] carrying
//! the exact `retry_after` and
//! [`retry_after_secs_ceil`](Denied::retry_after_secs_ceil) for HTTP
//! `Retry-After` (never 0 for a positive wait). A request larger than the
//! bucket can ever hold is [`CapacityExceeded`], not a wait:
//!
//! ```
//! use tollgate::{Bucket, Limiter, Quota};
//!
//! let bucket = Bucket::token_bucket(Quota::per_second(10)?.allow_burst(5)?);
//! let err = bucket.check_n(6, 0).unwrap_err();
//! assert_eq!((err.requested, err.capacity), (6, 5));
//! // n = 0 is a peek: it changes nothing.
//! let peek = bucket.check_n(0, 0)?;
//! assert_eq!(peek.snapshot().remaining(), 5);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A refund gives back permits of a request that a later stage refused,
//! never above the burst:
//!
//! ```
//! use tollgate::{Bucket, Limiter, Quota};
//!
//! let bucket = Bucket::token_bucket(Quota::per_second(10)?.allow_burst(2)?);
//! assert!(bucket.check_n(2, 0)?.is_allowed());
//! bucket.refund(5, 0);
//! assert_eq!(bucket.snapshot(0).remaining(), 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Keyed limiters (per client, per key)
//!
//! A keyed table gives every key (client IP, API key, sensor id) its own
//! bucket, in a table whose capacity is fixed when it is built: memory never
//! grows with traffic. [`keyed::ShardedKeyedTable`] (feature `std`) picks
//! its capacity at run time, allocates once, hashes with a random per-table
//! seed, and read-locks one shard per check;
//! [`keyed::LockFreeGcraTable`] does the same for GCRA buckets and keys of
//! at most 64 bits (integers, `Ipv4Addr`) with no lock at all on the check
//! path (key and TAT share one 128-bit atomic);
//! [`keyed::HeaplessKeyedTable`] is the `no_std` twin (const capacity,
//! `critical-section`, can be a `static`).
//!
//! ```
//! use tollgate::keyed::{KeyedPath, OverflowPolicy, ShardedKeyedTable};
//! use tollgate::{Gcra, Quota};
//!
//! let per_client = Gcra::token_bucket(Quota::per_second(10)?.allow_burst(2)?);
//! let table = ShardedKeyedTable::builder(per_client)
//!     .capacity(2)
//!     .shards(1)
//!     .overflow(OverflowPolicy::Deny)
//!     .build::<u32>()?;
//!
//! assert!(table.check(&1, 0).is_allowed());
//! assert!(table.check(&2, 0).is_allowed());
//! // Full of keys that are still throttled: key 3 is refused, never are
//! // keys 1 and 2 forgotten (that would reset their limits).
//! let third = table.check(&3, 0);
//! assert_eq!(third.path(), KeyedPath::OverflowDenied);
//! // 100 ms later both have refilled; evicting them changes nothing, so
//! // key 3 takes a slot.
//! assert_eq!(table.check(&3, 100_000_000).path(), KeyedPath::Own);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! When a full table has nothing to evict, the [`keyed::OverflowPolicy`]
//! decides: a shared overflow bucket with the default quota (default), deny,
//! or allow; every [`keyed::KeyedDecision`] says which path it took. A
//! per-key quota is any `Fn(&K) -> A`. See [`keyed`] for the security
//! reasoning and capacity sizing.
//!
//! ## Clocks that go backwards
//!
//! A clock that jumps back (VM migration, suspend) never makes a bucket
//! admit extra. Small backwards steps (a thread whose `now` is stale) only
//! make the bucket look fuller; a jump of more than the heal threshold
//! (default 1 s) resets the bucket to "empty at now", so service resumes one
//! interval later instead of after the jump. See [`gcra`].
//!
//! ## Features
//!
//! | feature | default | adds |
//! |---|---|---|
//! | `std` | yes | [`StdClock`], `Clock`/`Limiter` for `Arc` and `Box`, [`keyed::ShardedKeyedTable`], [`keyed::LockFreeGcraTable`] |
//!
//! Without default features the crate is `no_std` and allocation-free. On
//! targets without native 64-bit atomics (thumbv6m, riscv32imc) the final
//! binary chooses how `portable-atomic` emulates them: enable its
//! `critical-section` feature (and provide a critical-section
//! implementation, e.g. cortex-m's `critical-section-single-core`) or build
//! with `--cfg portable_atomic_unsafe_assume_single_core` on a single-core
//! chip. tollgate never picks for you.

#![no_std]
// The library never uses unsafe code. (Cargo.toml only denies it, so that
// a test binary can install a counting global allocator.)
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_auto_cfg))]

#[cfg(feature = "std")]
extern crate std;

pub mod clock;
pub mod decision;
pub mod gcra;
pub mod keyed;
pub mod limiter;
pub mod quota;
pub mod rate_limiter;

#[cfg(loom)]
#[doc(hidden)]
pub mod sync;
#[cfg(not(loom))]
mod sync;

#[cfg(feature = "std")]
pub use clock::StdClock;
pub use clock::{Clock, ManualClock};
pub use decision::{CapacityExceeded, Decision, Denied, Snapshot};
pub use gcra::{BucketKind, Gcra, GcraState};
pub use limiter::{Algorithm, Bucket, Limiter};
pub use quota::{Quota, QuotaError};
pub use rate_limiter::RateLimiter;
