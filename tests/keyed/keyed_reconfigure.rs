//! Live reconfiguration of a keyed table: `reconfigure` runs a new default
//! algorithm and carries what each default key (and the shared overflow
//! state) has used over by an `Inheritance` rule; `update_key_quota`
//! changes one key's per-key quota and converts that key only.
#![cfg(feature = "std")] // every table, the std ones included (keyed_support)

use crate::keyed_support;

use std::cell::Cell;
use std::time::Duration;

use keyed_support::{MS, QuotaMap, Quotas, SECOND, Spec, per_second, t};
use tollgate::keyed::{KeyedPath, KeyedTable};
use tollgate::{BucketKind, Gcra, Inheritance, Quota};

/// When every conversion happens: away from zero.
const NOW: u64 = 5 * SECOND;

/// 10 per second (T = 100 ms), burst 10: the default before.
fn before() -> Gcra {
    per_second(10, 10)
}

/// 20 per second (T = 50 ms), burst 20: the default after.
fn after() -> Gcra {
    per_second(20, 20)
}

/// What a key that used 6 of 10 keeps of a burst of 20, by rule.
const RULES: [(Inheritance, u32); 3] = [
    (Inheritance::UsedAmount, 14),
    (Inheritance::UsedFraction, 8),
    (Inheritance::Reset, 20),
];

/// A table of 4 keys: key 1 (default) used 6 of 10, key 100 (its own
/// quota, the same as the default) used 6 of 10, keys 2 and 3 (default)
/// used all 10; a fifth key overflowed into the shared bucket and used 6.
fn busy_table<T: KeyedTable<u64, Algorithm = Gcra>>(make: &impl Fn(Spec) -> T) -> T {
    let quotas = QuotaMap::leak([(100, before())]);
    let table = make(Spec::new(before(), 4).quotas(Quotas::Map(quotas)));
    let now = t(NOW);
    assert!(table.try_acquire_n(&1, 6, now).is_ok());
    assert!(table.try_acquire_n(&100, 6, now).is_ok());
    assert!(table.try_acquire_n(&2, 10, now).is_ok());
    assert!(table.try_acquire_n(&3, 10, now).is_ok());
    assert_eq!(table.len(), 4);
    assert_eq!(table.shared_snapshot(now).remaining(), 10);
    let overflow = table.try_acquire_n(&50, 6, now);
    assert!(overflow.is_ok());
    // an admission reports no path: the shared overflow state paid for it
    // (10 -> 4) and key 50 got no slot
    assert_eq!(table.shared_snapshot(now).remaining(), 4);
    assert!(!table.contains(&50));
    assert_eq!(table.len(), 4);
    // the shared state answers the next overflowing key: 5 is more than
    // its 4 left (a fresh key of its own would have all 10), refused by
    // the shared path
    let refused = table.try_acquire_n(&51, 5, now).unwrap_err();
    assert_eq!(refused.path(), KeyedPath::SharedOverflow);
    assert_eq!(table.shared_snapshot(now).remaining(), 4);
    table
}

fn each_inheritance_rule_keeps_what_it_says<T: KeyedTable<u64, Algorithm = Gcra>>(
    make: impl Fn(Spec) -> T,
) {
    let now = t(NOW);
    for (how, remaining) in RULES {
        let table = busy_table(&make);
        table.reconfigure(after(), how, now);
        assert_eq!(table.default_algorithm(), after(), "{how:?}");
        // a default key that used 6 of 10
        let key = table.snapshot(&1, now);
        assert_eq!((key.limit(), key.remaining()), (20, remaining), "{how:?}");
        assert_eq!(table.capacity(&1), 20);
        // the shared overflow state used 6 of 10 too: converted alike
        let shared = table.shared_snapshot(now);
        assert_eq!(
            (shared.limit(), shared.remaining()),
            (20, remaining),
            "{how:?}"
        );
        // a key with its own quota is not converted
        let own = table.snapshot(&100, now);
        assert_eq!((own.limit(), own.remaining()), (10, 4), "{how:?}");
        assert_eq!(table.capacity(&100), 10);
        // a key that used all 10: 10 of 20, all 20, or nothing
        let full_before = match how {
            Inheritance::UsedAmount => 10,
            Inheritance::UsedFraction => 0,
            _ => 20,
        };
        assert_eq!(table.snapshot(&2, now).remaining(), full_before, "{how:?}");
        // a key never seen is fresh under the new quota
        assert_eq!(table.snapshot(&7, now).remaining(), 20);
        // no key was added or dropped
        assert_eq!(table.len(), 4);
        assert!([1, 100, 2, 3].iter().all(|k| table.contains(k)));

        // the decisions follow: exactly `remaining` more now, then one
        // every new interval (50 ms)
        assert!(table.try_acquire_n(&1, remaining, now).is_ok());
        let refused = table.try_acquire(&1, now);
        assert!(refused.is_err(), "{how:?}");
        assert_eq!(
            refused.unwrap_err().retry_after(),
            Duration::from_millis(50)
        );
        assert!(table.try_acquire(&1, t(NOW + 50 * MS)).is_ok());
        // the key with its own quota still refills at 10 per second
        assert!(table.try_acquire_n(&100, 4, now).is_ok());
        assert_eq!(
            table.try_acquire(&100, now).unwrap_err().retry_after(),
            Duration::from_millis(100)
        );
    }
}

