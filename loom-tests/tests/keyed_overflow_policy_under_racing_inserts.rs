//! Keyed tables: new keys racing into a table full of busy keys get what
//! the overflow policy promises, in every interleaving.
//!
//! A full table of 2 keys, both busy until 1000 (one permit each at 0);
//! new keys arrive from 2–3 threads with out-of-order `now`s before 1000,
//! and the first of them sweeps (finding nothing idle) while the others
//! run:
//!
//! - `SharedBucket`: every new key is answered by the shared bucket (its
//!   refusals name that path; its admissions, which name no path, leave
//!   the key untracked), and all of those answers (and the shared bucket's
//!   final snapshot) are what some sequential order gives on one reference
//!   bucket: overflow traffic as a whole gets one key's quota;
//! - `Deny`: every new key is refused by the `OverflowDenied` path, with a
//!   `retry_after` no later than the time a slot frees up (1000) and at
//!   least 1 ns;
//! - `Allow`: every new key is admitted as a fresh key would be: full
//!   again one interval after its `now` (a shared or reused state would be
//!   full later), and the shared bucket is never touched.
//!
//! In every case the busy keys keep their slots and no new key gets one.
#![cfg(loom)]

use core::time::Duration;

use loom::sync::Arc;
use loom_tests::keyed_model::{self as km, KeyedOp, KeyedOutcome, KeyedTable};
use loom_tests::model;
use tollgate::keyed::{KeyedPath, OverflowPolicy};
use tollgate::{Gcra, Quota};

/// Emission interval (ns).
const T: u64 = 1_000;
const BURST: u32 = 2;

fn gcra() -> Gcra {
    Gcra::token_bucket(
        Quota::new(1, Duration::from_nanos(T))
            .and_then(|q| q.with_burst(BURST))
            .expect("valid quota"),
    )
}

/// Keys above 2 are new.
fn is_new(key: u64) -> bool {
    key > 2
}

fn overflow_race<Tb, X>(
    build: fn(Gcra, usize, OverflowPolicy) -> Tb,
    policy: OverflowPolicy,
    threads: Vec<Vec<KeyedOp>>,
    each_new: X,
) where
    Tb: KeyedTable,
    X: Fn(u64, KeyedOutcome) + Send + Sync + 'static,
{
    let gcra = gcra();
    let setup = vec![KeyedOp::check(1, 0), KeyedOp::check(2, 0)];
    let latest = km::all_nows(&setup, &threads)
        .into_iter()
        .max()
        .unwrap_or(0);
    assert!(latest < T, "the table must stay full of busy keys");
    let shared_runs =
        km::without_full_at(&km::one_state_runs(&gcra, is_new, &[], &threads, latest));
    model::check(move || {
        let table = Arc::new(build(gcra, 2, policy));
        let outcomes = km::run_keyed(&table, &setup, &threads);
        assert!(
            table.contains(1) && table.contains(2),
            "a busy key was evicted: {outcomes:?}"
        );
        assert_eq!(table.len(), 2, "{outcomes:?}");
        for (ops, outs) in threads.iter().zip(&outcomes) {
            for (op, out) in ops.iter().zip(outs) {
                if let KeyedOp::Check { key, now, .. } = *op {
                    if is_new(key) {
                        assert!(!table.contains(key), "new key {key} got a slot");
                        each_new(now, *out);
                    }
                }
            }
        }
        if policy == OverflowPolicy::SharedBucket {
            // refusals name the shared path; admissions name none, but the
            // new keys stay untracked (above), so only the shared bucket can
            // have admitted them, and its final snapshot must account for
            // every one of them. (The lock-free table's shared bucket
            // reports `full_at` as read after the check, so it is not
            // compared.)
            let seen = km::outcomes_via(is_new, KeyedPath::SharedOverflow, &threads, &outcomes)
                .unwrap_or_else(|| panic!("a new key missed the shared bucket: {outcomes:?}"));
            let seen = km::forget_full_at(&seen);
            let reset = table.shared_snapshot(latest).reset_after_nanos();
            assert!(
                shared_runs.contains(&(seen.clone(), reset)),
                "shared bucket: no sequential order gives {seen:?} ending {reset} ns from \
                 full: {outcomes:?}; allowed: {shared_runs:?}"
            );
        } else {
            // `Deny` and `Allow` answer without the shared bucket
            let shared = table.shared_snapshot(latest);
            assert_eq!(
                (shared.remaining(), shared.reset_after_nanos()),
                (BURST, 0),
                "the shared bucket was used: {outcomes:?}"
            );
        }
    });
}

/// Four permits asked of the shared bucket (burst 2) by three new keys.
fn shared_bucket<Tb: KeyedTable>(build: fn(Gcra, usize, OverflowPolicy) -> Tb) {
    overflow_race(
        build,
        OverflowPolicy::SharedBucket,
        vec![
            vec![KeyedOp::Check {
                key: 3,
                n: 2,
                now: 500,
            }],
            vec![KeyedOp::check(4, 400)],
            vec![KeyedOp::check(5, 450)],
        ],
        |_, _| {},
    );
}

/// New keys refused while the first one's sweep runs, and a busy key's
/// check.
fn deny<Tb: KeyedTable>(build: fn(Gcra, usize, OverflowPolicy) -> Tb) {
    overflow_race(
        build,
        OverflowPolicy::Deny,
        vec![
            vec![KeyedOp::check(3, 500)],
            vec![KeyedOp::check(4, 600)],
            vec![KeyedOp::check(1, 450)],
        ],
        |now, out| match out {
            KeyedOutcome::Refused {
                path: KeyedPath::OverflowDenied,
                retry_after,
            } => assert!(
                (1..=T - now).contains(&retry_after),
                "refused at {now} with retry_after {retry_after}: a slot frees up at {T}"
            ),
            other => panic!("a new key at {now} got {other:?}"),
        },
    );
}

/// New keys admitted as fresh keys, more than one key's burst in all.
///
/// An admission no longer names its path (`OverflowAllowed`): each must
/// be full again exactly one interval after its `now`, which only a fresh
/// state gives (key 3's second check at 500 on a reused or shared state
/// would be full at 2500), the key stays untracked, and the shared bucket
/// is still full at the end.
fn allow<Tb: KeyedTable>(build: fn(Gcra, usize, OverflowPolicy) -> Tb) {
    overflow_race(
        build,
        OverflowPolicy::Allow,
        vec![
            vec![KeyedOp::check(3, 500), KeyedOp::check(3, 500)],
            vec![KeyedOp::check(4, 600)],
        ],
        |now, out| {
            assert_eq!(
                out,
                KeyedOutcome::Admitted { full_at: now + T },
                "a new key at {now}"
            );
        },
    );
}

#[test]
fn sharded_shared_bucket() {
    shared_bucket(km::sharded);
}

#[test]
fn lock_free_shared_bucket() {
    shared_bucket(km::lock_free);
}

#[test]
fn heapless_shared_bucket() {
    shared_bucket(km::heapless);
}

#[test]
fn sharded_deny() {
    deny(km::sharded);
}

#[test]
fn lock_free_deny() {
    deny(km::lock_free);
}

#[test]
fn heapless_deny() {
    deny(km::heapless);
}

#[test]
fn sharded_allow() {
    allow(km::sharded);
}

#[test]
fn lock_free_allow() {
    allow(km::lock_free);
}

#[test]
fn heapless_allow() {
    allow(km::heapless);
}
