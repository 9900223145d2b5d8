//! Radio duty-cycle limits: airtime per sub-band, as ETSI EN 300 220
//! regulates the 863–870 MHz band in Europe (LoRaWAN's EU868).
//!
//! A licence-exempt transmitter in a sub-band with duty cycle `d` may be on
//! the air for at most a fraction `d` of the observation period, which is
//! one hour: 1 % is 36 s of airtime per hour, 0.1 % is 3.6 s, 10 % is
//! 360 s. The cost of a transmission is its airtime (the radio's
//! time-on-air for the frame, in microseconds or finer), and each sub-band
//! keeps its own account. [`DutyCycleLimiter`] enforces it per sub-band;
//! [`eu868`] is the European table, ready to use.
//!
//! ```
//! use core::time::Duration;
//! use tollgate::duty_cycle::{eu868::Eu868, DutyCycleLimiter, Transmit};
//! use tollgate::Timestamp;
//!
//! static RADIO: DutyCycleLimiter<6> = DutyCycleLimiter::eu868();
//!
//! // 868.1 MHz, 125 kHz wide: LoRaWAN's first default channel, sub-band M (g1), 1 %.
//! let band = RADIO.band_index(868_100_000, 125_000)?;
//! assert_eq!(band, Eu868::M.index());
//! let airtime = Duration::from_millis(500); // from the radio's time-on-air formula
//! let now = Timestamp::from_secs(10);
//! assert!(RADIO.try_transmit(band, airtime, now)?.is_allowed());
//! // 0.5 s at 1 % keeps the sub-band silent for 49.5 s after the frame ends.
//! let next = RADIO.try_transmit(band, airtime, now + Duration::from_secs(1))?;
//! assert_eq!(next, Transmit::Wait { retry_after: Duration::from_millis(49_000) });
//! assert_eq!(RADIO.time_until_allowed(band, airtime, now + Duration::from_secs(50))?, Duration::ZERO);
//! // The other sub-bands keep their own accounts.
//! assert!(RADIO.try_transmit(Eu868::P.index(), airtime, now)?.is_allowed());
//! # Ok::<(), tollgate::duty_cycle::TransmitError>(())
//! ```
//!
//! # Enforcement: the LoRaWAN time-off
//!
//! After a frame of airtime `a` in a sub-band of duty cycle `d`, the
//! sub-band stays silent for the *time-off* `a · (1/d − 1)`, counted from
//! the end of the frame: the next frame may start `a / d` after this one
//! started (LoRaWAN's `Toff = TimeOnAir / DutyCycle − TimeOnAir`, the rule
//! of the LoRaWAN 1.0 specification and of LoRaMac-node's `TimeOff =
//! TxTimeOnAir · DutyCycle − TxTimeOnAir`). It is a strict-pacing leaky
//! bucket (tollgate's GCRA with `τ = 0`) whose cost is airtime and whose
//! state is one instant per sub-band, the end of its time-off.
//!
//! Why this rule rather than a budget per hour: it is what the LoRaWAN
//! specification prescribes for EU868 end-devices, so a device using it
//! behaves as certified stacks do; it needs 8 bytes per sub-band (which
//! makes saving it across a reset a few bytes, below) where a true sliding
//! hour needs a history of frames; and it spreads transmissions instead of
//! spending an hour's budget at once, which a shared channel prefers. Its
//! arithmetic, checked by the tests:
//!
//! - every frame and its time-off together last exactly `a / d` (rounded
//!   up to the nanosecond), so back-to-back frames of one airtime fill an
//!   hour with exactly `d · 3600 s` of airtime: 36 frames of 1 s at 1 %,
//!   36 frames of 100 ms at 0.1 % (3.6 s), 360 frames of 1 s at 10 %;
//! - over **any** window of one hour, the airtime of a sub-band is at most
//!   `d · 3600 s + (1 − d) · a`, `a` being the longest frame that window
//!   overlaps: the window can cut off the time-off of its last frame, so
//!   the excess is at most one frame, never a second one;
//! - a single frame longer than the hour's budget `d · 3600 s` can never
//!   be sent ([`TransmitError::AirtimeTooLong`]), so no time-off is ever
//!   longer than an hour.
//!
//! If the reading of the regulation that applies to you counts every
//! sliding hour with no excess at all, build the sub-band with
//! [`SubBand::with_hard_hourly_cap`] and the longest frame you will send:
//! it lowers the duty cycle just enough (`d' = (d·3600 s − A) / (3600 s −
//! A)`) and refuses longer frames, and then no hour ever holds more than
//! `d · 3600 s`.
//!
//! # Sub-bands and channels
//!
//! [`DutyCycleLimiter::band_index`] finds a channel's sub-band from its
//! centre frequency and bandwidth: the whole channel must lie inside the
//! sub-band, edges included (ETSI limits the occupied bandwidth, not the
//! carrier). A carrier given with bandwidth 0 exactly on the edge between
//! two sub-bands is counted in the stricter one.
//!
//! # Saving and restoring across a reset or deep sleep
//!
//! The obligations (time-off still to serve, per sub-band) must survive a
//! reset or a deep sleep that stops the clock, or the device would
//! transmit again too early. [`DutyCycleLimiter::save`] records, for each
//! sub-band, the time-off remaining at the moment of the save (rounded
//! **up** to the microsecond; never more than an hour, so 4 bytes each),
//! and the clock reading it was saved at; [`SavedState::encode`] writes it
//! as `12 + 4·N` bytes (36 for EU868) with a version byte and a CRC.
//!
//! [`DutyCycleLimiter::restore`] rebuilds the limiter on the new clock
//! (whose zero may be the reset) by the **conservative rule**: each
//! sub-band's time-off resumes from `now` with what was left at the save,
//! minus only the downtime the caller can vouch for ([`Downtime`]):
//! none ([`Downtime::Unknown`]), a lower bound measured by something that
//! kept running ([`Downtime::AtLeast`], e.g. an RTC or the wake-up timer
//! that ended the sleep), or the difference of two readings of one clock
//! that survived ([`Downtime::SameClock`]). Counting too little downtime
//! only delays the next frame; the restored limiter never allows a frame
//! before the limiter that was saved would have. With no saved state at
//! all after an unexpected reset, [`DutyCycleLimiter::after_unknown_reset`]
//! assumes the worst: every sub-band silent for one hour.
//!
//! ```
//! use core::time::Duration;
//! use tollgate::duty_cycle::{eu868::Eu868, Downtime, DutyCycleLimiter, SavedState};
//! use tollgate::Timestamp;
//!
//! let radio = DutyCycleLimiter::eu868();
//! let m = Eu868::M.index();
//! let t = Timestamp::from_secs(1_000);
//! // 1 s on the air, then 99 s of time-off: the sub-band is free at 1 100 s
//! assert!(radio.try_transmit(m, Duration::from_secs(1), t)?.is_allowed());
//! let mut flash = [0u8; SavedState::<6>::ENCODED_LEN];
//! radio.save(t + Duration::from_secs(10)).encode(&mut flash)?; // 90 s left
//!
//! // ... reset: the clock starts again at zero ...
//! let saved = SavedState::<6>::decode(&flash)?;
//! let radio = DutyCycleLimiter::restore(DutyCycleLimiter::eu868(), &saved, Timestamp::ZERO, Downtime::Unknown);
//! assert_eq!(radio.time_until_allowed(m, Duration::from_secs(1), Timestamp::ZERO)?, Duration::from_secs(90));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Concurrency and time
//!
//! Each sub-band's state is one `AtomicU64` updated by compare-and-swap,
//! so a `static` limiter can be shared by tasks and threads (the same
//! caveat as a bucket's: on a Cortex-M3/M4 with portable-atomic's default
//! fallback, a 64-bit atomic is a spin lock that interrupt handlers must
//! not take). `now` is a [`Timestamp`] on the caller's monotonic clock; a
//! clock that goes back keeps a sub-band silent until it catches up (it
//! never allows a frame early).

