//! `refund_if_last`, the give-back of a cancelled reservation: the last
//! reservation booked comes back exactly (the state is as before it); one
//! with a later reservation on top stays spent and changes nothing; the
//! last ones cancelled latest first all come back; a reservation whose
//! bucket has refilled since gives nothing. The same on a bare
//! `GcraState` (whole-nanosecond and exact 1/3 s intervals) and on every
//! keyed table.
#![cfg(feature = "std")]

use std::time::Duration;

use tollgate::keyed::{HeaplessKeyedTable, KeyedTable, LockFreeGcraTable, ShardedKeyedTable};
use tollgate::{Algorithm, Gcra, GcraState, Quota, Snapshot, Timestamp};

/// A reservation: what identifies it for `refund_if_last` (when its
/// admission left the bucket full): `now` plus the `reset_after` of the
/// snapshot right after it, which an admission answers with.
fn full_at(now: Timestamp, after: &Snapshot) -> Timestamp {
    Timestamp::from_nanos(now.as_nanos() + after.reset_after_nanos())
}

fn gcras() -> [Gcra; 2] {
    [
        // 10 per second: 100 ms, whole nanoseconds
        Gcra::token_bucket(Quota::per_second(10).unwrap().with_burst(8).unwrap()),
        // 3 per second: 1/3 s, kept in units of 1/3 ns
        Gcra::token_bucket(Quota::per_second(3).unwrap().with_burst(8).unwrap()),
    ]
}

/// The operations under test, on one key of any store.
trait Line {
    fn reserve(&self, now: Timestamp) -> Timestamp;
    fn give_back(&self, full_at: Timestamp, now: Timestamp) -> bool;
    fn snapshot(&self, now: Timestamp) -> Snapshot;
}

struct Bare(Gcra, GcraState);

impl Line for Bare {
    fn reserve(&self, now: Timestamp) -> Timestamp {
        let d = self.0.check_n(&self.1, 1, now);
        assert!(d.is_ok(), "{d:?}");
        let reserved = d.unwrap();
        assert_eq!(reserved, full_at(now, &self.snapshot(now)));
        reserved
    }
    fn give_back(&self, full_at: Timestamp, now: Timestamp) -> bool {
        self.0.refund_if_last(&self.1, 1, full_at, now)
    }
    fn snapshot(&self, now: Timestamp) -> Snapshot {
        self.0.snapshot(&self.1, now)
    }
}

struct Keyed<T>(T);

impl<T: KeyedTable<u64>> Line for Keyed<T> {
    fn reserve(&self, now: Timestamp) -> Timestamp {
        let d = self.0.try_acquire_n(&7, 1, now);
        assert!(d.is_ok(), "{d:?}");
        let reserved = d.unwrap().full_at();
        assert_eq!(reserved, full_at(now, &self.snapshot(now)));
        reserved
    }
    fn give_back(&self, full_at: Timestamp, now: Timestamp) -> bool {
        self.0.refund_if_last(&7, 1, full_at, now)
    }
    fn snapshot(&self, now: Timestamp) -> Snapshot {
        self.0.snapshot(&7, now)
    }
}

fn lines(gcra: Gcra) -> Vec<(&'static str, Box<dyn Line>)> {
    vec![
        ("bare state", Box::new(Bare(gcra, GcraState::new()))),
        (
            "sharded",
            Box::new(Keyed(
                ShardedKeyedTable::<u64, _>::builder(gcra).build().unwrap(),
            )),
        ),
        (
            "lock-free",
            Box::new(Keyed(
                LockFreeGcraTable::<u64>::builder(gcra).build().unwrap(),
            )),
        ),
        (
            "no_std",
            Box::new(Keyed(
                HeaplessKeyedTable::<u64, Gcra, 8>::builder(gcra).build(),
            )),
        ),
    ]
}

#[test]
fn only_the_last_reservation_comes_back_and_exactly() {
    for gcra in gcras() {
        for (name, line) in lines(gcra) {
            let what = format!("{name}, {:?}", gcra.interval());
            let t0 = Timestamp::from_secs(10);
            line.reserve(t0);
            let before = line.snapshot(t0);
            let first = line.reserve(t0);
            let second = line.reserve(t0);
            let full = line.snapshot(t0);
            // a reservation with a later one on top stays spent
            assert!(!line.give_back(first, t0), "{what}");
            assert_eq!(line.snapshot(t0), full, "{what}");
            // the last one comes back, then the one before it is last
            let later = t0 + Duration::from_millis(10);
            assert!(line.give_back(second, later), "{what}");
            assert!(line.give_back(first, later), "{what}");
            assert_eq!(line.snapshot(t0), before, "{what}: exactly as before");
            // given back once: a second time gives nothing
            assert!(!line.give_back(first, later), "{what}");
            assert_eq!(line.snapshot(t0), before, "{what}");
        }
    }
}

#[test]
fn a_reservation_whose_turn_has_passed_gives_nothing_back() {
    for gcra in gcras() {
        for (name, line) in lines(gcra) {
            let what = format!("{name}, {:?}", gcra.interval());
            let t0 = Timestamp::from_secs(10);
            let only = line.reserve(t0);
            // the bucket is full again at `only`: nothing left to give
            assert!(!line.give_back(only, only), "{what}");
            let after = only + Duration::from_secs(1);
            assert!(!line.give_back(only, after), "{what}");
            assert_eq!(line.snapshot(after).remaining(), 8, "{what}");
        }
    }
}
