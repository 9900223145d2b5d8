//! Exact rates: a quota's emission interval `T = period / permits` is kept
//! exactly when its denominator (in nanoseconds, lowest terms) is at most
//! 16, so after exactly `k` periods exactly `k × permits` permits are back
//! (issue 16 item 5: `per_second(3)` gave 2 back after one second, where
//! .NET, nginx and a user expect 3). Quotas beyond that keep `T` rounded up
//! and never admit early. Every path that reads a TAT (snapshots, waits,
//! refunds, idleness, sweeps, reconfiguration) agrees.
#![cfg(feature = "std")]

use core::time::Duration;

use tollgate::keyed::{HeaplessKeyedTable, KeyedTable, LockFreeGcraTable, ShardedKeyedTable};
use tollgate::live::{Inheritance, LiveBucket};
use tollgate::{Bucket, Gcra, Limiter, Quota, Timestamp};

const SEC: u64 = 1_000_000_000;
/// An arbitrary start, not a multiple of anything.
const T0: u64 = 12_345_678_901;

fn t(ns: u64) -> Timestamp {
    Timestamp::from_nanos(ns)
}

fn burst(quota: Quota, burst: u32) -> Quota {
    quota.with_burst(burst).expect("valid burst")
}

/// `per_second(3)` with its default burst of 3: drained at once, all three
/// are back after exactly one second, not a nanosecond later.
#[test]
fn per_second_3_has_three_back_after_exactly_one_second() {
    let b = Bucket::token_bucket(Quota::per_second(3).unwrap());
    assert!(b.check_n(3, t(T0)).is_ok());
    // one nanosecond early: two back (the third is ⅓ ns away)
    assert_eq!(b.snapshot(t(T0 + SEC - 1)).remaining(), 2);
    assert!(b.check_n(3, t(T0 + SEC - 1)).is_err());
    // exactly one second: three (with T rounded up to 333_333_334 ns: two)
    let full = b.snapshot(t(T0 + SEC));
    assert_eq!(full.remaining(), 3);
    assert_eq!(full.reset_after(), Duration::ZERO);
    assert!(b.is_idle(t(T0 + SEC)));
    assert!(b.check_n(3, t(T0 + SEC)).is_ok());
    assert!(b.check(t(T0 + SEC)).is_err());
}

/// Quotas whose `T` is a fraction of a nanosecond, and one whose `T` is
/// whole: drained at once, `k × permits` are back after exactly `k`
/// periods and one fewer a nanosecond before, for each `k` up to the burst.
#[test]
fn after_exactly_k_periods_k_times_permits_are_back() {
    let quotas = [
        Quota::per_second(3).unwrap(),
        Quota::per_second(6).unwrap(),
        Quota::per_second(7).unwrap(),
        Quota::per_second(12).unwrap(),
        Quota::per_minute(7).unwrap(),
        Quota::per_hour(7).unwrap(),
        Quota::new(13, Duration::from_nanos(1_000)).unwrap(), // T = 76 12/13 ns
        Quota::new(5, Duration::from_nanos(7)).unwrap(),      // T = 1.4 ns
        Quota::per_second(16).unwrap(),                       // T whole: 62.5 ms
    ];
    const K: u32 = 4;
    for quota in quotas {
        assert!(quota.is_exact(), "{quota:?}");
        let permits = quota.permits();
        let period = quota.period_nanos();
        let b = Bucket::token_bucket(burst(quota, K * permits));
        assert!(b.check_n(K * permits, t(T0)).is_ok());
        for k in 1..=K {
            let at = T0 + u64::from(k) * period;
            let back = k * permits;
            assert_eq!(
                b.snapshot(t(at - 1)).remaining(),
                back - 1,
                "{quota:?}: {k} periods less 1 ns"
            );
            assert_eq!(
                b.snapshot(t(at)).remaining(),
                back,
                "{quota:?}: exactly {k} periods"
            );
            assert_eq!(
                b.time_until_ready(back, t(T0)),
                Ok(Duration::from_nanos(u64::from(k) * period)),
                "{quota:?}: wait for {back}"
            );
        }
        assert!(!b.is_idle(t(T0 + u64::from(K) * period - 1)));
        assert!(b.is_idle(t(T0 + u64::from(K) * period)));

        // period after period: exactly `permits` each, never one more
        let b = Bucket::token_bucket(quota);
        for k in 0..=(3 * K) {
            let at = t(T0 + u64::from(k) * period);
            assert!(b.check_n(permits, at).is_ok(), "{quota:?}: period {k}");
            assert!(b.check(at).is_err(), "{quota:?}: period {k}");
        }
    }
}

