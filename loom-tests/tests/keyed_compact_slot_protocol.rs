//! The compact keyed table's slot protocol (one `AtomicU64` holding a key
//! fingerprint and a 32-bit TAT, a compare-and-swap per admission, inserts
//! under a stripe mutex after a second scan, a seqlocked configuration):
//!
//! - two threads' first checks of one untracked key create exactly one
//!   entry, and the key is admitted exactly its burst;
//! - checks of one tracked key racing each other admit exactly what one
//!   bucket admits (no lost or duplicated compare-and-swap);
//! - a check of a tracked key racing a live `reconfigure` to a quota of
//!   the same burst admits at most what the rule leaves (`UsedAmount`: no
//!   more than one burst in total at one instant);
//! - `evict_refilled` racing a stale check of the idle key never lets the
//!   key have more than one burst at the instant.
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use loom_tests::model;
use tollgate::keyed::{CompactKeyedTable, KeyedTable, OverflowPolicy, RandomSeed};
use tollgate::tick::TickGcra;
use tollgate::{BucketKind, Inheritance, Limiter, Timestamp};

/// 1 GHz ticks (ticks are nanoseconds), one permit per 1,000 ns.
fn gcra(burst: u32) -> TickGcra {
    TickGcra::from_ticks(BucketKind::TokenBucket, 1_000, burst, 1_000_000_000)
        .and_then(|g| g.with_heal_threshold_ticks(10_000))
        .expect("valid")
}

/// The smallest table (two groups), a fixed seed.
fn table(burst: u32) -> CompactKeyedTable<u64> {
    CompactKeyedTable::builder(gcra(burst))
        .max_keys(2)
        .overflow(OverflowPolicy::Deny)
        .hasher(RandomSeed::with_seed(1, 2))
        .build()
        .expect("valid")
}

const NOW: Timestamp = Timestamp::from_nanos(1_000_000);

fn admitted(table: &CompactKeyedTable<u64>, key: u64, times: usize, now: Timestamp) -> usize {
    (0..times)
        .filter(|_| table.try_acquire(&key, now).is_ok())
        .count()
}

#[test]
fn first_checks_of_one_key_create_one_entry() {
    model::check(|| {
        let table = Arc::new(table(1));
        let other = {
            let table = Arc::clone(&table);
            thread::spawn(move || admitted(&table, 7, 1, NOW))
        };
        let mine = admitted(&table, 7, 1, NOW);
        let theirs = other.join().expect("thread");
        assert_eq!(mine + theirs, 1, "a burst of 1 admitted {}", mine + theirs);
        assert_eq!(table.len(), 1);
        assert_eq!(admitted(&table, 7, 1, NOW), 0);
    });
}

#[test]
fn racing_checks_of_a_tracked_key_admit_one_burst() {
    model::check(|| {
        let table = Arc::new(table(2));
        // tracked, one of two permits used
        assert_eq!(admitted(&table, 7, 1, NOW), 1);
        let other = {
            let table = Arc::clone(&table);
            thread::spawn(move || admitted(&table, 7, 1, NOW))
        };
        let mine = admitted(&table, 7, 1, NOW);
        let theirs = other.join().expect("thread");
        assert_eq!(mine + theirs, 1);
        assert_eq!(admitted(&table, 7, 1, NOW), 0);
    });
}

#[test]
fn a_check_racing_reconfigure_never_over_admits() {
    model::check(|| {
        let table = Arc::new(table(2));
        assert_eq!(admitted(&table, 7, 1, NOW), 1);
        let other = {
            let table = Arc::clone(&table);
            thread::spawn(move || admitted(&table, 7, 1, NOW))
        };
        // same burst, twice the interval: one permit used is one permit
        table.reconfigure(
            TickGcra::from_ticks(BucketKind::TokenBucket, 2_000, 2, 1_000_000_000)
                .and_then(|g| g.with_heal_threshold_ticks(10_000))
                .expect("valid"),
            Inheritance::UsedAmount,
            NOW,
        );
        let theirs = other.join().expect("thread");
        let after = admitted(&table, 7, 2, NOW);
        // one used before; at one instant, never more than the burst
        assert!(1 + theirs + after <= 2, "{} admitted", 1 + theirs + after);
    });
}

#[test]
fn eviction_racing_a_stale_check_never_over_admits() {
    model::check(|| {
        let table = Arc::new(table(1));
        // admitted at 1 ms: full again at 1 ms + 1 µs, and idle for the
        // threshold (10 µs) from 1 ms + 11 µs, when the sweep runs
        assert_eq!(admitted(&table, 7, 1, NOW), 1);
        let sweep = Timestamp::from_nanos(1_000_000 + 11_000);
        // a caller stale by 10 µs (the threshold): the bucket is full at
        // its `now`, so a fresh entry is exactly what it should see
        let stale = Timestamp::from_nanos(1_000_000 + 1_000);
        let other = {
            let table = Arc::clone(&table);
            thread::spawn(move || table.evict_refilled(sweep))
        };
        let stale_admits = admitted(&table, 7, 2, stale);
        let _ = other.join().expect("thread");
        assert_eq!(stale_admits, 1, "one burst at the stale instant");
    });
}