/// What was used drains at the new rate after the change.
fn used_permits_drain_at_the_new_rate<T: KeyedTable<u64, Algorithm = Gcra>>(
    make: impl Fn(Spec) -> T,
) {
    let table = busy_table(&make);
    table.reconfigure(after(), Inheritance::UsedAmount, t(NOW));
    // 6 used at T = 50 ms: one back every 50 ms, all back after 300 ms
    for (elapsed, remaining) in [(0, 14), (50, 15), (149, 16), (150, 17), (300, 20)] {
        let s = table.snapshot(&1, t(NOW + elapsed * MS));
        assert_eq!(s.remaining(), remaining, "{elapsed} ms");
    }
    assert_eq!(
        table.snapshot(&1, t(NOW)).reset_after(),
        Duration::from_millis(300)
    );
    // refilled: idle, so evicting it is lossless as before
    assert_eq!(table.evict_refilled(t(NOW + 300 * MS)), 1);
    assert!(!table.contains(&1));
}

/// More used than the new quota holds leaves an empty bucket (no debt
/// beyond it), for a key and for the shared state.
fn more_used_than_the_new_quota_holds_is_an_empty_bucket<T: KeyedTable<u64, Algorithm = Gcra>>(
    make: impl Fn(Spec) -> T,
) {
    for how in [Inheritance::UsedAmount, Inheritance::UsedFraction] {
        let table = busy_table(&make);
        let now = t(NOW);
        // 2 per second, burst 2 (T = 500 ms): key 2 used all 10 (more than
        // 2 by either rule), key 1 used 6 (more than 2 by amount; 60 % of
        // 2 = 1.2 by fraction)
        table.reconfigure(per_second(2, 2), how, now);
        let key_1 = match how {
            Inheritance::UsedAmount => (1_000, 500),
            _ => (600, 100),
        };
        for (key, (reset_ms, retry_ms)) in [(2, (1_000, 500)), (1, key_1)] {
            let s = table.snapshot(&key, now);
            assert_eq!(s.remaining(), 0, "key {key} {how:?}");
            // empty at now (reset 1 s): the next permit in one new
            // interval, 500 ms
            assert_eq!(
                s.reset_after(),
                Duration::from_millis(reset_ms),
                "key {key} {how:?}"
            );
            let d = table.try_acquire(&key, now);
            assert_eq!(
                d.unwrap_err().retry_after(),
                Duration::from_millis(retry_ms),
                "key {key} {how:?}"
            );
        }
        // the shared state used 6 of 10, like key 1
        let shared = table.shared_snapshot(now);
        assert_eq!(shared.remaining(), 0, "{how:?}");
        assert_eq!(
            shared.reset_after(),
            Duration::from_millis(key_1.0),
            "{how:?}"
        );
    }
}

/// A full key stays full under any rule; the kind of bucket can change.
fn a_full_key_stays_full_and_the_kind_can_change<T: KeyedTable<u64, Algorithm = Gcra>>(
    make: impl Fn(Spec) -> T,
) {
    let leaky = Gcra::leaky_bucket(Quota::per_second(4).unwrap().with_burst(2).unwrap());
    for how in [
        Inheritance::UsedAmount,
        Inheritance::UsedFraction,
        Inheritance::Reset,
    ] {
        let table = make(Spec::new(before(), 4));
        let now = t(NOW);
        assert!(table.try_acquire(&1, now).is_ok());
        // key 9 used one permit long ago: full again, still tracked
        assert!(table.try_acquire(&9, t(0)).is_ok());
        table.reconfigure(leaky, how, now);
        assert_eq!(table.default_algorithm().kind(), BucketKind::LeakyBucket);
        let s = table.snapshot(&9, now);
        assert_eq!((s.limit(), s.remaining()), (2, 2), "{how:?}");
        assert!(table.try_acquire_n(&9, 2, now).is_ok());
        // key 1 used 1 of 10 (100 ms): by amount 1 of 2 at 250 ms, by
        // fraction 10 % of 500 ms; a leaky bucket admits once drained
        let wait = match how {
            Inheritance::UsedAmount => Duration::from_millis(250),
            Inheritance::UsedFraction => Duration::from_millis(50),
            _ => Duration::ZERO,
        };
        let d = table.try_acquire(&1, now);
        assert_eq!(d.is_ok(), wait.is_zero(), "{how:?}");
        if !wait.is_zero() {
            assert_eq!(d.unwrap_err().retry_after(), wait, "{how:?}");
            assert!(table.try_acquire(&1, now + wait).is_ok(), "{how:?}");
        }
    }
}

