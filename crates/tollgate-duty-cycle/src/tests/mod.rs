//! The duty cycle's unit tests; its property tests against the
//! regulation are in [`properties`].

extern crate std;

use super::band::PERIOD_NANOS;
use super::eu868::Eu868;
use super::limiter::saved_micros;
use super::saved::crc16;
use super::*;
use core::time::Duration;
use proptest::prelude::*;
use std::string::ToString;
use std::vec::Vec;
use tollgate_core::clock::{Clock, ManualClock};
use tollgate_core::time::Timestamp;

mod as_limiter;
mod properties;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}
fn ms(m: u64) -> Duration {
    Duration::from_millis(m)
}

/// Sends frames of `airtime` back to back (each as soon as allowed)
/// for `span` on a manual clock; returns the airtime sent.
fn back_to_back(band: Eu868, airtime: Duration, span: Duration) -> (u32, Duration) {
    let radio = DutyCycleLimiter::eu868();
    let clock = ManualClock::new();
    let end = Timestamp::ZERO + span;
    let (mut frames, mut sent) = (0, Duration::ZERO);
    while clock.now() < end {
        match radio
            .try_transmit(band.index(), airtime, clock.now())
            .unwrap()
        {
            Transmit::Allowed { .. } => {
                frames += 1;
                sent += airtime;
                clock.advance(airtime); // on the air
            }
            Transmit::Wait { retry_after } => clock.advance(retry_after),
        }
    }
    (frames, sent)
}

#[test]
fn the_regulations_arithmetic_one_hour_per_sub_band() {
    // 1 % = 36 s per hour
    assert_eq!(back_to_back(Eu868::M, secs(1), secs(3_600)), (36, secs(36)));
    assert_eq!(back_to_back(Eu868::L, ms(500), secs(3_600)), (72, secs(36)));
    assert_eq!(back_to_back(Eu868::Q, secs(36), secs(3_600)), (1, secs(36)));
    // 0.1 % = 3.6 s per hour
    assert_eq!(
        back_to_back(Eu868::N, ms(100), secs(3_600)),
        (36, ms(3_600))
    );
    assert_eq!(
        back_to_back(Eu868::K, ms(3_600), secs(3_600)),
        (1, ms(3_600))
    );
    // 10 % = 360 s per hour
    assert_eq!(
        back_to_back(Eu868::P, secs(1), secs(3_600)),
        (360, secs(360))
    );
    // and per hour again over a day
    assert_eq!(
        back_to_back(Eu868::M, ms(250), secs(24 * 3_600)),
        (24 * 144, secs(24 * 36))
    );
}

#[test]
fn time_off_is_the_lorawan_formula() {
    let radio = DutyCycleLimiter::eu868();
    let t = Timestamp::from_secs(100);
    // the LoRaWAN example: 0.5 s in the 1 % g1 sub-band -> 49.5 s off
    let m = Eu868::M.index();
    assert_eq!(
        radio.try_transmit(m, ms(500), t),
        Ok(Transmit::Allowed {
            free_at: t + ms(50_000)
        })
    );
    let end_of_frame = t + ms(500);
    assert_eq!(
        radio.time_until_allowed(m, ms(500), end_of_frame),
        Ok(ms(49_500))
    );
    // the time-off ends to the nanosecond
    let free = t + ms(50_000);
    assert!(
        radio
            .try_transmit(m, ms(1), free - Duration::from_nanos(1))
            .unwrap()
            .retry_after()
            == Duration::from_nanos(1)
    );
    assert!(radio.try_transmit(m, ms(1), free).unwrap().is_allowed());
    assert_eq!(radio.free_at(m), Ok(free + ms(100)));
    // 0.1 %: 1 s -> 999 s off; 10 %: 1 s -> 9 s off
    assert_eq!(DutyCycle::PERMILLE_1.time_off(secs(1)), secs(999));
    assert_eq!(DutyCycle::PERCENT_10.time_off(secs(1)), secs(9));
    assert_eq!(DutyCycle::FULL.time_off(secs(1)), Duration::ZERO);
    // a duty cycle that does not divide evenly rounds the time-off up
    let third = DutyCycle::from_ppm(333_333).unwrap();
    assert_eq!(
        third.time_off(Duration::from_nanos(1)),
        Duration::from_nanos(3)
    );
}

