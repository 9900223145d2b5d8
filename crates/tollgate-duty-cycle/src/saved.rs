//! Saving a limiter's obligations across a reset, and restoring them.

use core::time::Duration;

use super::{OBSERVATION_PERIOD, RestoreError};
use tollgate_core::time::Timestamp;

/// How much time passed between a [`save`](super::DutyCycleLimiter::save) and a
/// [`restore`](super::DutyCycleLimiter::restore), as far as the caller can vouch.
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

/// The saved obligations of a [`DutyCycleLimiter`](super::DutyCycleLimiter) of `N` sub-bands:
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
    pub(super) saved_at: Timestamp,
    pub(super) remaining_us: [u32; N],
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
    /// [`DutyCycleLimiter::after_unknown_reset`](super::DutyCycleLimiter::after_unknown_reset) then).
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
pub(super) fn crc16(bytes: &[u8]) -> u16 {
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
