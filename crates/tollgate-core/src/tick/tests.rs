//! Unit tests of the tick bucket's conversions and wrapping reads.

use super::*;
use crate::gcra::BucketKind;
use crate::limiter::Algorithm;
use crate::time::Timestamp;

fn gcra(hz: u32) -> TickGcra {
    TickGcra::from_ticks(BucketKind::TokenBucket, 1, 1, hz)
        .and_then(|g| g.with_heal_threshold_ticks(0))
        .unwrap()
}

#[test]
fn a_tick_clock_round_trips_and_ticks_start_where_it_says() {
    for hz in [
        1,
        3,
        7,
        1_000,
        32_768,
        1_000_000,
        999_999_937,
        1_000_000_000,
    ] {
        let g = gcra(hz);
        for t in [
            0u64,
            1,
            2,
            3,
            1 << 20,
            (1 << 32) + 5,
            1 << 40,
            u64::MAX / 4_000_000_000,
        ] {
            // a tick clock reports tick t as ⌊t·10⁹/hz⌋ ns
            let Ok(ns) = u64::try_from(u128::from(t) * 1_000_000_000 / u128::from(hz)) else {
                assert_eq!(g.nanos_floor(t), u64::MAX); // saturates
                continue;
            };
            assert_eq!(g.nanos_floor(t), ns, "hz={hz} t={t}");
            assert_eq!(g.ticks_at(ns), t, "hz={hz} t={t}");
            if t > 0 && ns > 0 {
                assert_eq!(g.ticks_at(ns - 1), t - 1, "hz={hz} t={t}");
            }
            assert!(g.nanos_ceil(t) >= ns && g.nanos_ceil(t) - ns <= 1);
        }
    }
}

#[test]
fn extreme_timestamps_saturate_or_wrap_without_panicking() {
    for hz in [1, 32_768, 1_000_000_000, u32::MAX] {
        let g = gcra(hz);
        let _ = g.ticks_at(u64::MAX);
        assert!(g.ticks_at_saturating(u64::MAX) >= g.ticks_at_saturating(u64::MAX - 1));
        let _ = g.nanos_floor(u64::MAX);
        let _ = g.nanos_ceil(u64::MAX);
        let _ = g.wait_nanos(u64::MAX, u64::MAX);
        let _ = g.wait_nanos(0, u64::MAX);
        let state = TickState::new();
        let _ = g.check_n(&state, 1, Timestamp::MAX);
        let _ = g.check_n(&state, 1, Timestamp::MAX);
        let _ = g.time_until_ready_after(&state, u64::MAX, 1, Timestamp::MAX);
    }
}

#[test]
fn wrapping_reads_follow_the_rule() {
    let g = TickGcra::from_ticks(BucketKind::TokenBucket, 10, 3, 1_000)
        .and_then(|g| g.with_heal_threshold_ticks(5))
        .unwrap();
    let h = 35;
    assert_eq!(g.heal_limit, h);
    for tat in [1u32, 17, u32::MAX, 1 << 31] {
        for ahead in [0u32, 1, 30, 35, 36, 1 << 31, u32::MAX] {
            let now = tat.wrapping_sub(ahead);
            let want = if ahead <= h { ahead } else { 0 };
            assert_eq!(g.lead_at(tat, now), want, "tat={tat} ahead={ahead}");
        }
    }
    for now in [0, 1, 35, u32::MAX - 35, u32::MAX] {
        assert_eq!(g.lead_at(FULL, now), 0);
    }
}
