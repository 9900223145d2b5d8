//! Running loom models with a bounded search (only under `cfg(loom)`).

use loom::sync::Arc;
use tollgate::{Algorithm, Gcra, GcraState};

use crate::ops::{Op, Outcome, admitted_and_refunded_since, apply_all, drain};
use crate::orders::{Observed, Run, SpecLimiter, sequential_outcomes, sequential_runs};
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
        tat: u128::from(state.tat(&gcra).as_nanos()),
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

/// Inside a model: `threads` run concurrently on `state` with algorithm
/// `alg` (all but the last on spawned loom threads, the last on the
/// model's main thread). Returns each thread's outcomes.
pub fn run_threads<A>(alg: A, state: &Arc<A::State>, threads: &[Vec<Op>]) -> Vec<Vec<Outcome>>
where
    A: Algorithm + Copy + Send + Sync + 'static,
    A::State: Send + Sync + 'static,
{
    let mut outcomes = Vec::with_capacity(threads.len());
    if let Some((last, spawned)) = threads.split_last() {
        let handles: Vec<_> = spawned
            .iter()
            .map(|ops| {
                let state = Arc::clone(state);
                let ops = ops.clone();
                loom::thread::spawn(move || apply_all(&alg, &state, &ops))
            })
            .collect();
        let mine = apply_all(&alg, state, last);
        outcomes.extend(
            handles
                .into_iter()
                .map(|h| h.join().expect("model thread panicked")),
        );
        outcomes.push(mine);
    }
    outcomes
}

/// Model-checks that `threads` running concurrently on a fresh state of
/// `alg` (after `setup`, run sequentially) always produce what some
/// sequential order of the same operations produces in the reference
/// model `spec` (a fresh model configured like `alg`): every outcome, and
/// the snapshots at `probes` afterwards. `extra(run, state)` must hold in
/// every interleaving too (it runs after all threads have finished and may
/// probe the state further).
pub fn assert_linearizable_as<A, S, X>(
    alg: A,
    spec: S,
    setup: Vec<Op>,
    threads: Vec<Vec<Op>>,
    probes: Vec<u64>,
    extra: X,
) where
    A: Algorithm + Copy + Send + Sync + 'static,
    A::State: Send + Sync + 'static,
    S: SpecLimiter,
    X: Fn(&Run, &A::State) + Sync + Send + 'static,
{
    let mut start = spec;
    let mut previous = None;
    for &op in &setup {
        previous = Some(start.apply(op, previous));
    }
    let allowed = sequential_runs(&start, &threads, &probes);
    check(move || {
        let state = Arc::new(alg.new_state());
        let _ = apply_all(&alg, &state, &setup);
        let outcomes = run_threads(alg, &state, &threads);
        let end = probes
            .iter()
            .map(|&t| {
                let s = alg.snapshot(&state, tollgate::Timestamp::from_nanos(t));
                (s.remaining(), s.reset_after_nanos())
            })
            .collect();
        let run = Run { outcomes, end };
        assert!(
            allowed.contains(&run),
            "no sequential order of {threads:?} after {setup:?} gives {run:?}; \
             sequential runs: {allowed:?}"
        );
        extra(&run, &state);
    });
}

/// Model-checks a window limiter `alg` (fresh, after `setup` run
/// sequentially, then `threads` concurrently): linearizable against `spec`
/// (outcomes and the snapshot at the latest `now`), and the window that
/// starts at `since` and holds the latest `now` never admits more than
/// the limit. The bound counts permits admitted (setup and threads) by
/// callers whose `now` is at least `since`, less the refunds such callers
/// made, plus what a drain at the latest `now` still gets afterwards; a
/// stale caller charged to that window only lowers what the drain gets.
///
/// # Panics
/// If the scenario asks for no more than the limit in that window (an
/// over-admitting limiter could not be caught).
pub fn assert_window_bound<A, S>(alg: A, spec: S, setup: Vec<Op>, threads: Vec<Vec<Op>>, since: u64)
where
    A: Algorithm + Copy + Send + Sync + 'static,
    A::State: Send + Sync + 'static,
    S: SpecLimiter,
{
    let latest = threads.iter().flatten().map(Op::now).max().unwrap_or(0);
    let limit = u64::from(alg.capacity());
    let asked: u64 = threads
        .iter()
        .flatten()
        .filter_map(|op| match *op {
            Op::Check { n, now } if now >= since && n <= alg.capacity() => Some(u64::from(n)),
            _ => None,
        })
        .sum();
    assert!(asked > 0, "the scenario must ask for permits in the window");
    let setup_taken: u64 = setup
        .iter()
        .map(|op| match *op {
            Op::Check { n, now } if now >= since => u64::from(n),
            _ => 0,
        })
        .sum();
    let ops = threads.clone();
    assert_linearizable_as(
        alg,
        spec,
        setup,
        threads,
        vec![latest],
        move |run, state| {
            let (taken, given) = admitted_and_refunded_since(&ops, &run.outcomes, since);
            let drained = drain(&alg, state, latest);
            let total = (setup_taken + taken + drained).saturating_sub(given);
            assert!(
                total <= limit,
                "window from {since}: setup {setup_taken} + admitted {taken} + drain {drained} \
             - refunds {given} > limit {limit}: {run:?}"
            );
        },
    );
}