/// Quotas whose denominator is above 16 keep `T` rounded up: after exactly
/// one period one permit is still missing (a little later it is back), and
/// no permit ever comes back before its exact time.
#[test]
fn a_rounded_quota_never_admits_early() {
    let seventeen = Quota::per_second(17).unwrap();
    assert!(!seventeen.is_exact());
    assert_eq!(seventeen.interval_nanos(), 58_823_530); // 58_823_529 7/17 up
    let b = Bucket::token_bucket(seventeen);
    assert!(b.check_n(17, t(T0)).is_ok());
    assert_eq!(b.snapshot(t(T0 + SEC)).remaining(), 16);
    // 17 × 58_823_530 = 1 s + 10 ns
    assert_eq!(
        b.time_until_ready(17, t(T0)),
        Ok(Duration::from_nanos(SEC + 10))
    );
    assert_eq!(b.snapshot(t(T0 + SEC + 10)).remaining(), 17);

    for quota in [
        seventeen,
        Quota::per_second(999).unwrap(),
        Quota::new(31, Duration::from_nanos(1_000)).unwrap(),
        Quota::per_minute(7_001).unwrap(),
    ] {
        assert!(!quota.is_exact(), "{quota:?}");
        let permits = u128::from(quota.permits());
        let period = u128::from(quota.period_nanos());
        let b = Bucket::token_bucket(burst(quota, 1));
        // take each permit at the first nanosecond it is offered
        let mut now = T0;
        let mut taken: u128 = 0;
        for _ in 0..200 {
            if let Err(refusal) = b.check(t(now)) {
                let wait = refusal.retry_after().as_nanos() as u64;
                assert!(wait > 0);
                assert!(b.check(t(now + wait - 1)).is_err(), "{quota:?}");
                now += wait;
            } else {
                taken += 1;
                // the k-th permit after the first: no earlier than k × T,
                // T exact
                let elapsed = u128::from(now - T0);
                assert!(
                    (taken - 1) * period <= elapsed * permits,
                    "{quota:?}: permit {taken} at {elapsed} ns"
                );
            }
        }
        assert!(taken >= 100);
    }
}

/// A refund gives back exactly `n × T`: the fractions stay exact.
#[test]
fn refunds_give_back_exactly_n_intervals() {
    let b = Bucket::token_bucket(Quota::per_second(3).unwrap());
    assert!(b.check_n(3, t(T0)).is_ok());
    b.refund(1, t(T0));
    let s = b.snapshot(t(T0));
    assert_eq!(s.remaining(), 1);
    // 2T = 666_666_666⅔ ns until full, reported rounded up
    assert_eq!(s.reset_after(), Duration::from_nanos(666_666_667));
    // the third permit is back exactly one second after the three were
    // taken, less the refunded third: at T0 + 2T
    assert_eq!(b.snapshot(t(T0 + 333_333_333)).remaining(), 1);
    assert_eq!(b.snapshot(t(T0 + 333_333_334)).remaining(), 2);
    assert_eq!(b.snapshot(t(T0 + 666_666_666)).remaining(), 2);
    assert!(b.is_idle(t(T0 + 666_666_667)));
    // refunding everything: full at once, and exactly the burst again
    assert!(b.check_n(3, t(T0 + SEC)).is_ok());
    b.refund(3, t(T0 + SEC));
    assert!(b.is_idle(t(T0 + SEC)));
    assert!(b.check_n(3, t(T0 + SEC)).is_ok());
    assert!(b.check(t(T0 + SEC)).is_err());
    // a refund never lifts the bucket above its burst
    b.refund(100, t(T0 + SEC));
    assert_eq!(b.snapshot(t(T0 + 5 * SEC)).remaining(), 3);
}

