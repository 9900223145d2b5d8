//! Duty cycles and the sub-bands they apply to.

use core::fmt;
use core::time::Duration;

use super::ConfigError;
use tollgate_core::time::duration_to_nanos;

/// The observation period of ETSI EN 300 220: one hour.
pub const OBSERVATION_PERIOD: Duration = Duration::from_secs(3_600);
pub(super) const PERIOD_NANOS: u64 = 3_600_000_000_000;
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
    pub(super) ppm: u32,
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

    pub(super) const fn budget_nanos(self) -> u64 {
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
    pub(super) const fn cycle_nanos(self, airtime_nanos: u64) -> u64 {
        let c = (airtime_nanos as u128 * PPM as u128).div_ceil(self.ppm as u128);
        if c > u64::MAX as u128 {
            u64::MAX
        } else {
            c as u64
        }
    }

    /// `⌊a / d⌋` in nanoseconds (saturating): what a refund of airtime `a`
    /// takes off a time-off. Rounded down, so that a frame shortened by
    /// `a` never ends its time-off earlier than a frame of the shorter
    /// airtime would: `⌈x / d⌉ − ⌊a / d⌋ ≥ ⌈(x − a) / d⌉`.
    pub(super) const fn credit_nanos(self, airtime_nanos: u64) -> u64 {
        let c = (airtime_nanos as u128 * PPM as u128) / self.ppm as u128;
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
    pub(super) name: &'static str,
    pub(super) low_hz: u32,
    pub(super) high_hz: u32,
    pub(super) duty_cycle: DutyCycle,
    pub(super) max_airtime: Duration,
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
    /// refused. See the [module documentation](super) for why the plain
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
