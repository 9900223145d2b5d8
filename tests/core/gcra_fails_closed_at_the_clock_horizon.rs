//! Regression (found by the `quota_model` fuzz target, issue 19): a
//! whole-nanosecond bucket checked at the end of the clock's range
//! (`Timestamp::MAX`, or any instant within one lead of it) stored a TAT
//! that saturated at `u64::MAX`, so a second check at the same instant saw
//! a full bucket: two permits of a burst-1 quota at once. The fuzzer's
//! input was `Quota::new(1, 21.47 s)`, a check at 2^48 ns, then a clock
//! jump that saturated at `u64::MAX` and two checks there. Now every
//! bucket stops its clock at its horizon (`u64::MAX − 2 − max_lead`
//! units) and fails closed past it, as scaled (exact-rate) buckets did.

use std::time::Duration;

use tollgate::keyed::HeaplessKeyedTable;
use tollgate::{Bucket, Gcra, Limiter, Quota, Timestamp};

fn quotas() -> Vec<Quota> {
    vec![
        Quota::new(1, Duration::from_nanos(21_474_836_480)).unwrap(),
        Quota::per_second(10).unwrap().with_burst(3).unwrap(),
        // scaled: units of 1/3 ns
        Quota::per_second(3).unwrap().with_burst(2).unwrap(),
        Quota::per_hour(1).unwrap(),
    ]
}

/// Admissions of single permits at `at`, tried `tries` times.
fn admitted(check: impl Fn() -> bool, tries: u32) -> u32 {
    (0..tries).map(|_| u32::from(check())).sum()
}

#[test]
fn buckets_admit_at_most_their_burst_at_the_end_of_time() {
    for q in quotas() {
        for leaky in [false, true] {
            let b = if leaky {
                Bucket::leaky_bucket(q)
            } else {
                Bucket::token_bucket(q)
            };
            let burst = if leaky { 1 } else { q.burst() };
            // a check long before, then the clock at its very end, and
            // just before it
            assert!(b.check(Timestamp::from_nanos(1 << 48)).is_ok());
            for at in [u64::MAX, u64::MAX - 1, u64::MAX - 2] {
                let got = admitted(|| b.check(Timestamp::from_nanos(at)).is_ok(), 10);
                assert!(got <= burst, "{q:?} leaky {leaky}: {got} admitted at {at}");
            }
            // the bucket has stopped refilling: it fails closed
            let got = admitted(|| b.check(Timestamp::MAX).is_ok(), 10);
            assert_eq!(got, 0, "{q:?} leaky {leaky}: refilled past the horizon");
        }
    }
}

#[test]
fn a_fresh_bucket_at_the_end_of_time_admits_its_burst_once() {
    for q in quotas() {
        let b = Bucket::token_bucket(q);
        let got = admitted(|| b.check(Timestamp::MAX).is_ok(), q.burst() + 5);
        assert_eq!(got, q.burst(), "{q:?}");
        // a refund gives back no more than was taken
        b.refund(u32::MAX, Timestamp::MAX);
        let again = admitted(|| b.check(Timestamp::MAX).is_ok(), q.burst() + 5);
        assert!(again <= q.burst(), "{q:?}: {again} after a refund");
    }
}

#[test]
fn keyed_tables_admit_at_most_the_burst_per_key_at_the_end_of_time() {
    for q in quotas() {
        let table = HeaplessKeyedTable::<u8, Gcra, 8>::builder(Gcra::token_bucket(q)).build();
        for key in 0..4u8 {
            assert!(
                table
                    .try_acquire(&key, Timestamp::from_nanos(1 << 48))
                    .is_ok()
            );
            let got = admitted(|| table.try_acquire(&key, Timestamp::MAX).is_ok(), 10);
            assert!(got <= q.burst(), "{q:?} key {key}: {got} admitted");
        }
    }
}
