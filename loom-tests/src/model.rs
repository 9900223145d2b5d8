//! Running loom models with a bounded search (only under `cfg(loom)`).

use loom::sync::Arc;
use tollgate::{Algorithm, Gcra, GcraState};

use crate::ops::{apply, Op, Outcome};
use crate::orders::{sequential_outcomes, Observed};
use crate::spec::SpecBucket;

/// Preemption bound used when `LOOM_MAX_PREEMPTIONS` is not set, so that a
/// plain `cargo test` under `--cfg loom` stays bounded. Loom's own default
/// is unbounded, which for three threads with retry loops takes hours.
pub const DEFAULT_MAX_PREEMPTIONS: usize = 3;

/// Explores every interleaving of `f` (up to the preemption bound from
/// `LOOM_MAX_PREEMPTIONS`, or [`DEFAULT_MAX_PREEMPTIONS`]).
pub fn check<F>(f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(DEFAULT_MAX_PREEMPTIONS);
    }
    builder.check(f);
}

/// Inside a model: a fresh state for `gcra`, brought forward by running
/// `setup` sequentially, then `threads` run concurrently (all but the last
/// on spawned loom threads, the last on the model's main thread).
/// Returns each thread's outcomes and the final theoretical arrival time.
pub fn run_gcra(gcra: Gcra, setup: &[Op], threads: &[Vec<Op>]) -> Observed {
    let state = Arc::new(gcra.new_state());
    for &op in setup {
        let _ = apply(&gcra, &state, op);
    }
    let Some((last, spawned)) = threads.split_last() else {
        return Observed {
            outcomes: Vec::new(),
            tat: u128::from(state.tat()),
        };
    };
    let handles: Vec<_> = spawned
        .iter()
        .map(|ops| {
            let state = Arc::clone(&state);
            let ops = ops.clone();
            loom::thread::spawn(move || run_ops(&gcra, &state, &ops))
        })
        .collect();
    let mine = run_ops(&gcra, &state, last);
    let mut outcomes: Vec<Vec<Outcome>> = handles
        .into_iter()
        .map(|h| h.join().expect("model thread panicked"))
        .collect();
    outcomes.push(mine);
    Observed {
        outcomes,
        tat: u128::from(state.tat()),
    }
}

fn run_ops(gcra: &Gcra, state: &GcraState, ops: &[Op]) -> Vec<Outcome> {
    ops.iter().map(|&op| apply(gcra, state, op)).collect()
}

/// Model-checks that `threads` running concurrently on a `gcra` bucket
/// (after `setup`) always produce a result that some sequential order of
/// the same operations produces in the reference model, and that
/// `extra(observed)` holds for every interleaving.
pub fn assert_linearizable<X>(gcra: Gcra, setup: Vec<Op>, threads: Vec<Vec<Op>>, extra: X)
where
    X: Fn(&Observed) + Sync + Send + 'static,
{
    let mut start = SpecBucket::like(&gcra);
    for &op in &setup {
        let _ = start.apply(op);
    }
    let allowed = sequential_outcomes(start, &threads);
    check(move || {
        let observed = run_gcra(gcra, &setup, &threads);
        assert!(
            allowed.contains(&observed),
            "no sequential order of {threads:?} after {setup:?} gives {observed:?}; \
             sequential outcomes: {allowed:?}"
        );
        extra(&observed);
    });
}
