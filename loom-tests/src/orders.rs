//! Sequential orders of concurrent operations.
//!
//! A concurrent run is correct (linearizable) if what every thread observed,
//! and the final state, equal what *some* sequential execution gives: one
//! that runs all operations one at a time, each thread's in its program
//! order. With 2–3 threads of 1–2 operations there are at most a few dozen
//! such orders, so the models simply enumerate them all.

use std::collections::HashSet;

use crate::ops::{Op, Outcome};
use crate::spec::SpecBucket;

/// What a run produced: each thread's outcomes in program order, and the
/// bucket's final theoretical arrival time.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Observed {
    /// `outcomes[t][i]` is what thread `t`'s `i`-th operation returned.
    pub outcomes: Vec<Vec<Outcome>>,
    /// The final theoretical arrival time.
    pub tat: u128,
}

/// Every interleaving of the threads' operations that keeps each thread's
/// program order, as a sequence of `(thread, index)` pairs. Generic over
/// the operation type, so models of other limiters can reuse it.
#[must_use]
pub fn interleavings<T>(threads: &[Vec<T>]) -> Vec<Vec<(usize, usize)>> {
    fn extend<T>(
        threads: &[Vec<T>],
        next: &mut [usize],
        prefix: &mut Vec<(usize, usize)>,
        out: &mut Vec<Vec<(usize, usize)>>,
    ) {
        let mut any = false;
        for t in 0..threads.len() {
            if next[t] < threads[t].len() {
                any = true;
                prefix.push((t, next[t]));
                next[t] += 1;
                extend(threads, next, prefix, out);
                next[t] -= 1;
                prefix.pop();
            }
        }
        if !any {
            out.push(prefix.clone());
        }
    }
    let mut out = Vec::new();
    let mut next = vec![0; threads.len()];
    extend(threads, &mut next, &mut Vec::new(), &mut out);
    out
}

/// The set of results the reference model allows when `threads` run
/// concurrently on a bucket that starts as `start`.
#[must_use]
pub fn sequential_outcomes(start: SpecBucket, threads: &[Vec<Op>]) -> HashSet<Observed> {
    interleavings(threads)
        .into_iter()
        .map(|order| {
            let mut bucket = start;
            let mut outcomes: Vec<Vec<Outcome>> = threads
                .iter()
                .map(|ops| vec![Outcome::Refunded; ops.len()])
                .collect();
            for (t, i) in order {
                let previous = i.checked_sub(1).map(|p| outcomes[t][p]);
                outcomes[t][i] = bucket.apply(threads[t][i], previous);
            }
            Observed {
                outcomes,
                tat: bucket.tat(),
            }
        })
        .collect()
}

/// A sequential reference model of any limiter, driven by [`Op`]s: what
/// the generic linearizability check ([`sequential_runs`]) needs.
pub trait SpecLimiter: Clone + std::fmt::Debug {
    /// Applies `op` and returns what the contract says it returns;
    /// `previous` is what the same thread's previous operation returned.
    fn apply(&mut self, op: Op, previous: Option<Outcome>) -> Outcome;

    /// `(remaining, reset_after_nanos)` at `now`, changing nothing.
    fn snapshot(&self, now: u64) -> (u32, u64);
}

/// What a run of a limiter produced: each thread's outcomes in program
/// order, and the limiter's snapshots at some probe instants afterwards
/// (its observable end state).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Run {
    /// `outcomes[t][i]` is what thread `t`'s `i`-th operation returned.
    pub outcomes: Vec<Vec<Outcome>>,
    /// `(remaining, reset_after_nanos)` at each probe instant.
    pub end: Vec<(u32, u64)>,
}

/// The set of runs `spec` allows when `threads` run concurrently on a
/// limiter that starts as `start`, its end state read at `probes`.
#[must_use]
pub fn sequential_runs<S: SpecLimiter>(
    start: &S,
    threads: &[Vec<Op>],
    probes: &[u64],
) -> HashSet<Run> {
    interleavings(threads)
        .into_iter()
        .map(|order| {
            let mut spec = start.clone();
            let mut outcomes: Vec<Vec<Outcome>> = threads
                .iter()
                .map(|ops| vec![Outcome::Refunded; ops.len()])
                .collect();
            for (t, i) in order {
                let previous = i.checked_sub(1).map(|p| outcomes[t][p]);
                outcomes[t][i] = spec.apply(threads[t][i], previous);
            }
            Run {
                outcomes,
                end: probes.iter().map(|&t| spec.snapshot(t)).collect(),
            }
        })
        .collect()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::interleavings;
    use crate::ops::Op;

    fn factorial(n: usize) -> usize {
        (1..=n).product()
    }

    #[test]
    fn interleavings_are_all_distinct_order_preserving_merges() {
        let op = |now| Op::Check { n: 1, now };
        for lens in [
            vec![1, 1],
            vec![2, 1],
            vec![2, 2],
            vec![1, 1, 1],
            vec![2, 1, 2],
        ] {
            let threads: Vec<Vec<Op>> = lens
                .iter()
                .map(|&len| (0..len).map(|i| op(i as u64)).collect())
                .collect();
            let all = interleavings(&threads);
            // multinomial coefficient: (Σ len)! / Π len!
            let total: usize = lens.iter().sum();
            let expected = factorial(total) / lens.iter().map(|&l| factorial(l)).product::<usize>();
            assert_eq!(all.len(), expected, "lens {lens:?}");
            let distinct: std::collections::HashSet<_> = all.iter().collect();
            assert_eq!(distinct.len(), all.len());
            for order in &all {
                assert_eq!(order.len(), total);
                for (t, &len) in lens.iter().enumerate() {
                    let mine: Vec<usize> = order
                        .iter()
                        .filter(|(th, _)| *th == t)
                        .map(|&(_, i)| i)
                        .collect();
                    assert_eq!(mine, (0..len).collect::<Vec<_>>());
                }
            }
        }
    }
}
