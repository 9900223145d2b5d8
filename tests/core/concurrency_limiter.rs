//! The concurrency limiter against a plain counter model, and under real
//! threads: never more than `limit` in flight, every dropped permit returns.
//!
//! Its permits exist only as guards (`try_acquire`, `acquire(n).await`,
//! and, through `&ConcurrencyLimiter` as a `Limiter`, a chain's permit), or
//! as raw counts detached from a guard (`into_raw`) and given back with
//! `release`. `acquire` waits without a timer: it is woken by the release
//! that frees its permits.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::pin;
use std::sync::Arc;
#[cfg(feature = "std")]
use std::sync::atomic::AtomicBool;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use proptest::prelude::*;
#[cfg(feature = "tokio")]
use tollgate::queue::Queue;
use tollgate::{
    Bucket, Chain, ConcurrencyLimiter, ConcurrencyPermit, ConfigError, Gcra, Limiter, Quota,
    Refusal, Timestamp,
};

/// The refusal of a request that can never succeed: `requested` permits
/// asked of a limiter whose limit is `limit`.
fn never(r: &Refusal<'_>, requested: u32, limit: u32) -> bool {
    r.is_never() && (r.requested(), r.limit()) == (requested, limit)
}

#[derive(Debug, Clone)]
enum Op {
    /// take `n` behind a guard
    Acquire(u32),
    /// drop the i-th held guard
    Drop(usize),
    /// forget the i-th held guard, then (maybe) release its permits by hand
    Forget(usize, bool),
    /// take `n` and detach them from their guard (`into_raw`); this was an
    /// unguarded `Limiter::check_n` before API 13
    Detach(u32),
    /// give back `n` of the detached permits (`release`; was `Limiter::refund`)
    Release(u32),
}

fn op(limit: u32) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..=limit + 1).prop_map(Op::Acquire),
        3 => any::<usize>().prop_map(Op::Drop),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(i, r)| Op::Forget(i, r)),
        2 => (0..=limit + 1).prop_map(Op::Detach),
        1 => (0..=limit).prop_map(Op::Release),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Same decisions as a counter, in flight never above the limit, and the
    /// count always equals the permits held (guards + detached + leaked).
    #[test]
    fn matches_a_counter_and_never_exceeds_the_limit(
        (limit, ops) in (1u32..=10).prop_flat_map(|l| (Just(l), prop::collection::vec(op(l), 1..100)))
    ) {
        let limiter = ConcurrencyLimiter::with_limit(limit).unwrap();
        let mut held: Vec<ConcurrencyPermit<&ConcurrencyLimiter>> = vec![];
        let mut detached = 0u32; // taken and detached by into_raw, not yet released
        let mut leaked = 0u32; // forgotten and never released
        for op in ops {
            let in_flight: u32 = held.iter().map(|p| p.permits()).sum::<u32>() + detached + leaked;
            match op {
                Op::Acquire(n) => match limiter.try_acquire(n) {
                    Ok(p) => {
                        prop_assert!(in_flight + n <= limit);
                        prop_assert_eq!(p.permits(), n);
                        held.push(p);
                    }
                    Err(d) if !d.is_never() => {
                        prop_assert!(n <= limit && in_flight + n > limit);
                        prop_assert_eq!(d.snapshot().remaining(), limit - in_flight);
                    }
                    Err(e) => {
                        prop_assert!(never(&e, n, limit) && e.requested() > limit, "{:?}", e);
                    }
                },
                Op::Drop(i) if !held.is_empty() => {
                    let i = i % held.len();
                    drop(held.swap_remove(i));
                }
                Op::Forget(i, release) if !held.is_empty() => {
                    let p = held.swap_remove(i % held.len());
                    let n = p.permits();
                    std::mem::forget(p);
                    if release { limiter.release(n) } else { leaked += n }
                }
                Op::Detach(n) => match limiter.try_acquire(n).map(ConcurrencyPermit::into_raw) {
                    Ok(taken) => {
                        prop_assert_eq!(taken, n);
                        prop_assert!(in_flight + n <= limit);
                        prop_assert_eq!(limiter.snapshot().remaining(), limit - in_flight - n);
                        detached += n;
                    }
                    Err(d) if !d.is_never() => prop_assert!(in_flight + n > limit),
                    Err(e) => {
                        prop_assert!(never(&e, n, limit) && e.requested() > limit, "{:?}", e);
                    }
                },
                Op::Release(n) => {
                    let n = n.min(detached);
                    limiter.release(n);
                    detached -= n;
                }
                _ => {}
            }
            let in_flight: u32 = held.iter().map(|p| p.permits()).sum::<u32>() + detached + leaked;
            prop_assert_eq!(limiter.in_flight(), in_flight);
            prop_assert!(limiter.in_flight() <= limit);
            // idle (was `is_idle`): nothing in flight, nothing to wait for
            prop_assert_eq!(limiter.snapshot().reset_after().is_zero(), in_flight == 0);
            // every free permit can be taken now (was `time_until_ready == 0`)
            prop_assert_eq!(limiter.available(), limit - in_flight);
            prop_assert_eq!(limiter.snapshot().remaining(), limit - in_flight);
            let all_free = limiter.try_acquire(limit - in_flight);
            prop_assert!(all_free.is_ok());
            drop(all_free);
            prop_assert_eq!(limiter.in_flight(), in_flight);
        }
        drop(held);
        prop_assert_eq!(limiter.in_flight(), detached + leaked);
    }

    /// Huge requests and releases never panic or wrap.
    #[test]
    fn extreme_inputs_never_panic(limit in prop_oneof![Just(u32::MAX), 1..=u32::MAX], ns in prop::collection::vec(any::<u32>(), 1..30)) {
        let limiter = ConcurrencyLimiter::with_limit(limit).unwrap();
        for n in ns {
            // an unguarded take (was `check_n`)
            let _ = limiter.try_acquire(n).map(ConcurrencyPermit::into_raw);
            prop_assert!(limiter.in_flight() <= limit);
            limiter.release(n / 3);
            let _ = limiter.try_acquire(n).map(ConcurrencyPermit::into_raw);
            prop_assert!(limiter.in_flight() <= limit);
            // a waiter for the same: resolved, or pending and cancelled
            let _ = embassy_futures::poll_once(limiter.acquire(n));
            prop_assert!(limiter.in_flight() <= limit);
        }
    }
}

