//! Guard: under `--cfg loom`, the atomics tollgate uses are loom's.
//!
//! Loom can only explore interleavings of operations it sees. If
//! `tollgate_core::sync` ever named portable-atomic (or core) types under loom,
//! every model in this crate would pass on racy code: a false green. This
//! test writes a deliberately racy load-then-store counter against
//! `tollgate_core::sync`'s types and requires loom to catch the lost update; a
//! correct `fetch_add` counter, the control, must pass. The same goes for
//! the keyed tables' 128-bit slot type (a loom shim) and their locks.
//!
//! One `#[test]` per file on purpose: it swaps the process-wide panic hook
//! to keep the expected failure's message out of the output.
#![cfg(loom)]

use std::panic::{self, AssertUnwindSafe};

use loom::sync::Arc;
use loom_tests::model;
use tollgate_core::sync::{AtomicU32, AtomicU64, AtomicU128, Mutex, Ordering, RwLock};

/// Two threads each add one to a shared counter; `racy` does it with a
/// separate load and store (a lost-update race), otherwise with `fetch_add`.
macro_rules! counter_model {
    ($atomic:ty, $racy:expr) => {
        || {
            let racy: bool = $racy;
            let counter = Arc::new(<$atomic>::new(0));
            let bump = move |c: &$atomic| {
                if racy {
                    let seen = c.load(Ordering::Relaxed);
                    c.store(seen + 1, Ordering::Relaxed);
                } else {
                    c.fetch_add(1, Ordering::Relaxed);
                }
            };
            let other = Arc::clone(&counter);
            let t = loom::thread::spawn(move || bump(&other));
            bump(&counter);
            t.join().expect("thread");
            assert_eq!(counter.load(Ordering::Relaxed), 2, "lost update");
        }
    };
}

/// The same counter on the keyed tables' sync types: `AtomicU128` (the
/// loom shim: racy is load then store, correct is a compare-and-swap
/// loop), `Mutex` and `RwLock` (racy reads in one critical section and
/// writes in another, correct does both in one).
fn keyed_counter_model(kind: &'static str, racy: bool) -> impl Fn() + Sync + Send + 'static {
    move || {
        let wide = Arc::new(AtomicU128::new(0));
        let mutex = Arc::new(Mutex::new(0u32));
        let rwlock = Arc::new(RwLock::new(0u32));
        let bump = {
            let (wide, mutex, rwlock) =
                (Arc::clone(&wide), Arc::clone(&mutex), Arc::clone(&rwlock));
            move || match (kind, racy) {
                ("AtomicU128", true) => {
                    let seen = wide.load(Ordering::Acquire);
                    wide.store(seen + 1, Ordering::Release);
                }
                ("AtomicU128", false) => {
                    let mut seen = wide.load(Ordering::Acquire);
                    while let Err(now) =
                        wide.compare_exchange(seen, seen + 1, Ordering::AcqRel, Ordering::Acquire)
                    {
                        seen = now;
                    }
                }
                ("Mutex", true) => {
                    let seen = *mutex.lock().expect("lock");
                    *mutex.lock().expect("lock") = seen + 1;
                }
                ("Mutex", false) => *mutex.lock().expect("lock") += 1,
                ("RwLock", true) => {
                    let seen = *rwlock.read().expect("lock");
                    *rwlock.write().expect("lock") = seen + 1;
                }
                _ => *rwlock.write().expect("lock") += 1,
            }
        };
        let other = bump.clone();
        let t = loom::thread::spawn(other);
        bump();
        t.join().expect("thread");
        let total = match kind {
            "AtomicU128" => wide.load(Ordering::Acquire),
            "Mutex" => u128::from(*mutex.lock().expect("lock")),
            _ => u128::from(*rwlock.read().expect("lock")),
        };
        assert_eq!(total, 2, "lost update");
    }
}

/// Runs `f`, returning the message it panicked with (`None` if it passed).
fn panic_message(f: impl FnOnce()) -> Option<String> {
    let hook = panic::take_hook();
    panic::set_hook(Box::new(|_| {}));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    panic::set_hook(hook);
    result.err().map(|payload| {
        payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_default()
    })
}

#[test]
fn loom_catches_a_racy_counter_on_tollgate_sync_types() {
    let u64_racy = panic_message(|| model::check(counter_model!(AtomicU64, true)));
    let u32_racy = panic_message(|| model::check(counter_model!(AtomicU32, true)));
    for (ty, caught) in [("AtomicU64", u64_racy), ("AtomicU32", u32_racy)] {
        let message = caught.unwrap_or_else(|| {
            panic!(
                "loom did not catch a lost update on tollgate_core::sync::{ty}: \
                 the loom alias in crates/tollgate-core/src/sync.rs is not in effect"
            )
        });
        assert!(
            message.contains("lost update"),
            "{ty}: loom failed for another reason: {message}"
        );
    }

    // Control: the same counter done right passes, so the failures above
    // are the race and not a broken model.
    model::check(counter_model!(AtomicU64, false));
    model::check(counter_model!(AtomicU32, false));

    // The keyed tables' 128-bit slots and locks are loom's too (a std
    // lock, or portable-atomic's AtomicU128, would let the race pass).
    for kind in ["AtomicU128", "Mutex", "RwLock"] {
        let message = panic_message(|| model::check(keyed_counter_model(kind, true)))
            .unwrap_or_else(|| {
                panic!(
                    "loom did not catch a lost update on tollgate_core::sync::{kind}: \
                     the loom alias in crates/tollgate-core/src/sync.rs is not in effect"
                )
            });
        assert!(
            message.contains("lost update"),
            "{kind}: loom failed for another reason: {message}"
        );
        model::check(keyed_counter_model(kind, false));
    }
}