#[test]
fn sub_bands_keep_separate_accounts() {
    let radio = DutyCycleLimiter::eu868();
    let t = Timestamp::ZERO;
    for band in [Eu868::K, Eu868::L, Eu868::M, Eu868::N, Eu868::P, Eu868::Q] {
        assert!(
            radio
                .try_transmit(band.index(), ms(100), t)
                .unwrap()
                .is_allowed()
        );
        assert!(
            !radio
                .try_transmit(band.index(), ms(100), t)
                .unwrap()
                .is_allowed()
        );
    }
    let waits: Vec<_> = (0..6)
        .map(|b| radio.time_until_allowed(b, ms(100), t).unwrap())
        .collect();
    assert_eq!(
        waits,
        [secs(100), secs(10), secs(10), secs(100), secs(1), secs(10)]
    );
}

#[test]
fn bad_input_is_a_typed_error_never_a_panic() {
    let radio = DutyCycleLimiter::eu868();
    let t = Timestamp::MAX;
    assert_eq!(
        radio.try_transmit(6, ms(1), t),
        Err(TransmitError::UnknownBand { band: 6, bands: 6 })
    );
    assert_eq!(
        radio.try_transmit(usize::MAX, ms(1), t),
        Err(TransmitError::UnknownBand {
            band: usize::MAX,
            bands: 6
        })
    );
    assert_eq!(
        radio.free_at(7),
        Err(TransmitError::UnknownBand { band: 7, bands: 6 })
    );
    // a frame longer than an hour's budget can never be sent
    let m = Eu868::M.index();
    assert_eq!(
        radio.try_transmit(m, secs(36) + Duration::from_nanos(1), t),
        Err(TransmitError::AirtimeTooLong {
            airtime: secs(36) + Duration::from_nanos(1),
            max: secs(36)
        })
    );
    assert!(matches!(
        radio.time_until_allowed(m, Duration::MAX, t),
        Err(TransmitError::AirtimeTooLong { .. })
    ));
    // the whole budget in one frame is fine, then an hour of silence
    let late = Timestamp::MAX - secs(3_600);
    assert!(radio.try_transmit(m, secs(36), late).unwrap().is_allowed());
    assert_eq!(radio.time_until_allowed(m, secs(1), late), Ok(secs(3_600)));
    // zero airtime records nothing
    let p = Eu868::P.index();
    assert!(
        radio
            .try_transmit(p, Duration::ZERO, Timestamp::ZERO)
            .unwrap()
            .is_allowed()
    );
    assert_eq!(radio.free_at(p), Ok(Timestamp::ZERO));
    // configuration
    assert_eq!(
        DutyCycle::from_ppm(0),
        Err(ConfigError::InvalidDutyCycle { ppm: 0 })
    );
    assert_eq!(
        DutyCycle::from_ppm(1_000_001),
        Err(ConfigError::InvalidDutyCycle { ppm: 1_000_001 })
    );
    assert_eq!(DutyCycle::from_ppm(1_000_000), Ok(DutyCycle::FULL));
    assert_eq!(
        SubBand::new("x", 5, 5, DutyCycle::FULL),
        Err(ConfigError::InvalidEdges {
            low_hz: 5,
            high_hz: 5
        })
    );
    assert!(matches!(
        eu868::N.with_hard_hourly_cap(ms(3_600)),
        Err(ConfigError::NoRoomForFrame { .. })
    ));
    assert!(matches!(
        eu868::N.with_hard_hourly_cap(Duration::ZERO),
        Err(ConfigError::NoRoomForFrame { .. })
    ));
}

