//! A flood of 1,000,000 distinct keys into a full table: no allocation after
//! construction, every key throttled before the flood is still throttled
//! after it, and the overflow policy is applied and reported.
#![cfg(feature = "std")] // every table, the std ones included (keyed_support)

mod keyed_support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ops::Deref;

use keyed_support::{Spec, t};
use tollgate::keyed::{KeyedPath, KeyedTable, OverflowPolicy};
use tollgate::{Gcra, Limiter, Quota};

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
/// The size asked of every table: the std tables may round it up to whole
/// shards, the heapless one takes 8,192 (the power of two below it).
const MAX_KEYS: usize = 10_000;

/// 60 per hour (T = 60 s), burst 5: nothing refills during the flood.
fn algorithm() -> Gcra {
    Gcra::token_bucket(Quota::per_hour(60).unwrap().with_burst(BURST).unwrap())
}

fn spec(policy: OverflowPolicy) -> Spec {
    Spec::new(algorithm(), MAX_KEYS)
        .shards(None)
        .overflow(policy)
}

struct FloodOutcome {
    own: u64,
    overflow_allowed: u64,
    overflow_denied: u64,
}

/// Throttles keys `0..THROTTLED`, floods `FLOOD` fresh keys, and checks
/// the invariants that do not depend on the policy. Every check happens
/// after construction, so every allocation it counts is a failure.
fn flood<T: KeyedTable<u64> + ?Sized>(table: &T, expected_path: KeyedPath) -> FloodOutcome {
    let before = allocations();
    let mut now = 1_000;
    for key in 0..THROTTLED {
        for _ in 0..BURST {
            assert!(table.try_acquire(&key, t(now)).is_ok());
        }
        let refused = table.try_acquire(&key, t(now));
        assert!(refused.is_err());
        assert_eq!(refused.unwrap_err().path(), KeyedPath::Own);
    }
    let mut outcome = FloodOutcome {
        own: 0,
        overflow_allowed: 0,
        overflow_denied: 0,
    };
    for key in THROTTLED..THROTTLED + FLOOD {
        now += 1_000; // 1 µs per request: the whole flood lasts 1 s
        let decision = table.try_acquire(&key, t(now));
        match decision {
            // A refusal reports its path: never the key's own (a fresh
            // key's first request is admitted there), always the policy's.
            Err(refusal) => {
                assert_eq!(refusal.path(), expected_path, "key {key}");
                outcome.overflow_denied += 1;
            }
            // An admission no longer reports its path: the key's own path
            // gave it a slot (nothing is evicted during the flood: no key
            // refills), an overflow admission (shared bucket, allowed)
            // did not.
            Ok(_) if table.contains(&key) => outcome.own += 1,
            Ok(_) => {
                assert_ne!(expected_path, KeyedPath::OverflowDenied, "key {key}");
                outcome.overflow_allowed += 1;
            }
        }
    }
    // Still throttled, by their own bucket: the flood evicted none of them.
    for key in 0..THROTTLED {
        let decision = table.try_acquire(&key, t(now));
        assert!(decision.is_err(), "key {key} was reset by the flood");
        assert_eq!(decision.unwrap_err().path(), KeyedPath::Own);
    }
    assert_eq!(table.len(), table.max_keys());
    // Every slot not taken by a throttled key went to a flood key, then the
    // rest overflowed.
    assert_eq!(outcome.own, table.max_keys() as u64 - THROTTLED);
    assert_eq!(
        outcome.own + outcome.overflow_allowed + outcome.overflow_denied,
        FLOOD
    );
    let after = allocations();
    assert_eq!(after, before, "(allocations, bytes) after construction");
    outcome
}

// The behaviours take a maker returning any pointer to a table (`Box`:
// the heapless table of 8,192 keys is too big for a test thread's stack
// frames).

fn shared_bucket_flood_admits_one_burst_through_overflow<B>(make: impl Fn(Spec) -> B)
where
    B: Deref<Target: KeyedTable<u64>>,
{
    let table = make(spec(OverflowPolicy::SharedBucket));
    let outcome = flood(&*table, KeyedPath::SharedOverflow);
    // the shared bucket is one key's quota: its burst, no refill in 1 s
    assert_eq!(outcome.overflow_allowed, u64::from(BURST));
    assert_eq!(table.shared_snapshot(t(FLOOD * 1_000)).remaining(), 0);
}

