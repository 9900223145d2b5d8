//! The tokio queue's admission protocol (`crates/tollgate-queue/src/shared.rs` and
//! `waiters.rs`: one mutex over the waiter list, the `gate`, `due` and
//! `driving` atomics, and the admission loop any thread may end up running)
//! with releases, cancellations, newcomers, `close` and the queue's timer
//! racing each other.
//!
//! Under `cfg(loom)` the queue's mutex and atomics are loom's (through
//! `crates/tollgate-core/src/sync.rs`), its clock is a `ManualClock` the model moves, and its
//! timer only records where it is armed: the model fires it with
//! `Queue::model_fire_timer`, which is what tokio's timer driver does (see
//! `crates/tollgate-queue/src/timer.rs`). Every other line is the queue's own code, driven
//! through its public API: `acquire` futures polled by hand with counting
//! wakers, permits dropped, futures dropped (cancellation), `close`.
//!
//! In every interleaving:
//! - no waiter is lost: once the capacity it waits for is free, it is
//!   admitted (its next poll is ready) without anyone kicking the queue
//!   again;
//! - no waiter is woken twice: a waiter the queue resolves while it waits
//!   is woken exactly once, and `stats().wakeups` counts exactly those;
//! - the permits held through the queue never exceed the limiter's: a
//!   test-side count, raised after a grant and lowered before a permit is
//!   given back, never exceeds the limit, and the limiter always counts at
//!   least what is held (so no permit is returned twice);
//! - a cancellation returns capacity exactly once: a waiter granted but
//!   never polled gives its permit back, once (the limiter's count and the
//!   token bucket's state at the end say so);
//! - FIFO: a newcomer never overtakes a waiter, and waiters are admitted in
//!   the order they queued.
//!
//! The queue's memory is leaked once per execution (a `&'static Queue`, so
//! that its futures and permits can move to a loom thread), and so is the
//! concurrency limiter's (the queue takes it as a `&'static`, its permits
//! borrowing it): a few hundred bytes each, never touched again.
#![cfg(loom)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc as StdArc;
use std::task::{Context, Poll, Wake, Waker};

use loom::sync::Arc;
use loom::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use loom_tests::model;
use tollgate::ConcurrencyLimiter;
use tollgate::queue::{Queue, QueuePermit, WaitError};
use tollgate::{Bucket, Gcra, ManualClock, Quota, Timestamp};

/// Counts the wake-ups of one waiter.
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: StdArc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &StdArc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counter() -> (StdArc<Count>, Waker) {
    let count = StdArc::new(Count(AtomicUsize::new(0)));
    let waker = Waker::from(StdArc::clone(&count));
    (count, waker)
}

fn woken(count: &Count) -> usize {
    count.0.load(Ordering::SeqCst)
}

fn poll<F: Future + ?Sized>(fut: Pin<&mut F>, waker: &Waker) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(waker))
}

type Pinned<T> = Pin<Box<T>>;

/// A queue in front of a concurrency limiter of `limit`, and the test-side
/// count of permits held through it.
struct InFlight {
    queue: &'static Queue<&'static ConcurrencyLimiter>,
    limiter: &'static ConcurrencyLimiter,
    held: AtomicU32,
    limit: u32,
}

type Permit = QueuePermit<&'static ConcurrencyLimiter>;

