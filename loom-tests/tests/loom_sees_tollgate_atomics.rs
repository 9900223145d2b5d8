//! Guard: under `--cfg loom`, the atomics tollgate uses are loom's.
//!
//! Loom can only explore interleavings of operations it sees. If
//! `tollgate::sync` ever named portable-atomic (or core) types under loom,
//! every model in this crate would pass on racy code: a false green. This
//! test writes a deliberately racy load-then-store counter against
//! `tollgate::sync`'s types and requires loom to catch the lost update; a
//! correct `fetch_add` counter, the control, must pass.
//!
//! One `#[test]` per file on purpose: it swaps the process-wide panic hook
//! to keep the expected failure's message out of the output.
#![cfg(loom)]

use std::panic::{self, AssertUnwindSafe};

use loom::sync::Arc;
use loom_tests::model;
use tollgate::sync::{AtomicU32, AtomicU64, Ordering};

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
                "loom did not catch a lost update on tollgate::sync::{ty}: \
                 the loom alias in src/sync.rs is not in effect"
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
}