/// `update_key_quota` converts the one key whose per-key quota changed,
/// through a function reading a shared map; nothing else moves.
fn update_key_quota_converts_that_key_only<T: KeyedTable<u64, Algorithm = Gcra>>(
    make: impl Fn(Spec) -> T,
) {
    let now = t(NOW);
    let own = per_second(10, 10);
    let quotas = QuotaMap::leak([(3, own)]);
    let table = make(Spec::new(before(), 8).quotas(Quotas::Map(quotas)));
    for key in [1, 2, 3] {
        assert!(table.try_acquire_n(&key, 6, now).is_ok());
    }
    let overflow_before = table.shared_snapshot(now);
    let calls = Cell::new(0);

    // key 1: from the default to its own 20/s, burst 20, by amount
    table.update_key_quota(&1, Inheritance::UsedAmount, now, &mut || {
        calls.set(calls.get() + 1);
        quotas.set(1, Some(after()));
    });
    assert_eq!(calls.get(), 1);
    let s = table.snapshot(&1, now);
    assert_eq!((s.limit(), s.remaining()), (20, 14));
    // nothing else changed: key 2 (default), key 3 (own), the default,
    // the shared state
    for key in [2, 3] {
        let s = table.snapshot(&key, now);
        assert_eq!((s.limit(), s.remaining()), (10, 4), "key {key}");
    }
    assert_eq!(table.default_algorithm(), before());
    assert_eq!(table.shared_snapshot(now), overflow_before);

    // key 3: its own quota becomes 20/s, burst 20, by fraction
    table.update_key_quota(&3, Inheritance::UsedFraction, now, &mut || {
        calls.set(calls.get() + 1);
        quotas.set(3, Some(after()));
    });
    let s = table.snapshot(&3, now);
    assert_eq!((s.limit(), s.remaining()), (20, 8));
    assert_eq!(table.snapshot(&1, now).remaining(), 14);
    assert_eq!(table.snapshot(&2, now).remaining(), 4);

    // key 1 back to the default, reset: a full default bucket
    table.update_key_quota(&1, Inheritance::Reset, now, &mut || {
        calls.set(calls.get() + 1);
        quotas.set(1, None);
    });
    let s = table.snapshot(&1, now);
    assert_eq!((s.limit(), s.remaining()), (10, 10));

    // an untracked key: no state to convert, and it is not inserted
    table.update_key_quota(&9, Inheritance::UsedAmount, now, &mut || {
        calls.set(calls.get() + 1);
        quotas.set(9, Some(per_second(1, 1)));
    });
    assert!(!table.contains(&9));
    assert_eq!(table.snapshot(&9, now).limit(), 1);
    assert_eq!(table.len(), 3);
    assert_eq!(calls.get(), 4);

    // the decisions follow the converted states
    assert!(table.try_acquire_n(&3, 8, now).is_ok());
    assert!(table.try_acquire(&3, now).is_err());
    assert!(table.try_acquire_n(&1, 10, now).is_ok());
    assert!(table.try_acquire(&2, now).is_ok());

    // a reconfiguration now converts key 1 (default again) and key 2,
    // never key 3 (its own quota)
    table.reconfigure(per_second(5, 5), Inheritance::Reset, now);
    for (key, remaining) in [(1, 5), (2, 5), (3, 0)] {
        assert_eq!(
            table.snapshot(&key, now).remaining(),
            remaining,
            "key {key}"
        );
    }
    assert_eq!(table.snapshot(&3, now).limit(), 20);
}

keyed_support::every_table! {
    each_inheritance_rule_keeps_what_it_says: heapless 4,
    used_permits_drain_at_the_new_rate: heapless 4,
    more_used_than_the_new_quota_holds_is_an_empty_bucket: heapless 4,
    a_full_key_stays_full_and_the_kind_can_change: heapless 4,
    update_key_quota_converts_that_key_only: heapless 8,
}