fn deny_flood_refuses_every_overflowing_key<B>(make: impl Fn(Spec) -> B)
where
    B: Deref<Target: KeyedTable<u64>>,
{
    let table = make(spec(OverflowPolicy::Deny));
    let outcome = flood(&*table, KeyedPath::OverflowDenied);
    assert_eq!(outcome.overflow_allowed, 0);
    assert!(outcome.overflow_denied > 980_000);
}

fn allow_flood_admits_every_overflowing_key<B>(make: impl Fn(Spec) -> B)
where
    B: Deref<Target: KeyedTable<u64>>,
{
    let table = make(spec(OverflowPolicy::Allow));
    let outcome = flood(&*table, KeyedPath::OverflowAllowed);
    assert_eq!(outcome.overflow_denied, 0);
    assert!(outcome.overflow_allowed > 980_000);
}

/// After the throttled keys refill, new keys take their slots (lossless
/// eviction on demand), still without allocating.
fn keys_freed_after_refill_are_reused_without_allocating<B>(make: impl Fn(Spec) -> B)
where
    B: Deref<Target: KeyedTable<u64>>,
{
    let table = make(spec(OverflowPolicy::Deny));
    let before = allocations();
    let cap = table.max_keys() as u64;
    // fill every shard: keys land by hash, so some overflow before the end
    let (mut own, mut key) = (0, 0);
    while own < cap {
        match table.try_acquire(&key, t(0)) {
            // an admission (overflow is denied): the key's own slot
            Ok(_) => {
                assert!(table.contains(&key), "key {key}");
                own += 1;
            }
            Err(refusal) => assert_eq!(refusal.path(), KeyedPath::OverflowDenied),
        }
        key += 1;
    }
    let first_new = key;
    assert_eq!(
        table.try_acquire(&first_new, t(0)).unwrap_err().path(),
        KeyedPath::OverflowDenied
    );
    // one permit of burst 5 refills in T = 60 s
    let later = t(60_000_000_000);
    // half as many new keys as slots: shards fill unevenly, so a full
    // table's worth could overflow one shard
    for key in first_new..first_new + cap / 2 {
        let decision = table.try_acquire(&key, later);
        // the key's own path: admitted (overflow is denied) into a slot
        assert!(decision.is_ok(), "key {key}: {decision:?}");
        assert!(table.contains(&key), "key {key}");
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

/// The sharded table of `spec`, checking its size: 10,000 rounded up to
/// whole shards.
fn sharded(spec: Spec) -> Box<keyed_support::Sharded> {
    let table = Box::new(keyed_support::sharded(spec));
    assert!(table.max_keys() >= MAX_KEYS && table.max_keys() < MAX_KEYS + table.shards());
    table
}

fn lock_free(spec: Spec) -> Box<keyed_support::LockFree> {
    let table = Box::new(keyed_support::lock_free(spec));
    assert!(table.max_keys() >= MAX_KEYS && table.max_keys() < MAX_KEYS + table.shards());
    table
}

fn heapless(spec: Spec) -> Box<keyed_support::Heapless<8192>> {
    let table = Box::new(keyed_support::heapless::<8192>(spec));
    assert_eq!(table.max_keys(), 8192);
    table
}

macro_rules! every_boxed_table {
    ($($name:ident),* $(,)?) => {
        mod on {
            $(
                pub mod $name {
                    #[test]
                    fn sharded() {
                        super::super::$name(super::super::sharded);
                    }
                    #[test]
                    fn lock_free() {
                        super::super::$name(super::super::lock_free);
                    }
                    #[test]
                    fn heapless() {
                        super::super::$name(super::super::heapless);
                    }
                }
            )*
        }
    };
}

every_boxed_table! {
    shared_bucket_flood_admits_one_burst_through_overflow,
    deny_flood_refuses_every_overflowing_key,
    allow_flood_admits_every_overflowing_key,
    keys_freed_after_refill_are_reused_without_allocating,
}
