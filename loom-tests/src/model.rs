//! Running loom models with a bounded search (only under `cfg(loom)`).

use loom::sync::Arc;
use tollgate::{Algorithm, Gcra, GcraState};

use crate::ops::{apply_all, Op};
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
/// Returns each thread's outcomes with the final theoretical arrival time,
/// and the state itself for further (sequential) probing.
pub fn run_gcra(gcra: Gcra, setup: &[Op], threads: &[Vec<Op>]) -> (Observed, Arc<GcraState>) {
    let state = Arc::new(gcra.new_state());
    let _ = apply_all(&gcra, &state, setup);
    let mut outcomes = Vec::with_capacity(threads.len());
    if let Some((last, spawned)) = threads.split_last() {
        let handles: Vec<_> = spawned
            .iter()
            .map(|ops| {
                let state = Arc::clone(&state);
                let ops = ops.clone();
                loom::thread::spawn(move || apply_all(&gcra, &state, &ops))
            })
            .collect();
        let mine = apply_all(&gcra, &state, last);
        outcomes.extend(
            handles
                .into_iter()
                .map(|h| h.join().expect("model thread panicked")),
        );
        outcomes.push(mine);
    }
    let observed = Observed {
        outcomes,
        tat: u128::from(state.tat()),
    };
    (observed, state)
}

/// Model-checks that `threads` running concurrently on a `gcra` bucket
/// (after `setup`) always produce a result that some sequential order of
/// the same operations produces in the reference model, and that
/// `extra(observed, state)` holds for every interleaving (it runs after
/// all threads have finished and may probe the state further).
pub fn assert_linearizable<X>(gcra: Gcra, setup: Vec<Op>, threads: Vec<Vec<Op>>, extra: X)
where
    X: Fn(&Observed, &GcraState) + Sync + Send + 'static,
{
    let mut start = SpecBucket::like(&gcra);
    let mut previous = None;
    for &op in &setup {
        previous = Some(start.apply(op, previous));
    }
    let allowed = sequential_outcomes(start, &threads);
    check(move || {
        let (observed, state) = run_gcra(gcra, &setup, &threads);
        assert!(
            allowed.contains(&observed),
            "no sequential order of {threads:?} after {setup:?} gives {observed:?}; \
             sequential outcomes: {allowed:?}"
        );
        extra(&observed, &state);
    });
}