/// Peeks, snapshots and waits report nanoseconds rounded up: the first
/// nanosecond at which the state they describe holds.
#[test]
fn peeks_and_waits_round_up_to_the_first_nanosecond_that_holds() {
    let b = Bucket::token_bucket(Quota::per_second(3).unwrap());
    assert!(b.check(t(T0)).is_ok());
    assert!(b.check_n(0, t(T0)).is_ok());
    let peek = b.snapshot(t(T0));
    assert_eq!(peek.remaining(), 2);
    assert_eq!(peek.reset_after_nanos(), 333_333_334);
    assert_eq!(
        b.time_until_ready(3, t(T0)),
        Ok(Duration::from_nanos(333_333_334))
    );
    assert_eq!(b.time_until_ready(2, t(T0)), Ok(Duration::ZERO));
    // ⅓ ns before full: reported as 1 ns
    let s = b.snapshot(t(T0 + 333_333_333));
    assert_eq!((s.remaining(), s.reset_after_nanos()), (2, 1));
    assert_eq!(
        b.time_until_ready(3, t(T0 + 333_333_333)),
        Ok(Duration::from_nanos(1))
    );
    assert_eq!(b.state().tat(b.algorithm()), t(T0 + 333_333_334));
    let s = b.snapshot(t(T0 + 333_333_334));
    assert_eq!((s.remaining(), s.reset_after_nanos()), (3, 0));

    // the wait behind a queue: 2 queued ahead of 1 on a drained burst of
    // 1 is exactly 3T = 1 s (with T rounded up: 1_000_000_002)
    let b = Bucket::token_bucket(burst(Quota::per_second(3).unwrap(), 1));
    assert!(b.check(t(T0)).is_ok());
    assert_eq!(
        b.time_until_ready_after(&(), 2, 1, t(T0)),
        Some(Duration::from_secs(1))
    );
    assert_eq!(
        b.time_until_ready_after(&(), 1, 1, t(T0)),
        Some(Duration::from_nanos(666_666_667))
    );
    assert_eq!(
        b.time_until_ready_after(&(), 0, 1, t(T0)),
        Some(Duration::from_nanos(333_333_334))
    );
}

/// A leaky bucket paces at the exact interval: requests of `permits`
/// weight are admitted exactly one period apart, and a request is refused
/// until the first nanosecond its predecessors have drained.
#[test]
fn leaky_buckets_drain_at_the_exact_interval() {
    for quota in [
        Quota::per_second(3).unwrap(),
        Quota::per_minute(7).unwrap(),
        Quota::per_second(12).unwrap(),
    ] {
        let permits = quota.permits();
        let period = quota.period_nanos();
        let b = Bucket::leaky_bucket(quota);
        for k in 0..10 {
            let at = T0 + k * period;
            if k > 0 {
                let early = b.check_n(permits, t(at - 1)).unwrap_err();
                assert_eq!(
                    early.retry_after(),
                    Duration::from_nanos(1),
                    "{quota:?} {k}"
                );
            }
            assert!(b.check_n(permits, t(at)).is_ok(), "{quota:?}: period {k}");
        }
    }
    // two of three: drained at ⌈2T⌉ = 666_666_667 (rounded T: 666_666_668)
    let b = Bucket::leaky_bucket(Quota::per_second(3).unwrap());
    assert!(b.check_n(2, t(T0)).is_ok());
    let d = b.check(t(T0)).unwrap_err();
    assert_eq!(d.retry_after_nanos(), 666_666_667);
    assert_eq!(d.snapshot().reset_after_nanos(), 666_666_667);
    assert!(b.check(t(T0 + 666_666_666)).is_err());
    assert!(b.check(t(T0 + 666_666_667)).is_ok());
}

