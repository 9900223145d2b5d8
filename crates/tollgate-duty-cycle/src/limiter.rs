//! The limiter: each sub-band's time-off, one atomic word each.

use core::fmt;
use core::time::Duration;

use super::{Downtime, OBSERVATION_PERIOD, SavedState, SubBand, TransmitError, eu868};
use tollgate_core::sync::{AtomicU64, Ordering};
use tollgate_core::time::{Timestamp, duration_to_nanos};

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
/// documentation](super)) for each of `N` sub-bands, 8 bytes of state each.
///
/// It is also the core's [`Limiter<usize>`](tollgate_core::Limiter): one
/// limiter per sub-band index, airtime in microseconds as its permits
/// ([`airtime_permits`](super::airtime_permits)), so that a waiter on any
/// limiter waits for a transmission slot (see [the
/// guide](super::guide#waiting-for-a-transmission-slot)).
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
    pub(crate) bands: [SubBand; N],
    /// Per sub-band: the end of its time-off, in nanoseconds.
    pub(crate) free_at: [AtomicU64; N],
}

impl DutyCycleLimiter<6> {
    tollgate_core::const_fn_unless_loom! {
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
                    });
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
    /// and `now`. See [restoring](super#saving-and-restoring-across-a-reset-or-deep-sleep).
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
pub(super) fn saved_micros(left: Duration) -> u32 {
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