use core::fmt;
use core::time::Duration;

use crate::sync::{AtomicU64, Ordering};
use crate::time::{duration_to_nanos, Timestamp};

/// The observation period of ETSI EN 300 220: one hour.
pub const OBSERVATION_PERIOD: Duration = Duration::from_secs(3_600);
const PERIOD_NANOS: u64 = 3_600_000_000_000;
const PPM: u64 = 1_000_000;

/// A duty cycle: the fraction of the observation period a transmitter may
/// be on the air, in parts per million (1 % = 10 000 ppm).
///
/// ```
/// use core::time::Duration;
/// use tollgate::duty_cycle::DutyCycle;
///
/// assert_eq!(DutyCycle::PERCENT_1.hourly_budget(), Duration::from_secs(36));
/// assert_eq!(DutyCycle::PERMILLE_1.hourly_budget(), Duration::from_millis(3_600));
/// assert_eq!(DutyCycle::PERCENT_10.hourly_budget(), Duration::from_secs(360));
/// // 0.5 s on the air at 1 %: 49.5 s of silence after it
/// assert_eq!(DutyCycle::PERCENT_1.time_off(Duration::from_millis(500)), Duration::from_millis(49_500));
/// assert_eq!(DutyCycle::from_ppm(2_500)?.to_string(), "0.25%");
/// # Ok::<(), tollgate::duty_cycle::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DutyCycle {
    ppm: u32,
}

impl DutyCycle {
    /// 10 %.
    pub const PERCENT_10: Self = Self { ppm: 100_000 };
    /// 1 %.
    pub const PERCENT_1: Self = Self { ppm: 10_000 };
    /// 0.1 %.
    pub const PERMILLE_1: Self = Self { ppm: 1_000 };
    /// 100 %: no limit (airtime still counts, time-off is zero).
    pub const FULL: Self = Self { ppm: 1_000_000 };