/// `LiveBucket` and every keyed table keep the same exact TAT: full (idle,
/// evictable) at exactly one period, busy a nanosecond before.
#[test]
fn every_bucket_and_table_is_exact_and_evicts_at_the_exact_instant() {
    let quota = Quota::per_second(3).unwrap();
    let gcra = Gcra::token_bucket(quota);

    let live = LiveBucket::new(gcra);
    assert!(live.check_n(3, t(T0)).is_ok());
    assert!(!live.is_idle(t(T0 + SEC - 1)));
    assert_eq!(live.snapshot(t(T0 + SEC - 1)).remaining(), 2);
    assert!(live.is_idle(t(T0 + SEC)));
    assert_eq!(
        live.time_until_ready_after(&(), 2, 1, t(T0)),
        Some(Duration::from_secs(1))
    );
    assert!(live.check_n(3, t(T0 + SEC)).is_ok());

    let sharded = ShardedKeyedTable::<u64, _>::builder(gcra)
        .max_keys(8)
        .build()
        .unwrap();
    let lock_free = LockFreeGcraTable::<u64>::builder(gcra)
        .max_keys(8)
        .build()
        .unwrap();
    let heapless = HeaplessKeyedTable::<u64, Gcra, 8>::builder(gcra).build();
    // (was a loop over `&dyn KeyedLimiter`; the merged trait is not dyn
    // compatible, so a generic function per table)
    fn exact_and_evicted_at_the_exact_instant<T: KeyedTable<u64, Algorithm = Gcra>>(
        i: usize,
        table: &T,
    ) {
        assert!(table.try_acquire_n(&7, 3, t(T0)).is_ok(), "{i}");
        let early = table.try_acquire_n(&7, 3, t(T0 + SEC - 1)).unwrap_err();
        assert_eq!(early.retry_after(), Duration::from_nanos(1));
        assert_eq!(table.snapshot(&7, t(T0 + SEC - 1)).remaining(), 2);
        assert_eq!(
            table.time_until_ready(&7, 3, t(T0)),
            Ok(Duration::from_secs(1))
        );
        assert_eq!(table.evict_refilled(t(T0 + SEC - 1)), 0, "table {i}");
        assert!(table.contains(&7));
        assert_eq!(table.evict_refilled(t(T0 + SEC)), 1, "table {i}");
        assert!(!table.contains(&7));
        assert!(table.try_acquire_n(&7, 3, t(T0 + SEC)).is_ok());
    }
    exact_and_evicted_at_the_exact_instant(0, &sharded);
    exact_and_evicted_at_the_exact_instant(1, &lock_free);
    exact_and_evicted_at_the_exact_instant(2, &heapless);
}

/// Reconfiguration between quotas of different denominators converts the
/// TAT exactly, rounding towards less room.
#[test]
fn reconfiguration_converts_between_units_exactly() {
    let three = Quota::per_second(3).unwrap();
    let seven = Quota::per_second(7).unwrap();
    let ten = Quota::per_second(10).unwrap();
    let seventeen = Quota::per_second(17).unwrap(); // rounded
    let two_of_three = || {
        let b = LiveBucket::token_bucket(three);
        assert!(b.check_n(2, t(T0)).is_ok());
        b
    };
    // (to, rule, remaining, reset_after ns)
    let cases = [
        // 2 used, charged again at T = 1/7 s: 2/7 s
        (seven, Inheritance::UsedAmount, 5, 285_714_286),
        // 2/3 used of 7: 4⅔ permits, 2/3 s until full
        (seven, Inheritance::UsedFraction, 2, 666_666_667),
        (seven, Inheritance::Reset, 7, 0),
        (ten, Inheritance::UsedAmount, 8, 200_000_000),
        (ten, Inheritance::UsedFraction, 3, 666_666_667),
        (seventeen, Inheritance::UsedAmount, 15, 2 * 58_823_530),
    ];
    for (to, how, remaining, reset) in cases {
        let b = two_of_three();
        b.set_quota(to, how, t(T0));
        let s = b.snapshot(t(T0));
        assert_eq!(
            (s.remaining(), s.reset_after_nanos()),
            (remaining, reset),
            "to {to:?} by {how:?}"
        );
    }
    // and back: 2 of 10 used are 2 of 3 (2T = 666_666_666⅔ ns), 1 of 7
    // is exactly one third of a second at 3 per second
    let b = LiveBucket::token_bucket(ten);
    assert!(b.check_n(2, t(T0)).is_ok());
    b.set_quota(three, Inheritance::UsedAmount, t(T0));
    assert_eq!(b.snapshot(t(T0)).reset_after_nanos(), 666_666_667);
    assert_eq!(b.snapshot(t(T0 + 666_666_666)).remaining(), 2);
    assert!(b.is_idle(t(T0 + 666_666_667)));
    let b = LiveBucket::token_bucket(seven);
    assert!(b.check(t(T0)).is_ok());
    b.set_quota(three, Inheritance::UsedAmount, t(T0));
    assert_eq!(b.snapshot(t(T0 + SEC / 3)).remaining(), 2);
    assert!(b.is_idle(t(T0 + SEC / 3 + 1)));
    // a full bucket stays full across units
    let b = LiveBucket::token_bucket(three);
    assert!(b.check_n(3, t(T0)).is_ok());
    b.set_quota(seven, Inheritance::UsedAmount, t(T0 + SEC));
    assert!(b.is_idle(t(T0 + SEC)));
    assert_eq!(b.snapshot(t(T0 + SEC)).remaining(), 7);
}

