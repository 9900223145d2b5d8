//! Operations on a limiter, and what they returned.

use tollgate::{Algorithm, Refusal, Timestamp};

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
    /// `refund(n, now)`, unconditionally (it may give back permits the
    /// caller never took: an over-refund).
    Refund {
        /// Permits given back.
        n: u32,
        /// The caller's clock reading, in nanoseconds.
        now: u64,
    },
    /// `refund(n, now)` only if the same thread's previous operation was
    /// admitted: the chain pattern (take, then give back when a later
    /// stage refuses).
    RefundIfAllowed {
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
            Op::Check { now, .. } | Op::Refund { now, .. } | Op::RefundIfAllowed { now, .. } => now,
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
    /// A refund that was made (it returns nothing).
    Refunded,
    /// A [`Op::RefundIfAllowed`] skipped because the previous operation
    /// was not admitted.
    Skipped,
    /// A change of configuration was made (it returns nothing).
    Reconfigured,
}

impl Outcome {
    /// The outcome of a check: an admission (whatever it returned on
    /// admission, the algorithm's full-again instant or nothing), a
    /// refusal with its exact wait, or a refusal that can never succeed.
    #[must_use]
    pub fn of_check<T>(result: Result<T, Refusal<'_>>) -> Self {
        match result {
            Ok(_) => Outcome::Allowed,
            Err(refusal) if refusal.is_never() => Outcome::Exceeded,
            Err(refusal) => Outcome::Denied {
                retry_after: refusal.retry_after_nanos(),
            },
        }
    }

    /// True for [`Outcome::Allowed`].
    #[must_use]
    pub const fn is_allowed(&self) -> bool {
        matches!(self, Outcome::Allowed)
    }
}

/// Runs `op` on the real algorithm `alg` and its `state`; `previous` is
/// what the same thread's previous operation returned (if any).
pub fn apply<A: Algorithm>(
    alg: &A,
    state: &A::State,
    op: Op,
    previous: Option<Outcome>,
) -> Outcome {
    match op {
        Op::Check { n, now } => {
            Outcome::of_check(alg.check_n(state, n, Timestamp::from_nanos(now)))
        }
        Op::RefundIfAllowed { .. } if previous != Some(Outcome::Allowed) => Outcome::Skipped,
        Op::Refund { n, now } | Op::RefundIfAllowed { n, now } => {
            alg.refund(state, n, Timestamp::from_nanos(now));
            Outcome::Refunded
        }
    }
}

/// Runs one thread's `ops` in order on the real algorithm.
pub fn apply_all<A: Algorithm>(alg: &A, state: &A::State, ops: &[Op]) -> Vec<Outcome> {
    let mut outcomes: Vec<Outcome> = Vec::with_capacity(ops.len());
    for &op in ops {
        let previous = outcomes.last().copied();
        outcomes.push(apply(alg, state, op, previous));
    }
    outcomes
}

/// Permits given back by refunds that were made.
#[must_use]
pub fn refunded(ops: &[Op], outcomes: &[Outcome]) -> u64 {
    ops.iter()
        .zip(outcomes)
        .map(|(op, out)| match (op, out) {
            (Op::Refund { n, .. } | Op::RefundIfAllowed { n, .. }, Outcome::Refunded) => {
                u64::from(*n)
            }
            _ => 0,
        })
        .sum()
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

/// Takes single permits at `now` until refused; returns how many were
/// admitted (at most `capacity + 1` attempts, so it always ends).
pub fn drain<A: Algorithm>(alg: &A, state: &A::State, now: u64) -> u64 {
    let now = Timestamp::from_nanos(now);
    let mut taken = 0;
    for _ in 0..=alg.capacity() {
        if alg.check_n(state, 1, now).is_ok() {
            taken += 1;
        } else {
            break;
        }
    }
    taken
}

/// Permits admitted and permits refunded (as asked) by those operations
/// of `ops[t]` (with `outcomes[t]`) whose `now` is at least `since`.
#[must_use]
pub fn admitted_and_refunded_since(
    ops: &[Vec<Op>],
    outcomes: &[Vec<Outcome>],
    since: u64,
) -> (u64, u64) {
    let (late_ops, late_outcomes): (Vec<Op>, Vec<Outcome>) = ops
        .iter()
        .zip(outcomes)
        .flat_map(|(o, out)| o.iter().copied().zip(out.iter().copied()))
        .filter(|(op, _)| op.now() >= since)
        .unzip();
    (
        admitted(&late_ops, &late_outcomes),
        refunded(&late_ops, &late_outcomes),
    )
}
