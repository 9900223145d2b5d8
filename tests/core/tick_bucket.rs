//! The 32-bit tick bucket (`tollgate::tick`): the same decisions as the
//! 64-bit `Gcra` on every operation sequence, wherever on the 32-bit circle
//! it runs (across the wrap); the idle horizon and the sentinel exactly as
//! documented; exact retry hints in ticks and in timestamps; configuration
//! errors; the keyed tables and the `Limiter` adapters.

use core::time::Duration;

use proptest::prelude::*;
use tollgate::keyed::{HeaplessKeyedTable, KeyedPath, KeyedTable};
use tollgate::tick::{MAX_SPAN_TICKS, TickGcra, TickState};
use tollgate::{
    Algorithm, Bucket, BucketKind, Chain, ConfigError, Gcra, GcraState, Inheritance, Limiter,
    LockFreedom, Quota, Refusal, Snapshot, Timestamp, WithStats, valid,
};

const GHZ: u32 = 1_000_000_000;

fn kind(leaky: bool) -> BucketKind {
    if leaky {
        BucketKind::LeakyBucket
    } else {
        BucketKind::TokenBucket
    }
}

/// The 64-bit twin of a tick bucket: nanoseconds = ticks.
fn twin(kind: BucketKind, interval: u32, burst: u32, heal: u32) -> Gcra {
    let quota = Quota::new(1, Duration::from_nanos(u64::from(interval)))
        .and_then(|q| q.with_burst(burst))
        .unwrap();
    Gcra::new(kind, quota).with_heal_threshold(Duration::from_nanos(u64::from(heal)))
}

#[derive(Debug, Clone)]
enum Op {
    Check(u32),
    Refund(u32),
    Advance(u64),
    /// The next operation uses a `now` this many ticks stale.
    Stale(u32),
}

fn op(burst: u32, max_gap: u64, heal: u32) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..=burst + 1).prop_map(Op::Check),
        1 => (0..=burst + 1).prop_map(Op::Refund),
        3 => (0..=max_gap).prop_map(Op::Advance),
        1 => (0..=heal).prop_map(Op::Stale),
    ]
}