    /// A duty cycle of `ppm` parts per million (1 to 1 000 000).
    ///
    /// # Errors
    /// [`ConfigError::InvalidDutyCycle`] for 0 or more than 1 000 000.
    pub const fn from_ppm(ppm: u32) -> Result<Self, ConfigError> {
        if ppm == 0 || ppm as u64 > PPM {
            return Err(ConfigError::InvalidDutyCycle { ppm });
        }
        Ok(Self { ppm })
    }

    /// The duty cycle in parts per million.
    #[must_use]
    pub const fn ppm(self) -> u32 {
        self.ppm
    }

    /// The airtime allowed per observation period: `d · 3600 s`.
    #[must_use]
    pub const fn hourly_budget(self) -> Duration {
        Duration::from_nanos(self.budget_nanos())
    }

    const fn budget_nanos(self) -> u64 {
        // ppm · 3.6 ms, at most 3.6e12: no overflow
        self.ppm as u64 * (PERIOD_NANOS / PPM)
    }

    /// The silence a frame of `airtime` imposes after it ends:
    /// `airtime · (1/d − 1)`, rounded up to the nanosecond (saturating).
    #[must_use]
    pub const fn time_off(self, airtime: Duration) -> Duration {
        let a = duration_to_nanos(airtime);
        let cycle = self.cycle_nanos(a);
        Duration::from_nanos(cycle.saturating_sub(a))
    }

    /// `⌈a / d⌉` in nanoseconds: a frame plus its time-off (saturating).
    const fn cycle_nanos(self, airtime_nanos: u64) -> u64 {
        let c = (airtime_nanos as u128 * PPM as u128).div_ceil(self.ppm as u128);
        if c > u64::MAX as u128 {
            u64::MAX
        } else {
            c as u64
        }
    }
}

impl fmt::Display for DutyCycle {
    /// As a percentage without trailing zeros: `1%`, `0.1%`, `0.25%`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let whole = self.ppm / 10_000;
        let mut frac = self.ppm % 10_000;
        if frac == 0 {
            return write!(f, "{whole}%");
        }
        let mut digits = 4;
        while frac.is_multiple_of(10) {
            frac /= 10;
            digits -= 1;
        }
        write!(f, "{whole}.{frac:0digits$}%")
    }
}

/// A sub-band: a frequency range with its duty cycle.
///
/// ```
/// use tollgate::duty_cycle::{DutyCycle, SubBand};
/// use tollgate::valid;
///
/// const MY_BAND: SubBand = valid!(SubBand::new("868.0-868.6", 868_000_000, 868_600_000, DutyCycle::PERCENT_1));
/// assert!(MY_BAND.contains_channel(868_100_000, 125_000));
/// assert!(!MY_BAND.contains_channel(868_550_000, 125_000)); // sticks out at the top
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SubBand {
    name: &'static str,
    low_hz: u32,
    high_hz: u32,
    duty_cycle: DutyCycle,
    max_airtime: Duration,
}

impl SubBand {
    /// The sub-band `low_hz..=high_hz` with `duty_cycle`. Its longest
    /// frame is its hourly budget.
    ///
    /// # Errors
    /// [`ConfigError::InvalidEdges`] unless `low_hz < high_hz`.
    pub const fn new(
        name: &'static str,
        low_hz: u32,
        high_hz: u32,
        duty_cycle: DutyCycle,
    ) -> Result<Self, ConfigError> {
        if low_hz >= high_hz {
            return Err(ConfigError::InvalidEdges { low_hz, high_hz });
        }
        Ok(Self {
            name,
            low_hz,
            high_hz,
            duty_cycle,
            max_airtime: duty_cycle.hourly_budget(),
        })
    }

    /// This sub-band, enforced so that **no** window of one hour holds
    /// more than the hourly budget, for frames of up to `max_airtime`:
    /// the duty cycle is lowered to `(budget − max_airtime) / (1 h −
    /// max_airtime)` (rounded down to the ppm) and longer frames are
    /// refused. See the [module documentation](self) for why the plain
    /// time-off can exceed the budget by one frame.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::duty_cycle::eu868;
    ///
    /// // LoRa SF12 frames of up to 1.5 s in the 1 % sub-band M
    /// let m = eu868::M.with_hard_hourly_cap(Duration::from_millis(1_500))?;
    /// assert_eq!(m.duty_cycle().ppm(), 9_587); // 0.9587 %
    /// assert_eq!(m.max_airtime(), Duration::from_millis(1_500));
    /// # Ok::<(), tollgate::duty_cycle::ConfigError>(())
    /// ```
    ///
    /// # Errors
    /// [`ConfigError::NoRoomForFrame`] if a frame of `max_airtime` would
    /// leave no duty cycle at all (it is not shorter than the budget), or
    /// if `max_airtime` is zero.
    pub const fn with_hard_hourly_cap(self, max_airtime: Duration) -> Result<Self, ConfigError> {
        let a = duration_to_nanos(max_airtime);
        let budget = self.duty_cycle.budget_nanos();
        if a == 0 || a >= budget {
            return Err(ConfigError::NoRoomForFrame {
                max_airtime,
                budget: self.duty_cycle.hourly_budget(),
            });
        }
        // d' = (d·H − A) / (H − A), in ppm, rounded down
        let num = (budget - a) as u128 * PPM as u128;
        let ppm = num / (PERIOD_NANOS - a) as u128;
        if ppm == 0 {
            return Err(ConfigError::NoRoomForFrame {
                max_airtime,
                budget: self.duty_cycle.hourly_budget(),
            });
        }
        Ok(Self {
            duty_cycle: DutyCycle { ppm: ppm as u32 },
            max_airtime,
            ..self
        })
    }

