//! Per-key quotas: a function of the key picks each key's algorithm; the
//! table stores only state, and the default runs the shared overflow bucket.

use tollgate::keyed::{HeaplessKeyedTable, KeyedPath, ShardedKeyedTable};
use tollgate::{Gcra, Quota};

const SECOND: u64 = 1_000_000_000;

fn per_second(n: u32, burst: u32) -> Gcra {
    Gcra::token_bucket(Quota::per_second(n).unwrap().allow_burst(burst).unwrap())
}

/// API keys starting with "premium-" get burst 10, others burst 2.
#[allow(clippy::ptr_arg)] // a per-key quota receives &K, here &String
fn plan(key: &String) -> Gcra {
    if key.starts_with("premium-") {
        per_second(10, 10)
    } else {
        per_second(1, 2)
    }
}

fn burst_of(check: impl Fn() -> bool) -> usize {
    (0..20).take_while(|_| check()).count()
}

#[test]
fn sharded_closure_gives_each_key_its_quota() {
    let table = ShardedKeyedTable::builder(per_second(1, 2))
        .capacity(100)
        .per_key(plan)
        .build::<String>()
        .unwrap();
    let premium = "premium-7".to_string();
    let free = "free-7".to_string();
    assert_eq!(burst_of(|| table.check(&premium, 0).is_allowed()), 10);
    assert_eq!(burst_of(|| table.check(&free, 0).is_allowed()), 2);
    assert_eq!(table.snapshot(&premium, 0).limit(), 10);
    assert_eq!(table.snapshot(&free, 0).limit(), 2);
    // premium refills at 10/s: 100 ms for one permit; free at 1/s
    assert_eq!(table.time_until_ready(&premium, 1, 0).unwrap(), SECOND / 10);
    assert_eq!(table.time_until_ready(&free, 1, 0).unwrap(), SECOND);
    // the can-never-succeed error follows the key's own quota
    assert!(table.check_n(&free, 5, SECOND).is_err());
    assert!(table.check_n(&premium, 5, SECOND).is_ok());
}

#[test]
fn heapless_fn_pointer_gives_each_key_its_quota() {
    fn by_priority(id: &u8) -> Gcra {
        if *id < 0x10 {
            per_second(100, 8)
        } else {
            per_second(1, 1)
        }
    }
    let table = HeaplessKeyedTable::<u8, Gcra, 8>::new(per_second(1, 1)).with_per_key(by_priority);
    assert_eq!(burst_of(|| table.check(&0x01, 0).is_allowed()), 8);
    assert_eq!(burst_of(|| table.check(&0x20, 0).is_allowed()), 1);
    assert_eq!(table.time_until_ready(&0x01, 1, 0).unwrap(), SECOND / 100);
}

#[test]
fn static_heapless_table_built_const_gives_each_key_its_quota_and_overflows_to_the_default() {
    const FAST: Quota = match Quota::per_second(100) {
        Ok(q) => match q.allow_burst(8) {
            Ok(q) => q,
            Err(_) => panic!("burst"),
        },
        Err(_) => panic!("quota"),
    };
    const DEFAULT: Quota = match Quota::per_second(1) {
        Ok(q) => match q.allow_burst(3) {
            Ok(q) => q,
            Err(_) => panic!("burst"),
        },
        Err(_) => panic!("quota"),
    };
    fn by_id(_: &u8) -> Gcra {
        Gcra::token_bucket(FAST)
    }
    // built in a const context: the per-key quota lives in the static
    static TABLE: HeaplessKeyedTable<u8, Gcra, 2, fn(&u8) -> Gcra> =
        HeaplessKeyedTable::from_parts_per_key(
            Gcra::token_bucket(DEFAULT),
            tollgate::GcraState::new(),
            by_id as fn(&u8) -> Gcra,
        );
    // both slots: each key gets its own burst of 8
    assert_eq!(burst_of(|| TABLE.check(&1, 0).is_allowed()), 8);
    assert_eq!(burst_of(|| TABLE.check(&2, 0).is_allowed()), 8);
    assert_eq!(TABLE.time_until_ready(&1, 1, 0).unwrap(), SECOND / 100);
    // full of throttled keys: a third key takes the shared bucket, which
    // runs the default quota (burst 3), not the key's (burst 8)
    let third: Vec<_> = (0..5).map(|_| TABLE.check(&3, 0)).collect();
    assert!(third.iter().all(|d| d.path() == KeyedPath::SharedOverflow));
    assert_eq!(third.iter().filter(|d| d.is_allowed()).count(), 3);
    assert!(TABLE.contains(&1) && TABLE.contains(&2) && !TABLE.contains(&3));
}

#[test]
fn overflow_of_a_per_key_table_uses_the_default_quota() {
    // capacity 1: the second key overflows into the shared bucket, which
    // runs the default quota (burst 3), not the key's (burst 10)
    let table = ShardedKeyedTable::builder(per_second(1, 3))
        .capacity(1)
        .shards(1)
        .per_key(|k: &u32| {
            if *k == 0 {
                per_second(1, 1)
            } else {
                per_second(10, 10)
            }
        })
        .build::<u32>()
        .unwrap();
    assert!(table.check(&0, 0).is_allowed());
    let overflowing: Vec<_> = (0..5).map(|_| table.check(&1, 0)).collect();
    assert!(overflowing
        .iter()
        .all(|d| d.path() == KeyedPath::SharedOverflow));
    assert_eq!(overflowing.iter().filter(|d| d.is_allowed()).count(), 3);
    // a weight the key allows but the default cannot ever grant: refused
    // with a wait for a slot, not an error the key could never overcome
    let heavy = table.check_n(&1, 5, 0).unwrap();
    assert!(heavy.is_denied());
    assert_eq!(heavy.path(), KeyedPath::SharedOverflow);
    assert_eq!(
        heavy.decision().retry_after().as_nanos(),
        u128::from(SECOND)
    );
}