impl InFlight {
    fn new(limit: u32) -> Arc<Self> {
        let limiter: &'static ConcurrencyLimiter = Box::leak(Box::new(
            ConcurrencyLimiter::with_limit(limit).expect("valid limit"),
        ));
        let queue = Box::leak(Box::new(Queue::new(limiter)));
        Arc::new(Self {
            queue,
            limiter,
            held: AtomicU32::new(0),
            limit,
        })
    }

    /// Records a permit just granted; asserts the bound.
    fn took(&self, permit: &Permit) {
        let n = permit.permits();
        let held = self.held.fetch_add(n, Ordering::SeqCst) + n;
        assert!(
            held <= self.limit,
            "{held} permits held, limit {}",
            self.limit
        );
        self.holding(n);
    }

    /// Gives a permit back (by dropping it), recording it first.
    fn give_back(&self, permit: Permit) {
        let n = permit.permits();
        self.holding(n);
        self.held.fetch_sub(n, Ordering::SeqCst);
        drop(permit);
    }

    /// This thread holds `n`: the limiter must count at least that many.
    fn holding(&self, n: u32) {
        let in_flight = self.limiter.in_flight();
        assert!(in_flight >= n, "holding {n} but only {in_flight} in flight");
    }

    fn take_now(&self) -> Permit {
        let permit = self.queue.try_acquire(&(), 1).expect("capacity is free");
        self.took(&permit);
        permit
    }

    /// A waiter that queued (its first poll is pending).
    fn waiter(&self, waker: &Waker) -> Pinned<impl Future<Output = Result<Permit, WaitError>>> {
        let mut fut = Box::pin(self.queue.acquire(&(), 1));
        assert!(poll(fut.as_mut(), waker).is_pending(), "queued");
        fut
    }

    /// The waiter's next poll must be its grant.
    fn granted(
        &self,
        fut: Pin<&mut impl Future<Output = Result<Permit, WaitError>>>,
        waker: &Waker,
        who: &str,
    ) -> Permit {
        match poll(fut, waker) {
            Poll::Ready(Ok(permit)) => {
                self.took(&permit);
                permit
            }
            Poll::Ready(Err(e)) => panic!("{who} refused: {e}"),
            Poll::Pending => panic!("{who} lost: the capacity it waits for is free"),
        }
    }

    /// With no thread running: the limiter counts exactly the permits held
    /// (a permit returned twice would leave it counting fewer).
    fn quiescent(&self) {
        assert_eq!(
            self.limiter.in_flight(),
            self.held.load(Ordering::SeqCst),
            "the limiter's count differs from the permits held"
        );
    }

    /// Nothing held, nothing queued: every permit came back exactly once.
    fn settled(&self) {
        assert_eq!(self.held.load(Ordering::SeqCst), 0);
        assert_eq!(self.limiter.in_flight(), 0, "a permit was never returned");
        let stats = self.queue.stats();
        assert_eq!((stats.queued_requests, stats.queued_permits), (0, 0));
    }
}

/// The permit a waiter waits for is released while its future is dropped
/// (cancelled): the release may grant it first (then the cancellation must
/// hand the permit on, once) or the cancellation may unlink it first.
/// Either way the waiter behind gets the permit, woken exactly once. A
/// bystander holds the other permit throughout, so a permit given back
/// twice would show (the limiter would count fewer than are held).
#[test]
fn release_racing_the_cancellation_of_the_head_hands_the_permit_on() {
    model::check(|| {
        let s = InFlight::new(2);
        let bystander = s.take_now();
        let held = s.take_now();
        let (_ca, wa) = counter();
        let (cb, wb) = counter();
        let a = s.waiter(&wa);
        let mut b = s.waiter(&wb);
        let releaser = {
            let s = Arc::clone(&s);
            loom::thread::spawn(move || s.give_back(held))
        };
        drop(a); // cancelled, possibly after its grant
        releaser.join().unwrap();
        let pb = s.granted(b.as_mut(), &wb, "the waiter behind");
        s.quiescent();
        assert_eq!(woken(&cb), 1, "woken exactly once");
        let stats = s.queue.stats();
        assert_eq!(stats.cancelled_requests, 1);
        // the queue woke b, and a if it granted a before the cancellation
        assert!((1..=2).contains(&stats.wakeups), "{stats:?}");
        s.give_back(pb);
        s.give_back(bystander);
        s.settled();
        assert_eq!(s.queue.stats().admitted_requests, 3);
    });
}

/// Two releases at once, two waiters: whichever thread runs the admission
/// loop, the other's kick is not lost (`due`/`driving`), and each waiter is
/// admitted, in order, woken exactly once.
#[test]
fn two_releases_at_once_admit_both_waiters_each_woken_once() {
    model::check(|| {
        let s = InFlight::new(2);
        let (p1, p2) = (s.take_now(), s.take_now());
        let (ca, wa) = counter();
        let (cb, wb) = counter();
        let mut a = s.waiter(&wa);
        let mut b = s.waiter(&wb);
        let releaser = {
            let s = Arc::clone(&s);
            loom::thread::spawn(move || s.give_back(p1))
        };
        s.give_back(p2);
        releaser.join().unwrap();
        let pa = s.granted(a.as_mut(), &wa, "the first waiter");
        let pb = s.granted(b.as_mut(), &wb, "the second waiter");
        s.quiescent();
        assert_eq!((woken(&ca), woken(&cb)), (1, 1), "each woken exactly once");
        assert_eq!(s.queue.stats().wakeups, 2);
        s.give_back(pa);
        s.give_back(pb);
        s.settled();
    });
}

