//! A chain's refused request costs nothing in its first member, even while
//! other callers use that member directly: a chain whose second member is
//! spent (so it always refuses) races direct checks on the first member,
//! with out-of-order `now`s. In every interleaving, the first member's end
//! state (its snapshot at the latest `now`) equals what the direct checks
//! that were admitted would have left on their own, replayed sequentially.
//!
//! Racing the chain's transient take, a direct check may be refused (the
//! documented "errs on the side of admitting less"); the replay then
//! leaves it out. The one inexact case is a chain caller whose `now` is
//! stale across a window boundary: its refund cannot tell which window its
//! permit was charged to and gives nothing back, so the member may end
//! with *less* capacity than the direct checks alone would leave, never
//! more (`chain_with_a_stale_now_across_a_window_boundary`).
#![cfg(loom)]

use core::time::Duration;

use loom::sync::Arc;
use loom_tests::{model, t};
use tollgate::{
    Bucket, Chain, ConcurrencyLimiter, FixedWindow, Gcra, Limiter, Quota, SlidingWindow,
};

/// A second member that refuses everything before 1 ms.
fn spent() -> Bucket<FixedWindow> {
    let window = Bucket::new(FixedWindow::new(1, Duration::from_millis(1)).expect("valid window"));
    assert!(window.check(t(0)).is_ok());
    window
}

/// How the first member's end state must relate to the replay.
#[derive(Clone, Copy)]
enum Expect {
    /// Exactly the state the admitted direct checks leave.
    Same,
    /// At most the capacity they leave (a stale chain refund fails closed).
    NoMoreCapacity,
}

/// After `setup` (direct checks at those `now`s), a chain check at
/// `chain_now` (spawned) races the direct checks `direct[t]` (the last
/// list on the main thread, the others spawned).
fn refusal_costs_nothing<F, M>(
    make_first: M,
    setup: Vec<u64>,
    chain_now: u64,
    direct: Vec<Vec<u64>>,
    expect: Expect,
) where
    F: Limiter + Send + Sync + 'static,
    M: Fn() -> F + Send + Sync + 'static,
{
    let latest = direct
        .iter()
        .flatten()
        .copied()
        .chain([chain_now])
        .max()
        .unwrap_or(0);
    model::check(move || {
        let first = make_first();
        for &now in &setup {
            assert!(
                first.try_acquire(&(), t(now)).is_ok(),
                "setup check at {now}"
            );
        }
        let chain = Arc::new(Chain::new(first, spent()));
        let chain_thread = {
            let chain = Arc::clone(&chain);
            loom::thread::spawn(move || chain.try_acquire(&(), t(chain_now)).is_ok())
        };
        let (mine, spawned) = direct.split_last().expect("direct callers");
        let handles: Vec<_> = spawned
            .iter()
            .map(|nows| {
                let (chain, nows) = (Arc::clone(&chain), nows.clone());
                loom::thread::spawn(move || {
                    nows.iter()
                        .map(|&now| chain.first().try_acquire(&(), t(now)).is_ok())
                        .collect::<Vec<bool>>()
                })
            })
            .collect();
        let my_results: Vec<bool> = mine
            .iter()
            .map(|&now| chain.first().try_acquire(&(), t(now)).is_ok())
            .collect();
        let mut results: Vec<Vec<bool>> = handles
            .into_iter()
            .map(|h| h.join().expect("direct caller"))
            .collect();
        results.push(my_results);
        assert!(!chain_thread.join().expect("chain"), "the chain admitted");

        // the admitted direct checks alone, sequentially, on a fresh member
        let alone = make_first();
        for &now in &setup {
            assert!(alone.try_acquire(&(), t(now)).is_ok());
        }
        for (nows, got) in direct.iter().zip(&results) {
            for (&now, &admitted) in nows.iter().zip(got) {
                if admitted {
                    assert!(alone.try_acquire(&(), t(now)).is_ok(), "replay at {now}");
                }
            }
        }
        let (real, want) = (
            chain.first().snapshot(&(), t(latest)),
            alone.snapshot(&(), t(latest)),
        );
        match expect {
            Expect::Same => assert_eq!(
                (real.remaining(), real.reset_after_nanos()),
                (want.remaining(), want.reset_after_nanos()),
                "direct results {results:?}"
            ),
            Expect::NoMoreCapacity => assert!(
                real.remaining() <= want.remaining(),
                "the chain's refusal left capacity behind: {} > {}, direct results {results:?}",
                real.remaining(),
                want.remaining()
            ),
        }
    });
}

