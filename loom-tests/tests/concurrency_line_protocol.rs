//! The line protocol of `ConcurrencyLimiter::acquire` (`crates/tollgate-core/src/concurrency.rs`,
//! the line in `crates/tollgate-core/src/wakers.rs`): a release gives its permits back, then a
//! `SeqCst` fence, then reads the count of waiters and, if any, takes the
//! permits of the front waiters that fit on their behalf under the line's
//! lock and wakes exactly those; a waiter refused as a newcomer counts
//! itself under the lock, fences, then looks again before it joins the
//! back; a newcomer is refused while anyone is in line; a granted waiter
//! dropped before it polled gives its permits back through the release
//! path. Models: no lost wake-up (a release, or a raised limit, racing a
//! waiter joining); each waiter woken exactly once per admission; a
//! granted or waiting waiter cancelled racing a release passes the permits
//! on exactly once; a newcomer racing a release never overtakes the line;
//! two releases racing admit a front waiter of 2 before a waiter of 1.
#![cfg(loom)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom_tests::model;
use tollgate::ConcurrencyLimiter;

/// A waker that counts its wake-ups (loom sees the counter).
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counting() -> (Arc<CountingWaker>, Waker) {
    let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
    (Arc::clone(&counter), Waker::from(counter))
}

fn woken(c: &CountingWaker) -> usize {
    c.0.load(Ordering::SeqCst)
}

fn poll<F: Future + Unpin>(f: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(f).poll(&mut Context::from_waker(waker))
}

fn limiter(limit: u32) -> Arc<ConcurrencyLimiter> {
    Arc::new(ConcurrencyLimiter::with_limit(limit).expect("valid limit"))
}

/// Runs `a` and `b` at once: `a` on a spawned thread and `b` on the
/// model's, or the other way round with `swap`. Each model runs both ways:
/// loom reaches different preemptions of a spawned thread and of the main
/// one (a model of a newcomer on the main thread never saw it run between
/// a spawned release's two steps).
fn race<A, B>(
    swap: bool,
    a: impl FnOnce() -> A + Send + 'static,
    b: impl FnOnce() -> B + Send + 'static,
) -> (A, B)
where
    A: Send + 'static,
    B: Send + 'static,
{
    if swap {
        let t = loom::thread::spawn(b);
        let ra = a();
        (ra, t.join().expect("spawned"))
    } else {
        let t = loom::thread::spawn(a);
        let rb = b();
        (t.join().expect("spawned"), rb)
    }
}

/// Both ways round (see [`race`]).
fn check(model: fn(bool)) {
    for swap in [false, true] {
        model::check(move || model(swap));
    }
}

#[test]
fn a_waiter_racing_the_release_of_the_only_permit_is_woken_once_and_admitted() {
    check(|swap| {
        let l = limiter(1);
        let held = l.try_acquire_owned(1).expect("free");
        let (count, waker) = counting();
        let mut waiting = Box::pin(l.acquire_owned(1));
        let w = waker.clone();
        let (first, ()) = race(
            swap,
            move || {
                let first = poll(&mut waiting, &w);
                (first, waiting)
            },
            move || drop(held),
        );
        let (first, mut waiting) = first;
        let permit = match first {
            Poll::Ready(r) => r.expect("1 ≤ limit"),
            Poll::Pending => {
                assert_eq!(woken(&count), 1, "woken exactly once by the release");
                match poll(&mut waiting, &waker) {
                    Poll::Ready(r) => r.expect("granted by the release"),
                    Poll::Pending => panic!("woken, but not granted: lost wake-up"),
                }
            }
        };
        assert_eq!(l.in_flight(), 1);
        drop(permit);
        assert_eq!(l.in_flight(), 0);
    });
}

#[test]
fn a_waiter_racing_a_raised_limit_is_woken_once_and_admitted() {
    check(|swap| {
        let l = limiter(1);
        let held = l.try_acquire_owned(1).expect("free");
        let (count, waker) = counting();
        let mut waiting = Box::pin(l.acquire_owned(1));
        let (w, raiser) = (waker.clone(), Arc::clone(&l));
        let (first, ()) = race(
            swap,
            move || {
                let first = poll(&mut waiting, &w);
                (first, waiting)
            },
            move || raiser.set_limit(2).expect("valid limit"),
        );
        let (first, mut waiting) = first;
        let permit = match first {
            Poll::Ready(r) => r.expect("1 ≤ limit"),
            Poll::Pending => {
                assert_eq!(woken(&count), 1, "woken exactly once by the new limit");
                match poll(&mut waiting, &waker) {
                    Poll::Ready(r) => r.expect("granted by the new limit"),
                    Poll::Pending => panic!("woken, but not granted: lost wake-up"),
                }
            }
        };
        assert_eq!(l.in_flight(), 2);
        drop((permit, held));
        assert_eq!(l.in_flight(), 0);
    });
}