#[test]
fn threads_never_exceed_the_limit_and_every_dropped_permit_returns() {
    const LIMIT: u32 = 5;
    let limiter = ConcurrencyLimiter::with_limit(LIMIT).unwrap();
    // counts permits between a successful acquire and the guard's drop, so
    // it never exceeds what the limiter holds
    let observed = AtomicU32::new(0);
    let peak = AtomicU32::new(0);
    let granted = AtomicU32::new(0);
    std::thread::scope(|s| {
        for t in 0..6u32 {
            let (limiter, observed, peak, granted) = (&limiter, &observed, &peak, &granted);
            s.spawn(move || {
                for i in 0..3_000u32 {
                    let n = 1 + (i + t) % 3;
                    if let Ok(permit) = limiter.try_acquire(n) {
                        let now = observed.fetch_add(n, Ordering::SeqCst) + n;
                        peak.fetch_max(now, Ordering::SeqCst);
                        assert!(now <= LIMIT, "{now} in flight");
                        granted.fetch_add(1, Ordering::Relaxed);
                        if i % 7 == 0 {
                            std::thread::yield_now();
                        }
                        observed.fetch_sub(n, Ordering::SeqCst);
                        drop(permit);
                    }
                }
            });
        }
    });
    assert_eq!(limiter.in_flight(), 0, "every dropped permit came back");
    assert!(peak.load(Ordering::SeqCst) <= LIMIT);
    assert!(granted.load(Ordering::Relaxed) > 0);
}

/// Was `algorithm_state_can_live_in_a_static` (the `Concurrency` algorithm
/// and its `ConcurrencyState` are gone): the limiter itself is
/// `const`-constructible from a `NonZeroU32`, so it can be a `static` with
/// no `Result` to unwrap.
#[test]
fn limiter_can_live_in_a_static() {
    static JOBS: ConcurrencyLimiter =
        ConcurrencyLimiter::new(core::num::NonZeroU32::new(2).unwrap());
    let jobs: &'static ConcurrencyLimiter = &JOBS;
    let a = jobs.try_acquire(2).unwrap();
    assert!(matches!(jobs.try_acquire(1), Err(r) if !r.is_never()));
    drop(a);
    assert_eq!(jobs.in_flight(), 0);
    assert!(jobs.snapshot().reset_after().is_zero());
}

/// `Probe::<T>::IS_LIMITER` is true exactly when `T: Limiter` (an inherent
/// const with a bound wins over the trait's default when the bound holds).
struct Probe<T: ?Sized>(PhantomData<T>);
trait NotALimiter {
    const IS_LIMITER: bool = false;
}
impl<T: ?Sized> NotALimiter for Probe<T> {}
impl<T: ?Sized + Limiter> Probe<T> {
    const IS_LIMITER: bool = true;
}

/// `CopyProbe::<T>::IS_COPY` is true exactly when `T: Copy`.
struct CopyProbe<T: ?Sized>(PhantomData<T>);
trait NotCopy {
    const IS_COPY: bool = false;
}
impl<T: ?Sized> NotCopy for CopyProbe<T> {}
impl<T: Copy> CopyProbe<T> {
    const IS_COPY: bool = true;
}

/// Changed on purpose (issue 25; API 13 had made it no `Limiter` at all):
/// through a reference the concurrency limiter is a `Limiter` whose permit
/// is its guard, so a chain or a statistics wrapper holds the guard, and
/// the guard is not `Copy`, which is what every waiter that drops permits
/// requires. The owned limiter and an `Arc` keep their own `try_acquire(n)`.
#[test]
fn is_a_limiter_through_a_reference_and_its_permit_is_the_guard() {
    // checked at compile time
    const { assert!(!Probe::<ConcurrencyLimiter>::IS_LIMITER) };
    const { assert!(!Probe::<Arc<ConcurrencyLimiter>>::IS_LIMITER) };
    const { assert!(Probe::<&ConcurrencyLimiter>::IS_LIMITER) };
    const { assert!(!CopyProbe::<<&ConcurrencyLimiter as Limiter>::Permit>::IS_COPY) };
    const { assert!(CopyProbe::<<Bucket<Gcra> as Limiter>::Permit>::IS_COPY) };
    // the probe does see a limiter
    const { assert!(Probe::<Bucket<Gcra>>::IS_LIMITER) };
    #[cfg(feature = "std")] // `Limiter` for `Arc<L>` comes with `std`
    const {
        assert!(Probe::<Arc<Bucket<Gcra>>>::IS_LIMITER)
    };
    // an `Arc`'s own methods are still found with the trait in scope
    let shared = Arc::new(ConcurrencyLimiter::with_limit(2).unwrap());
    let held = shared.try_acquire(2).unwrap();
    assert_eq!(shared.snapshot().remaining(), 0);
    drop(held);
}