#[test]
fn concurrency_permit_dropped_after_a_later_refusal() {
    // The concurrency limiter is no longer a `Limiter`, so no `Chain` takes
    // it; its "chain" is a guard: take a permit, ask the next stage (spent:
    // refuses), drop the guard. Racing direct acquires (whose permits stay
    // out), it must leave the limiter exactly as those acquires alone
    // would: the refused caller's permit comes back once.
    model::check(|| {
        let limiter = Arc::new(ConcurrencyLimiter::with_limit(2).expect("valid limit"));
        let staged = {
            let limiter = Arc::clone(&limiter);
            loom::thread::spawn(move || {
                let second = spent();
                let Ok(permit) = limiter.try_acquire(1) else {
                    return false;
                };
                if second.check(t(0)).is_ok() {
                    let _ = permit.into_raw();
                    return true;
                }
                drop(permit); // the later stage refused: give it back
                false
            })
        };
        let direct = {
            let limiter = Arc::clone(&limiter);
            loom::thread::spawn(move || limiter.try_acquire(1).map(|p| p.into_raw()).is_ok())
        };
        let mine = limiter.try_acquire(1).map(|p| p.into_raw()).is_ok();
        let theirs = direct.join().expect("direct caller");
        assert!(!staged.join().expect("staged caller"), "the stage admitted");

        // the admitted direct acquires alone, on a fresh limiter
        let alone = ConcurrencyLimiter::with_limit(2).expect("valid limit");
        for admitted in [mine, theirs] {
            if admitted {
                let _ = alone.try_acquire(1).expect("replay").into_raw();
            }
        }
        let (real, want) = (limiter.snapshot(), alone.snapshot());
        assert_eq!(
            (real.remaining(), real.reset_after_nanos()),
            (want.remaining(), want.reset_after_nanos()),
            "direct results {:?}",
            (mine, theirs)
        );
    });
}

#[test]
fn fixed_window_first_within_one_window() {
    // Out-of-order `now`s, all in window [0, 100).
    refusal_costs_nothing(
        || Bucket::new(FixedWindow::new(2, Duration::from_nanos(100)).expect("valid window")),
        vec![],
        50,
        vec![vec![60], vec![40]],
        Expect::Same,
    );
}

#[test]
fn chain_with_a_stale_now_across_a_window_boundary() {
    // The chain's `now` (99) is in window 0; direct callers open window 1.
    // Before the stale-refund fix, the chain's refund freed a permit of
    // window 1 here (the member ended with more capacity than the direct
    // checks alone leave, and window 1 admitted 3 of 2).
    refusal_costs_nothing(
        || Bucket::new(FixedWindow::new(2, Duration::from_nanos(100)).expect("valid window")),
        vec![],
        99,
        vec![vec![100], vec![100, 101]],
        Expect::NoMoreCapacity,
    );
}

#[test]
fn busy_token_bucket_first() {
    // T = 10 ns, burst 3; the setup puts the bucket's TAT (110) ahead of
    // every `now`, as under steady traffic.
    let quota = Quota::new(1, Duration::from_nanos(10))
        .and_then(|q| q.with_burst(3))
        .expect("valid quota");
    refusal_costs_nothing(
        move || Bucket::new(Gcra::token_bucket(quota)),
        vec![100],
        103,
        vec![vec![105], vec![104]],
        Expect::Same,
    );
}

#[test]
fn sliding_window_first() {
    // Two threads only (see sliding_window_bound_and_lock.rs): the chain
    // in segment 1 races a direct caller in segment 1, then a stale one.
    refusal_costs_nothing(
        || {
            Bucket::new(
                SlidingWindow::<2>::new(2, Duration::from_nanos(100)).expect("valid window"),
            )
        },
        vec![],
        50,
        vec![vec![60, 40]],
        Expect::Same,
    );
}
