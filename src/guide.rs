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
//! Use `default-features = false`.
//!
//! **From an interrupt handler, use a tick bucket.** `tollgate::tick` is the
//! same token or leaky bucket with its state in one `u32` of ticks of your
//! timer (4 bytes of RAM), changed by native compare-and-swap where the chip
//! has it (`LDREX`/`STREX` on thumbv7m/thumbv7em, `LR.W`/`SC.W` on RISC-V
//! with `A`) and by `critical_section::with` where it has none (thumbv6m,
//! riscv32imc: the firmware provides the critical section, e.g. cortex-m's
//! `critical-section-single-core`). It is interrupt-safe on every target, and
//! it never goes through portable-atomic. Ticks wrap; a bucket reads exactly
//! as long as it was written less than `2³² − (burst·T + heal threshold)`
//! ticks ago (71 minutes at 1 MHz, 36 hours at 32 768 Hz), and beyond that
//! can only refuse, never over-admit (the `tick` module has the proof).
//!
//! **The 64-bit states** (`Gcra`, `FixedWindow`, `LiveBucket`, the keyed
//! tables' buckets) use portable-atomic's `AtomicU64`. tollgate enables its
//! `fallback` feature and nothing else; what a chip without 64-bit atomics
//! gets is up to your binary (portable-atomic 1.15, `src/imp/mod.rs`):
//!
//! | target | your binary adds | 64-bit state from an interrupt handler |
//! |---|---|---|
//! | thumbv6m-none-eabi, riscv32imc-unknown-none-elf (no compare-and-swap) | required: portable-atomic's `critical-section` feature plus an implementation, or `unsafe-assume-single-core` (feature, or `--cfg portable_atomic_unsafe_assume_single_core` in `RUSTFLAGS`) on a single-core chip | safe with either |
//! | thumbv7m-none-eabi, thumbv7em-none-eabi(hf), riscv32imac-unknown-none-elf (32-bit compare-and-swap) | nothing: portable-atomic's lock table (global spin locks, about 2 KiB of RAM) | **not safe**: an interrupt that meets a lock held by the code it interrupted spins forever. portable-atomic's `critical-section` feature changes nothing on these targets (it is used only where there is no compare-and-swap). Safe with `unsafe-assume-single-core` (interrupts masked instead; single core, privileged code) or `unsafe-assume-privileged` (the lock table with interrupts masked) |
//! | x86_64, aarch64, i686, wasm32 | nothing (native 64-bit atomics) | safe |
//!
//! Every limiter, state and table implements `tollgate::LockFreedom`, whose
//! `IS_LOCK_FREE` and `IS_INTERRUPT_SAFE` constants say the above for the
//! build at hand: assert them (`const _: () =
//! assert!(<Bucket<Gcra> as LockFreedom>::IS_INTERRUPT_SAFE);`) and a build
//! that could deadlock does not compile. The `lock_freedom` module documents
//! every type on every target. (portable-atomic's `unsafe-assume-privileged`
//! *feature* is invisible to tollgate, so with it the constant errs on the
//! safe side; its `--cfg` form is seen.) The sliding window takes a spin lock
//! on every target: never share one with an interrupt handler.
//!
//! CI builds the library with `cargo build --no-default-features --target T`
//! for thumbv6m and riscv32imc (with `--cfg
//! portable_atomic_unsafe_assume_single_core`) and thumbv7em.
//!
//! A 64-bit bucket's state is 8 bytes. A `static Bucket<Gcra>` keeps its
//! configuration next to it, and a `static` with atomics is placed in RAM
//! whole (56 bytes); a `BucketRef` keeps the configuration in a read-only
//! `static` (flash) and costs exactly the 8 bytes of RAM:
//!
//! ```
//! use tollgate::{valid, Bucket, BucketRef, Gcra, GcraState, Quota};
//! const QUOTA: Quota = valid!(Quota::per_second(50));            // checked at compile time
//! static RADIO: Bucket<Gcra> = Bucket::leaky_bucket(QUOTA); // 56 bytes of RAM
//! static UPLINK_CONFIG: Gcra = Gcra::token_bucket(QUOTA);    // flash
//! static UPLINK_STATE: GcraState = GcraState::new();         // 8 bytes of RAM
//! static UPLINK: BucketRef<'static, Gcra> = BucketRef::new(&UPLINK_CONFIG, &UPLINK_STATE);
//! ```
//!
//! `examples/firmware` (its own crate, outside the workspace) runs these
//! buckets, a keyed table and an interrupt hammer test on three Cortex-M
//! machines under QEMU and checks every admission from inside the firmware;
//! its README describes each check and shows the output.
//!
//! ### Size
//!
//! What one token bucket adds to a firmware image (release, opt-level "s",
//! LTO; `examples/firmware/size-probe.sh [target]` builds the size probe with
//! the bucket and with a no-op limiter in its place and compares `llvm-size -A`):
//!
//! | bucket, target, atomics | `.text` | RAM (`.data` + `.bss`) |
//! |---|---|---|
//! | tick bucket (`size-probe.sh T tick`), thumbv7em-none-eabihf | **+52 bytes** | **4 bytes** (the `TickState`) |
//! | tick bucket, thumbv7m-none-eabi | +52 bytes | 4 bytes |
//! | tick bucket, thumbv6m-none-eabi (critical section) | +72 bytes | 4 bytes |
//! | 64-bit, thumbv7em-none-eabihf, `unsafe-assume-single-core` | +344 bytes | +8 bytes (the `GcraState`) |
//! | 64-bit, thumbv6m-none-eabi, `critical-section` | +468 bytes | +8 bytes |
//! | 64-bit, thumbv7m-none-eabi, `fallback` lock table | +708 bytes | +2176 bytes: 8 for the bucket, 2144 for portable-atomic's lock table (once per image), 24 alignment |
//!
//! The tick probe calls `check_ticks` with the low 32 bits of embassy's tick
//! count (its `.bss` total did not grow: the 4-byte state filled alignment
//! padding; the script lists the probe's own statics). The 64-bit probe checks
//! the bucket with `Algorithm::check_n` on `EmbassyClock` time; each further
//! bucket adds its 8 (or 4) bytes of state. Waiting costs more:
//! with `size-probe.sh thumbv7em-none-eabihf acquire` (the bucket awaited with
//! `acquire(1).await`, against a plain `Timer` for the no-op) the bucket and
//! its waiter add 1872 bytes of `.text` and 48 bytes of RAM (the 8-byte state
//! plus the 40-byte wait future inside the task). 932 of those bytes are
//! compiler-builtins' 64-bit division, which converting a wait back to ticks
//! needs at 32 768 Hz and which most firmware already links for other
//! reasons.
//!
//! A keyed table costs more code, since it brings a hash map, eviction and
//! the overflow bucket: `size-probe.sh T keyed` swaps the bucket for a
//! `static HeaplessKeyedTable<u8, Gcra, 8>` checked with 16 keys taking
//! turns.
//!
//! | target, atomics | `.text` | RAM (`.data` + `.bss`) |
//! |---|---|---|
//! | thumbv7em-none-eabihf, `unsafe-assume-single-core` | +3628 bytes | +256 bytes |
//! | thumbv6m-none-eabi, `critical-section` | +3988 bytes | +256 bytes |
//!
//! The 256 bytes are the whole table for 8 keys (the map with its 8 slots
//! and index, the sweep hint, the default configuration and the shared
//! overflow bucket); its initial value is not all zeros, so it sits in
//! `.data` and its initializer takes the same 256 bytes of flash. The
//! whole checking firmware, keyed checks included, is 32–34 KB of `.text`
//! (mostly semihosting formatting).
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
//! an error at once; `.with_timeout(..)` / `.with_deadline(..)` bound it:
//!
//! ```
//! # #[cfg(feature = "embassy")] {
//! use tollgate::embassy::{self, WaitError};
//! use tollgate::{valid, Bucket, Gcra, Quota};
//!
//! static UPLINK: Bucket<Gcra> = Bucket::token_bucket(valid!(Quota::per_second(20)));
//!
//! async fn publish() -> Result<(), WaitError> {
//!     embassy::acquire(&UPLINK, &(), 1).await?;
//!     // ... send one telemetry frame ...
//!     Ok(())
//! }
//! # embassy_futures::block_on(publish()).unwrap();
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
//! `RateLimit-Policy` / `RateLimit` fields; policies can queue instead of
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
//!
//! ## What is hand-written, and why
//!
//! tollgate leans on well-kept crates where one serves: `portable-atomic`
//! (64- and 128-bit atomics on every target), `critical-section`,
//! `heapless` (the `no_std` table's map and its FNV hash), `humantime`
//! (durations in config files), `ipnet` (trusted-proxy networks),
//! `siphasher` and `sha2` (key digests), `serde`, `toml` and `serde_json`
//! (rules files), `redis`, `tokio`, tower's traits. What remains written
//! here, and why:
//!
//! | piece | where | why not a crate |
//! |---|---|---|
//! | the GCRA step, windows, concurrency limiter, tick buckets, and the same GCRA in Lua for Redis | [`gcra`], [`window`], [`concurrency`], [`tick`], `redis` | they are the crate: exact arithmetic (thirds of a nanosecond, 32-bit wrap rules), one atomic word, `const` constructors, loom-checked, with one contract for the in-process and the Redis versions |
//! | `X-Forwarded-For` / `Forwarded` parsing | `http` (client IP) | the client IP must be the right-most address that is not a trusted proxy (`ipnet` networks), read without allocating; it is a few short functions, fuzzed (`fuzz/`, target `forwarded_headers`). The closest crate found, `trusted-proxies` (0.3, first released in 2025), also extracts host and scheme under its own configuration type |
//! | the `Retry-After`, `RateLimit-Policy` and `RateLimit` values | `http` (headers) | a few integers and tokens per response, written into a stack buffer so that the refusal path builds no `String`; the HTTP tests parse the values the server sends with the `sfv` crate (RFC 8941), so the output is held to a real parser |
//! | path-prefix routing | `http` (routing) | prefixes that are segment-bounded, ASCII case-insensitive, longest first across every policy: router crates (matchit and others) match whole routes with parameters, case-sensitively; fuzzed (`prefix_routing`) |
//! | the waiting lines of `queue::Queue` | `queue` | a slab-backed doubly linked list per key, touched only under the queue's mutex: O(1) cancellation of any waiter, O(peak waiters) memory; a lock-free intrusive list would need `unsafe`, which the crate forbids |
//! | the waker set of the concurrency limiter | [`concurrency`] | one type for `std` (grows) and `no_std` (fixed slots in a critical section, with generations so a cancelled waiter never clears a newer one) |
//! | the sliding window's spin lock | [`window`] | a few instructions around `S + 1` words, in `no_std`, through the crate's atomics so loom checks it; documented as not interrupt-safe |
//! | the Redis refusal cache | `redis` | a direct-mapped array of fixed size whose entries expire at their refusal's deadline, allocated once; general cache crates (moka, lru) size and evict by their own rules |
//!
//! ## Verification
//!
//! Beyond unit, doc and property tests, every atomic protocol is model
//! checked with [loom](https://docs.rs/loom) in the `loom-tests` workspace
//! crate: all interleavings of 2–3 threads whose clock readings reach the
//! limiter out of order. For the GCRA buckets the models show that no
//! interleaving admits more than `capacity + ⌊span / T⌋`, that concurrent
//! checks and refunds always equal some sequential order, that a refund
//! never lifts a bucket above its burst, and that a stale `now` under the
//! heal threshold grants nothing. For the 32-bit tick buckets they show
//! that checks and refunds racing across the 2³² wrap, callers stale
//! within the heal threshold and reads at the edge of the idle horizon
//! always equal a sequential run of a wrapping reference model and never
//! admit more than `capacity + ⌊span / T⌋` of the unwrapped clock. For the
//! fixed and sliding windows they
//! show that the window of the latest reading never admits more than its
//! limit across boundary races, stale callers and refunds, and that every
//! run equals some sequential order; for the concurrency limiter, that the
//! permits held never exceed the limit, that each dropped, partly released
//! or detached permit is returned exactly once, and that a waiter is never
//! left asleep by a release; for a chain, that a refused request leaves its
//! first member as the direct traffic alone would; for [`WithStats`], that
//! the counters equal what the callers saw. For the keyed tables (sharded,
//! lock-free and `no_std`) they show that callers seeing a key for the
//! first time at once create one state for it, that evicting a key while
//! stale checks of it race never admits it beyond its quota, that a
//! throttled key is never evicted to make room, and that each overflow
//! policy keeps its promise under racing inserts; for live reconfiguration,
//! that no check racing a quota change acts on a state of one quota with
//! the other. Every atomic type, and every lock of the keyed tables, is
//! named in one module, so a `--cfg loom` build swaps all of them for
//! loom's; a guard model fails if that ever stops being true. Run it with
//! `loom-tests/run.sh` (74 model tests at 3 preemptions: about 37 s of
//! model checking on 2 shared cores, 32 s of it the keyed tables;
//! `loom-tests/README.md` explains how to add a model for a new atomic
//! type).
//!
//! Property tests (proptest) hold both buckets to a reference model written
//! as a plain credit counter (`tests/model.rs`: identical decisions, the
//! `burst + ⌊t/T⌋` bound over every window, random non-monotonic clocks,
//! extreme values), and the loom suite's sequential reference models to the
//! real types. `scripts/test.sh` runs every test;
//! `examples/firmware/run-qemu.sh` runs the firmware under QEMU.

// The guide's links name the crate root's items as the root does.
#[allow(unused_imports)]
use crate::*;
