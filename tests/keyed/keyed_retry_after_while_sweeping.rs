//! A new key refused by a full table (`OverflowPolicy::Deny`) is told to
//! come back when a slot can free up, even while another thread is in the
//! middle of sweeping that table.
//!
//! Found by the loom model `keyed_overflow_policy_under_racing_inserts`
//! (`lock_free_deny`): the lock-free table's sweep used to reset its
//! "earliest idle time" hint to "never" when it started and lower it entry
//! by entry, and a lock-free reader that met the hint mid-sweep refused
//! with `retry_after` ≈ `u64::MAX − now` (584 years). Here one thread
//! sweeps a full table of busy keys over and over while another checks new
//! keys; every refusal must name a time no later than the busy keys'. The
//! same behaviour is pinned on the other two tables.
#![cfg(feature = "std")]

use crate::keyed_support;

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use keyed_support::{Spec, t};
use tollgate::keyed::{KeyedPath, KeyedTable, LockFreeGcraTable, OverflowPolicy};
use tollgate::{Gcra, Quota};

const CAPACITY: usize = 4_000;
/// The lock-free table's slots for `CAPACITY` keys (25 % spare).
const SLOTS: u64 = 5_000;
const NOW: u64 = 500;
const RUN: Duration = Duration::from_millis(300);

/// Places key `k` at slot `k`: the keys fill the first 4,000 slots, so a
/// sweep scans all of them before it finds the empty slot it starts from
/// (a window wide enough for the reader to land in).
#[derive(Clone, Copy)]
struct InOrder;

struct InOrderHasher(u64);

impl Hasher for InOrderHasher {
    fn finish(&self) -> u64 {
        // home = (low 32 bits × SLOTS) >> 32; round up so it lands exactly
        ((u128::from(self.0) << 32).div_ceil(u128::from(SLOTS))) as u64
    }
    fn write(&mut self, _bytes: &[u8]) {
        unreachable!("u64 keys only")
    }
    fn write_u64(&mut self, key: u64) {
        self.0 = key;
    }
}

impl BuildHasher for InOrder {
    type Hasher = InOrderHasher;
    fn build_hasher(&self) -> InOrderHasher {
        InOrderHasher(0)
    }
}

/// One permit per second: a key checked at 0 is busy until 1 s.
fn algorithm() -> Gcra {
    Gcra::token_bucket(Quota::per_second(1).expect("valid quota"))
}

/// Fills `table` (overflow `Deny`) with busy keys, sweeps it from one
/// thread while another checks new keys for `RUN`.
fn deny_retry_after_is_bounded_while_sweeping<T: KeyedTable<u64> + Sync>(table: &T) {
    assert_eq!(table.overflow_policy(), OverflowPolicy::Deny);
    let busy_until = algorithm().interval_nanos();
    let max_keys = table.max_keys() as u64;
    for key in 0..max_keys {
        assert!(table.try_acquire(&key, t(0)).is_ok());
    }
    assert_eq!(table.len() as u64, max_keys);

    let stop = AtomicBool::new(false);
    let (refusals, sweeps) = std::thread::scope(|s| {
        let sweeper = s.spawn(|| {
            let start = Instant::now();
            let mut sweeps = 0u64;
            // bounded on its own too: never outlive a reader stuck behind it
            while !stop.load(Ordering::Relaxed) && start.elapsed() < RUN {
                assert_eq!(table.evict_refilled(t(NOW)), 0, "every key is busy");
                sweeps += 1;
                // let a reader waiting for the shard's mutex in
                std::thread::yield_now();
            }
            sweeps
        });
        let start = Instant::now();
        let mut refusals = 0u64;
        let mut key = max_keys;
        while start.elapsed() < RUN {
            let decision = table.try_acquire(&key, t(NOW));
            assert!(decision.is_err(), "key {key}: {decision:?}");
            let refusal = decision.unwrap_err();
            assert_eq!(refusal.path(), KeyedPath::OverflowDenied);
            let retry_after = refusal.retry_after().as_nanos();
            assert!(
                (1..=u128::from(busy_until - NOW)).contains(&retry_after),
                "refused with retry_after {retry_after} ns; a slot frees up in {} ns",
                busy_until - NOW
            );
            refusals += 1;
            key += 1;
        }
        stop.store(true, Ordering::Relaxed);
        (refusals, sweeper.join().expect("sweeper"))
    });
    assert!(
        refusals > 0 && sweeps > 0,
        "{refusals} refusals, {sweeps} sweeps"
    );
    assert_eq!(table.len() as u64, max_keys);
}

#[test]
fn lock_free_deny_retry_after_is_bounded_while_sweeping() {
    let table = LockFreeGcraTable::<u64>::builder(algorithm())
        .max_keys(CAPACITY)
        .shards(1)
        .overflow(OverflowPolicy::Deny)
        .hasher(InOrder)
        .build()
        .expect("valid table");
    assert_eq!(table.max_keys(), CAPACITY);
    deny_retry_after_is_bounded_while_sweeping(&table);
}

#[test]
fn sharded_deny_retry_after_is_bounded_while_sweeping() {
    let spec = Spec::new(algorithm(), CAPACITY).overflow(OverflowPolicy::Deny);
    deny_retry_after_is_bounded_while_sweeping(&keyed_support::sharded(spec));
}

#[test]
fn heapless_deny_retry_after_is_bounded_while_sweeping() {
    let spec = Spec::new(algorithm(), 4_096).overflow(OverflowPolicy::Deny);
    deny_retry_after_is_bounded_while_sweeping(&keyed_support::heapless::<4_096>(spec));
}