/// A newcomer arriving while the head's permit is being released never
/// overtakes it (FIFO): the head gets the permit, the newcomer queues
/// behind and is admitted when the head gives it back.
#[test]
fn a_newcomer_racing_a_release_never_overtakes_the_head() {
    model::check(|| {
        let s = InFlight::new(1);
        let held = s.take_now();
        let (ca, wa) = counter();
        let (cc, wc) = counter();
        let mut a = s.waiter(&wa);
        let releaser = {
            let s = Arc::clone(&s);
            loom::thread::spawn(move || s.give_back(held))
        };
        let mut c = Box::pin(s.queue.acquire(&(), 1));
        let first = poll(c.as_mut(), &wc);
        releaser.join().unwrap();
        assert!(first.is_pending(), "the newcomer overtook the head");
        let pa = s.granted(a.as_mut(), &wa, "the head");
        s.quiescent();
        assert_eq!(woken(&ca), 1);
        assert!(poll(c.as_mut(), &wc).is_pending(), "behind the head");
        assert_eq!(woken(&cc), 0);
        s.give_back(pa);
        let pc = s.granted(c.as_mut(), &wc, "the newcomer");
        assert_eq!(woken(&cc), 1, "woken exactly once");
        s.give_back(pc);
        s.settled();
    });
}

/// `close` racing the release that would admit the waiter: the waiter is
/// either admitted (then it holds the permit) or refused `Closed` (then the
/// permit stays free), woken exactly once either way.
#[test]
fn close_racing_a_release_resolves_the_waiter_once() {
    model::check(|| {
        let s = InFlight::new(1);
        let held = s.take_now();
        let (ca, wa) = counter();
        let mut a = s.waiter(&wa);
        let releaser = {
            let s = Arc::clone(&s);
            loom::thread::spawn(move || s.give_back(held))
        };
        s.queue.close();
        releaser.join().unwrap();
        match poll(a.as_mut(), &wa) {
            Poll::Ready(Ok(permit)) => {
                s.took(&permit);
                s.give_back(permit);
            }
            Poll::Ready(Err(WaitError::Closed)) => s.quiescent(),
            other => panic!("unresolved or wrong: {other:?}"),
        }
        assert_eq!(woken(&ca), 1, "woken exactly once");
        s.settled();
    });
}

/// A time-based limiter: a token bucket (T = 10, burst 2) on the model's
/// clock, emptied at 0. The head waits for the refill at 10; the queue's
/// timer fires (the clock moved to 10) while the head is cancelled. The
/// waiter behind is admitted at 10, whichever came first, and the bucket
/// is spent exactly: the cancelled head's permit, if it was granted, went
/// back once (a check at 10 is refused afterwards; a second refund would
/// leave one more), and 2 + 10/T were admitted by 10.
#[test]
fn timer_racing_the_cancellation_of_the_head() {
    model::check(|| {
        let clock = StdArc::new(ManualClock::new());
        let quota = Quota::new(1, core::time::Duration::from_nanos(10))
            .and_then(|q| q.with_burst(2))
            .expect("valid quota");
        let queue: &'static Queue<Bucket<Gcra>> = Box::leak(Box::new(
            Queue::builder(Bucket::token_bucket(quota))
                .model_clock(StdArc::clone(&clock))
                .build(),
        ));
        queue.try_acquire(&(), 2).expect("a full bucket").forget();
        let (_ca, wa) = counter();
        let (cb, wb) = counter();
        let mut a = Box::pin(queue.acquire(&(), 1));
        assert!(poll(a.as_mut(), &wa).is_pending());
        let mut b = Box::pin(queue.acquire(&(), 1));
        assert!(poll(b.as_mut(), &wb).is_pending());
        assert_eq!(queue.model_timer(&()), Some(10), "armed at the refill");
        let timer = {
            let clock = StdArc::clone(&clock);
            loom::thread::spawn(move || {
                clock.set(Timestamp::from_nanos(10));
                queue.model_fire_timer(&());
            })
        };
        drop(a); // cancelled, possibly after its grant
        timer.join().unwrap();
        match poll(b.as_mut(), &wb) {
            Poll::Ready(Ok(permit)) => permit.forget(),
            other => panic!("the waiter behind was not admitted at 10: {other:?}"),
        }
        assert_eq!(woken(&cb), 1, "woken exactly once");
        let stats = queue.stats();
        assert_eq!(stats.admitted_permits, 3, "burst + 10/T by t = 10");
        assert_eq!((stats.queued_requests, stats.cancelled_requests), (0, 1));
        // the bucket is spent: the head's permit went back once, not twice
        let now = Timestamp::from_nanos(10);
        assert!(
            queue
                .limiter()
                .check_n(1, now)
                .is_err_and(|r| !r.is_never()),
            "a refund too many: the bucket admits a third permit at 10"
        );
    });
}