#[test]
fn errors_name_the_problem() {
    let cases: [(&dyn core::error::Error, &str); 9] = [
        (&ConfigError::InvalidDutyCycle { ppm: 0 }, "0 ppm"),
        (
            &ConfigError::InvalidEdges {
                low_hz: 9,
                high_hz: 2,
            },
            "from 9 Hz to 2 Hz",
        ),
        (
            &ConfigError::NoRoomForFrame {
                max_airtime: secs(4),
                budget: ms(3_600),
            },
            "up to 4s",
        ),
        (
            &TransmitError::UnknownBand { band: 7, bands: 6 },
            "sub-band 7",
        ),
        (
            &TransmitError::AirtimeTooLong {
                airtime: secs(40),
                max: secs(36),
            },
            "40s is longer than the 36s",
        ),
        (
            &TransmitError::NoSubBand {
                center_hz: 868_650_000,
                bandwidth_hz: 125_000,
            },
            "125000 Hz channel at 868650000 Hz",
        ),
        (&RestoreError::Checksum, "checksum"),
        (&RestoreError::Version { found: 255 }, "version 255"),
        (&RestoreError::OutOfRange { band: 3 }, "sub-band 3"),
    ];
    for (e, text) in cases {
        assert!(e.to_string().contains(text), "{e}: {text}");
    }
    assert!(
        RestoreError::BufferTooSmall { len: 3, needed: 36 }
            .to_string()
            .contains("3 bytes")
    );
    assert!(
        RestoreError::BandCount {
            saved: 5,
            expected: 6
        }
        .to_string()
        .contains("5 sub-bands")
    );
    assert_eq!(DutyCycle::PERCENT_1.to_string(), "1%");
    assert_eq!(DutyCycle::PERMILLE_1.to_string(), "0.1%");
    assert_eq!(DutyCycle::PERCENT_10.to_string(), "10%");
    assert_eq!(DutyCycle::from_ppm(1).unwrap().to_string(), "0.0001%");
    let text = std::format!("{:?}", DutyCycleLimiter::eu868());
    assert!(text.contains("M (g1)"), "{text}");
}

#[test]
fn the_eu868_table() {
    use eu868::*;
    let radio = DutyCycleLimiter::eu868();
    let b = |f, w| radio.band_index(f, w);
    // LoRaWAN's default channels and RX2
    for f in [868_100_000, 868_300_000, 868_500_000] {
        assert_eq!(b(f, 125_000), Ok(Eu868::M.index()));
    }
    for f in [
        867_100_000,
        867_300_000,
        867_500_000,
        867_700_000,
        867_900_000,
    ] {
        assert_eq!(b(f, 125_000), Ok(Eu868::L.index()));
    }
    assert_eq!(b(869_525_000, 125_000), Ok(Eu868::P.index()));
    assert_eq!(b(864_100_000, 125_000), Ok(Eu868::K.index()));
    assert_eq!(b(868_900_000, 125_000), Ok(Eu868::N.index()));
    assert_eq!(b(869_850_000, 125_000), Ok(Eu868::Q.index()));
    // a channel sticking out of its sub-band, or in a gap: none
    for (f, w) in [
        (868_550_000, 125_000),
        (868_650_000, 25_000),
        (869_300_000, 125_000),
        (862_000_000, 0),
        (870_000_001, 0),
    ] {
        assert_eq!(
            b(f, w),
            Err(TransmitError::NoSubBand {
                center_hz: f,
                bandwidth_hz: w
            })
        );
    }
    // a bare carrier on an edge counts in the stricter sub-band
    assert_eq!(b(865_000_000, 0), Ok(Eu868::K.index()));
    assert_eq!(b(868_000_000, 0), Ok(Eu868::L.index()));
    assert_eq!(b(870_000_000, 0), Ok(Eu868::Q.index()));
    // duty cycles and budgets
    let budgets: Vec<_> = SUB_BANDS
        .iter()
        .map(|s| s.duty_cycle().hourly_budget())
        .collect();
    assert_eq!(
        budgets,
        [
            ms(3_600),
            secs(36),
            secs(36),
            ms(3_600),
            secs(360),
            secs(36)
        ]
    );
    assert_eq!(Eu868::P.sub_band(), P);
    assert_eq!(P.low_hz(), 869_400_000);
    assert_eq!(P.high_hz(), 869_650_000);
    assert!(P.name().contains("g3"));
    assert_eq!(P.max_airtime(), secs(360));
    assert_eq!(radio.bands(), &SUB_BANDS);
}

