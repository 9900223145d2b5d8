//! The concurrency limiter under concurrent acquires and releases: in
//! every interleaving, the permits held never exceed the limit, every
//! permit is returned exactly once (RAII drop, `release_some`, `into_raw`
//! plus `release`, owned permits dropped on another thread), and a release
//! racing an acquire is linearizable against the reference model.
//!
//! "Held" is tracked outside the limiter with a test-side counter that a
//! thread raises *after* its acquire succeeded and lowers *before* it
//! gives the permits back, so the counter never exceeds what the limiter
//! counts in flight: if it ever exceeds the limit, the limiter over-admitted.
//! A thread holding `k` permits also checks that the limiter counts at
//! least `k` in flight: a permit returned twice (by anyone) makes that fail.
//!
//! The async side, `acquire(n).await`, is woken by releases (the line
//! protocol of `crates/tollgate-core/src/concurrency.rs`: a waiter counts itself, then looks
//! again before it joins the line; a release frees the permit, then hands
//! it to the front of the line and wakes that waiter; modelled in detail in
//! `concurrency_line_protocol.rs`): a waiter racing the release of the only
//! permit must never miss it (no lost wake-up), whether it is polled by
//! hand or by `loom::future::block_on`.
#![cfg(loom)]

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Wake, Waker};

use loom::sync::Arc;
use loom::sync::atomic::{AtomicU32 as Held, Ordering};
use loom_tests::{
    Op, Run, SpecConcurrency, apply_guarded, check, model, refund, refund_if_allowed,
    sequential_runs,
};
use tollgate::ConcurrencyLimiter;

const LIMIT: u32 = 2;

/// The shared limiter and the test-side count of permits held.
struct Shared {
    limiter: ConcurrencyLimiter,
    held: Held,
}

impl Shared {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            limiter: ConcurrencyLimiter::with_limit(LIMIT).expect("valid limit"),
            held: Held::new(0),
        })
    }

    /// Records `n` permits just acquired; asserts the bound.
    fn took(&self, n: u32) {
        let held = self.held.fetch_add(n, Ordering::SeqCst) + n;
        assert!(held <= LIMIT, "{held} permits held, limit {LIMIT}");
        self.holding(n);
    }

    /// Records `n` permits about to be given back.
    fn giving_back(&self, n: u32) {
        self.holding(n);
        self.held.fetch_sub(n, Ordering::SeqCst);
    }

    /// This thread holds `n`: the limiter must count at least that many.
    fn holding(&self, n: u32) {
        let in_flight = self.limiter.in_flight();
        assert!(in_flight >= n, "holding {n} but only {in_flight} in flight");
    }
}

#[test]
fn raii_release_some_and_into_raw_return_every_permit_once() {
    model::check(|| {
        let shared = Shared::new();
        let dropper = {
            let s = Arc::clone(&shared);
            loom::thread::spawn(move || {
                if let Ok(permit) = s.limiter.try_acquire(1) {
                    s.took(1);
                    s.giving_back(1);
                    drop(permit);
                }
            })
        };
        let partial = {
            let s = Arc::clone(&shared);
            loom::thread::spawn(move || {
                if let Ok(mut permit) = s.limiter.try_acquire(2) {
                    s.took(2);
                    s.giving_back(1);
                    permit.release_some(1);
                    assert_eq!(permit.permits(), 1);
                    s.giving_back(1);
                    drop(permit);
                }
            })
        };
        // the main thread detaches its permit and releases it by hand
        if let Ok(permit) = shared.limiter.try_acquire(1) {
            shared.took(1);
            let n = permit.into_raw();
            shared.holding(n); // still in flight after into_raw
            shared.giving_back(n);
            shared.limiter.release(n);
        }
        dropper.join().expect("dropper");
        partial.join().expect("partial");
        assert_eq!(shared.limiter.in_flight(), 0, "a permit was not returned");
    });
}

#[test]
fn owned_permits_dropped_on_other_threads_return_once() {
    // `try_acquire_owned` permits moved to and dropped on another thread
    // (`std::sync::Arc` keeps the limiter alive; loom sees its atomics).
    model::check(|| {
        let limiter = std::sync::Arc::new(ConcurrencyLimiter::with_limit(1).expect("valid limit"));
        let first = limiter.try_acquire_owned(1).ok();
        let mover = loom::thread::spawn(move || drop(first));
        let racer = {
            let limiter = std::sync::Arc::clone(&limiter);
            loom::thread::spawn(move || {
                // in flight ≤ 1: either the first permit is still out and
                // this is refused, or it came back and this one fits
                let second = limiter.try_acquire_owned(1);
                if second.is_ok() {
                    assert_eq!(limiter.in_flight(), 1);
                }
                second.is_ok()
            })
        };
        mover.join().expect("mover");
        let _ = racer.join().expect("racer");
        assert_eq!(limiter.in_flight(), 0, "an owned permit was not returned");
        assert!(limiter.try_acquire(1).is_ok());
    });
}

#[test]
fn release_of_a_leaked_permit_racing_acquires() {
    // Both permits are out: one leaked (forgotten), one held by the main
    // thread. A thread recovers the leaked one with `release` while two
    // others try to acquire: at most one of them gets in.
    model::check(|| {
        let shared = Shared::new();
        std::mem::forget(shared.limiter.try_acquire(1).expect("free"));
        let mine = shared.limiter.try_acquire(1).expect("free");
        shared.took(1);
        let releaser = {
            let s = Arc::clone(&shared);
            loom::thread::spawn(move || s.limiter.release(1))
        };
        let acquirer = {
            let s = Arc::clone(&shared);
            loom::thread::spawn(move || {
                let got = s.limiter.try_acquire(1).map(|p| p.into_raw()).is_ok();
                if got {
                    s.took(1);
                }
                got
            })
        };
        let got_mine = shared.limiter.try_acquire(1).map(|p| p.into_raw()).is_ok();
        if got_mine {
            shared.took(1);
        }
        releaser.join().expect("releaser");
        let got_theirs = acquirer.join().expect("acquirer");
        assert!(
            !(got_mine && got_theirs),
            "two got the one recovered permit"
        );
        shared.giving_back(1);
        drop(mine);
        let detached = u32::from(got_mine) + u32::from(got_theirs);
        assert_eq!(shared.limiter.in_flight(), detached);
    });
}