fn rate_and_one_in_flight(jobs: &ConcurrencyLimiter) -> Chain<Bucket<Gcra>, &ConcurrencyLimiter> {
    Bucket::token_bucket(Quota::per_second(10).unwrap()).and(jobs)
}

#[test]
fn a_chain_of_a_rate_and_an_in_flight_limit_holds_the_guard() {
    let jobs = ConcurrencyLimiter::with_limit(1).unwrap();
    let limiter = rate_and_one_in_flight(&jobs);
    let now = Timestamp::ZERO;
    let running = limiter.try_acquire(&(), now).unwrap();
    assert_eq!(jobs.in_flight(), 1);
    assert_eq!(limiter.first().snapshot(now).remaining(), 9);
    // the in-flight limit refuses: the rate gets its permit back
    let refused = limiter.try_acquire(&(), now).unwrap_err();
    assert_eq!(refused.stage(), 1);
    assert_eq!(limiter.first().snapshot(now).remaining(), 9);
    assert_eq!(limiter.snapshot(&(), now).remaining(), 0); // the tighter member
    // the work ends: the guard the chain handed out releases
    drop(running);
    assert_eq!(jobs.in_flight(), 0);
    let again = limiter.try_acquire(&(), now).unwrap();
    assert_eq!(
        (jobs.in_flight(), limiter.first().snapshot(now).remaining()),
        (1, 8)
    );
    // a cancelled chain permit gives both back
    limiter.cancel(&(), again, now);
    assert_eq!(
        (jobs.in_flight(), limiter.first().snapshot(now).remaining()),
        (0, 9)
    );
}

#[test]
fn a_chain_refused_by_its_rate_takes_no_in_flight_permit() {
    let jobs = ConcurrencyLimiter::with_limit(5).unwrap();
    let limiter = Bucket::token_bucket(Quota::per_second(1).unwrap()).and(&jobs);
    let now = Timestamp::ZERO;
    let first = limiter.try_acquire(&(), now).unwrap();
    let refused = limiter.try_acquire(&(), now).unwrap_err();
    assert_eq!(
        (refused.stage(), refused.retry_after()),
        (0, Duration::from_secs(1))
    );
    assert_eq!(
        jobs.in_flight(),
        1,
        "only the admitted request holds a permit"
    );
    drop(first);
    assert_eq!(jobs.in_flight(), 0);
}

/// Was `Limiter::acquire_in_line` (gone): the waiter now waits in a
/// `Queue` over the chain (the concurrency limiter leaked, as the queue
/// takes it as a `&'static`), polled by hand inside a paused runtime. The
/// running permit is taken through the same queue, whose release wakes the
/// waiter.
#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn a_chained_waiter_on_the_in_flight_limit_is_woken_by_the_release() {
    let jobs: &'static ConcurrencyLimiter =
        Box::leak(Box::new(ConcurrencyLimiter::with_limit(1).unwrap()));
    let queue = Queue::new(rate_and_one_in_flight(jobs));
    let now = tollgate::Clock::now(queue.clock());
    let running = queue.try_acquire(&(), 1).unwrap();
    let (count, waker) = counter();
    let mut cx = Context::from_waker(&waker);
    let mut waiting = pin!(queue.acquire(&(), 1));
    let mut polls = 1;
    assert!(waiting.as_mut().poll(&mut cx).is_pending()); // in the queue's line
    assert_eq!(wakes(&count), 0);
    drop(running); // the release hands its permit to the line
    assert_eq!(wakes(&count), 1, "woken by the release, once");
    polls += 1;
    let admitted = match waiting.as_mut().poll(&mut cx) {
        Poll::Ready(Ok(permit)) => permit,
        other => panic!("admitted at the release, got {other:?}"),
    };
    assert_eq!(polls, 2, "polled at most twice for one admission");
    assert_eq!(jobs.in_flight(), 1, "the permit holds the in-flight slot");
    // the rate was charged once for each admission, never for the wait
    assert_eq!(queue.limiter().first().snapshot(now).remaining(), 8);
    drop(admitted);
    assert_eq!(jobs.in_flight(), 0);
}

/// A waker that counts its wake-ups.
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A counting waker: `(counter, waker)`. `Arc::strong_count(&counter)` is 2
/// while only the caller holds the waker; more means someone kept a clone.
fn counter() -> (Arc<Count>, Waker) {
    let count = Arc::new(Count(AtomicUsize::new(0)));
    (Arc::clone(&count), Waker::from(Arc::clone(&count)))
}

fn wakes(c: &Count) -> usize {
    c.0.load(Ordering::SeqCst)
}

/// True while something other than the caller keeps a clone of the waker.
fn registered(c: &Arc<Count>) -> bool {
    Arc::strong_count(c) > 2
}

