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
//! keys; every refusal must name a time no later than the busy keys'.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tollgate::keyed::{KeyedPath, LockFreeGcraTable, OverflowPolicy, SameQuota};
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

#[test]
fn lock_free_deny_retry_after_is_bounded_while_sweeping() {
    // one permit per second: a key checked at 0 is busy until 1 s
    let gcra = Gcra::token_bucket(Quota::per_second(1).expect("valid quota"));
    let busy_until = gcra.interval_nanos();
    let table = LockFreeGcraTable::<u64, _, _>::with_options(
        CAPACITY,
        gcra,
        OverflowPolicy::Deny,
        InOrder,
        SameQuota,
        Some(1),
    )
    .expect("valid table");
    for key in 0..CAPACITY as u64 {
        assert!(table.check(key, 0).is_allowed());
    }
    assert_eq!(table.len(), CAPACITY);

    let stop = AtomicBool::new(false);
    let (refusals, sweeps) = std::thread::scope(|s| {
        let sweeper = s.spawn(|| {
            let start = Instant::now();
            let mut sweeps = 0u64;
            // bounded on its own too: never outlive a reader stuck behind it
            while !stop.load(Ordering::Relaxed) && start.elapsed() < RUN {
                assert_eq!(table.evict_refilled(NOW), 0, "every key is busy");
                sweeps += 1;
                // let a reader waiting for the shard's mutex in
                std::thread::yield_now();
            }
            sweeps
        });
        let start = Instant::now();
        let mut refusals = 0u64;
        let mut key = CAPACITY as u64;
        while start.elapsed() < RUN {
            let decision = table.check(key, NOW);
            assert_eq!(decision.path(), KeyedPath::OverflowDenied);
            assert!(decision.is_denied());
            let retry_after = decision.decision().retry_after().as_nanos();
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
    assert_eq!(table.len(), CAPACITY);
}
