//! Property tests: random frames against the regulation's hourly budget,
//! hard caps, and restores that never grant earlier.

use super::*;

/// Attempts: (sub-band, airtime in µs, pause before it in ms).
fn attempts() -> impl Strategy<Value = Vec<(usize, u64, u64)>> {
    proptest::collection::vec((0usize..6, 1u64..=3_000_000, 0u64..=30_000), 1..300)
}

/// Airtime of `frames` (start, airtime in ns) inside `[from, from + 1 h]`.
fn airtime_in_hour(frames: &[(u64, u64)], from: u64) -> u64 {
    let to = from + PERIOD_NANOS;
    frames
        .iter()
        .map(|&(s, a)| (s + a).min(to).saturating_sub(s.max(from)))
        .sum()
}

/// Every hour that starts or ends on a frame edge (the worst windows).
fn worst_hours(frames: &[(u64, u64)]) -> impl Iterator<Item = u64> + '_ {
    frames.iter().flat_map(|&(s, a)| {
        [
            s,
            (s + a).saturating_sub(PERIOD_NANOS),
            s.saturating_sub(PERIOD_NANOS),
        ]
    })
}

proptest! {
    /// Against the regulation: in every sub-band, the frames started at
    /// least `a / d` apart, and no hour holds more than `d · 3600 s`
    /// plus `(1 − d)` times the longest frame in it.
    #[test]
    fn every_hour_holds_the_budget_plus_at_most_one_frame(attempts in attempts()) {
        let radio = DutyCycleLimiter::eu868();
        let mut now = 0u64;
        let mut frames: [Vec<(u64, u64)>; 6] = Default::default();
        for (band, airtime_us, pause_ms) in attempts {
            now += pause_ms * 1_000_000;
            let a = airtime_us * 1_000;
            let airtime = Duration::from_nanos(a);
            match radio.try_transmit(band, airtime, Timestamp::from_nanos(now)) {
                Ok(Transmit::Allowed { .. }) => {
                    frames[band].push((now, a));
                    now += a; // the radio is busy
                }
                Ok(Transmit::Wait { retry_after }) => {
                    prop_assert!(!retry_after.is_zero());
                }
                Err(TransmitError::AirtimeTooLong { max, .. }) => prop_assert!(airtime > max),
                Err(e) => prop_assert!(false, "{}", e),
            }
        }
        for (band, frames) in frames.iter().enumerate() {
            let d = eu868::SUB_BANDS[band].duty_cycle();
            for w in frames.windows(2) {
                let cycle = (u128::from(w[0].1) * 1_000_000).div_ceil(u128::from(d.ppm()));
                prop_assert!(u128::from(w[1].0 - w[0].0) >= cycle);
            }
            let budget = d.budget_nanos();
            let longest = frames.iter().map(|f| f.1).max().unwrap_or(0);
            let slack = longest * (1_000_000 - u64::from(d.ppm())) / 1_000_000 + 1;
            for from in worst_hours(frames) {
                let used = airtime_in_hour(frames, from);
                prop_assert!(used <= budget + slack, "band {} used {} of {}", band, used, budget);
            }
        }
    }

    /// With a hard hourly cap, no hour ever holds more than the budget.
    #[test]
    fn a_hard_cap_holds_every_hour(attempts in attempts(), cap_ms in 100u64..=3_000) {
        let cap = Duration::from_millis(cap_ms);
        let bands = [
            eu868::L.with_hard_hourly_cap(cap).unwrap(),
            eu868::P.with_hard_hourly_cap(cap).unwrap(),
        ];
        let radio = DutyCycleLimiter::new(bands);
        let mut now = 0u64;
        let mut frames: [Vec<(u64, u64)>; 2] = Default::default();
        for (band, airtime_us, pause_ms) in attempts {
            let band = band % 2;
            now += pause_ms * 1_000_000 / 10;
            let a = airtime_us * 1_000;
            if let Ok(Transmit::Allowed { .. }) = radio.try_transmit(band, Duration::from_nanos(a), Timestamp::from_nanos(now)) {
                prop_assert!(a <= cap_ms * 1_000_000);
                frames[band].push((now, a));
                now += a;
            }
        }
        let budgets = [eu868::L.duty_cycle().budget_nanos(), eu868::P.duty_cycle().budget_nanos()];
        for (band, frames) in frames.iter().enumerate() {
            for from in worst_hours(frames) {
                prop_assert!(airtime_in_hour(frames, from) <= budgets[band]);
            }
        }
    }

    /// Saving and restoring at any moment, with any downtime the caller
    /// can vouch for, never lets a frame start earlier than the limiter
    /// without the reset would have.
    #[test]
    fn restore_never_grants_earlier(
        attempts in attempts(),
        save_after_ms in 0u64..=4_000_000,
        actual_down_ms in 0u64..=4_000_000,
        vouched_percent in 0u64..=100,
    ) {
        let original = DutyCycleLimiter::eu868();
        let mut now = 0u64;
        for (band, airtime_us, pause_ms) in attempts {
            now += pause_ms * 1_000_000;
            if let Ok(Transmit::Allowed { .. }) = original.try_transmit(band, Duration::from_micros(airtime_us), Timestamp::from_nanos(now)) {
                now += airtime_us * 1_000;
            }
        }
        let save_at = Timestamp::from_nanos(now) + Duration::from_millis(save_after_ms);
        let mut bytes = [0u8; SavedState::<6>::ENCODED_LEN];
        original.save(save_at).encode(&mut bytes).unwrap();
        let saved = SavedState::<6>::decode(&bytes).unwrap();
        // the device is off for `actual_down`, and can vouch for part of it;
        // the new clock starts at zero
        let actual_down = Duration::from_millis(actual_down_ms);
        let vouched = actual_down * u32::try_from(vouched_percent).unwrap() / 100;
        let restored = DutyCycleLimiter::restore(
            DutyCycleLimiter::eu868(), &saved, Timestamp::ZERO, Downtime::AtLeast(vouched));
        for band in 0..6 {
            // the same real instant on both clocks
            let real_free = original.free_at(band).unwrap();
            let restored_free = restored.free_at(band).unwrap();
            let restored_free_real = save_at + actual_down + (restored_free - Timestamp::ZERO);
            prop_assert!(restored_free_real >= real_free);
            // and by no more than the unvouched downtime plus a microsecond
            let later = restored_free_real - real_free.max(save_at + actual_down);
            prop_assert!(later <= actual_down - vouched + Duration::from_micros(1));
        }
    }
}