#[test]
fn acquire_is_woken_by_the_release_and_not_before() {
    let limiter = ConcurrencyLimiter::with_limit(2).unwrap();
    let first = limiter.try_acquire(1).unwrap();
    let second = limiter.try_acquire(1).unwrap();
    let (count, waker) = counter();
    let mut cx = Context::from_waker(&waker);
    let mut waiting = pin!(limiter.acquire(1));

    assert!(waiting.as_mut().poll(&mut cx).is_pending());
    assert!(registered(&count), "a pending acquire keeps its waker");
    // nothing that frees no permit wakes it
    assert!(limiter.try_acquire(1).is_err());
    let _ = limiter.snapshot();
    limiter.release(0);
    assert_eq!(wakes(&count), 0);
    // polling again without a release: still pending, still not woken
    assert!(waiting.as_mut().poll(&mut cx).is_pending());
    assert_eq!(wakes(&count), 0);
    assert_eq!(limiter.in_flight(), 2, "a pending acquire takes nothing");

    drop(first);
    assert_eq!(wakes(&count), 1, "the release woke the waiter");
    assert_eq!(
        limiter.in_flight(),
        2,
        "the release took the permit for the waiter"
    );
    assert!(limiter.try_acquire(1).is_err(), "a newcomer cannot take it");
    let Poll::Ready(Ok(permit)) = waiting.as_mut().poll(&mut cx) else {
        panic!("the freed permit is granted on the next poll")
    };
    assert_eq!((permit.permits(), limiter.in_flight()), (1, 2));

    // a resolved acquire is no longer woken
    drop(second);
    drop(permit);
    assert_eq!(wakes(&count), 1);
    assert_eq!(limiter.in_flight(), 0);
}

#[test]
fn acquire_of_several_waits_until_enough_are_free() {
    let limiter = ConcurrencyLimiter::with_limit(3).unwrap();
    let mut a = limiter.try_acquire(2).unwrap();
    let b = limiter.try_acquire(1).unwrap();
    let (count, waker) = counter();
    let mut cx = Context::from_waker(&waker);
    let mut waiting = pin!(limiter.acquire(2));
    assert!(waiting.as_mut().poll(&mut cx).is_pending());

    // one permit back is not enough: not woken
    a.release_some(1);
    assert_eq!(wakes(&count), 0);
    assert!(waiting.as_mut().poll(&mut cx).is_pending());
    assert!(registered(&count));
    drop(b);
    assert_eq!(wakes(&count), 1);
    let Poll::Ready(Ok(permit)) = waiting.as_mut().poll(&mut cx) else {
        panic!("two permits are free")
    };
    assert_eq!(permit.permits(), 2);
    assert_eq!(limiter.in_flight(), 3);
    drop((a, permit));
    assert_eq!(limiter.in_flight(), 0);
}

/// On a real executor: an hour of (paused) tokio time passes without the
/// waiter completing, and it completes within a millisecond of the drop,
/// never before it.
#[cfg(feature = "std")] // owned permits need `Arc`
#[tokio::test(start_paused = true)]
async fn a_waiting_task_completes_right_after_the_permit_is_dropped() {
    let limiter = Arc::new(ConcurrencyLimiter::with_limit(1).unwrap());
    let held = limiter.try_acquire_owned(1).unwrap();
    let released = Arc::new(AtomicBool::new(false));
    let task = tokio::spawn({
        let (limiter, released) = (Arc::clone(&limiter), Arc::clone(&released));
        async move {
            let permit = limiter.acquire_owned(1).await.unwrap();
            assert!(
                released.load(Ordering::SeqCst),
                "granted before the release"
            );
            permit.permits()
        }
    });
    tokio::time::sleep(Duration::from_secs(3_600)).await;
    assert!(!task.is_finished(), "no timer or polling grants the permit");
    assert_eq!(limiter.in_flight(), 1);

    released.store(true, Ordering::SeqCst);
    drop(held);
    let permits = tokio::time::timeout(Duration::from_millis(1), task)
        .await
        .expect("woken by the release")
        .unwrap();
    assert_eq!(permits, 1);
    assert_eq!(
        limiter.in_flight(),
        0,
        "the task's permit was dropped with it"
    );
}

/// A direct waiter behind a holder of 10 s (paused time) is admitted at
/// the instant of the release, after one wake-up (its polls are counted):
/// the direct case of "every in-flight waiter is woken by the release".
#[cfg(feature = "std")] // owned permits need `Arc`
#[tokio::test(start_paused = true)]
async fn a_direct_waiter_is_admitted_at_the_release_and_woken_once() {
    let limiter = Arc::new(ConcurrencyLimiter::with_limit(1).unwrap());
    let held = limiter.try_acquire_owned(1).unwrap();
    let polls = Arc::new(AtomicUsize::new(0));
    let task = tokio::spawn({
        let (limiter, polls) = (Arc::clone(&limiter), Arc::clone(&polls));
        async move {
            let mut acquire = pin!(limiter.acquire_owned(1));
            let permit = std::future::poll_fn(|cx| {
                polls.fetch_add(1, Ordering::SeqCst);
                acquire.as_mut().poll(cx)
            })
            .await
            .unwrap();
            let admitted = tokio::time::Instant::now();
            drop(permit);
            admitted
        }
    });
    tokio::time::sleep(Duration::from_secs(10)).await;
    let released = tokio::time::Instant::now();
    drop(held);
    let admitted = task.await.unwrap();
    assert_eq!(admitted, released);
    let polls = polls.load(Ordering::SeqCst);
    assert!(polls - 1 <= 2, "{polls} polls for one admission");
}