#[test]
fn guards_and_release_are_linearizable() {
    // The guard API, racing: a permit taken and dropped (the chain-style
    // give-back), two acquires of which one is impossible, a permit taken
    // and then an over-release through `release` (the path of leaked and
    // `into_raw` permits). Guards still held at a thread's end stay in
    // flight (detached), as the reference model counts them.
    let threads: Vec<Vec<Op>> = vec![
        vec![check(1, 0), refund_if_allowed(1, 0)],
        vec![check(2, 0), check(3, 0)],
        vec![check(1, 0), refund(2, 0)],
    ];
    // the real limiter's atomics exist only inside the model: the default hint
    let hint = u64::try_from(tollgate::concurrency::DEFAULT_RETRY_HINT.as_nanos()).expect("1 ms");
    let spec = SpecConcurrency::new(LIMIT, hint);
    let allowed = sequential_runs(&spec, &threads, &[0]);
    model::check(move || {
        let limiter = Arc::new(ConcurrencyLimiter::with_limit(LIMIT).expect("valid limit"));
        assert_eq!(
            SpecConcurrency::like(&limiter),
            spec,
            "the reference is configured alike"
        );
        let (last, spawned) = threads.split_last().expect("threads");
        let handles: Vec<_> = spawned
            .iter()
            .map(|ops| {
                let (limiter, ops) = (Arc::clone(&limiter), ops.clone());
                loom::thread::spawn(move || apply_guarded(&limiter, &ops))
            })
            .collect();
        let mine = apply_guarded(&limiter, last);
        let mut outcomes: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().expect("model thread panicked"))
            .collect();
        outcomes.push(mine);
        let snap = limiter.snapshot();
        let run = Run {
            outcomes,
            end: vec![(snap.remaining(), snap.reset_after_nanos())],
        };
        assert!(
            allowed.contains(&run),
            "no sequential order of {threads:?} gives {run:?}; sequential runs: {allowed:?}"
        );
        let in_flight = limiter.in_flight();
        assert!(in_flight <= LIMIT);
        // in flight = taken − given back, given back floored at 0 each time:
        // at most what was taken
        let taken = loom_tests::admitted_by_all(&threads, &run.outcomes);
        assert!(u64::from(in_flight) <= taken);
    });
}

/// A waker that counts its wake-ups (loom sees the counter).
struct CountingWaker(loom::sync::atomic::AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: std::sync::Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn acquire_is_woken_by_the_release_of_the_only_permit() {
    // The only permit is held; one thread releases it (drops the guard)
    // while the main thread polls `acquire(1)` by hand. If the first poll
    // is pending, the release must have woken the waker by the time it
    // returns (it freed the permit first, then handed it to the waiter in
    // line), and the next poll must then get the permit: a release that
    // slipped between the waiter's failed take and its joining the line,
    // and was not seen by its second look, would be a lost wake-up.
    model::check(|| {
        let limiter = std::sync::Arc::new(ConcurrencyLimiter::with_limit(1).expect("valid limit"));
        let held = limiter.try_acquire_owned(1).expect("free");
        let releaser = loom::thread::spawn(move || drop(held));

        let counter = std::sync::Arc::new(CountingWaker(loom::sync::atomic::AtomicUsize::new(0)));
        let waker = Waker::from(std::sync::Arc::clone(&counter));
        let mut cx = Context::from_waker(&waker);
        let mut acquire = pin!(limiter.acquire(1));
        let first = acquire.as_mut().poll(&mut cx);
        releaser.join().expect("releaser");
        let permit = match first {
            Poll::Ready(result) => result.expect("1 ≤ limit"),
            Poll::Pending => {
                let woken = counter.0.load(Ordering::SeqCst);
                assert!(
                    woken >= 1,
                    "lost wake-up: the release freed the permit but never woke the waiter"
                );
                match acquire.as_mut().poll(&mut cx) {
                    Poll::Ready(result) => result.expect("1 ≤ limit"),
                    Poll::Pending => panic!("woken, but the permit is still not free"),
                }
            }
        };
        assert_eq!(permit.permits(), 1);
        assert_eq!(limiter.in_flight(), 1);
        drop(permit);
        assert_eq!(limiter.in_flight(), 0);
    });
}

#[test]
fn block_on_acquire_completes_when_the_holder_releases() {
    // The same race driven by loom's executor: `block_on` parks the thread
    // until the waker is woken, so a lost wake-up is a deadlock loom
    // reports. The releaser gives back a leaked permit with `release`.
    model::check(|| {
        let limiter = Arc::new(ConcurrencyLimiter::with_limit(1).expect("valid limit"));
        let leaked = limiter.try_acquire(1).expect("free").into_raw();
        let releaser = {
            let limiter = Arc::clone(&limiter);
            loom::thread::spawn(move || limiter.release(leaked))
        };
        let permit = loom::future::block_on(limiter.acquire(1)).expect("1 ≤ limit");
        assert_eq!(limiter.in_flight(), 1);
        drop(permit);
        releaser.join().expect("releaser");
        assert_eq!(limiter.in_flight(), 0);
    });
}
