//! `WithStats` under concurrent checks, refunds and `take`: in every
//! interleaving the counters equal the permits the threads saw admitted,
//! refused (refusals and impossible requests) and refunded: no count is
//! lost or doubled, and `take` (swap to zero) racing the updates loses
//! nothing either (taken + left = total).
#![cfg(loom)]

use core::time::Duration;

use loom::sync::Arc;
use loom_tests::{model, t};
use tollgate::{Bucket, FixedWindow, Gcra, Limiter, Quota, Statistics, WithStats};

/// Permits one thread saw: (admitted, refused, refunded).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Seen {
    admitted: u64,
    refused: u64,
    refunded: u64,
}

impl Seen {
    fn check<L: Limiter>(&mut self, limiter: &L, n: u32, now: u64) -> bool {
        let allowed = limiter.try_acquire_n(&(), n, t(now)).is_ok();
        if allowed {
            self.admitted += u64::from(n);
        } else {
            self.refused += u64::from(n);
        }
        allowed
    }

    fn check_one<L: Limiter>(&mut self, limiter: &L, now: u64) -> bool {
        let allowed = limiter.try_acquire(&(), t(now)).is_ok();
        if allowed {
            self.admitted += 1;
        } else {
            self.refused += 1;
        }
        allowed
    }

    fn refund<L: Limiter>(&mut self, limiter: &L, n: u32, now: u64) {
        limiter.refund(&(), n, t(now));
        self.refunded += u64::from(n);
    }

    fn plus(self, other: Self) -> Self {
        Self {
            admitted: self.admitted + other.admitted,
            refused: self.refused + other.refused,
            refunded: self.refunded + other.refunded,
        }
    }

    fn of(stats: Statistics) -> Self {
        Self {
            admitted: stats.admitted,
            refused: stats.refused,
            refunded: stats.refunded,
        }
    }
}

#[test]
fn counters_equal_what_the_threads_saw() {
    // A token bucket (T = 10 ns, burst 2) asked for more than it holds:
    // single checks, a weighted one, an impossible one (n > burst, counted
    // as refused) and a chain-style refund.
    let quota = Quota::new(1, Duration::from_nanos(10))
        .and_then(|q| q.with_burst(2))
        .expect("valid quota");
    model::check(move || {
        let limiter = Arc::new(WithStats::new(Bucket::new(Gcra::token_bucket(quota))));
        let a = {
            let l = Arc::clone(&limiter);
            loom::thread::spawn(move || {
                let mut seen = Seen::default();
                if seen.check_one(&*l, 100) {
                    seen.refund(&*l, 1, 100);
                }
                seen
            })
        };
        let b = {
            let l = Arc::clone(&limiter);
            loom::thread::spawn(move || {
                let mut seen = Seen::default();
                seen.check(&*l, 2, 101);
                seen
            })
        };
        let mut mine = Seen::default();
        mine.check(&*limiter, 3, 100); // can never succeed
        mine.check_one(&*limiter, 102);
        let total = mine.plus(a.join().expect("a")).plus(b.join().expect("b"));
        let stats = limiter.statistics(&(), t(102));
        assert_eq!(Seen::of(stats), total);
        assert_eq!(
            total.refused + total.admitted,
            7,
            "every permit asked counted once"
        );
        assert!(total.admitted >= 1, "someone got in");
    });
}

#[test]
fn take_racing_updates_loses_nothing() {
    // A fixed window (2 per 100 ns) asked for 3; a thread takes the
    // counters mid-run: what it took plus what is left is the total.
    model::check(|| {
        let limiter = Arc::new(WithStats::new(Bucket::new(
            FixedWindow::new(2, Duration::from_nanos(100)).expect("valid window"),
        )));
        let checker = {
            let l = Arc::clone(&limiter);
            loom::thread::spawn(move || {
                let mut seen = Seen::default();
                seen.check_one(&*l, 10);
                seen.check_one(&*l, 20);
                seen
            })
        };
        let taker = {
            let l = Arc::clone(&limiter);
            loom::thread::spawn(move || Seen::of(l.take()))
        };
        let mut mine = Seen::default();
        mine.check_one(&*limiter, 30);
        let total = mine.plus(checker.join().expect("checker"));
        let taken = taker.join().expect("taker");
        let left = Seen::of(limiter.take());
        assert_eq!(taken.plus(left), total);
        assert_eq!((total.admitted, total.refused), (2, 1));
    });
}