#[test]
fn a_granted_waiter_cancelled_racing_the_release_passes_the_permit_on_once() {
    check(|swap| {
        let l = limiter(1);
        let held = l.try_acquire_owned(1).expect("free");
        let (_, gone_waker) = counting();
        let (next_count, next_waker) = counting();
        let mut gone = Box::pin(l.acquire_owned(1));
        let mut next = Box::pin(l.acquire_owned(1));
        assert!(poll(&mut gone, &gone_waker).is_pending());
        assert!(poll(&mut next, &next_waker).is_pending());
        // cancelled before or after the release granted it the permit
        race(swap, move || drop(gone), move || drop(held));
        assert_eq!(woken(&next_count), 1, "the next waiter woken exactly once");
        let permit = match poll(&mut next, &next_waker) {
            Poll::Ready(r) => r.expect("the permit went on to the next waiter"),
            Poll::Pending => panic!("the permit was lost"),
        };
        assert_eq!(l.in_flight(), 1);
        assert!(l.try_acquire(1).is_err(), "the permit was given twice");
        drop(permit);
        assert_eq!(l.in_flight(), 0);
    });
}

#[test]
fn a_front_waiter_leaving_racing_a_release_lets_the_next_one_in() {
    // 2 held; the front waits for 2, the next for 1. One permit comes back
    // while the front waiter is cancelled: whatever the order, the waiter
    // of 1 is admitted, woken exactly once.
    check(|swap| {
        let l = limiter(2);
        let one = l.try_acquire_owned(1).expect("free");
        let other = l.try_acquire_owned(1).expect("free");
        let (_, front_waker) = counting();
        let (next_count, next_waker) = counting();
        let mut front = Box::pin(l.acquire_owned(2));
        let mut next = Box::pin(l.acquire_owned(1));
        assert!(poll(&mut front, &front_waker).is_pending());
        assert!(poll(&mut next, &next_waker).is_pending());
        race(swap, move || drop(front), move || drop(one));
        assert_eq!(woken(&next_count), 1);
        let Poll::Ready(Ok(permit)) = poll(&mut next, &next_waker) else {
            panic!("the waiter of 1 was not admitted")
        };
        assert_eq!(l.in_flight(), 2);
        drop((permit, other));
        assert_eq!(l.in_flight(), 0);
    });
}

#[test]
fn a_newcomer_racing_a_release_never_overtakes_the_line() {
    check(|swap| {
        let l = limiter(1);
        let held = l.try_acquire_owned(1).expect("free");
        let (count, waker) = counting();
        let mut waiting = Box::pin(l.acquire_owned(1));
        assert!(poll(&mut waiting, &waker).is_pending());
        let newcomer = Arc::clone(&l);
        let (refused, ()) = race(
            swap,
            move || newcomer.try_acquire(1).is_err(),
            move || drop(held),
        );
        assert!(refused, "a newcomer took the permit released for the line");
        assert_eq!(woken(&count), 1);
        let Poll::Ready(Ok(permit)) = poll(&mut waiting, &waker) else {
            panic!("the waiter was not granted the released permit")
        };
        drop(permit);
        assert_eq!(l.in_flight(), 0);
    });
}

#[test]
fn two_releases_admit_a_front_waiter_of_two_before_a_waiter_of_one() {
    check(|swap| {
        let l = limiter(2);
        let a = l.try_acquire_owned(1).expect("free");
        let b = l.try_acquire_owned(1).expect("free");
        let (large_count, large_waker) = counting();
        let (small_count, small_waker) = counting();
        let mut large = Box::pin(l.acquire_owned(2));
        let mut small = Box::pin(l.acquire_owned(1));
        assert!(poll(&mut large, &large_waker).is_pending());
        assert!(poll(&mut small, &small_waker).is_pending());
        race(swap, move || drop(a), move || drop(b));
        assert_eq!(
            (woken(&large_count), woken(&small_count)),
            (1, 0),
            "only the front waiter, once"
        );
        assert!(poll(&mut small, &small_waker).is_pending(), "overtaken");
        let Poll::Ready(Ok(two)) = poll(&mut large, &large_waker) else {
            panic!("the front waiter was not admitted")
        };
        assert_eq!(l.in_flight(), 2);
        drop(two);
        assert_eq!(woken(&small_count), 1);
        assert!(matches!(poll(&mut small, &small_waker), Poll::Ready(Ok(_))));
        assert_eq!(l.in_flight(), 0);
    });
}
