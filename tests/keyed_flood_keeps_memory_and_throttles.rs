//! A flood of 1,000,000 distinct keys into a full table: no allocation after
//! construction, every key throttled before the flood is still throttled
//! after it, and the overflow policy is applied and reported.

mod keyed_support;

use keyed_support::Table;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use tollgate::keyed::{
    HeaplessKeyedTable, KeyedPath, LockFreeGcraTable, OverflowPolicy, RandomSeed, SameQuota,
    ShardedKeyedTable,
};
use tollgate::{Gcra, Quota};

/// Counts allocations made by the current thread (tests run in parallel
/// threads, so a global count would mix them).
struct CountingAlloc;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    static BYTES: Cell<u64> = const { Cell::new(0) };
}

fn record(bytes: usize) {
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
    let _ = BYTES.try_with(|c| c.set(c.get() + bytes as u64));
}

// SAFETY: forwards to the system allocator unchanged; only counts.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        record(new_size);
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

fn allocations() -> (u64, u64) {
    (ALLOCATIONS.with(Cell::get), BYTES.with(Cell::get))
}

const FLOOD: u64 = 1_000_000;
const THROTTLED: u64 = 1_000;
const BURST: u32 = 5;

/// 60 per hour (T = 60 s), burst 5: nothing refills during the flood.
fn algorithm() -> Gcra {
    Gcra::token_bucket(Quota::per_hour(60).unwrap().allow_burst(BURST).unwrap())
}

struct FloodOutcome {
    own: u64,
    overflow_allowed: u64,
    overflow_denied: u64,
}

/// Throttles keys `0..THROTTLED`, floods `FLOOD` fresh keys, and checks
/// the invariants that do not depend on the policy. Every check happens
/// after construction, so every allocation it counts is a failure.
fn flood(table: &dyn Table, expected_path: KeyedPath) -> FloodOutcome {
    let before = allocations();
    let mut now = 1_000;
    for key in 0..THROTTLED {
        for _ in 0..BURST {
            assert!(table.check(key, now).is_allowed());
        }
        let refused = table.check(key, now);
        assert!(refused.is_denied());
        assert_eq!(refused.path(), KeyedPath::Own);
    }
    let mut outcome = FloodOutcome {
        own: 0,
        overflow_allowed: 0,
        overflow_denied: 0,
    };
    for key in THROTTLED..THROTTLED + FLOOD {
        now += 1_000; // 1 µs per request: the whole flood lasts 1 s
        let decision = table.check(key, now);
        match decision.path() {
            KeyedPath::Own => {
                assert!(decision.is_allowed(), "a fresh key's first request");
                outcome.own += 1;
            }
            path => {
                assert_eq!(path, expected_path);
                if decision.is_allowed() {
                    outcome.overflow_allowed += 1;
                } else {
                    outcome.overflow_denied += 1;
                }
            }
        }
    }
    // Still throttled, by their own bucket: the flood evicted none of them.
    for key in 0..THROTTLED {
        let decision = table.check(key, now);
        assert!(decision.is_denied(), "key {key} was reset by the flood");
        assert_eq!(decision.path(), KeyedPath::Own);
    }
    assert_eq!(table.len(), table.capacity());
    // Every slot not taken by a throttled key went to a flood key, then the
    // rest overflowed.
    assert_eq!(outcome.own, table.capacity() as u64 - THROTTLED);
    assert_eq!(
        outcome.own + outcome.overflow_allowed + outcome.overflow_denied,
        FLOOD
    );
    let after = allocations();
    assert_eq!(after, before, "(allocations, bytes) after construction");
    outcome
}

fn sharded(policy: OverflowPolicy) -> ShardedKeyedTable<u64, Gcra> {
    ShardedKeyedTable::builder(algorithm())
        .capacity(10_000)
        .overflow(policy)
        .build()
        .unwrap()
}

#[test]
fn sharded_shared_bucket_flood_admits_one_burst_through_overflow() {
    let table = sharded(OverflowPolicy::SharedBucket);
    assert!(table.capacity() >= 10_000 && table.capacity() < 10_000 + table.shards());
    let outcome = flood(&table, KeyedPath::SharedOverflow);
    // the shared bucket is one key's quota: its burst, no refill in 1 s
    assert_eq!(outcome.overflow_allowed, u64::from(BURST));
    assert_eq!(table.shared_snapshot(FLOOD * 1_000).remaining(), 0);
}