    /// The sub-band's name.
    #[must_use]
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// The lowest frequency of the sub-band, in Hz.
    #[must_use]
    pub const fn low_hz(&self) -> u32 {
        self.low_hz
    }

    /// The highest frequency of the sub-band, in Hz.
    #[must_use]
    pub const fn high_hz(&self) -> u32 {
        self.high_hz
    }

    /// The duty cycle enforced.
    #[must_use]
    pub const fn duty_cycle(&self) -> DutyCycle {
        self.duty_cycle
    }

    /// The longest frame accepted: the hourly budget, or the cap given to
    /// [`with_hard_hourly_cap`](Self::with_hard_hourly_cap).
    #[must_use]
    pub const fn max_airtime(&self) -> Duration {
        self.max_airtime
    }

    /// Whether a channel centred on `center_hz`, `bandwidth_hz` wide, lies
    /// wholly inside the sub-band (edges included).
    #[must_use]
    pub const fn contains_channel(&self, center_hz: u32, bandwidth_hz: u32) -> bool {
        // in tenths of a hertz would be exact for odd widths; half-widths
        // rounded up make an odd-width channel only stricter
        let half = bandwidth_hz.div_ceil(2);
        center_hz >= self.low_hz.saturating_add(half)
            && center_hz.saturating_add(half) <= self.high_hz
    }
}

pub mod eu868 {
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
    use crate::valid;

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
}

/// What [`DutyCycleLimiter::try_transmit`] decided.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transmit {
    /// Transmit now. The sub-band is silent again from `free_at` (the end
    /// of the frame plus its time-off).
    Allowed {
        /// When the sub-band's time-off ends.
        free_at: Timestamp,
    },
    /// Not now: the sub-band's time-off ends after `retry_after`. Nothing
    /// was recorded.
    Wait {
        /// The time until the frame may start.
        retry_after: Duration,
    },
}

impl Transmit {
    /// Whether the frame may be sent now.
    #[must_use]
    pub const fn is_allowed(&self) -> bool {
        matches!(self, Self::Allowed { .. })
    }

    /// The wait before the frame may start: zero if allowed.
    #[must_use]
    pub const fn retry_after(&self) -> Duration {
        match self {
            Self::Allowed { .. } => Duration::ZERO,
            Self::Wait { retry_after } => *retry_after,
        }
    }
}

/// A limit on airtime per sub-band: the LoRaWAN time-off (see the [module
/// documentation](self)) for each of `N` sub-bands, 8 bytes of state each.
///
/// ```
/// use core::time::Duration;
/// use tollgate::duty_cycle::{DutyCycle, DutyCycleLimiter, SubBand, TransmitError};
/// use tollgate::{valid, Timestamp};
///
/// const BANDS: [SubBand; 1] = [valid!(SubBand::new("ism", 433_050_000, 434_790_000, DutyCycle::PERCENT_10))];
/// static RADIO: DutyCycleLimiter<1> = DutyCycleLimiter::new(BANDS);
///
/// let t = Timestamp::ZERO;
/// assert!(RADIO.try_transmit(0, Duration::from_secs(1), t)?.is_allowed());
/// assert_eq!(RADIO.time_until_allowed(0, Duration::from_secs(1), t)?, Duration::from_secs(10));
/// // No panic on bad input: typed errors.
/// assert_eq!(
///     RADIO.try_transmit(1, Duration::from_secs(1), t),
///     Err(TransmitError::UnknownBand { band: 1, bands: 1 })
/// );
/// assert!(matches!(
///     RADIO.try_transmit(0, Duration::from_secs(361), t),
///     Err(TransmitError::AirtimeTooLong { .. })
/// ));
/// # Ok::<(), TransmitError>(())
/// ```
pub struct DutyCycleLimiter<const N: usize> {
    bands: [SubBand; N],
    /// Per sub-band: the end of its time-off, in nanoseconds.
    free_at: [AtomicU64; N],
}

impl DutyCycleLimiter<6> {
    crate::sync::const_fn_unless_loom! {
        /// The six EU868 sub-bands ([`eu868::SUB_BANDS`]), indexed by
        /// [`eu868::Eu868`], with no obligations.
        #[must_use]
        pub fn eu868() -> Self {
            Self::new(eu868::SUB_BANDS)
        }
    }
}