#[cfg(feature = "std")] // owned permits need `Arc`
#[test]
fn acquire_above_the_limit_resolves_at_once_to_capacity_exceeded() {
    let limiter = Arc::new(ConcurrencyLimiter::with_limit(3).unwrap());
    let (count, waker) = counter();
    let mut cx = Context::from_waker(&waker);
    let exceeded = |e: &Refusal<'_>| never(e, 4, 3);
    // even on an idle limiter: it could never be granted
    let mut fut = pin!(limiter.acquire(4));
    assert!(matches!(fut.as_mut().poll(&mut cx), Poll::Ready(Err(e)) if exceeded(&e)));
    let mut owned = pin!(limiter.acquire_owned(4));
    assert!(matches!(owned.as_mut().poll(&mut cx), Poll::Ready(Err(e)) if exceeded(&e)));
    // and on a busy one, without waiting for a release
    let held = limiter.try_acquire(3).unwrap();
    assert!(matches!(
        embassy_futures::poll_once(limiter.acquire(u32::MAX)),
        Poll::Ready(Err(e)) if never(&e, u32::MAX, 3)
    ));
    assert!(!registered(&count), "nothing was registered");
    assert_eq!(wakes(&count), 0);
    assert_eq!(limiter.in_flight(), 3);
    drop(held);
    assert_eq!(limiter.in_flight(), 0);
    // the same as try_acquire says
    assert!(matches!(
        limiter.try_acquire(4),
        Err(e) if exceeded(&e)
    ));
}

/// Documented: `acquire(0)` resolves at once, even with every permit taken.
#[test]
fn acquire_of_zero_resolves_at_once_on_a_full_limiter() {
    let limiter = ConcurrencyLimiter::with_limit(2).unwrap();
    let held = limiter.try_acquire(2).unwrap();
    let (count, waker) = counter();
    let mut fut = pin!(limiter.acquire(0));
    let Poll::Ready(Ok(none)) = fut.as_mut().poll(&mut Context::from_waker(&waker)) else {
        panic!("acquire(0) waited")
    };
    assert_eq!((none.permits(), limiter.in_flight()), (0, 2));
    assert!(!registered(&count));
    drop((none, held));
    assert_eq!(limiter.in_flight(), 0);
}

#[test]
fn lowering_the_limit_refuses_new_work_until_enough_are_released() {
    let limiter = ConcurrencyLimiter::with_limit(4).unwrap();
    let a = limiter.try_acquire(2).unwrap();
    let b = limiter.try_acquire(1).unwrap();
    limiter.set_limit(2).unwrap();
    assert_eq!(limiter.limit(), 2);
    // the permits in flight are kept, above the new limit
    assert_eq!((limiter.in_flight(), limiter.available()), (3, 0));
    let s = limiter.snapshot();
    assert_eq!((s.limit(), s.remaining()), (2, 0));
    assert!(matches!(limiter.try_acquire(1), Err(d) if !d.is_never() && d.limit() == 2));
    assert!(matches!(
        limiter.try_acquire(3),
        Err(e) if never(&e, 3, 2)
    ));
    drop(b); // 2 in flight: at the new limit
    assert!(matches!(
        limiter.try_acquire(1),
        Err(d) if !d.is_never()
    ));
    drop(a);
    assert_eq!(limiter.available(), 2);
    let both = limiter.try_acquire(2).unwrap();
    assert!(limiter.try_acquire(1).is_err());
    drop(both);
    // zero is refused and changes nothing
    assert_eq!(limiter.set_limit(0), Err(ConfigError::ZeroLimit));
    assert_eq!(limiter.limit(), 2);
}

#[test]
fn raising_the_limit_wakes_the_waiters() {
    let limiter = ConcurrencyLimiter::with_limit(1).unwrap();
    let held = limiter.try_acquire(1).unwrap();
    let (count, waker) = counter();
    let mut cx = Context::from_waker(&waker);
    let mut waiting = pin!(limiter.acquire(1));
    assert!(waiting.as_mut().poll(&mut cx).is_pending());
    // a refused change wakes nobody
    assert_eq!(limiter.set_limit(0), Err(ConfigError::ZeroLimit));
    assert_eq!(wakes(&count), 0);

    limiter.set_limit(2).unwrap();
    assert_eq!(wakes(&count), 1, "raising the limit woke the waiter");
    let Poll::Ready(Ok(permit)) = waiting.as_mut().poll(&mut cx) else {
        panic!("the raised limit has room")
    };
    assert_eq!((limiter.in_flight(), limiter.limit()), (2, 2));
    drop((held, permit));
    assert_eq!(limiter.in_flight(), 0);
}

#[test]
fn a_waiter_above_a_lowered_limit_resolves_to_capacity_exceeded() {
    let limiter = ConcurrencyLimiter::with_limit(3).unwrap();
    let held = limiter.try_acquire(3).unwrap();
    let (count, waker) = counter();
    let mut cx = Context::from_waker(&waker);
    let mut waiting = pin!(limiter.acquire(3));
    assert!(waiting.as_mut().poll(&mut cx).is_pending());
    limiter.set_limit(2).unwrap();
    assert_eq!(wakes(&count), 1, "lowering the limit wakes the waiters too");
    assert!(matches!(
        waiting.as_mut().poll(&mut cx),
        Poll::Ready(Err(e)) if never(&e, 3, 2)
    ));
    assert_eq!(limiter.in_flight(), 3);
    drop(held);
    assert_eq!(limiter.in_flight(), 0);
}

