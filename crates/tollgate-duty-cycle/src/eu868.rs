//! The EU868 sub-bands of ETSI EN 300 220-2 V3.2.1 (Annex B), as
//! LoRaWAN end-devices use them, with their duty cycles.
//!
//! | sub-band | also called | MHz | duty cycle | per hour |
//! |---|---|---|---|---|
//! | [`K`] | h1.4 | 863.0 – 865.0 | 0.1 % | 3.6 s |
//! | [`L`] | g | 865.0 – 868.0 | 1 % | 36 s |
//! | [`M`] | g1 | 868.0 – 868.6 | 1 % | 36 s |
//! | [`N`] | g2 | 868.7 – 869.2 | 0.1 % | 3.6 s |
//! | [`P`] | g3 | 869.4 – 869.65 | 10 % | 360 s |
//! | [`Q`] | g4 | 869.7 – 870.0 | 1 % | 36 s |
//!
//! Sources: the band edges and duty cycles are those of LoRaMac-node's
//! `RegionEU868` (`VerifyRfFreq` and `EU868_BAND0..5`: 1 % for bands
//! 0, 1, 4; 0.1 % for 2, 5; 10 % for 3), whose older
//! `LoRaMac-definitions.h` names the five upper bands `BAND_G1_0..4`
//! (g, g1, g2, g3, g4); the letters and the split of the two 0.1 %
//! ranges into separate sub-bands (K and N) follow EN 300 220-2 V3.2.1
//! as quoted in LoRaMac-node pull request 750. The gaps (868.6–868.7,
//! 869.2–869.4, 869.65–869.7 MHz) belong to no sub-band here: a channel
//! there is [`TransmitError::NoSubBand`](super::TransmitError::NoSubBand).
//!
//! Other conditions of the standard (transmit power, listen before
//! talk as an alternative to the duty cycle, the 25 kHz channelling of
//! some bands) are not modelled: this is airtime accounting only.

use super::{DutyCycle, SubBand};
use tollgate_core::valid;

/// 863.0–865.0 MHz, 0.1 %.
pub const K: SubBand = valid!(SubBand::new(
    "K 863.0-865.0 MHz",
    863_000_000,
    865_000_000,
    DutyCycle::PERMILLE_1
));
/// 865.0–868.0 MHz, 1 % ("g").
pub const L: SubBand = valid!(SubBand::new(
    "L (g) 865.0-868.0 MHz",
    865_000_000,
    868_000_000,
    DutyCycle::PERCENT_1
));
/// 868.0–868.6 MHz, 1 % ("g1"): LoRaWAN's three default channels.
pub const M: SubBand = valid!(SubBand::new(
    "M (g1) 868.0-868.6 MHz",
    868_000_000,
    868_600_000,
    DutyCycle::PERCENT_1
));
/// 868.7–869.2 MHz, 0.1 % ("g2").
pub const N: SubBand = valid!(SubBand::new(
    "N (g2) 868.7-869.2 MHz",
    868_700_000,
    869_200_000,
    DutyCycle::PERMILLE_1
));
/// 869.4–869.65 MHz, 10 % ("g3"): LoRaWAN's RX2 channel (869.525 MHz).
pub const P: SubBand = valid!(SubBand::new(
    "P (g3) 869.4-869.65 MHz",
    869_400_000,
    869_650_000,
    DutyCycle::PERCENT_10
));
/// 869.7–870.0 MHz, 1 % ("g4").
pub const Q: SubBand = valid!(SubBand::new(
    "Q (g4) 869.7-870.0 MHz",
    869_700_000,
    870_000_000,
    DutyCycle::PERCENT_1
));

/// The six sub-bands, in the order of [`Eu868`].
pub const SUB_BANDS: [SubBand; 6] = [K, L, M, N, P, Q];

/// The index of each EU868 sub-band in [`SUB_BANDS`] (and in a
/// [`DutyCycleLimiter::eu868`](super::DutyCycleLimiter::eu868)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Eu868 {
    /// 863.0–865.0 MHz, 0.1 %.
    K,
    /// 865.0–868.0 MHz, 1 % (g).
    L,
    /// 868.0–868.6 MHz, 1 % (g1).
    M,
    /// 868.7–869.2 MHz, 0.1 % (g2).
    N,
    /// 869.4–869.65 MHz, 10 % (g3).
    P,
    /// 869.7–870.0 MHz, 1 % (g4).
    Q,
}

impl Eu868 {
    /// The sub-band's index in [`SUB_BANDS`].
    #[must_use]
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The sub-band.
    #[must_use]
    pub const fn sub_band(self) -> SubBand {
        SUB_BANDS[self as usize]
    }
}
