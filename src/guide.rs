//! The guide: every topic the crate root's map points to, one section
//! each.
//!
//! ## Time is a type
//!
//! Every operation takes `now` as a [`Timestamp`] and every length of time
//! as a [`Duration`](core::time::Duration), so passing milliseconds or
//! embassy ticks where nanoseconds were meant does not compile. A clock
//! reads timestamps; wherever a limiter meets a clock ([`RateLimiter`],
//! direct or over a table, embassy's `acquire`, the HTTP layer) a limiter whose
//! step is finer than the clock's resolution is refused with
//! [`ConfigError::ClockTooCoarse`]. Every std clock ([`StdClock`],
//! [`CoarseClock`], `QuantaClock`, `TokioClock`) shares one process-wide
//! origin, so their timestamps lie on one time line.
//!
//! ## Buckets in `static`s
//!
//! Algorithms are small `Copy` configurations; state is a few atomic bytes
//! (8 for a GCRA bucket). An operation is "algorithm applied to state at
//! `now`". That is what lets a bucket be a `static` in firmware; [`valid!`]
//! checks a `const` constructor at compile time, so no `match` or `panic!`
//! is needed:
//!
//! ```
//! use tollgate::{valid, Bucket, Gcra, Quota, Timestamp};
//!
//! static RADIO: Bucket<Gcra> = Bucket::leaky_bucket(valid!(Quota::per_second(50)));
//!
//! let now = Timestamp::from_millis(1); // from your timer
//! assert!(RADIO.check(now).is_ok());
//! assert!(RADIO.check(now).is_err()); // strict pacing: 20 ms apart
//! assert!(RADIO.check(now + core::time::Duration::from_millis(20)).is_ok());
//! ```
//!
//! ## Interrupt handlers
//!
//! A limiter checked from an interrupt handler *and* from the code it
//! interrupts must never wait for a lock that code holds. [`TickGcra`] with
//! a [`TickState`] ([`tick`]) is a token or leaky bucket in 32-bit ticks of
//! your timer, with 32-bit arithmetic only; `const` asserts on
//! [`LockFreedom`] turn a build that could deadlock into a compile error:
//!
//! ```
//! use tollgate::tick::{TickGcra, TickState};
//! use tollgate::{valid, LockFreedom, Quota};
//!
//! static LIMIT: TickGcra = valid!(TickGcra::token_bucket(valid!(Quota::per_second(100)), 32_768));
//! static STATE: TickState = TickState::new(); // 4 bytes
//! const _: () = assert!(TickState::IS_INTERRUPT_SAFE);
//!
//! // in the handler, `now` straight from a wrapping 32-bit timer
//! let now: u32 = 0xFFFF_FFF0;
//! assert!(LIMIT.check_ticks(&STATE, now).is_ok());
//! ```
//!
//! ## On a microcontroller
//!
//! Use `default-features = false` (add `embassy` or `rtic` to wait). The
//! README's "A firmware from scratch" is a whole firmware (manifest, linker
//! set-up, `main.rs`); CI builds it as written and runs it under QEMU on
//! thumbv6m (`microbit`), thumbv7m (`lm3s6965evb`) and thumbv7em
//! (`mps2-an386`).
//!
//! **The critical section.** A chip without an atomic that tollgate needs
//! gets it from a critical section, which the firmware provides (one
//! implementation per image, through the `critical-section` crate):
//!
//! | chip | what needs the critical section | the implementation to add |
//! |---|---|---|
//! | single-core Cortex-M0/M0+ (thumbv6m: no compare-and-swap) | every limiter | `cortex-m = { version = "0.7", features = ["critical-section-single-core"] }` |
//! | single-core Cortex-M3/M4/M7/M33 (thumbv7m, thumbv7em, thumbv8m) | the 64-bit states (`Gcra`, `FixedWindow`, `LiveBucket`, the keyed tables and their buckets); **not** the tick buckets | the same line |
//! | single-hart RISC-V (riscv32imc: no compare-and-swap; riscv32imac) | as thumbv6m; as thumbv7m | `riscv = { version = "0.12", features = ["critical-section-single-hart"] }` |
//! | multi-core chips (RP2040, ESP32-C6 with its LP core, ...) | as above | the HAL's (embassy-rp, rp2040-hal, esp-hal provide one); never a single-core one |
//!
//! If the firmware never names `cortex_m` (an embassy firmware does, through
//! its executor; a bare one may not), add `use cortex_m as _;`: an unused
//! crate is not linked, and the link then fails with `undefined symbol:
//! _critical_section_1_0_acquire`. A critical section masks interrupts for
//! the few instructions of one update, so every limiter is interrupt-safe
//! except the sliding window (a spin lock). The `lock_freedom` module has
//! the table per type and target; `const` asserts on `tollgate::LockFreedom`
//! make a build that could deadlock fail to compile.
//!
//! **From an interrupt handler, prefer a tick bucket.** `tollgate::tick` is
//! the same token or leaky bucket with its state in one `u32` of ticks of
//! your timer (4 bytes of RAM), changed by native compare-and-swap where the
//! chip has it (`LDREX`/`STREX` on thumbv7m/thumbv7em, `LR.W`/`SC.W` on
//! RISC-V with `A`: lock-free) and by a critical section where it has none
//! (thumbv6m, riscv32imc), with 32-bit arithmetic only. Ticks wrap; a bucket
//! reads exactly as long as it was written less than
//! `2³² − (burst·T + heal threshold)` ticks ago (71 minutes at 1 MHz, 36
//! hours at 32 768 Hz), and beyond that can only refuse, never over-admit
//! (the `tick` module has the proof). One nudge: a TAT that would be stored
//! as 0 is stored as 1 (0 means a fresh state), which moves every later
//! admission one tick on; a busy run whose TAT lands on tick 0 of the wrap
//! admits `burst + ⌊(t₁ − t₀ − 1)/T⌋` over ticks `t₀..=t₁` instead of
//! `burst + ⌊(t₁ − t₀)/T⌋` (one fewer when `T` divides `t₁ − t₀`).
//!
//! **Waiting.** With feature `embassy`, `tollgate::embassy::acquire(&bucket,
//! &(), n).await` sleeps on embassy-time until the permits are granted. A
//! board with a HAL gets embassy-time's driver from it (embassy-stm32,
//! embassy-nrf, embassy-rp); a board without one can use `systick-timer`
//! (its `embassy-time-driver` feature: an embassy-time driver on SysTick for
//! any Cortex-M), or write the small SysTick driver `examples/firmware`
//! has. With feature `rtic`, `tollgate::rtic` makes any RTIC monotonic a
//! clock.
//!
//! ### Size
//!
//! What each pattern adds to a firmware image, measured by CI
//! (`scripts/firmware-sizes.py --check` builds `examples/firmware`'s size
//! probe, release, opt-level "s", LTO, with the pattern and with a no-op in
//! its place, and fails if a figure here is more than 5 % from the
//! measurement). Flash is `.text`; RAM is `.data` + `.bss`:
//!
//! <!-- sizes: begin -->
//! | pattern | thumbv6m: flash / RAM | thumbv7m: flash / RAM | thumbv7em: flash / RAM |
//! |---|---|---|---|
//! | tick bucket: `static TickGcra` + `TickState`, `check_ticks` | +72 / +4 B | +52 / +4 B | +52 / +4 B |
//! | `static Gcra` (flash) + `GcraState`, checked | +488 / +8 B | +384 / +8 B | +384 / +8 B |
//! | `static Bucket<Gcra>`, `check(now)` | +532 / +8 B | +428 / +8 B | +460 / +8 B |
//! | `static Gcra` + `GcraState`, `embassy::acquire(..).await` (against a plain `Timer`) | +3764 / +56 B | +3432 / +56 B | +3496 / +56 B |
//! | `static HeaplessKeyedTable<u8, Gcra, 8>`, 16 keys taking turns | +5828 / +256 B | +5372 / +256 B | +5496 / +256 B |
//! <!-- sizes: end -->
//!
//! A `static Bucket<Gcra>` holds its configuration beside its state; with
//! link-time optimisation only the 8-byte state stays in RAM, and the
//! configuration's arithmetic costs a few dozen bytes more than a
//! configuration in its own read-only `static` (which a `BucketRef` or
//! `Algorithm::check_n` applies to a `GcraState`). Each further bucket adds
//! its state (8 or 4 bytes) and little code. Waiting links the async
//! waiter and converts a wait back to embassy ticks (64-bit division, which
//! most firmware already links for other reasons); the RAM is the state
//! plus the wait future inside the task. A keyed table brings a hash map,
//! eviction and the overflow bucket; its 256 bytes are the whole table for
//! 8 keys (the map with its slots and index, the sweep hint, the default
//! configuration and the shared overflow bucket).
//!
//! `examples/firmware` (its own crate, outside the workspace) runs these
//! buckets, a keyed table, the duty-cycle limiter and an interrupt hammer
//! test on the three machines under QEMU and checks every admission from
//! inside the firmware; its README describes each check and shows the
//! output.
//!
//! ## Token bucket or leaky bucket
//!
//! - A **token bucket** admits up to `burst` permits at once from a full
//!   bucket, then refills at the rate: friendly to bursty clients.
//! - A **leaky bucket** (strict pacing) admits one permit per interval and
//!   never two single permits at the same instant: smooth output for
//!   radios, buses and downstream services that dislike spikes. A request
//!   of weight `n` (up to the quota's burst) waits for the previous work to
//!   drain, then occupies `n` intervals.
//!
//! ```
//! use tollgate::{Bucket, Quota, Timestamp};
//!
//! let quota = Quota::per_second(4)?; // T = 250 ms, burst 4
//! let token = Bucket::token_bucket(quota);
//! let leaky = Bucket::leaky_bucket(quota);
//! let now = Timestamp::ZERO;
//! let token_burst = (0..10).filter(|_| token.check(now).is_ok()).count();
//! let leaky_burst = (0..10).filter(|_| leaky.check(now).is_ok()).count();
//! assert_eq!((token_burst, leaky_burst), (4, 1));
//! # Ok::<(), tollgate::ConfigError>(())
//! ```
//!
//! ## Windows, concurrency, chains and statistics
//!
//! Every rate algorithm implements [`Algorithm`] (so keyed tables can keep
//! its state per key) and, bundled in a [`Bucket`], [`Limiter`]. Which one:
//!
//! | algorithm | use it when |
//! |---|---|
//! | token bucket ([`Bucket::token_bucket`]) | clients are bursty: allow a burst, then a steady rate |
//! | leaky bucket ([`Bucket::leaky_bucket`]) | the downstream wants smooth, evenly spaced traffic |
//! | fixed window ([`FixedWindow`]) | you want the cheapest "N per minute" and can accept up to 2N across a boundary |
//! | sliding window ([`SlidingWindow`]) | "N per minute" must hold in every minute (at segment resolution), fairly |
//! | concurrency ([`ConcurrencyLimiter`]) | you limit work in flight (connections, jobs), not a rate |
//!
//! A **fixed window** admits `limit` permits per aligned window in one
//! atomic word; a refusal waits only until the next boundary:
//!
//! ```
//! use core::time::Duration;
//! use tollgate::{valid, Bucket, FixedWindow, Timestamp};
//!
//! static API: Bucket<FixedWindow> =
//!     Bucket::fixed_window(valid!(FixedWindow::new(100, Duration::from_secs(60))));
//!
//! let t = Timestamp::from_secs(59);
//! assert!(API.check_n(100, t).is_ok());
//! assert_eq!(API.check(t).unwrap_err().retry_after(), Duration::from_secs(1));
//! ```
//!
//! A **sliding window** (.NET's segments) counts a permit until its segment
//! leaves the window, so no span of the window's length admits more than
//! the limit:
//!
//! ```
//! use core::time::Duration;
//! use tollgate::{Bucket, SlidingWindow, Timestamp};
//!
//! // 100 per minute, in 6 segments of 10 s.
//! let limiter = Bucket::new(SlidingWindow::<6>::new(100, Duration::from_secs(60))?);
//! assert!(limiter.check_n(100, Timestamp::from_secs(59)).is_ok());
//! // Unlike a fixed window, the next minute does not start afresh at 60 s:
//! // these permits leave the window when their segment (50..60 s) does, at 110 s.
//! let refused = limiter.check(Timestamp::from_secs(60)).unwrap_err();
//! assert_eq!(refused.retry_after(), Duration::from_secs(50));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A **concurrency limiter** bounds the permits in flight. Its permits are
//! guards that give their share back when dropped, and `acquire(n).await`
//! is woken by the release that frees them (on any executor); through a
//! reference it is a [`Limiter`] whose permit is the guard, so it chains
//! with a rate (`bucket.and(&JOBS)`, see [`ConcurrencyLimiter`]):
//!
//! ```
//! use core::num::NonZeroU32;
//! use tollgate::ConcurrencyLimiter;
//!
//! // a limit of zero cannot be written: no Result to unwrap
//! static JOBS: ConcurrencyLimiter = ConcurrencyLimiter::new(NonZeroU32::new(4).unwrap());
//! {
//!     let _permit = JOBS.try_acquire(3)?;
//!     assert!(JOBS.try_acquire(2).is_err());
//! } // dropped: the 3 permits return
//! assert_eq!(JOBS.available(), 4);
//! # Ok::<(), tollgate::Refusal>(())
//! ```
//!
//! Every limiter — a bucket, a window, a keyed table, a partitioned
//! limiter, one you write — implements one trait, [`Limiter<K>`](Limiter):
//! `try_acquire_n(&key, n, now)` returns a permit or a [`Refusal`]
//! (`K = ()` for a direct limiter; buckets also have `check(now)` without
//! a key). [`Limiter::and`] chains limiters over the same key: every member
//! must allow, and when a later one refuses, the earlier ones get their
//! permits back, so a refused request costs nothing ([`Chain`]). Wrap any
//! limiter in [`WithStats`] to count what it admitted and refused:
//!
//! ```
//! use core::time::Duration;
//! use tollgate::{Bucket, FixedWindow, Limiter, Quota, Timestamp, WithStats};
//!
//! let chain = WithStats::new(Bucket::token_bucket(Quota::per_second(100)?))
//!     .and(Bucket::new(FixedWindow::new(2, Duration::from_secs(1))?));
//! let now = Timestamp::ZERO;
//! let admitted = (0..5).filter(|_| chain.try_acquire(&(), now).is_ok()).count();
//! assert_eq!(admitted, 2);
//! let stats = chain.first().statistics(&(), now);
//! // 5 admitted by the bucket, 3 given back when the window refused
//! assert_eq!((stats.admitted, stats.refunded, stats.available), (5, 3, 98));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Refusals and snapshots
//!
//! A check returns `Ok` or a [`Refusal`]: the exact `retry_after` (and
//! [`retry_after_secs_ceil`](Refusal::retry_after_secs_ceil) for HTTP
//! `Retry-After`, never 0 for a positive wait) and the limiter's
//! [`Snapshot`] (remaining permits, time until full, limit). A request
//! larger than the bucket can ever hold is refused
//! [`never`](Refusal::is_never), not asked to wait. An admission builds
//! nothing: ask for the snapshot when you need it (for headers, say).
//!
//! ```
//! use tollgate::{Bucket, Quota, Timestamp};
//!
//! let bucket = Bucket::token_bucket(Quota::per_second(10)?.with_burst(5)?);
//! let now = Timestamp::ZERO;
//! let never = bucket.check_n(6, now).unwrap_err();
//! assert!(never.is_never());
//! assert_eq!((never.requested(), never.limit()), (6, 5));
//! // n = 0 is a peek: it changes nothing.
//! assert!(bucket.check_n(0, now).is_ok());
//! assert_eq!(bucket.snapshot(now).remaining(), 5);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A refund gives back permits of a request that a later stage refused,
//! never above the burst:
//!
//! ```
//! use tollgate::{Bucket, Quota, Timestamp};
//!
//! let bucket = Bucket::token_bucket(Quota::per_second(10)?.with_burst(2)?);
//! let now = Timestamp::ZERO;
//! assert!(bucket.check_n(2, now).is_ok());
//! bucket.refund(5, now);
//! assert_eq!(bucket.snapshot(now).remaining(), 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Keyed limiters (per client, per key)
//!
//! A keyed table gives every key (client IP, API key, sensor id) its own
//! bucket, in a table whose capacity is fixed when it is built: memory never
//! grows with traffic. Every table is a [`Limiter<K>`](Limiter) (keys by
//! reference, time as a [`Timestamp`]) with a [`KeyedTable`] side for its
//! size, eviction and reconfiguration, and is built the same way,
//! `Table::builder(algorithm)` and then its settings
//! ([`keyed::TableBuilder`]):
//!
//! - [`keyed::ShardedKeyedTable`] (feature `std`): capacity chosen at run
//!   time, allocated once, a random per-table hash seed, one shard read-lock
//!   per check; any algorithm and key type;
//! - [`keyed::LockFreeGcraTable`] (feature `std`): GCRA buckets and keys of
//!   at most 64 bits (integers, `Ipv4Addr`), no lock on the check path;
//! - [`keyed::HeaplessKeyedTable`]: the `no_std` twin (const capacity,
//!   `critical-section`, `const` builder for a `static`).
//!
//! ```
//! use tollgate::keyed::{KeyedPath, KeyedTable, OverflowPolicy, ShardedKeyedTable};
//! use tollgate::{Gcra, Limiter, Quota, Timestamp};
//!
//! let per_client = Gcra::token_bucket(Quota::per_second(10)?.with_burst(2)?);
//! let table = ShardedKeyedTable::<u32, _>::builder(per_client)
//!     .max_keys(2)
//!     .shards(1)
//!     .overflow(OverflowPolicy::Deny)
//!     .build()?;
//!
//! let now = Timestamp::ZERO;
//! assert!(table.try_acquire(&1, now).is_ok());
//! assert!(table.try_acquire(&2, now).is_ok());
//! // Full of keys that are still throttled: key 3 is refused, never are
//! // keys 1 and 2 forgotten (that would reset their limits).
//! assert_eq!(table.try_acquire(&3, now).unwrap_err().path(), KeyedPath::OverflowDenied);
//! // 100 ms later both have refilled; evicting them changes nothing, so
//! // key 3 takes a slot.
//! assert!(table.try_acquire(&3, Timestamp::from_millis(100)).is_ok());
//! assert!(table.contains(&3));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! When a full table has nothing to evict, the [`keyed::OverflowPolicy`]
//! decides: a shared overflow bucket with the default quota (default), deny,
//! or allow; every refusal says which path refused it
//! ([`Refusal::path`]). A per-key
//! quota is any `Fn(&K) -> A`. [`RateLimiter`] pairs a table with its
//! clock. See [`keyed`]
//! for the security reasoning and capacity sizing.
//!
//! ## Changing quotas while running
//!
//! A [`LiveBucket`] and every keyed table change their quota in place,
//! carrying what clients have used over by an explicit [`Inheritance`] rule
//! (keep the amount used, keep the fraction used, or reset); a
//! [`ConcurrencyLimiter`] changes its limit with `set_limit`; the HTTP layer
//! reloads its rules file keeping the buckets of unchanged rules. See
//! [`live`].
//!
//! ```
//! use tollgate::keyed::ShardedKeyedTable;
//! use tollgate::{Gcra, Inheritance, KeyedTable, Limiter, Quota, Timestamp};
//!
//! let table = ShardedKeyedTable::<u32, _>::builder(Gcra::token_bucket(Quota::per_second(10)?))
//!     .build()?;
//! let now = Timestamp::ZERO;
//! assert!(table.try_acquire_n(&7, 6, now).is_ok()); // 6 of 10 used
//! table.reconfigure(Gcra::token_bucket(Quota::per_second(20)?), Inheritance::UsedFraction, now);
//! assert_eq!(table.snapshot(&7, now).remaining(), 8); // 60 % of 20 used
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Clocks that go backwards
//!
//! A clock that jumps back (VM migration, suspend) never makes a bucket
//! admit extra. Small backwards steps (a thread whose `now` is stale) only
//! make the bucket look fuller; a jump of more than the heal threshold
//! (default 1 s) resets the bucket to "empty at now", so service resumes one
//! interval later instead of after the jump. See [`gcra`].
//!
//! ## The layers, and how the crate is built
//!
//! - [`layers`]: async waiting on firmware with embassy, queued acquisition
//!   on tokio, a fleet on Redis, the HTTP middleware.
//! - [`design`]: what is hand-written and why, and how the crate is
//!   verified.

pub mod design;
pub mod layers;

// The guide's links name the crate root's items as the root does.
#[allow(unused_imports)]
use crate::*;