impl<const N: usize> DutyCycleLimiter<N> {
    /// A limiter for `bands` with no obligations (every sub-band free).
    #[cfg(not(loom))]
    #[must_use]
    pub const fn new(bands: [SubBand; N]) -> Self {
        Self {
            bands,
            free_at: [const { AtomicU64::new(0) }; N],
        }
    }

    /// A limiter for `bands` with no obligations (every sub-band free).
    #[cfg(loom)]
    #[must_use]
    pub fn new(bands: [SubBand; N]) -> Self {
        Self {
            bands,
            free_at: core::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// A limiter for `bands` after a reset with no saved state: every
    /// sub-band is silent for one observation period from `now`, the
    /// longest time-off a frame can leave. It never allows a frame that
    /// the lost state would have refused.
    #[must_use]
    pub fn after_unknown_reset(bands: [SubBand; N], now: Timestamp) -> Self {
        let limiter = Self::new(bands);
        let until = (now + OBSERVATION_PERIOD).as_nanos();
        for slot in &limiter.free_at {
            slot.store(until, Ordering::Relaxed);
        }
        limiter
    }

    /// The sub-bands.
    #[must_use]
    pub const fn bands(&self) -> &[SubBand; N] {
        &self.bands
    }

    /// The index of the sub-band that wholly contains a channel centred on
    /// `center_hz`, `bandwidth_hz` wide; the stricter one if several do.
    ///
    /// # Errors
    /// [`TransmitError::NoSubBand`] if none does.
    pub fn band_index(&self, center_hz: u32, bandwidth_hz: u32) -> Result<usize, TransmitError> {
        let mut found: Option<usize> = None;
        for (i, band) in self.bands.iter().enumerate() {
            if band.contains_channel(center_hz, bandwidth_hz) {
                let stricter = match found {
                    Some(j) => band.duty_cycle < self.bands[j].duty_cycle,
                    None => true,
                };
                if stricter {
                    found = Some(i);
                }
            }
        }
        found.ok_or(TransmitError::NoSubBand {
            center_hz,
            bandwidth_hz,
        })
    }

    fn band(
        &self,
        band: usize,
        airtime: Duration,
    ) -> Result<(&SubBand, &AtomicU64), TransmitError> {
        let (Some(config), Some(slot)) = (self.bands.get(band), self.free_at.get(band)) else {
            return Err(TransmitError::UnknownBand { band, bands: N });
        };
        if airtime > config.max_airtime {
            return Err(TransmitError::AirtimeTooLong {
                airtime,
                max: config.max_airtime,
            });
        }
        Ok((config, slot))
    }

    /// Asks to start a frame of `airtime` in sub-band `band` at `now`. If
    /// the sub-band's time-off is over, the frame is recorded (the
    /// sub-band is then silent until `now + airtime / d`) and
    /// [`Transmit::Allowed`]; otherwise [`Transmit::Wait`] with the time
    /// until it is, and nothing changes. A zero airtime records nothing.
    ///
    /// # Errors
    /// [`TransmitError::UnknownBand`] for an index out of range;
    /// [`TransmitError::AirtimeTooLong`] for a frame longer than the
    /// sub-band's hourly budget (or its cap): it could never be sent.
    pub fn try_transmit(
        &self,
        band: usize,
        airtime: Duration,
        now: Timestamp,
    ) -> Result<Transmit, TransmitError> {
        let (config, slot) = self.band(band, airtime)?;
        let now_ns = now.as_nanos();
        let cycle = config.duty_cycle.cycle_nanos(duration_to_nanos(airtime));
        let mut current = slot.load(Ordering::Relaxed);
        loop {
            if current > now_ns {
                return Ok(Transmit::Wait {
                    retry_after: Duration::from_nanos(current - now_ns),
                });
            }
            if cycle == 0 {
                return Ok(Transmit::Allowed { free_at: now });
            }
            let next = now_ns.saturating_add(cycle);
            match slot.compare_exchange_weak(current, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    return Ok(Transmit::Allowed {
                        free_at: Timestamp::from_nanos(next),
                    })
                }
                Err(seen) => current = seen,
            }
        }
    }

    /// The time from `now` until a frame of `airtime` may start in `band`
    /// (zero if it may start now). Under the time-off rule this does not
    /// depend on the airtime, but the airtime is checked.
    ///
    /// # Errors
    /// As [`try_transmit`](Self::try_transmit).
    pub fn time_until_allowed(
        &self,
        band: usize,
        airtime: Duration,
        now: Timestamp,
    ) -> Result<Duration, TransmitError> {
        let (_, slot) = self.band(band, airtime)?;
        Ok(Timestamp::from_nanos(slot.load(Ordering::Relaxed)) - now)
    }

    /// When sub-band `band`'s time-off ends: a frame may start at or after
    /// this time (a time at or before `now` means the sub-band is free).
    ///
    /// # Errors
    /// [`TransmitError::UnknownBand`] for an index out of range.
    pub fn free_at(&self, band: usize) -> Result<Timestamp, TransmitError> {
        self.band(band, Duration::ZERO)
            .map(|(_, slot)| Timestamp::from_nanos(slot.load(Ordering::Relaxed)))
    }

    /// The obligations at `now`, to keep across a reset or a deep sleep:
    /// each sub-band's remaining time-off, rounded up to the microsecond,
    /// and `now`. See [restoring](self#saving-and-restoring-across-a-reset-or-deep-sleep).
    #[must_use]
    pub fn save(&self, now: Timestamp) -> SavedState<N> {
        let mut remaining_us = [0u32; N];
        for (out, slot) in remaining_us.iter_mut().zip(&self.free_at) {
            let left = Timestamp::from_nanos(slot.load(Ordering::Relaxed)) - now;
            *out = saved_micros(left);
        }
        SavedState {
            saved_at: now,
            remaining_us,
        }
    }

    /// `fresh` (a limiter with the sub-band table to use, as built by
    /// [`new`](Self::new)) carrying the obligations of `saved` on a clock
    /// that now reads `now`, by the conservative rule: each sub-band's
    /// time-off resumes at `now` with what was left at the save, less the
    /// `downtime` the caller can vouch for. An obligation in `fresh` that
    /// ends later is kept.
    #[must_use]
    pub fn restore(fresh: Self, saved: &SavedState<N>, now: Timestamp, downtime: Downtime) -> Self {
        let credit = match downtime {
            Downtime::Unknown => Duration::ZERO,
            Downtime::AtLeast(d) => d,
            Downtime::SameClock => now - saved.saved_at,
        };
        for (slot, &us) in fresh.free_at.iter().zip(&saved.remaining_us) {
            let left = Duration::from_micros(u64::from(us)).saturating_sub(credit);
            let until = (now + left).as_nanos();
            let _ = slot.fetch_max(until, Ordering::Relaxed);
        }
        fresh
    }
}

/// A remaining time-off in whole microseconds, rounded up, at most one
/// hour (3.6e9 µs: 4 bytes).
///
/// More than an hour left means `now` is behind the clock that set the
/// time-off (it went back, or `now` is stale): in real time the
/// obligation is at most the longest frame cycle, one hour, so the cap
/// keeps the saved state conservative.
fn saved_micros(left: Duration) -> u32 {
    let us = duration_to_nanos(left.min(OBSERVATION_PERIOD)).div_ceil(1_000);
    u32::try_from(us).unwrap_or(u32::MAX)
}

impl<const N: usize> fmt::Debug for DutyCycleLimiter<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_list();
        for (band, slot) in self.bands.iter().zip(&self.free_at) {
            list.entry(&(
                band.name,
                band.duty_cycle,
                Timestamp::from_nanos(slot.load(Ordering::Relaxed)),
            ));
        }
        list.finish()
    }
}

