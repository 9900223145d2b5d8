//! What can go wrong: building, transmitting, restoring.

use core::fmt;
use core::time::Duration;

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
/// wait is not an error: it is [`Transmit::Wait`](super::Transmit::Wait)).
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