#[cfg(feature = "std")] // owned permits need `Arc`
#[test]
fn a_dropped_pending_acquire_leaves_nothing_registered() {
    let limiter = Arc::new(ConcurrencyLimiter::with_limit(1).unwrap());
    let held = limiter.try_acquire(1).unwrap();

    // a few cancelled waiters, borrowed and owned
    let cancelled: Vec<(Arc<Count>, Waker)> = (0..3).map(|_| counter()).collect();
    {
        let (c0, w0) = &cancelled[0];
        let mut fut = pin!(limiter.acquire(1));
        assert!(fut.as_mut().poll(&mut Context::from_waker(w0)).is_pending());
        assert!(registered(c0));
        let (c1, w1) = &cancelled[1];
        let mut owned = pin!(limiter.acquire_owned(1));
        assert!(
            owned
                .as_mut()
                .poll(&mut Context::from_waker(w1))
                .is_pending()
        );
        assert!(registered(c1));
        let (c2, w2) = &cancelled[2];
        let mut again = pin!(limiter.acquire(1));
        assert!(
            again
                .as_mut()
                .poll(&mut Context::from_waker(w2))
                .is_pending()
        );
        assert!(registered(c2));
    } // all three dropped while pending
    for (c, _) in &cancelled {
        assert!(!registered(c), "a cancelled waiter's waker was kept");
    }
    assert_eq!(limiter.in_flight(), 1, "cancelled waiters took nothing");

    // more cancelled waiters than a small waker set has slots
    let many: Vec<(Arc<Count>, Waker)> = (0..20).map(|_| counter()).collect();
    for (_, w) in &many {
        let mut fut = pin!(limiter.acquire(1));
        assert!(fut.as_mut().poll(&mut Context::from_waker(w)).is_pending());
    }
    for (c, _) in &many {
        assert!(!registered(c));
    }
    let woken_before: Vec<usize> = many.iter().map(|(c, _)| wakes(c)).collect();

    // the next waiter is still woken by a release, and only it
    let (next, waker) = counter();
    let mut cx = Context::from_waker(&waker);
    let mut waiting = pin!(limiter.acquire(1));
    assert!(waiting.as_mut().poll(&mut cx).is_pending());
    drop(held);
    assert_eq!(wakes(&next), 1);
    for (c, _) in &cancelled {
        assert_eq!(wakes(c), 0, "a cancelled waiter was woken");
    }
    let woken_after: Vec<usize> = many.iter().map(|(c, _)| wakes(c)).collect();
    assert_eq!(woken_after, woken_before, "a cancelled waiter was woken");
    let Poll::Ready(Ok(permit)) = waiting.as_mut().poll(&mut cx) else {
        panic!("the released permit goes to the next waiter")
    };
    assert_eq!(permit.permits(), 1);
}

/// The same with tasks: an aborted waiting task (its future dropped) does
/// not swallow the release meant for the task behind it.
#[cfg(feature = "std")] // owned permits need `Arc`
#[tokio::test(start_paused = true)]
async fn an_aborted_waiting_task_does_not_swallow_the_release() {
    let limiter = Arc::new(ConcurrencyLimiter::with_limit(1).unwrap());
    let held = limiter.try_acquire_owned(1).unwrap();
    let spawn_waiter = || {
        let limiter = Arc::clone(&limiter);
        tokio::spawn(async move { limiter.acquire_owned(1).await.map(|p| p.permits()) })
    };
    let cancelled = spawn_waiter();
    let next = spawn_waiter();
    tokio::time::sleep(Duration::from_secs(1)).await; // both are waiting
    assert!(!cancelled.is_finished() && !next.is_finished());
    cancelled.abort();
    assert!(cancelled.await.unwrap_err().is_cancelled());

    drop(held);
    let got = tokio::time::timeout(Duration::from_millis(1), next)
        .await
        .expect("the remaining waiter was woken")
        .unwrap();
    assert_eq!(got, Ok(1));
    assert_eq!(limiter.in_flight(), 0);
}

/// A hand-polled waiter: its future, its counting waker, and the wake-ups
/// already answered by a poll.
struct Waiter<'a> {
    #[allow(clippy::type_complexity)]
    future: std::pin::Pin<
        Box<
            dyn std::future::Future<
                    Output = Result<ConcurrencyPermit<&'a ConcurrencyLimiter>, Refusal<'static>>,
                > + 'a,
        >,
    >,
    count: Arc<Count>,
    waker: Waker,
    answered: usize,
}

impl<'a> Waiter<'a> {
    /// A waiter for `n` permits, polled once.
    fn new(
        limiter: &'a ConcurrencyLimiter,
        n: u32,
    ) -> (Self, Poll<ConcurrencyPermit<&'a ConcurrencyLimiter>>) {
        let (count, waker) = counter();
        let mut waiter = Self {
            future: Box::pin(limiter.acquire(n)),
            count,
            waker,
            answered: 0,
        };
        let first = waiter.poll();
        (waiter, first)
    }

    fn poll(&mut self) -> Poll<ConcurrencyPermit<&'a ConcurrencyLimiter>> {
        self.answered = wakes(&self.count);
        let mut cx = Context::from_waker(&self.waker);
        self.future
            .as_mut()
            .poll(&mut cx)
            .map(|r| r.expect("within the limit"))
    }

    /// Polled as an executor would: only if woken since the last poll.
    fn poll_if_woken(&mut self) -> Option<Poll<ConcurrencyPermit<&'a ConcurrencyLimiter>>> {
        (wakes(&self.count) > self.answered).then(|| self.poll())
    }
}

