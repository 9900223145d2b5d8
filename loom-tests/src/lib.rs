//! Loom model checks of tollgate's atomic protocols.
//!
//! The models live in `tests/` and compile only under `--cfg loom`:
//!
//! ```sh
//! loom-tests/run.sh
//! # = RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 \
//! #   cargo test -p loom-tests --release --target-dir target/loom
//! ```
//!
//! This library holds what the models share, all of it plain sequential
//! code that also builds (and is unit-tested) without loom:
//!
//! - [`spec`]: a sequential reference model of the GCRA written from the
//!   design contract, used to decide what a concurrent run may return;
//! - [`orders`]: every sequential order of the threads' operations, and the
//!   outcomes the reference model gives for each, so a model can assert
//!   that what it observed is one of them (linearizability);
//! - [`tick_spec`]: the same for the 32-bit tick bucket, on the circle of
//!   ticks modulo 2³² (the models run it at 1 GHz: ticks are nanoseconds);
//! - [`live_spec`]: checks and live changes of quota ([`LiveOp`]) and every
//!   result a sequential order of them gives on the reference model;
//! - [`ops`]: one vocabulary ([`Op`], [`Outcome`]) for driving the real
//!   algorithm and the reference model alike;
//! - `keyed_model` (under `cfg(loom)` only): one vocabulary of operations
//!   for every keyed table, and what the GCRA reference model allows each
//!   key;
//! - `lock_free_protocol` (under `cfg(loom)` only): the lock-free keyed
//!   table's slot protocol on a 64-bit loom atomic, so that loom checks its
//!   orderings (the table's own 128-bit slots are a lock-based shim);
//! - a `critical-section` implementation on a loom mutex (under `cfg(loom)`
//!   only), so the `no_std` keyed table's sections are visible to loom;
//! - `model` (under `cfg(loom)` only): `loom::model` with a default
//!   preemption bound, so a bare `cargo test` under loom stays bounded too.

pub mod concurrency_spec;
pub mod live_spec;
pub mod ops;
pub mod orders;
pub mod spec;
pub mod tick_spec;
pub mod window_spec;

#[cfg(loom)]
mod critical_section_model;
#[cfg(loom)]
pub mod keyed_model;
#[cfg(loom)]
pub mod lock_free_protocol;
#[cfg(loom)]
pub mod model;

pub use concurrency_spec::{SpecConcurrency, apply_guarded};
pub use live_spec::{LiveOp, LiveRun, live_admitted, live_check, live_runs};
pub use ops::{
    Op, Outcome, admitted, admitted_and_refunded_since, admitted_by_all, apply, apply_all,
    clock_bound, drain, refunded,
};
pub use orders::{Observed, Run, SpecLimiter, interleavings, sequential_outcomes, sequential_runs};
pub use spec::SpecBucket;
pub use tick_spec::SpecTick;
pub use window_spec::{SpecFixedWindow, SpecSlidingWindow};

use core::time::Duration;

use tollgate::{Gcra, Quota};

/// A token bucket with interval `interval` ns and burst `burst`, for models.
///
/// # Panics
/// If the quota is invalid (a bug in the model, not in tollgate).
#[must_use]
pub fn token_bucket(interval: u64, burst: u32) -> Gcra {
    let quota = Quota::new(1, Duration::from_nanos(interval))
        .and_then(|q| q.with_burst(burst))
        .expect("valid model quota");
    Gcra::token_bucket(quota)
}

/// A strict-pacing leaky bucket with interval `interval` ns accepting
/// weights up to `max_weight` (its burst), for models.
///
/// # Panics
/// If the quota is invalid (a bug in the model, not in tollgate).
#[must_use]
pub fn leaky_bucket(interval: u64, max_weight: u32) -> Gcra {
    let quota = Quota::new(1, Duration::from_nanos(interval))
        .and_then(|q| q.with_burst(max_weight))
        .expect("valid model quota");
    Gcra::leaky_bucket(quota)
}

/// The [`Timestamp`](tollgate::Timestamp) `ns` nanoseconds after the
/// origin: the models write their clock readings as small nanosecond
/// counts.
#[must_use]
pub const fn t(ns: u64) -> tollgate::Timestamp {
    tollgate::Timestamp::from_nanos(ns)
}

/// `check_n(n, now)`.
#[must_use]
pub const fn check(n: u32, now: u64) -> Op {
    Op::Check { n, now }
}

/// `refund(n, now)`, unconditionally.
#[must_use]
pub const fn refund(n: u32, now: u64) -> Op {
    Op::Refund { n, now }
}

/// `refund(n, now)` if the thread's previous operation was admitted.
#[must_use]
pub const fn refund_if_allowed(n: u32, now: u64) -> Op {
    Op::RefundIfAllowed { n, now }
}