/// Past its horizon (`(2^64 − 2 − burst × P) / d` ns after the clock's
/// origin) an exact bucket stops refilling: it admits what it held at the
/// horizon and nothing more, however far the clock goes.
#[test]
fn past_the_horizon_an_exact_bucket_fails_closed() {
    let quota = Quota::per_second(3).unwrap();
    // P = 1 s in units of 1/3 ns, burst 3: max lead 3e9 units
    let horizon = (u64::MAX - 2 - 3 * SEC) / 3;
    let b = Bucket::token_bucket(quota);
    // exact up to the horizon
    assert!(b.check_n(3, t(horizon - 2 * SEC)).is_ok());
    assert_eq!(b.snapshot(t(horizon - SEC - 1)).remaining(), 2);
    assert_eq!(b.snapshot(t(horizon - SEC)).remaining(), 3);
    let mut admitted = 0;
    for now in [
        horizon,
        horizon + 1,
        horizon + SEC,
        horizon + 1_000 * SEC,
        u64::MAX - 1,
        u64::MAX,
    ] {
        for _ in 0..5 {
            if b.check(t(now)).is_ok() {
                admitted += 1;
            }
        }
    }
    assert_eq!(admitted, 3, "the burst it held at the horizon, no more");
    assert!(!b.is_idle(Timestamp::MAX));
    // a whole-nanosecond quota is unaffected (584 years, as before)
    let b = Bucket::token_bucket(Quota::per_second(10).unwrap());
    assert!(b.check_n(10, t(horizon)).is_ok());
    assert!(b.check_n(10, t(horizon + SEC)).is_ok());
}

/// Waiting behind a queue (nginx `limit_req burst=3` without `nodelay`: a
/// bucket of burst 1 behind a queue of 3) admits each excess request at
/// its turn, to the nanosecond: the first nanosecond at or after the
/// previous admission plus `T`. A bucket of burst 1 restarts from the
/// instant it admits, and a clock reading in whole nanoseconds is up to
/// 1 ns after an exact rational turn, so at 3 per second (`T` = 333_333_333⅓
/// ns) the turns are 333_333_334, 666_666_668 and 1_000_000_002 ns: at most
/// 1 ns per admission behind the exact `k·T`, never ahead. tokio's timers
/// fire on a 1 ms grid, so the paused clock is moved by hand to 1 ns
/// before each turn and to the turn, and the queue asked to look again
/// (`Queue::recheck`); left to its timer, the queue admits each on the
/// first millisecond tick at or after its turn, never before, and charges
/// it at its turn (the timer's lateness does not add up: see
/// `a_paced_line_keeps_its_rate_on_the_timer_grid`).
#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn queued_waiters_are_admitted_at_their_turns_to_the_nanosecond() {
    use core::future::Future;
    use core::pin::Pin;
    use core::task::{Context, Poll};
    use tollgate::Clock;
    use tollgate::partitioned::Partitioned;
    use tollgate::queue::{Queue, WaitError};

    /// The future's answer now, without waiting.
    async fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
        core::future::poll_fn(|cx: &mut Context<'_>| Poll::Ready(Pin::new(&mut *f).poll(cx))).await
    }

    // a newcomer's wait, estimated from the bucket before any admission:
    // the exact turns `⌈k·T⌉`
    const ESTIMATES: [u64; 3] = [333_333_334, 666_666_667, 1_000_000_000];
    // the admissions: each ⌈previous + T⌉
    const TURNS: [u64; 3] = [333_333_334, 666_666_668, 1_000_000_002];
    let bucket = Gcra::token_bucket(burst(Quota::per_second(3).unwrap(), 1));
    let table = ShardedKeyedTable::<u8, _>::builder(bucket).build().unwrap();
    let zone = Partitioned::<u8, u8>::builder("exact")
        .policy("zone", |k: &u8| Some(*k), table)
        .build();
    let queue = Queue::builder(zone).queue_limit(3).build();
    let clock = *queue.clock();
    // tick 0 of tokio's timer grid
    let t0 = tokio::time::Instant::now();

    // key 1: each turn reached by hand, to the nanosecond
    let start = clock.now();
    let mut first = Box::pin(queue.acquire(&1, 1));
    assert!(matches!(poll_once(&mut first).await, Poll::Ready(Ok(_))));
    let mut waiters = Vec::new();
    for turn in ESTIMATES {
        // what a newcomer would wait now: exactly its turn
        assert_eq!(
            queue.try_acquire(&1, 1).unwrap_err(),
            WaitError::WouldWait {
                retry_after: Some(Duration::from_nanos(turn))
            }
        );
        let mut waiter = Box::pin(queue.acquire(&1, 1));
        assert!(poll_once(&mut waiter).await.is_pending());
        waiters.push(waiter);
    }
    // the fifth does not fit; room comes at the first turn
    let mut fifth = Box::pin(queue.acquire(&1, 1));
    assert_eq!(
        poll_once(&mut fifth).await.map(|r| r.map(drop)),
        Poll::Ready(Err(WaitError::QueueFull {
            retry_after: Some(Duration::from_nanos(ESTIMATES[0]))
        }))
    );
    // each waiter: still waiting 1 ns before its turn; admitted at it (if
    // not, the nanosecond it is admitted at, looking again each ns)
    let mut early = Vec::new();
    let mut at = Vec::new();
    for (turn, waiter) in TURNS.into_iter().zip(&mut waiters) {
        let before = start + Duration::from_nanos(turn - 1);
        tokio::time::advance(before - clock.now()).await;
        queue.recheck();
        early.push(poll_once(waiter).await.is_pending());
        let mut admitted = None;
        for _ in 0..1_000 {
            tokio::time::advance(Duration::from_nanos(1)).await;
            queue.recheck();
            if let Poll::Ready(r) = poll_once(waiter).await {
                assert!(r.is_ok());
                admitted = Some(u64::try_from((clock.now() - start).as_nanos()).unwrap());
                break;
            }
        }
        at.push(admitted);
    }
    assert_eq!(queue.stats().queued_requests, 0);

    // key 2, left to the queue's timer, from a tick of tokio's timer grid:
    // each on the first millisecond tick at or after its exact turn
    let start = t0 + Duration::from_secs(2);
    tokio::time::advance(start - tokio::time::Instant::now()).await;
    assert!(queue.try_acquire(&2, 1).is_ok());
    let mut waiters: Vec<_> = TURNS
        .iter()
        .map(|_| Box::pin(queue.acquire(&2, 1)))
        .collect();
    for waiter in &mut waiters {
        assert!(poll_once(waiter).await.is_pending());
    }
    let mut admitted = Vec::new();
    for waiter in waiters {
        assert!(waiter.await.is_ok());
        admitted.push(start.elapsed());
    }
    let ticks: Vec<Duration> = TURNS
        .iter()
        .map(|&turn| Duration::from_millis(turn.div_ceil(1_000_000)))
        .collect();
    assert_eq!(
        (early, at, admitted),
        (vec![true; 3], TURNS.map(Some).to_vec(), ticks),
        "(waiting 1 ns before each turn, admitted at (ns, by hand), admitted at (by the timer))"
    );
}