#[test]
fn save_reset_restore_keeps_the_obligations() {
    let radio = DutyCycleLimiter::eu868();
    let t0 = Timestamp::from_secs(5_000);
    let (m, n, p) = (Eu868::M.index(), Eu868::N.index(), Eu868::P.index());
    assert!(radio.try_transmit(m, secs(2), t0).unwrap().is_allowed()); // free at +200 s
    assert!(radio.try_transmit(n, ms(1_500), t0).unwrap().is_allowed()); // +1500 s
    assert!(
        radio
            .try_transmit(p, Duration::from_nanos(1_234_567), t0)
            .unwrap()
            .is_allowed()
    ); // +12 345 670 ns
    let save_at = t0 + secs(50);
    let saved = radio.save(save_at);
    assert_eq!(saved.saved_at(), save_at);
    assert_eq!(saved.remaining(m), Some(secs(150)));
    assert_eq!(saved.remaining(n), Some(secs(1_450)));
    assert_eq!(saved.remaining(p), Some(Duration::ZERO));
    assert_eq!(saved.remaining(Eu868::K.index()), Some(Duration::ZERO));
    assert_eq!(saved.remaining(6), None);
    let mut flash = [0xA5u8; 64];
    assert_eq!(saved.encode(&mut flash), Ok(36));
    let back = SavedState::<6>::decode(&flash).unwrap();
    assert_eq!(back, saved);

    // reset: the new clock starts at zero, nothing known about the downtime
    let restored = DutyCycleLimiter::restore(
        DutyCycleLimiter::eu868(),
        &back,
        Timestamp::ZERO,
        Downtime::Unknown,
    );
    let z = Timestamp::ZERO;
    assert_eq!(restored.time_until_allowed(m, secs(1), z), Ok(secs(150)));
    assert_eq!(restored.time_until_allowed(n, secs(1), z), Ok(secs(1_450)));
    assert!(restored.try_transmit(p, secs(1), z).unwrap().is_allowed());
    assert!(
        !restored
            .try_transmit(m, secs(1), z + secs(149))
            .unwrap()
            .is_allowed()
    );
    assert!(
        restored
            .try_transmit(m, secs(1), z + secs(150))
            .unwrap()
            .is_allowed()
    );

    // a downtime the caller can vouch for is credited, no more
    let rtc = DutyCycleLimiter::restore(
        DutyCycleLimiter::eu868(),
        &back,
        Timestamp::from_secs(7),
        Downtime::AtLeast(secs(100)),
    );
    assert_eq!(rtc.free_at(m), Ok(Timestamp::from_secs(7 + 50)));
    assert_eq!(rtc.free_at(n), Ok(Timestamp::from_secs(7 + 1_350)));
    // the same clock kept running: its own readings measure the downtime
    let same = DutyCycleLimiter::restore(
        DutyCycleLimiter::eu868(),
        &back,
        save_at + secs(1_000),
        Downtime::SameClock,
    );
    assert_eq!(same.free_at(m), Ok(save_at + secs(1_000)));
    assert_eq!(same.free_at(n), Ok(save_at + secs(1_450)));
    // ... but a clock behind the save time credits nothing
    let behind =
        DutyCycleLimiter::restore(DutyCycleLimiter::eu868(), &back, z, Downtime::SameClock);
    assert_eq!(behind.free_at(n), Ok(z + secs(1_450)));
    // a fresh limiter's own later obligation is kept
    let busy = DutyCycleLimiter::eu868();
    assert!(busy.try_transmit(m, secs(30), z).unwrap().is_allowed()); // free at 3000 s
    let merged = DutyCycleLimiter::restore(busy, &back, z, Downtime::Unknown);
    assert_eq!(merged.free_at(m), Ok(z + secs(3_000)));
}