#[test]
fn sharded_deny_flood_refuses_every_overflowing_key() {
    let table = sharded(OverflowPolicy::Deny);
    let outcome = flood(&table, KeyedPath::OverflowDenied);
    assert_eq!(outcome.overflow_allowed, 0);
    assert!(outcome.overflow_denied > 980_000);
}

#[test]
fn sharded_allow_flood_admits_every_overflowing_key() {
    let table = sharded(OverflowPolicy::Allow);
    let outcome = flood(&table, KeyedPath::OverflowAllowed);
    assert_eq!(outcome.overflow_denied, 0);
    assert!(outcome.overflow_allowed > 980_000);
}

fn lock_free(policy: OverflowPolicy) -> LockFreeGcraTable<u64> {
    LockFreeGcraTable::with_options(
        10_000,
        algorithm(),
        policy,
        RandomSeed::new(),
        SameQuota,
        None,
    )
    .unwrap()
}

#[test]
fn lock_free_shared_bucket_flood_admits_one_burst_through_overflow() {
    let table = lock_free(OverflowPolicy::SharedBucket);
    let outcome = flood(&table, KeyedPath::SharedOverflow);
    assert_eq!(outcome.overflow_allowed, u64::from(BURST));
}

#[test]
fn lock_free_deny_flood_refuses_every_overflowing_key() {
    let table = lock_free(OverflowPolicy::Deny);
    let outcome = flood(&table, KeyedPath::OverflowDenied);
    assert_eq!(outcome.overflow_allowed, 0);
}

#[test]
fn lock_free_allow_flood_admits_every_overflowing_key() {
    let table = lock_free(OverflowPolicy::Allow);
    let outcome = flood(&table, KeyedPath::OverflowAllowed);
    assert_eq!(outcome.overflow_denied, 0);
}

#[test]
fn heapless_shared_bucket_flood_keeps_throttled_keys() {
    // heapless capacities are powers of two: 8,192 is the closest to 10,000
    let table: Box<HeaplessKeyedTable<u64, Gcra, 8192>> =
        Box::new(HeaplessKeyedTable::new(algorithm()));
    let outcome = flood(&*table, KeyedPath::SharedOverflow);
    assert_eq!(outcome.overflow_allowed, u64::from(BURST));
}

#[test]
fn heapless_deny_flood_refuses_every_overflowing_key() {
    let table: Box<HeaplessKeyedTable<u64, Gcra, 8192>> =
        Box::new(HeaplessKeyedTable::new(algorithm()).with_overflow(OverflowPolicy::Deny));
    let outcome = flood(&*table, KeyedPath::OverflowDenied);
    assert_eq!(outcome.overflow_allowed, 0);
}

#[test]
fn keys_freed_after_refill_are_reused_without_allocating() {
    // After the throttled keys refill, new keys take their slots (lossless
    // eviction on demand), still without allocating.
    let table = sharded(OverflowPolicy::Deny);
    let before = allocations();
    let cap = table.capacity() as u64;
    // fill every shard: keys land by hash, so some overflow before the end
    let (mut own, mut key) = (0, 0);
    while own < cap {
        match table.check(&key, 0).path() {
            KeyedPath::Own => own += 1,
            path => assert_eq!(path, KeyedPath::OverflowDenied),
        }
        key += 1;
    }
    let first_new = key;
    assert_eq!(table.check(&first_new, 0).path(), KeyedPath::OverflowDenied);
    // one permit of burst 5 refills in T = 60 s
    let later = 60_000_000_000;
    // half as many new keys as slots: shards fill unevenly, so a full
    // table's worth could overflow one shard
    for key in first_new..first_new + cap / 2 {
        let decision = table.check(&key, later);
        assert_eq!(decision.path(), KeyedPath::Own, "key {key}");
        assert!(decision.is_allowed());
    }
    // the sweeps evicted every refilled key of the shards they ran in
    assert!(table.len() as u64 >= cap / 2 && (table.len() as u64) < cap);
    assert_eq!(
        table.evict_refilled(later),
        table.len() - (cap / 2) as usize
    );
    assert_eq!(table.len() as u64, cap / 2);
    assert_eq!(allocations(), before);
}