/// A line of a burst-1 bucket left to the queue's timer keeps the bucket's
/// rate: each waiter is charged at its turn, not at the (later) tick its
/// timer fired on, so the timer grid's lateness does not add up from one
/// admission to the next. At 300 per second (`T` = 3⅓ ms, off tokio's 1 ms
/// grid), 30 queued waiters behind a first admission are all admitted by
/// `30·T` = 100 ms (plus the last tick's lateness), where charging each at
/// its tick took 120 ms (250 per second).
#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn a_paced_line_keeps_its_rate_on_the_timer_grid() {
    use tollgate::queue::Queue;

    let bucket = Gcra::token_bucket(burst(Quota::per_second(300).unwrap(), 1));
    let table = ShardedKeyedTable::<u8, _>::builder(bucket).build().unwrap();
    let queue = Queue::builder(table).queue_limit(30).build();
    let start = tokio::time::Instant::now();
    assert!(queue.try_acquire(&1, 1).is_ok());
    let waiters: Vec<_> = (0..30)
        .map(|_| tokio::spawn(queue.acquire(&1, 1)))
        .collect();
    let mut at = Vec::new();
    for w in waiters {
        assert!(w.await.unwrap().is_ok());
        at.push(start.elapsed());
    }
    // the k-th at its turn's tick: ⌈k·T⌉ ms at most 1 ms late, in order
    for (k, t) in (1u64..).zip(&at) {
        let turn = Duration::from_nanos((k * 1_000_000_000).div_ceil(300));
        assert!(
            *t >= turn && *t <= turn + Duration::from_millis(1),
            "waiter {k} admitted at {t:?}, its turn {turn:?}: {at:?}"
        );
    }
    assert!(at[29] <= Duration::from_millis(101), "{at:?}");
}
