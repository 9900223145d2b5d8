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