/// Ten waiters of one permit on a limit of 1, released one at a time, are
/// admitted in the order they started waiting, each woken at most twice
/// (here once), however the executor orders its polls: a release wakes
/// only the waiter it admits. (Before: every release woke every waiter,
/// the last of ten was woken nine times, and the first one polled won.)
#[cfg(feature = "std")] // more waiters than a `no_std` line has slots
#[test]
fn ten_waiters_are_admitted_in_arrival_order_each_woken_at_most_twice() {
    let limiter = ConcurrencyLimiter::with_limit(1).unwrap();
    let mut held = Some(limiter.try_acquire(1).unwrap());
    let mut waiters: Vec<Option<Waiter<'_>>> = (0..10)
        .map(|_| {
            let (w, first) = Waiter::new(&limiter, 1);
            assert!(first.is_pending());
            Some(w)
        })
        .collect();
    let mut admitted = Vec::new();
    let mut counts = [0; 10];
    while admitted.len() < 10 {
        drop(held.take()); // one release
        // the executor polls the woken tasks, last arrived first
        for i in (0..10).rev() {
            let Some(w) = waiters[i].as_mut() else {
                continue;
            };
            if let Some(Poll::Ready(permit)) = w.poll_if_woken() {
                assert!(held.is_none(), "two admitted by one release");
                admitted.push(i);
                counts[i] = wakes(&w.count);
                held = Some(permit);
                waiters[i] = None;
            }
        }
        assert!(held.is_some(), "a release admitted nobody");
        assert_eq!(limiter.in_flight(), 1);
    }
    assert_eq!(admitted, (0..10).collect::<Vec<_>>(), "arrival order");
    assert!(counts.iter().all(|&c| c <= 2), "wake-ups: {counts:?}");
    drop(held);
    assert_eq!(limiter.in_flight(), 0);
}

/// A waiter of 3 permits at the front of the line is admitted when 3 are
/// free, before a later waiter of 1 that would have fitted each time one
/// came back: the release does not let the small one overtake, and a
/// newcomer (`try_acquire`) may not take the freed permits either.
#[test]
fn a_front_waiter_of_three_is_admitted_before_a_later_waiter_of_one() {
    let limiter = ConcurrencyLimiter::with_limit(3).unwrap();
    let mut guards: Vec<_> = (0..3).map(|_| limiter.try_acquire(1).unwrap()).collect();
    let (mut large, first) = Waiter::new(&limiter, 3);
    assert!(first.is_pending());
    let (mut small, first) = Waiter::new(&limiter, 1);
    assert!(first.is_pending());
    for freed in 1..=2 {
        drop(guards.pop());
        // the small one polled first, as an executor may
        for w in [&mut small, &mut large] {
            assert!(
                !matches!(w.poll_if_woken(), Some(Poll::Ready(_))),
                "admitted with {freed} free: overtook the waiter of 3"
            );
        }
        assert!(limiter.try_acquire(1).is_err(), "a newcomer overtook");
        assert_eq!(limiter.available(), freed);
    }
    drop(guards.pop());
    assert!(
        small.poll_if_woken().is_none(),
        "the small waiter was woken"
    );
    let Some(Poll::Ready(three)) = large.poll_if_woken() else {
        panic!("3 free: the front waiter is admitted")
    };
    assert_eq!((three.permits(), wakes(&large.count)), (3, 1));
    drop(three);
    let Some(Poll::Ready(one)) = small.poll_if_woken() else {
        panic!("the small waiter is next")
    };
    assert_eq!((limiter.in_flight(), wakes(&small.count)), (1, 1));
    drop(one);
    assert_eq!(limiter.in_flight(), 0);
}

/// A waiter granted the released permit but dropped before it polled
/// (cancelled) hands the permit to the next waiter, which is woken then
/// and not before; nothing is lost or given twice. Borrowed and owned.
#[cfg(feature = "std")] // owned permits need `Arc`
#[test]
fn a_granted_then_dropped_waiter_hands_its_permit_to_the_next() {
    let limiter = Arc::new(ConcurrencyLimiter::with_limit(1).unwrap());
    let held = limiter.try_acquire(1).unwrap();
    let (first, poll) = Waiter::new(&limiter, 1);
    assert!(poll.is_pending());
    let (owned_count, owned_waker) = counter();
    let mut owned = Box::pin(limiter.acquire_owned(1));
    assert!(
        owned
            .as_mut()
            .poll(&mut Context::from_waker(&owned_waker))
            .is_pending()
    );
    let (mut last, poll) = Waiter::new(&limiter, 1);
    assert!(poll.is_pending());

    drop(held);
    assert_eq!(wakes(&first.count), 1, "the front waiter was granted");
    assert_eq!(
        (wakes(&owned_count), wakes(&last.count)),
        (0, 0),
        "only the granted waiter is woken"
    );
    drop(first); // cancelled after it was granted, before it polled
    assert_eq!(
        limiter.in_flight(),
        1,
        "the permit was handed on, not freed"
    );
    assert_eq!((wakes(&owned_count), wakes(&last.count)), (1, 0));
    drop(owned); // the owned waiter too
    assert_eq!(limiter.in_flight(), 1);
    assert_eq!(wakes(&last.count), 1);
    let Some(Poll::Ready(permit)) = last.poll_if_woken() else {
        panic!("the permit reached the last waiter")
    };
    assert_eq!(limiter.in_flight(), 1);
    drop(permit);
    assert_eq!(limiter.in_flight(), 0, "no permit lost or given twice");
}

