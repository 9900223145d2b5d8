//! # tollgate-duty-cycle
//!
//! Radio duty-cycle limits: airtime per sub-band, as ETSI EN 300 220
//! regulates the 863–870 MHz band in Europe (LoRaWAN's EU868). `no_std`,
//! no allocation, one `static` per radio. Use it as `tollgate::duty_cycle`
//! (the `tollgate` crate re-exports it; add `tollgate`, not this crate).
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
//! To **wait** for a slot rather than poll, use the limiter as what it also
//! is, the core's [`Limiter`](tollgate_core::Limiter) per sub-band (the
//! key is the sub-band's index, the permits are the frame's airtime in
//! microseconds: [`airtime_permits`]): any waiter on a limiter then waits
//! for a transmission slot as it waits for a bucket, and resolves to the
//! instant the frame was admitted. See
//! [waiting for a slot](guide#waiting-for-a-transmission-slot).
//!
//! # Guide
//!
//! The [`guide`] has one section each on
//! [enforcement: the LoRaWAN time-off](guide#enforcement-the-lorawan-time-off),
//! [sub-bands and channels](guide#sub-bands-and-channels),
//! [waiting for a transmission slot](guide#waiting-for-a-transmission-slot),
//! [saving and restoring across a reset or deep sleep](guide#saving-and-restoring-across-a-reset-or-deep-sleep)
//! and [concurrency and time](guide#concurrency-and-time).

#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_debug_implementations)]
#![doc(test(attr(deny(unused_imports))))]

#[cfg(test)]
extern crate std;

mod airtime;
mod band;
mod error;
pub mod eu868;
pub mod guide;
mod limiter;
mod saved;
#[cfg(all(test, not(loom)))]
mod tests;

pub use airtime::airtime_permits;
pub use band::{DutyCycle, OBSERVATION_PERIOD, SubBand};
pub use error::{ConfigError, RestoreError, TransmitError};
pub use limiter::{DutyCycleLimiter, Transmit};
pub use saved::{Downtime, SavedState};