fn t(ns: u64) -> Timestamp {
    Timestamp::from_nanos(ns)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Tick-native calls at `now + base` (any base: the run crosses the wrap
    /// wherever it lands) decide exactly as the 64-bit `Gcra` at `now`, with
    /// callers stale by up to the heal threshold.
    #[test]
    fn ticks_agree_with_the_64_bit_gcra_anywhere_on_the_circle(
        leaky in any::<bool>(),
        interval in 1u32..50,
        burst in 1u32..6,
        heal in 0u32..200,
        base in any::<u32>(),
        ops in prop::collection::vec(op(6, 400, 200), 1..80),
    ) {
        let kind = kind(leaky);
        let tick = TickGcra::from_ticks(kind, interval, burst, GHZ)
            .and_then(|g| g.with_heal_threshold_ticks(heal))
            .unwrap();
        let gcra = twin(kind, interval, burst, heal);
        let (ts, gs) = (TickState::new(), GcraState::new());
        let mut now: u64 = 1_000; // stale readings stay above zero
        let mut stale = 0u64;
        for op in ops {
            let at = now - stale.min(u64::from(heal)).min(now);
            let tick_now = (at as u32).wrapping_add(base);
            match op {
                Op::Advance(d) => { now += d; continue; }
                Op::Stale(s) => { stale = u64::from(s); continue; }
                Op::Check(n) => {
                    let got = tick.check_n_ticks(&ts, n, tick_now);
                    let want = gcra.check_n(&gs, n, t(at));
                    match (got, want) {
                        // both: can never succeed
                        (Err(a), Err(b)) if b.is_never() => {
                            prop_assert_eq!(a, TickGcra::NEVER);
                            prop_assert_eq!(n, b.requested());
                        }
                        (Ok(()), Ok(_)) => {}
                        (Err(retry_after), Err(d)) if !d.is_never() => {
                            prop_assert!(retry_after != TickGcra::NEVER);
                            prop_assert_eq!(u64::from(retry_after), d.retry_after_nanos());
                        }
                        (a, b) => prop_assert!(false, "tick {:?} vs gcra {:?}", a, b),
                    }
                }
                Op::Refund(n) => {
                    tick.refund_ticks(&ts, n, tick_now);
                    gcra.refund(&gs, n, t(at));
                }
            }
            stale = 0;
            // a busy TAT of exactly 0 is stored as 1 (documented): the two
            // then legitimately differ by a tick, so stop comparing
            if ts.tat_ticks() == 1 && (gs.tat(&gcra).as_nanos() as u32).wrapping_add(base) == 0 {
                return Ok(());
            }
            let snap = gcra.snapshot(&gs, t(now));
            let tick_now = (now as u32).wrapping_add(base);
            prop_assert_eq!(tick.available_ticks(&ts, tick_now), snap.remaining());
            prop_assert_eq!(u64::from(tick.lead_ticks(&ts, tick_now)), snap.reset_after_nanos());
            prop_assert_eq!(tick.lead_ticks(&ts, tick_now) == 0, gcra.is_idle(&gs, t(now)));
        }
    }

    /// At 1 GHz a tick is a nanosecond: the `Algorithm` (timestamp) path is
    /// the 64-bit `Gcra`, snapshots and `retry_after` included.
    #[test]
    fn timestamps_at_one_gigahertz_are_the_64_bit_gcra(
        leaky in any::<bool>(),
        interval in 1u32..50,
        burst in 1u32..6,
        ops in prop::collection::vec(op(6, 400, 0), 1..60),
    ) {
        let kind = kind(leaky);
        let tick = TickGcra::from_ticks(kind, interval, burst, GHZ).unwrap();
        let gcra = twin(kind, interval, burst, tick.heal_threshold_ticks());
        let (ts, gs) = (TickState::new(), GcraState::new());
        // away from tick 0, where a refund back to full stores TAT 1 (a busy
        // TAT is never the sentinel 0): one tick less room, documented
        let mut now = 1_000u64;
        for op in ops {
            match op {
                Op::Advance(d) => now += d,
                Op::Stale(_) => {}
                Op::Check(n) => {
                    let got = facts(tick.check_n(&ts, n, t(now)), || tick.snapshot(&ts, t(now)));
                    let want = facts(gcra.check_n(&gs, n, t(now)), || gcra.snapshot(&gs, t(now)));
                    prop_assert_eq!(got, want);
                }
                Op::Refund(n) => {
                    tick.refund(&ts, n, t(now));
                    gcra.refund(&gs, n, t(now));
                }
            }
            prop_assert_eq!(
                snapshot_facts(tick.snapshot(&ts, t(now))),
                snapshot_facts(gcra.snapshot(&gs, t(now)))
            );
            for n in 0..=burst + 1 {
                prop_assert_eq!(
                    tick.time_until_ready(&ts, n, t(now)),
                    gcra.time_until_ready(&gs, n, t(now))
                );
                for ahead in [0u64, 1, 3] {
                    prop_assert_eq!(
                        tick.time_until_ready_after(&ts, ahead, n, t(now)),
                        gcra.time_until_ready_after(&gs, ahead, n, t(now))
                    );
                }
            }
        }
    }

    /// A refusal's `retry_after` is exact: the same request is refused one
    /// tick earlier and admitted on the tick (token and leaky, any `n`,
    /// across the wrap).
    #[test]
    fn retry_after_ticks_is_exact(
        leaky in any::<bool>(),
        interval in 1u32..1_000,
        burst in 1u32..8,
        taken in 1u32..8,
        gap in 0u32..3_000,
        n in 1u32..8,
        start in any::<u32>(),
    ) {
        let gcra = TickGcra::from_ticks(kind(leaky), interval, burst, 1_000_000).unwrap();
        let (taken, n) = (taken.min(burst), n.min(burst));
        let state = TickState::new();
        prop_assert!(gcra.check_n_ticks(&state, taken, start).is_ok());
        let now = start.wrapping_add(gap);
        let wait = gcra.time_until_ready_ticks(&state, n, now).unwrap();
        if let Err(retry_after) = gcra.check_n_ticks(&state, n, now) {
            prop_assert!(retry_after >= 1 && retry_after != TickGcra::NEVER);
            prop_assert_eq!(wait, retry_after);
            let before = now.wrapping_add(retry_after - 1);
            prop_assert!(gcra.check_n_ticks(&state, n, before).is_err());
            prop_assert!(gcra.check_n_ticks(&state, n, now.wrapping_add(retry_after)).is_ok());
        } else {
            prop_assert_eq!(wait, 0);
        }
    }

    /// Through timestamps on a tick clock that rounds its readings down (as
    /// embassy's `EmbassyClock` does), decisions are the tick-native ones at
    /// the exact tick, and `retry_after` lands on the first nanosecond of
    /// the tick at which the request is admitted.
    #[test]
    fn timestamps_of_a_tick_clock_map_to_their_exact_ticks(
        // above 1 GHz several ticks share a nanosecond: timestamps cannot name them
        hz in prop_oneof![Just(32_768u32), Just(1_000_000), Just(3), Just(999_983), Just(GHZ), 1u32..=GHZ],
        interval in 1u32..100,
        burst in 1u32..5,
        start in 0u64..(1 << 34), // at 1 Hz, far beyond 2³² ticks; any rate in u64 ns
        gaps in prop::collection::vec(0u64..200, 1..20),
    ) {
        let Ok(gcra) = TickGcra::from_ticks(BucketKind::TokenBucket, interval, burst, hz) else {
            return Ok(()); // a 1 s heal threshold beyond the horizon at this rate
        };
        // the timestamp of tick `k` as a tick clock reports it: rounded down
        let ns_of = |k: u64| (u128::from(k) * 1_000_000_000 / u128::from(hz)) as u64;
        let (by_ts, by_tick) = (TickState::new(), TickState::new());
        let mut k = start;
        for gap in gaps {
            k += gap;
            let now = t(ns_of(k));
            prop_assert_eq!(gcra.tick_of(now), k as u32);
            let want = gcra.check_ticks(&by_tick, k as u32);
            let got = gcra.check_n(&by_ts, 1, now);
            if let Err(d) = got {
                prop_assert!(!d.is_never());
            }
            prop_assert_eq!(got.is_ok(), want.is_ok());
            if let (Err(d), Err(retry_after)) = (got, want) {
                let due = now + d.retry_after();
                prop_assert_eq!(u64::from(gcra.tick_of(due)), (k + u64::from(retry_after)) & 0xFFFF_FFFF);
                prop_assert_eq!(
                    u64::from(gcra.tick_of(due - Duration::from_nanos(1))),
                    (k + u64::from(retry_after) - 1) & 0xFFFF_FFFF
                );
                prop_assert_eq!(due.as_nanos(), ns_of(k + u64::from(retry_after)));
            }
        }
    }

    /// Callers whose `now`s arrive out of order (by up to the heal
    /// threshold) never make the bucket admit more than `burst + ⌊span/T⌋`
    /// over the span of the `now`s they passed, across the wrap.
    #[test]
    fn stale_callers_never_over_admit(
        interval in 1u32..20,
        burst in 1u32..5,
        base in any::<u32>(),
        steps in prop::collection::vec((0u64..30, 0u64..40, 1u32..4), 1..200),
    ) {
        let gcra = TickGcra::from_ticks(BucketKind::TokenBucket, interval, burst, 1_000_000)
            .and_then(|g| g.with_heal_threshold_ticks(40))
            .unwrap();
        let state = TickState::new();
        let (mut clock, mut admitted, mut lo, mut hi) = (100u64, 0u64, u64::MAX, 0u64);
        for (advance, staleness, n) in steps {
            clock += advance;
            let at = clock - staleness;
            if gcra.check_n_ticks(&state, n.min(burst), (at as u32).wrapping_add(base)).is_ok() {
                admitted += u64::from(n.min(burst));
                lo = lo.min(at);
                hi = hi.max(at);
            }
        }
        if admitted > 0 {
            prop_assert!(admitted <= u64::from(burst) + (hi - lo) / u64::from(interval),
                "{} admitted over {} ticks", admitted, hi - lo);
        }
    }
}

/// The facts of an `Algorithm::check_n` answer (`after`: the snapshot
/// taken right after it, at the same instant): for a request that can
/// never succeed `Err((requested, limit))`; else `Ok` of whether it was
/// admitted, `retry_after` (zero when admitted), the snapshot's facts (the
/// raw fields behind `remaining` are scaled differently: the refusal's, or
/// the one right after an admission) and, for an admission, the instant the
/// state is full again.
type Facts = Result<(bool, Duration, (u32, u32, Duration), Option<Timestamp>), (u32, u32)>;

fn facts(r: Result<Timestamp, Refusal<'_>>, after: impl FnOnce() -> Snapshot) -> Facts {
    match r {
        Err(d) if d.is_never() => Err((d.requested(), d.limit())),
        Err(d) => Ok((false, d.retry_after(), snapshot_facts(*d.snapshot()), None)),
        Ok(full) => Ok((true, Duration::ZERO, snapshot_facts(after()), Some(full))),
    }
}

fn snapshot_facts(s: tollgate::Snapshot) -> (u32, u32, Duration) {
    (s.limit(), s.remaining(), s.reset_after())
}

#[test]
fn an_idle_bucket_reads_full_until_the_horizon_and_never_over_admits_after() {
    for leaky in [false, true] {
        let gcra = TickGcra::from_ticks(kind(leaky), 100, 4, 1_000_000).unwrap();
        let h = gcra.max_lead_ticks() + gcra.heal_threshold_ticks();
        assert_eq!(gcra.horizon_ticks(), 0u32.wrapping_sub(h));
        for w in [0u32, 12_345, u32::MAX - 50, 1 << 31] {
            let state = TickState::new();
            assert!(gcra.check_n_ticks(&state, 2, w).is_ok());
            let l0 = gcra.lead_ticks(&state, w);
            assert_eq!(l0, 200);
            // throttled, exactly, while the lead lasts
            for e in [0, 1, 199] {
                assert_eq!(gcra.lead_ticks(&state, w.wrapping_add(e)), l0 - e);
            }
            // idle: full from L₀ on, for every tick up to the horizon (sampled
            // densely near both ends and across the middle)
            let last_full = gcra.horizon_ticks() + l0 - 1; // e < 2³² − H + L₀
            let mut samples: Vec<u32> = (l0..l0 + 1_000).collect();
            samples.extend((0..1_000).map(|i| last_full - i));
            samples.extend((1..64).map(|i| l0 + (last_full - l0) / 64 * i));
            for e in samples {
                let now = w.wrapping_add(e);
                assert_eq!(gcra.lead_ticks(&state, now), 0, "leaky={leaky} w={w} e={e}");
                assert_eq!(gcra.available_ticks(&state, now), 4);
            }
            // one tick beyond: it may read as throttled (by H at most), which
            // only ever refuses
            let beyond = w.wrapping_add(last_full + 1);
            assert_eq!(gcra.lead_ticks(&state, beyond), h);
            for e in 0..=h {
                let now = beyond.wrapping_add(e);
                assert!(gcra.lead_ticks(&state, now) <= h - e);
            }
            assert_eq!(gcra.lead_ticks(&state, beyond.wrapping_add(h)), 0);
        }
    }
}

#[test]
fn the_sentinel_reads_full_at_every_tick() {
    let gcra = TickGcra::from_ticks(BucketKind::TokenBucket, 1_000, 3, 1_000_000).unwrap();
    let fresh = TickState::new();
    assert_eq!(fresh.tat_ticks(), 0);
    let h = gcra.max_lead_ticks() + gcra.heal_threshold_ticks();
    for now in [0, 1, h, u32::MAX - h, u32::MAX - 1, u32::MAX, 1 << 31] {
        assert_eq!(gcra.lead_ticks(&fresh, now), 0, "now={now}");
        assert_eq!(gcra.available_ticks(&fresh, now), 3);
    }
    // a refund back to full stores `now`, as the 64-bit bucket does: a
    // caller one tick stale still sees it busy
    let state = TickState::new();
    assert!(gcra.check_ticks(&state, 77).is_ok());
    gcra.refund_ticks(&state, 1, 77);
    assert_eq!(state.tat_ticks(), 77);
    assert_eq!(gcra.lead_ticks(&state, 76), 1);
    // refresh leaves a busy bucket, and one full for less than the heal
    // threshold, alone; then stores the sentinel
    assert!(gcra.check_ticks(&state, 100).is_ok());
    gcra.refresh_ticks(&state, 500);
    assert_eq!(state.tat_ticks(), 1_100);
    let heal = gcra.heal_threshold_ticks();
    gcra.refresh_ticks(&state, 1_100 + heal - 1);
    assert_eq!(state.tat_ticks(), 1_100);
    gcra.refresh_ticks(&state, 1_100 + heal);
    assert_eq!(state.tat_ticks(), 0);
    // an admission that would store exactly 0 stores 1: one tick less room
    let state = TickState::new();
    assert!(gcra.check_ticks(&state, u32::MAX - 999).is_ok());
    assert_eq!(state.tat_ticks(), 1);
    assert_eq!(gcra.lead_ticks(&state, 0), 1);
    assert_eq!(gcra.lead_ticks(&state, 1), 0);
}

#[test]
fn configuration_errors_are_typed() {
    let q = Quota::per_second(10).unwrap();
    assert_eq!(TickGcra::token_bucket(q, 0), Err(ConfigError::ZeroTickRate));
    assert_eq!(
        TickGcra::from_ticks(BucketKind::TokenBucket, 1, 1, 0),
        Err(ConfigError::ZeroTickRate)
    );
    assert_eq!(
        TickGcra::from_ticks(BucketKind::TokenBucket, 1, 0, 1),
        Err(ConfigError::ZeroBurst)
    );
    assert!(matches!(
        TickGcra::from_ticks(BucketKind::TokenBucket, 0, 1, 1),
        Err(ConfigError::IntervalTooShort { .. })
    ));
    // burst × interval + heal: 2³¹ − 1 fits, 2³¹ does not
    let hz = 1_000; // heal threshold 1 s = 1 000 ticks
    let fits = (MAX_SPAN_TICKS - 1_000) / 2;
    let ok = TickGcra::from_ticks(BucketKind::TokenBucket, fits, 2, hz).unwrap();
    assert_eq!(
        ok.max_lead_ticks() + ok.heal_threshold_ticks(),
        MAX_SPAN_TICKS - 1
    );
    assert!(ok.with_heal_threshold_ticks(1_001).is_ok());
    assert_eq!(
        ok.with_heal_threshold_ticks(1_002),
        Err(ConfigError::TickHorizonExceeded {
            ticks: u64::from(MAX_SPAN_TICKS) + 1,
            max: MAX_SPAN_TICKS
        })
    );
    assert!(matches!(
        TickGcra::from_ticks(BucketKind::TokenBucket, u32::MAX, u32::MAX, hz),
        Err(ConfigError::TickHorizonExceeded { .. })
    ));
    // a quota too slow for the horizon at this rate
    assert!(matches!(
        TickGcra::token_bucket(Quota::per_hour(1).unwrap(), 1_000_000),
        Err(ConfigError::TickHorizonExceeded { .. })
    ));
    assert!(matches!(
        ok.with_heal_threshold(Duration::MAX),
        Err(ConfigError::TickHorizonExceeded { .. })
    ));
    // above 2³⁰ Hz the default heal threshold is 2³⁰ ticks, not a second
    let fast = TickGcra::from_ticks(BucketKind::TokenBucket, 10, 1, u32::MAX).unwrap();
    assert_eq!(fast.heal_threshold_ticks(), 1 << 30);
}

#[test]
fn quotas_convert_to_whole_ticks_rounded_up() {
    let per = |permits, hz| {
        TickGcra::token_bucket(Quota::per_second(permits).unwrap(), hz)
            .unwrap()
            .interval_ticks()
    };
    assert_eq!(per(200, 32_768), 164); // 163.84
    assert_eq!(per(256, 32_768), 128); // exact
    assert_eq!(per(3, 3), 1); // from period/permits, not the rounded-up 333 333 334 ns
    assert_eq!(per(1_000, 1_000_000), 1_000);
    assert_eq!(per(2_000_000, 1_000_000), 1); // faster than a tick: one tick
    let g = TickGcra::token_bucket(Quota::per_second(200).unwrap(), 32_768).unwrap();
    assert_eq!(g.required_resolution(), g.interval());
    assert_eq!(g.interval(), Duration::from_nanos(5_004_883));
}

#[test]
fn limiter_adapters_and_statics() {
    static CONFIG: TickGcra = valid!(TickGcra::token_bucket(
        valid!(valid!(Quota::per_second(100)).with_burst(2)),
        1_000_000
    ));
    static BUCKET: Bucket<TickGcra> = Bucket::from_parts(CONFIG, TickState::new());
    const _: () = assert!(Bucket::<TickGcra>::IS_INTERRUPT_SAFE);
    assert_eq!(core::mem::size_of::<TickState>(), 4);

    let now = Timestamp::from_millis(3);
    assert!(BUCKET.check(now).is_ok());
    assert!(BUCKET.check_ticks(3_000).is_ok());
    let refused = BUCKET.check(now).unwrap_err();
    assert_eq!(refused.retry_after(), Duration::from_millis(10));
    assert_eq!(refused.snapshot().remaining(), 0);

    // a chain with a 64-bit bucket; a refusal of the second costs the first nothing
    let chain = Chain::new(
        WithStats::new(Bucket::new(CONFIG)),
        Bucket::token_bucket(Quota::per_second(1).unwrap().with_burst(1).unwrap()),
    );
    assert!(chain.try_acquire(&(), now).is_ok());
    assert!(chain.try_acquire(&(), now).is_err());
    assert_eq!(chain.first().snapshot(&(), now).remaining(), 1);
    let stats = chain.first().statistics(&(), now);
    assert_eq!((stats.admitted, stats.refunded), (2, 1));
}

#[test]
fn keyed_tables_keep_tick_states() {
    static PER_ID: HeaplessKeyedTable<u16, TickGcra, 4> = HeaplessKeyedTable::builder(valid!(
        TickGcra::from_ticks(BucketKind::TokenBucket, 1_000, 2, 1_000_000)
    ))
    .build();
    let now = Timestamp::from_millis(1);
    for id in 0..4u16 {
        assert!(PER_ID.try_acquire(&id, now).is_ok());
        assert!(PER_ID.try_acquire(&id, now).is_ok());
        assert!(PER_ID.try_acquire(&id, now).is_err());
    }
    // full of throttled keys: a new key takes the shared bucket (it gets no
    // slot; new keys share that bucket's burst of 2, and its refusal names it)
    assert!(PER_ID.try_acquire(&9, now).is_ok());
    assert!(!PER_ID.contains(&9));
    assert_eq!(PER_ID.len(), 4);
    assert!(PER_ID.try_acquire(&10, now).is_ok());
    assert_eq!(
        PER_ID.try_acquire(&11, now).unwrap_err().path(),
        KeyedPath::SharedOverflow
    );
    // 2 ms later they have refilled and are evicted losslessly
    let later = Timestamp::from_millis(3);
    assert!(PER_ID.try_acquire(&9, later).is_ok());
    assert!(PER_ID.contains(&9)); // its own slot
    assert_eq!(PER_ID.len(), 1); // the insert swept the four refilled keys

    // its own bucket of 2 (one taken), whose refusal names the own slot
    assert!(PER_ID.try_acquire(&9, later).is_ok());
    assert_eq!(
        PER_ID.try_acquire(&9, later).unwrap_err().path(),
        KeyedPath::Own
    );
    assert!(PER_ID.try_acquire(&0, later).is_ok());
    assert_eq!(PER_ID.evict_refilled(Timestamp::from_millis(10)), 2);

    #[cfg(feature = "std")] // the sharded table
    {
        use tollgate::keyed::ShardedKeyedTable;
        let table = ShardedKeyedTable::<u32, _>::builder(
            TickGcra::from_ticks(BucketKind::TokenBucket, 100, 10, 1_000_000).unwrap(),
        )
        .build()
        .unwrap();
        let now = Timestamp::ZERO;
        assert!(table.try_acquire_n(&7, 6, now).is_ok());
        table.reconfigure(
            TickGcra::from_ticks(BucketKind::TokenBucket, 100, 20, 1_000_000).unwrap(),
            Inheritance::UsedFraction,
            now,
        );
        assert_eq!(table.snapshot(&7, now).remaining(), 8); // 60 % of 20 used
    }
}

/// Carrying a state over to another configuration agrees with the 64-bit
/// `Gcra` (at 1 GHz, ticks are nanoseconds), also across tick rates.
#[test]
fn carry_over_matches_the_64_bit_gcra() {
    for how in [
        Inheritance::UsedAmount,
        Inheritance::UsedFraction,
        Inheritance::Reset,
    ] {
        for (used, burst_after, interval_after) in [(0, 4, 10), (3, 8, 5), (4, 2, 30), (2, 4, 7)] {
            let before = TickGcra::from_ticks(BucketKind::TokenBucket, 10, 4, GHZ).unwrap();
            let after =
                TickGcra::from_ticks(BucketKind::TokenBucket, interval_after, burst_after, GHZ)
                    .unwrap();
            let (g_before, g_after) = (
                twin(BucketKind::TokenBucket, 10, 4, GHZ),
                twin(BucketKind::TokenBucket, interval_after, burst_after, GHZ),
            );
            let now = t(5_000);
            let (ts, gs) = (TickState::new(), GcraState::new());
            if used > 0 {
                assert!(before.check_n(&ts, used, now).is_ok());
                assert!(g_before.check_n(&gs, used, now).is_ok());
            }
            before.carry_over(&after, &ts, how, now);
            g_before.carry_over(&g_after, &gs, how, now);
            for later in [5_000, 5_003, 5_040] {
                assert_eq!(
                    snapshot_facts(after.snapshot(&ts, t(later))),
                    snapshot_facts(g_after.snapshot(&gs, t(later))),
                    "{how:?} used={used}"
                );
            }
        }
    }
    // from 1 kHz to 1 MHz: the lead is carried in permits, not in ticks
    let slow = TickGcra::from_ticks(BucketKind::TokenBucket, 10, 4, 1_000).unwrap();
    let fast = TickGcra::from_ticks(BucketKind::TokenBucket, 10_000, 4, 1_000_000).unwrap();
    let state = TickState::new();
    let now = Timestamp::from_secs(7);
    assert!(slow.check_n(&state, 3, now).is_ok());
    slow.carry_over(&fast, &state, Inheritance::UsedAmount, now);
    assert_eq!(fast.snapshot(&state, now).remaining(), 1);
    assert_eq!(
        fast.snapshot(&state, now).reset_after(),
        Duration::from_millis(30)
    );
}

#[test]
fn lock_freedom_on_this_host() {
    // every CI host has native 32-bit compare-and-swap
    const { assert!(TickState::IS_LOCK_FREE) };
    const { assert!(TickGcra::IS_INTERRUPT_SAFE) };
    assert_eq!(
        <WithStats<Bucket<TickGcra>> as LockFreedom>::is_lock_free(),
        GcraState::IS_LOCK_FREE
    );
}
