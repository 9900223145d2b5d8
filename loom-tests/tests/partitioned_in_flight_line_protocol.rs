//! The line protocol of a partitioned limiter's in-flight policy
//! (`src/partitioned/lines.rs`): a release gives its permits back to the
//! key's counter, then a `SeqCst` fence, then reads the table's count of
//! waiters and, if any, hands the permits to the front of the key's line
//! under the lines' lock; a waiter announces itself (count, then fence)
//! before it looks at the counter. Models: a waiter racing the release of
//! the only permit is never lost (woken once, then admitted); a granted
//! waiter cancelled racing the release passes the permit on exactly once;
//! a newcomer racing a release never overtakes the line.
#![cfg(loom)]

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Wake, Waker};

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom_tests::model;
use tollgate::partitioned::Partitioned;
use tollgate::{Limiter, Timestamp};

/// A waker that counts its wake-ups (loom sees the counter).
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: std::sync::Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counting() -> (std::sync::Arc<CountingWaker>, Waker) {
    let counter = std::sync::Arc::new(CountingWaker(AtomicUsize::new(0)));
    (std::sync::Arc::clone(&counter), Waker::from(counter))
}

/// One job in flight per tenant.
fn one_per_tenant() -> std::sync::Arc<Partitioned<u32, u32>> {
    std::sync::Arc::new(
        Partitioned::<u32, u32>::builder("jobs")
            .concurrency(
                "per_tenant",
                |t: &u32| Some(*t),
                Partitioned::<u32, u32>::in_flight_table(1, 4).expect("valid table"),
            )
            .build(),
    )
}

fn poll<F: Future + Unpin>(f: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(f).poll(&mut Context::from_waker(waker))
}

const NOW: Timestamp = Timestamp::ZERO;

#[test]
fn a_waiter_racing_the_release_of_the_only_permit_is_woken_and_admitted() {
    model::check(|| {
        let p = one_per_tenant();
        let held = p.try_acquire(&7, NOW).expect("free");
        let releaser = loom::thread::spawn(move || drop(held));
        let (woken, waker) = counting();
        let mut waiting = Box::pin(p.acquire_key_in_line(0, 7, 1, usize::MAX, NOW));
        let first = poll(&mut waiting, &waker);
        releaser.join().expect("releaser");
        let admission = match first {
            Poll::Ready(r) => r.expect("admitted at once"),
            Poll::Pending => {
                assert_eq!(
                    woken.0.load(Ordering::SeqCst),
                    1,
                    "the release must wake the queued waiter exactly once"
                );
                match poll(&mut waiting, &waker) {
                    Poll::Ready(r) => r.expect("granted by the release"),
                    Poll::Pending => panic!("woken, but not granted"),
                }
            }
        };
        // it holds the one permit: nobody else gets in
        assert!(p.try_acquire(&7, NOW).is_err());
        drop(admission);
        assert!(p.try_acquire(&7, NOW).is_ok());
    });
}

#[test]
fn a_granted_waiter_cancelled_racing_the_release_passes_the_permit_on_once() {
    model::check(|| {
        let p = one_per_tenant();
        let held = p.try_acquire(&7, NOW).expect("free");
        let (_, gone_waker) = counting();
        let (next_woken, next_waker) = counting();
        let mut gone = Box::pin(p.acquire_key_in_line(0, 7, 1, usize::MAX, NOW));
        let mut next = Box::pin(p.acquire_key_in_line(0, 7, 1, usize::MAX, NOW));
        assert!(poll(&mut gone, &gone_waker).is_pending());
        assert!(poll(&mut next, &next_waker).is_pending());
        let releaser = loom::thread::spawn(move || drop(held));
        drop(gone); // before or after the release granted it the permit
        releaser.join().expect("releaser");
        assert_eq!(next_woken.0.load(Ordering::SeqCst), 1);
        let admission = match poll(&mut next, &next_waker) {
            Poll::Ready(r) => r.expect("the permit went on to the next waiter"),
            Poll::Pending => panic!("the permit was lost"),
        };
        assert!(
            p.try_acquire(&7, NOW).is_err(),
            "the permit was given twice"
        );
        drop(admission);
        assert!(p.try_acquire(&7, NOW).is_ok());
    });
}

#[test]
fn a_newcomer_racing_a_release_never_overtakes_the_line() {
    model::check(|| {
        let p = one_per_tenant();
        let held = p.try_acquire(&7, NOW).expect("free");
        let (_, waker) = counting();
        let mut waiting = Box::pin(p.acquire_key_in_line(0, 7, 1, usize::MAX, NOW));
        assert!(poll(&mut waiting, &waker).is_pending());
        let releaser = loom::thread::spawn(move || drop(held));
        assert!(
            p.try_acquire(&7, NOW).is_err(),
            "a newcomer took the permit released for the line"
        );
        releaser.join().expect("releaser");
        let Poll::Ready(Ok(admission)) = poll(&mut waiting, &waker) else {
            panic!("the waiter was not granted the released permit")
        };
        drop(admission);
    });
}