#[test]
fn remaining_time_off_is_saved_rounded_up() {
    let radio = DutyCycleLimiter::eu868();
    let p = Eu868::P.index();
    assert!(
        radio
            .try_transmit(p, Duration::from_nanos(1), Timestamp::ZERO)
            .unwrap()
            .is_allowed()
    ); // free at 10 ns
    assert_eq!(
        radio.save(Timestamp::ZERO).remaining(p),
        Some(Duration::from_micros(1))
    );
    assert_eq!(saved_micros(Duration::from_nanos(1)), 1);
    // more than an hour left means the clock went back: the real
    // obligation is at most an hour, which is what is saved
    assert_eq!(saved_micros(secs(10_000)), 3_600_000_000);
    let radio = DutyCycleLimiter::eu868();
    assert!(
        radio
            .try_transmit(p, secs(1), Timestamp::from_secs(5_000))
            .unwrap()
            .is_allowed()
    );
    let saved = radio.save(Timestamp::ZERO);
    assert_eq!(saved.remaining(p), Some(OBSERVATION_PERIOD));
    let mut bytes = [0u8; 36];
    saved.encode(&mut bytes).unwrap();
    assert_eq!(SavedState::<6>::decode(&bytes), Ok(saved));
}

#[test]
fn no_state_after_a_reset_means_an_hour_of_silence() {
    let t = Timestamp::from_secs(3);
    let radio = DutyCycleLimiter::after_unknown_reset(eu868::SUB_BANDS, t);
    for band in 0..6 {
        assert_eq!(
            radio.time_until_allowed(band, ms(1), t),
            Ok(OBSERVATION_PERIOD)
        );
        assert!(
            radio
                .try_transmit(band, ms(1), t + OBSERVATION_PERIOD)
                .unwrap()
                .is_allowed()
        );
    }
}

#[test]
fn decode_rejects_anything_but_a_saved_state() {
    type S = SavedState<6>;
    let mut good = [0u8; S::ENCODED_LEN];
    DutyCycleLimiter::eu868()
        .save(Timestamp::ZERO)
        .encode(&mut good)
        .unwrap();
    assert_eq!(
        S::decode(&good[..35]),
        Err(RestoreError::BufferTooSmall {
            len: 35,
            needed: 36
        })
    );
    let mut small = [0u8; 10];
    assert_eq!(
        DutyCycleLimiter::eu868()
            .save(Timestamp::ZERO)
            .encode(&mut small),
        Err(RestoreError::BufferTooSmall {
            len: 10,
            needed: 36
        })
    );
    // erased flash, zeroed RAM
    assert_eq!(
        S::decode(&[0xFF; 36]),
        Err(RestoreError::Version { found: 0xFF })
    );
    assert_eq!(S::decode(&[0; 36]), Err(RestoreError::Version { found: 0 }));
    assert_eq!(
        SavedState::<5>::decode(&good),
        Err(RestoreError::BandCount {
            saved: 6,
            expected: 5
        })
    );
    // a single flipped bit anywhere is caught
    for byte in 2..36 {
        for bit in 0..8 {
            let mut bad = good;
            bad[byte] ^= 1 << bit;
            assert_eq!(S::decode(&bad), Err(RestoreError::Checksum), "{byte}.{bit}");
        }
    }
    // a checksummed but impossible obligation (over an hour)
    let mut long = good;
    long[10..14].copy_from_slice(&3_600_000_001u32.to_le_bytes());
    let crc = crc16(&long[..34]);
    long[34..].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(S::decode(&long), Err(RestoreError::OutOfRange { band: 0 }));
    assert_eq!(crc16(b"123456789"), 0x29B1); // the CRC-16/CCITT-FALSE check value
}

#[test]
fn threads_sharing_a_sub_band_get_one_frame_per_time_off() {
    let radio = std::sync::Arc::new(DutyCycleLimiter::eu868());
    let m = Eu868::M.index();
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let radio = std::sync::Arc::clone(&radio);
            std::thread::spawn(move || {
                // every thread walks the same hour in 1 s steps
                (0..3_600u64)
                    .filter(|&s| {
                        let now = Timestamp::from_secs(s);
                        radio.try_transmit(m, ms(100), now).unwrap().is_allowed()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut starts: Vec<u64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    starts.sort_unstable();
    // 100 ms at 1 %: frames at least 10 s apart, whoever sends them,
    // so at most 360 in the hour
    assert!(starts.windows(2).all(|w| w[1] - w[0] >= 10), "{starts:?}");
    assert!(
        starts.len() <= 360 && starts.len() >= 300,
        "{}",
        starts.len()
    );
}