/// How much time passed between a [`save`](DutyCycleLimiter::save) and a
/// [`restore`](DutyCycleLimiter::restore), as far as the caller can vouch.
/// Crediting more than really passed would let the device transmit early:
/// when in doubt, [`Unknown`](Downtime::Unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Downtime {
    /// Nothing is known: the saved time-off is served again in full from
    /// the restore (a reset, a watchdog, a brown-out).
    Unknown,
    /// At least this much passed, measured by something that kept running
    /// (an RTC, the wake-up timer that ended a deep sleep).
    AtLeast(Duration),
    /// The clock that reads `now` at the restore is the one that read the
    /// save time (it kept running across the sleep, e.g. an RTC): the
    /// downtime is the difference of the two readings (none if the clock
    /// is behind).
    SameClock,
}

/// The saved obligations of a [`DutyCycleLimiter`] of `N` sub-bands:
/// each sub-band's remaining time-off (whole microseconds, rounded up)
/// and the clock reading at the save. [`encode`](Self::encode) writes
/// [`ENCODED_LEN`](Self::ENCODED_LEN) bytes for flash or retained RAM.
///
/// ```
/// use tollgate::duty_cycle::{DutyCycleLimiter, RestoreError, SavedState};
/// use tollgate::Timestamp;
///
/// let saved = DutyCycleLimiter::eu868().save(Timestamp::ZERO);
/// let mut bytes = [0u8; SavedState::<6>::ENCODED_LEN];
/// assert_eq!(saved.encode(&mut bytes)?, 36);
/// assert_eq!(SavedState::<6>::decode(&bytes)?, saved);
/// bytes[20] ^= 1; // a flipped bit
/// assert_eq!(SavedState::<6>::decode(&bytes), Err(RestoreError::Checksum));
/// # Ok::<(), RestoreError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SavedState<const N: usize> {
    saved_at: Timestamp,
    remaining_us: [u32; N],
}

const FORMAT_VERSION: u8 = 1;

impl<const N: usize> SavedState<N> {
    /// Bytes written by [`encode`](Self::encode): a version byte, the
    /// sub-band count, the save time (8 bytes), 4 bytes per sub-band and a
    /// CRC-16: `12 + 4·N` (36 for EU868).
    pub const ENCODED_LEN: usize = 12 + 4 * N;

    /// The clock reading at the save.
    #[must_use]
    pub const fn saved_at(&self) -> Timestamp {
        self.saved_at
    }

