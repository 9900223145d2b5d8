//! How the crate is built: what is hand-written and why, and how it is
//! verified.
//!
//! ## What is hand-written, and why
//!
//! tollgate leans on well-kept crates where one serves: `portable-atomic`
//! (64- and 128-bit atomics on every target), `critical-section`,
//! `heapless` (the `no_std` table's map and its FNV hash), `ipnet`
//! (trusted-proxy networks),
//! `siphasher` and `sha2` (key digests), `serde`, `toml` and `serde_json`
//! (rules files), `redis`, `tokio`, tower's traits. What remains written
//! here, and why:
//!
//! | piece | where | why not a crate |
//! |---|---|---|
//! | the GCRA step, windows, concurrency limiter, tick buckets, and the same GCRA in Lua for Redis | [`gcra`], [`window`], [`concurrency`], [`tick`], `redis` | they are the crate: exact arithmetic (thirds of a nanosecond, 32-bit wrap rules), one atomic word, `const` constructors, loom-checked, with one contract for the in-process and the Redis versions |
//! | `X-Forwarded-For` / `Forwarded` parsing | `http` (client IP) | the client IP must be the right-most address that is not a trusted proxy (`ipnet` networks), read without allocating; it is a few short functions, fuzzed (`fuzz/`, target `forwarded_headers`). The closest crate found, `trusted-proxies` (0.3, first released in 2025), also extracts host and scheme under its own configuration type |
//! | the `Retry-After`, `RateLimit-Policy` and `RateLimit` values | `http` (headers) | a few integers and tokens per response, written into a stack buffer so that the refusal path builds no `String`; the HTTP tests parse the values the server sends with the `sfv` crate (RFC 8941), so the output is held to a real parser |
//! | durations in rules files | `http::config` | five lower-case units (`ms`, `s`, `m`, `h`, `d`), whole numbers, largest first: a general parser (humantime, used before) reads `"1M"` as a month and `"1m"` as a minute, so a case typo loosened a limit 43,830 times; the strict grammar is some 40 lines, unit-tested and fuzzed (`rules_file`) |
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
//! as a plain credit counter (`tests/core/model.rs`: identical decisions, the
//! `burst + ⌊t/T⌋` bound over every window, random non-monotonic clocks,
//! extreme values), and the loom suite's sequential reference models to the
//! real types. `scripts/test.sh` runs every test;
//! `examples/firmware/run-qemu.sh` runs the firmware under QEMU.

// The guide's links name the crate root's items as the root does.
#[allow(unused_imports)]
use crate::*;
