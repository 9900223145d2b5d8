//! A shaped policy's cancelled reservation (`Limiter::cancel` of a `Partitioned`,
//! what a dropped waiter does) racing other reservations of the same
//! bucket: the cancellation gives the turn back only with one
//! compare-and-swap from exactly the TAT its reservation stored
//! (`refund_if_last`), so in every interleaving the reservations that are
//! kept, and one booked after all threads are done, hold pairwise distinct
//! turns at least one interval apart, and the late one comes after every
//! kept one (no later arrival is given an earlier waiter's turn). Run on
//! the sharded, lock-free and `no_std` tables and on the one bucket of a
//! global policy (`PolicyStore::single`, the `LiveBucket` protocol).
//!
//! With the plain refund the cancellation used before, these models fail:
//! a reservation cancelled after a later one was booked moves the TAT back
//! under it, and the late booking gets the later one's turn.
#![cfg(loom)]

use core::time::Duration;

use loom::sync::Arc;
use loom_tests::keyed_model::{heapless, lock_free, sharded};
use loom_tests::{model, t, token_bucket};
use tollgate::keyed::{KeyedTable, OverflowPolicy};
use tollgate::partitioned::{Lease, Partitioned, PolicyStore, Shaping};
use tollgate::{Gcra, Limiter, LiveBucket};

/// Interval (ns) and burst of the models' bucket: one at once, five more
/// may wait (room for every reservation of a model, none given back).
const T: u64 = 100;
const BURST: u32 = 6;

fn shaped<S>(table: S) -> Partitioned<u64, u64>
where
    S: KeyedTable<u64, Algorithm = Gcra> + Send + Sync + 'static,
{
    Partitioned::builder("line")
        .shaped("key", |k: &u64| Some(*k), table, Shaping::delay_all())
        .build()
}

fn global(gcra: Gcra) -> Partitioned<u64, u64> {
    let store = PolicyStore::single(LiveBucket::new(gcra))
        .with_shaping(Shaping::delay_all())
        .expect("a bucket can shape");
    Partitioned::builder("line")
        .store("all", |k: &u64| Some(*k), store)
        .build()
}

/// A reservation at `now` 0 (the bucket's lead is its turn): its delay.
fn reserve(p: &Partitioned<u64, u64>) -> (Duration, Lease<u64>) {
    let lease = p.try_acquire(&1, t(0)).expect("room in the line");
    (lease.delay(), lease)
}

/// After `setup` reservations kept on the main thread, `cancelling`
/// threads each reserve and cancel, racing `keeping` threads that each
/// reserve and keep; then one more reservation. Every kept turn (and the
/// late one) is distinct, at least `T` from the others, and the late one
/// is after all of them.
fn kept_turns_stay_distinct(
    make: fn() -> Partitioned<u64, u64>,
    setup: usize,
    cancelling: usize,
    keeping: usize,
) {
    model::check(move || {
        let p = Arc::new(make());
        let mut kept: Vec<(Duration, Lease<u64>)> = (0..setup).map(|_| reserve(&p)).collect();
        let cancels: Vec<_> = (0..cancelling)
            .map(|_| {
                let p = Arc::clone(&p);
                loom::thread::spawn(move || {
                    let (_, lease) = reserve(&p);
                    p.cancel(&1, lease, t(0));
                })
            })
            .collect();
        let keeps: Vec<_> = (1..keeping)
            .map(|_| {
                let p = Arc::clone(&p);
                loom::thread::spawn(move || reserve(&p))
            })
            .collect();
        if keeping > 0 {
            kept.push(reserve(&p));
        }
        for c in cancels {
            c.join().expect("cancelling thread");
        }
        for k in keeps {
            kept.push(k.join().expect("keeping thread"));
        }
        let (late, _) = reserve(&p);
        let mut turns: Vec<Duration> = kept.iter().map(|k| k.0).collect();
        for &turn in &turns {
            assert!(
                late > turn,
                "the late reservation at {late:?} is not after {turn:?}: {turns:?}"
            );
        }
        turns.push(late);
        turns.sort();
        for pair in turns.windows(2) {
            assert!(
                pair[1] - pair[0] >= Duration::from_nanos(T),
                "two reservations within one interval: {turns:?}"
            );
        }
    });
}

fn sharded_line() -> Partitioned<u64, u64> {
    shaped(sharded(token_bucket(T, BURST), 2, OverflowPolicy::Deny))
}

fn lock_free_line() -> Partitioned<u64, u64> {
    shaped(lock_free(token_bucket(T, BURST), 2, OverflowPolicy::Deny))
}

fn heapless_line() -> Partitioned<u64, u64> {
    shaped(heapless(token_bucket(T, BURST), 2, OverflowPolicy::Deny))
}

fn global_line() -> Partitioned<u64, u64> {
    global(token_bucket(T, BURST))
}

const LINES: [(&str, fn() -> Partitioned<u64, u64>); 4] = [
    ("sharded", sharded_line),
    ("lock-free", lock_free_line),
    ("no_std", heapless_line),
    ("global bucket", global_line),
];

#[test]
fn a_cancellation_racing_a_booking_never_hands_out_its_turn_twice() {
    // one waiter already in line; a second books and cancels while a
    // third books
    for (name, make) in LINES {
        eprintln!("{name}");
        kept_turns_stay_distinct(make, 2, 1, 1);
    }
}

#[test]
fn two_cancellations_racing_a_booking_never_hand_out_a_turn_twice() {
    for (name, make) in LINES {
        eprintln!("{name}");
        kept_turns_stay_distinct(make, 1, 2, 1);
    }
}