/// Raising the limit from 1 to 3 with three waiters of 1 (and 1 held)
/// admits and wakes exactly the first two; the third is not woken.
#[test]
fn raising_the_limit_wakes_exactly_the_waiters_that_fit() {
    let limiter = ConcurrencyLimiter::with_limit(1).unwrap();
    let held = limiter.try_acquire(1).unwrap();
    let mut waiters: Vec<Waiter<'_>> = (0..3)
        .map(|_| {
            let (w, first) = Waiter::new(&limiter, 1);
            assert!(first.is_pending());
            w
        })
        .collect();
    limiter.set_limit(3).unwrap();
    let woken: Vec<usize> = waiters.iter().map(|w| wakes(&w.count)).collect();
    assert_eq!(woken, [1, 1, 0]);
    assert_eq!(limiter.in_flight(), 3, "taken for the two that fit");
    let permits: Vec<_> = waiters[..2]
        .iter_mut()
        .map(|w| match w.poll() {
            Poll::Ready(p) => p,
            Poll::Pending => panic!("a woken waiter was not admitted"),
        })
        .collect();
    assert!(waiters[2].poll().is_pending());
    drop(held);
    assert_eq!(wakes(&waiters[2].count), 1);
    assert!(waiters[2].poll().is_ready());
    drop(permits);
}

/// Without `std` the line has 8 slots. Two more waiters find them all
/// taken: each wakes itself at every poll (polled again, never lost), the
/// 8 in line are never woken by them and are admitted first, in arrival
/// order, each woken at most twice; the two join as slots free and are
/// admitted after them. (Before: a ninth registration woke the other 8.)
#[cfg(not(feature = "std"))]
#[test]
fn without_std_waiters_beyond_the_slots_poll_again_and_leave_the_line_alone() {
    let limiter = ConcurrencyLimiter::with_limit(1).unwrap();
    let mut held = Some(limiter.try_acquire(1).unwrap());
    let mut waiters: Vec<Option<Waiter<'_>>> = (0..10)
        .map(|_| {
            let (w, first) = Waiter::new(&limiter, 1);
            assert!(first.is_pending());
            Some(w)
        })
        .collect();
    let woken = |ws: &[Option<Waiter<'_>>]| -> Vec<usize> {
        ws.iter()
            .map(|w| w.as_ref().map_or(0, |w| wakes(&w.count)))
            .collect()
    };
    assert_eq!(woken(&waiters), [0, 0, 0, 0, 0, 0, 0, 0, 1, 1]);
    // polled again, the two outside the line wake themselves again
    for w in waiters[8..].iter_mut().flatten() {
        assert!(w.poll_if_woken().unwrap().is_pending());
    }
    assert_eq!(woken(&waiters), [0, 0, 0, 0, 0, 0, 0, 0, 2, 2]);

    let mut admitted = Vec::new();
    let mut counts = [0; 10];
    for _ in 0..100 {
        if admitted.len() == 10 {
            break;
        }
        drop(held.take());
        for i in (0..10).rev() {
            let Some(w) = waiters[i].as_mut() else {
                continue;
            };
            if let Some(Poll::Ready(permit)) = w.poll_if_woken() {
                assert!(held.is_none(), "two admitted by one release");
                admitted.push(i);
                counts[i] = wakes(&w.count);
                held = Some(permit);
                waiters[i] = None;
            }
        }
        assert_eq!(limiter.in_flight(), 1);
    }
    assert_eq!(
        &admitted[..8],
        &[0, 1, 2, 3, 4, 5, 6, 7],
        "the line's order"
    );
    let mut late = admitted[8..].to_vec();
    late.sort_unstable();
    assert_eq!(late, [8, 9], "the waiters outside the line got in");
    assert!(counts[..8].iter().all(|&c| c <= 2), "wake-ups: {counts:?}");
    drop(held);
    assert_eq!(limiter.in_flight(), 0);
}

/// Ten tasks wait for the one permit of a limiter held for 10 s (paused
/// time); the holder and then each task in turn hold it for a second. Each
/// task is admitted at the instant the permit before it is released, in
/// the order the tasks started waiting, and is polled at most three times
/// (spawned, then at most two wake-ups): a release wakes only the task it
/// admits. (Before: each release woke every waiting task.)
#[cfg(feature = "std")] // owned permits need `Arc`
#[tokio::test(start_paused = true)]
async fn ten_waiting_tasks_are_admitted_at_each_release_in_order() {
    let limiter = Arc::new(ConcurrencyLimiter::with_limit(1).unwrap());
    let held = limiter.try_acquire_owned(1).unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..10 {
        let (limiter, order) = (Arc::clone(&limiter), Arc::clone(&order));
        tasks.push(tokio::spawn(async move {
            let mut polls = 0;
            let mut acquire = pin!(limiter.acquire_owned(1));
            let permit = std::future::poll_fn(|cx| {
                polls += 1;
                acquire.as_mut().poll(cx)
            })
            .await
            .unwrap();
            let admitted = tokio::time::Instant::now();
            order.lock().unwrap().push(i);
            tokio::time::sleep(Duration::from_secs(1)).await;
            drop(permit);
            (admitted, tokio::time::Instant::now(), polls)
        }));
        // each task is waiting before the next one starts
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_secs(10)).await;
    let mut released = tokio::time::Instant::now();
    drop(held);
    for task in tasks {
        let (admitted, done, polls) = task.await.unwrap();
        assert_eq!(admitted, released, "admitted at the release");
        assert!(polls <= 3, "{polls} polls for one admission");
        released = done;
    }
    assert_eq!(*order.lock().unwrap(), (0..10).collect::<Vec<_>>());
    assert_eq!(limiter.in_flight(), 0);
}