    /// Sub-band `band`'s time-off remaining at the save (`None` out of
    /// range).
    #[must_use]
    pub fn remaining(&self, band: usize) -> Option<Duration> {
        self.remaining_us
            .get(band)
            .map(|&us| Duration::from_micros(u64::from(us)))
    }

    /// Writes the state into the start of `out` (little-endian, with a
    /// CRC-16/CCITT); returns the length written.
    ///
    /// # Errors
    /// [`RestoreError::BufferTooSmall`] if `out` is shorter than
    /// [`ENCODED_LEN`](Self::ENCODED_LEN); [`RestoreError::BandCount`]
    /// for more than 255 sub-bands.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, RestoreError> {
        let Ok(count) = u8::try_from(N) else {
            return Err(RestoreError::BandCount {
                saved: N,
                expected: 255,
            });
        };
        let Some(out) = out.get_mut(..Self::ENCODED_LEN) else {
            return Err(RestoreError::BufferTooSmall {
                len: out.len(),
                needed: Self::ENCODED_LEN,
            });
        };
        out[0] = FORMAT_VERSION;
        out[1] = count;
        out[2..10].copy_from_slice(&self.saved_at.as_nanos().to_le_bytes());
        for (chunk, us) in out[10..10 + 4 * N]
            .chunks_exact_mut(4)
            .zip(&self.remaining_us)
        {
            chunk.copy_from_slice(&us.to_le_bytes());
        }
        let body = Self::ENCODED_LEN - 2;
        let crc = crc16(&out[..body]);
        out[body..].copy_from_slice(&crc.to_le_bytes());
        Ok(Self::ENCODED_LEN)
    }

    /// Reads a state written by [`encode`](Self::encode). Any byte string
    /// is safe to pass: a corrupt, truncated or foreign one is an error,
    /// never a state that grants airtime (fall back to
    /// [`DutyCycleLimiter::after_unknown_reset`] then).
    ///
    /// # Errors
    /// [`RestoreError`]: too short, wrong version or sub-band count, bad
    /// checksum, or a remaining time-off above one hour (no frame can
    /// leave that much).
    pub fn decode(bytes: &[u8]) -> Result<Self, RestoreError> {
        let Some(bytes) = bytes.get(..Self::ENCODED_LEN) else {
            return Err(RestoreError::BufferTooSmall {
                len: bytes.len(),
                needed: Self::ENCODED_LEN,
            });
        };
        if bytes[0] != FORMAT_VERSION {
            return Err(RestoreError::Version { found: bytes[0] });
        }
        if usize::from(bytes[1]) != N {
            return Err(RestoreError::BandCount {
                saved: usize::from(bytes[1]),
                expected: N,
            });
        }
        let body = Self::ENCODED_LEN - 2;
        let stored = u16::from_le_bytes([bytes[body], bytes[body + 1]]);
        if crc16(&bytes[..body]) != stored {
            return Err(RestoreError::Checksum);
        }
        let mut at = [0u8; 8];
        at.copy_from_slice(&bytes[2..10]);
        let mut remaining_us = [0u32; N];
        let max = OBSERVATION_PERIOD.as_micros() as u32;
        for (i, (us, chunk)) in remaining_us
            .iter_mut()
            .zip(bytes[10..10 + 4 * N].chunks_exact(4))
            .enumerate()
        {
            *us = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
            if *us > max {
                return Err(RestoreError::OutOfRange { band: i });
            }
        }
        Ok(Self {
            saved_at: Timestamp::from_nanos(u64::from_le_bytes(at)),
            remaining_us,
        })
    }
}

/// CRC-16/CCITT-FALSE (polynomial 0x1021, initial value 0xFFFF).
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0xFFFF;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// Why a sub-band or duty cycle could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigError {
    /// A duty cycle of 0 or above 100 %.
    InvalidDutyCycle {
        /// The value asked for, in parts per million.
        ppm: u32,
    },
    /// A sub-band whose low edge is not below its high edge.
    InvalidEdges {
        /// The low edge asked for.
        low_hz: u32,
        /// The high edge asked for.
        high_hz: u32,
    },
    /// A hard hourly cap whose longest frame leaves no room: it is zero or
    /// not shorter than the hourly budget.
    NoRoomForFrame {
        /// The longest frame asked for.
        max_airtime: Duration,
        /// The sub-band's hourly budget.
        budget: Duration,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::InvalidDutyCycle { ppm } => {
                write!(
                    f,
                    "a duty cycle of {ppm} ppm is not between 1 and 1000000 ppm"
                )
            }
            Self::InvalidEdges { low_hz, high_hz } => {
                write!(f, "a sub-band from {low_hz} Hz to {high_hz} Hz is empty")
            }
            Self::NoRoomForFrame {
                max_airtime,
                budget,
            } => write!(
                f,
                "frames of up to {max_airtime:?} leave no room under an hourly budget of {budget:?}"
            ),
        }
    }
}

impl core::error::Error for ConfigError {}

