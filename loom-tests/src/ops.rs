//! Operations on a limiter, and what they returned.

use tollgate::{Algorithm, Decision};

/// One operation a thread performs on a bucket, with the `now` it read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `check_n(n, now)`.
    Check {
        /// Permits requested.
        n: u32,
        /// The caller's clock reading, in nanoseconds.
        now: u64,
    },
    /// `refund(n, now)`.
    Refund {
        /// Permits given back.
        n: u32,
        /// The caller's clock reading, in nanoseconds.
        now: u64,
    },
}

impl Op {
    /// The `now` this operation was made with.
    #[must_use]
    pub const fn now(&self) -> u64 {
        match *self {
            Op::Check { now, .. } | Op::Refund { now, .. } => now,
        }
    }
}

/// What one operation returned, reduced to what the contract pins down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// `n` permits were taken (or `n = 0` peeked).
    Allowed,
    /// Refused; the same request would succeed after `retry_after` ns.
    Denied {
        /// The refusal's exact wait in nanoseconds.
        retry_after: u64,
    },
    /// `n` is larger than the bucket can ever hold.
    Exceeded,
    /// A refund (it returns nothing).
    Refunded,
}

impl Outcome {
    /// The outcome of a check.
    #[must_use]
    pub fn of_check(result: Result<Decision, tollgate::CapacityExceeded>) -> Self {
        match result {
            Ok(Decision::Allowed(_)) => Outcome::Allowed,
            Ok(Decision::Denied(denied)) => Outcome::Denied {
                retry_after: denied.retry_after_nanos(),
            },
            Err(_) => Outcome::Exceeded,
        }
    }

    /// True for [`Outcome::Allowed`].
    #[must_use]
    pub const fn is_allowed(&self) -> bool {
        matches!(self, Outcome::Allowed)
    }
}

/// Runs `op` on the real algorithm `alg` and its `state`.
pub fn apply<A: Algorithm>(alg: &A, state: &A::State, op: Op) -> Outcome {
    match op {
        Op::Check { n, now } => Outcome::of_check(alg.check_n(state, n, now)),
        Op::Refund { n, now } => {
            alg.refund(state, n, now);
            Outcome::Refunded
        }
    }
}

/// Permits admitted by `ops` given their `outcomes` (peeks count 0).
#[must_use]
pub fn admitted(ops: &[Op], outcomes: &[Outcome]) -> u64 {
    ops.iter()
        .zip(outcomes)
        .map(|(op, out)| match (op, out) {
            (Op::Check { n, .. }, Outcome::Allowed) => u64::from(*n),
            _ => 0,
        })
        .sum()
}

/// The design's safety bound for a bucket that starts full: over the span
/// of clock readings `nows`, at most `capacity + ⌊(max − min) / T⌋` permits
/// (capacity = burst, or the largest weight for a leaky bucket).
#[must_use]
pub fn clock_bound(capacity: u32, interval: u64, nows: impl IntoIterator<Item = u64>) -> u64 {
    let (lo, hi) = nows
        .into_iter()
        .fold((u64::MAX, 0), |(lo, hi), t| (lo.min(t), hi.max(t)));
    let span = hi.saturating_sub(lo);
    u64::from(capacity) + span / interval.max(1)
}

/// Total permits admitted across threads: `ops[t]` with `outcomes[t]`.
#[must_use]
pub fn admitted_by_all(ops: &[Vec<Op>], outcomes: &[Vec<Outcome>]) -> u64 {
    ops.iter()
        .zip(outcomes)
        .map(|(o, out)| admitted(o, out))
        .sum()
}