/// Why a transmission request could not be answered (a frame that must
/// wait is not an error: it is [`Transmit::Wait`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransmitError {
    /// No sub-band with this index.
    UnknownBand {
        /// The index asked for.
        band: usize,
        /// The number of sub-bands.
        bands: usize,
    },
    /// The frame is longer than the sub-band ever allows (its hourly
    /// budget, or its hard cap): it can never be sent there.
    AirtimeTooLong {
        /// The frame's airtime.
        airtime: Duration,
        /// The longest frame the sub-band allows.
        max: Duration,
    },
    /// No sub-band wholly contains the channel.
    NoSubBand {
        /// The channel's centre frequency.
        center_hz: u32,
        /// The channel's bandwidth.
        bandwidth_hz: u32,
    },
}

impl fmt::Display for TransmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::UnknownBand { band, bands } => {
                write!(f, "sub-band {band} does not exist (there are {bands})")
            }
            Self::AirtimeTooLong { airtime, max } => write!(
                f,
                "a frame of {airtime:?} is longer than the {max:?} the sub-band ever allows"
            ),
            Self::NoSubBand {
                center_hz,
                bandwidth_hz,
            } => write!(
                f,
                "no sub-band contains a {bandwidth_hz} Hz channel at {center_hz} Hz"
            ),
        }
    }
}

impl core::error::Error for TransmitError {}

/// Why a saved state could not be written or read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RestoreError {
    /// The buffer is shorter than the encoding.
    BufferTooSmall {
        /// The buffer's length.
        len: usize,
        /// The bytes needed.
        needed: usize,
    },
    /// An unknown format version (or erased or foreign memory).
    Version {
        /// The version byte found.
        found: u8,
    },
    /// The state was saved for another number of sub-bands.
    BandCount {
        /// Sub-bands in the saved state.
        saved: usize,
        /// Sub-bands expected.
        expected: usize,
    },
    /// The checksum does not match: the bytes are corrupt.
    Checksum,
    /// A remaining time-off longer than any frame can leave (one hour).
    OutOfRange {
        /// The sub-band's index.
        band: usize,
    },
}

impl fmt::Display for RestoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::BufferTooSmall { len, needed } => {
                write!(f, "{len} bytes are too few for a saved state of {needed}")
            }
            Self::Version { found } => write!(f, "unknown saved-state version {found}"),
            Self::BandCount { saved, expected } => {
                write!(f, "the state has {saved} sub-bands, the limiter {expected}")
            }
            Self::Checksum => f.write_str("the saved state's checksum does not match"),
            Self::OutOfRange { band } => {
                write!(f, "sub-band {band}'s saved time-off is longer than an hour")
            }
        }
    }
}

impl core::error::Error for RestoreError {}

#[cfg(all(test, not(loom)))]
mod tests {
    extern crate std;

    use super::eu868::Eu868;
    use super::*;
    use crate::clock::{Clock, ManualClock};
    use proptest::prelude::*;
    use std::string::ToString;
    use std::vec::Vec;

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
            assert!(radio
                .try_transmit(band.index(), ms(100), t)
                .unwrap()
                .is_allowed());
            assert!(!radio
                .try_transmit(band.index(), ms(100), t)
                .unwrap()
                .is_allowed());
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
        assert!(radio
            .try_transmit(p, Duration::ZERO, Timestamp::ZERO)
            .unwrap()
            .is_allowed());
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
        assert!(RestoreError::BufferTooSmall { len: 3, needed: 36 }
            .to_string()
            .contains("3 bytes"));
        assert!(RestoreError::BandCount {
            saved: 5,
            expected: 6
        }
        .to_string()
        .contains("5 sub-bands"));
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
        assert!(radio
            .try_transmit(p, Duration::from_nanos(1_234_567), t0)
            .unwrap()
            .is_allowed()); // +12 345 670 ns
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
        assert!(!restored
            .try_transmit(m, secs(1), z + secs(149))
            .unwrap()
            .is_allowed());
        assert!(restored
            .try_transmit(m, secs(1), z + secs(150))
            .unwrap()
            .is_allowed());

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
        assert!(radio
            .try_transmit(p, Duration::from_nanos(1), Timestamp::ZERO)
            .unwrap()
            .is_allowed()); // free at 10 ns
        assert_eq!(
            radio.save(Timestamp::ZERO).remaining(p),
            Some(Duration::from_micros(1))
        );
        assert_eq!(saved_micros(Duration::from_nanos(1)), 1);
        // more than an hour left means the clock went back: the real
        // obligation is at most an hour, which is what is saved
        assert_eq!(saved_micros(secs(10_000)), 3_600_000_000);
        let radio = DutyCycleLimiter::eu868();
        assert!(radio
            .try_transmit(p, secs(1), Timestamp::from_secs(5_000))
            .unwrap()
            .is_allowed());
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
            assert!(radio
                .try_transmit(band, ms(1), t + OBSERVATION_PERIOD)
                .unwrap()
                .is_allowed());
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
}
