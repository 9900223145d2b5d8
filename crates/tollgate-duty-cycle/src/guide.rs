//! The duty-cycle limiter, part by part: how it enforces the LoRaWAN
//! time-off, sub-bands and channels, waiting for a transmission slot,
//! saving its state across a reset or deep sleep, and concurrency and
//! time. The [crate root](crate) has the example and the types.
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
//!   be sent ([`TransmitError::AirtimeTooLong`](crate::TransmitError::AirtimeTooLong)), so no time-off is ever
//!   longer than an hour.
//!
//! If the reading of the regulation that applies to you counts every
//! sliding hour with no excess at all, build the sub-band with
//! [`SubBand::with_hard_hourly_cap`](crate::SubBand::with_hard_hourly_cap) and the longest frame you will send:
//! it lowers the duty cycle just enough (`d' = (d·3600 s − A) / (3600 s −
//! A)`) and refuses longer frames, and then no hour ever holds more than
//! `d · 3600 s`.
//!
//! # Sub-bands and channels
//!
//! [`DutyCycleLimiter::band_index`](crate::DutyCycleLimiter::band_index) finds a channel's sub-band from its
//! centre frequency and bandwidth: the whole channel must lie inside the
//! sub-band, edges included (ETSI limits the occupied bandwidth, not the
//! carrier). A carrier given with bandwidth 0 exactly on the edge between
//! two sub-bands is counted in the stricter one.
//!
//! # Waiting for a transmission slot
//!
//! [`DutyCycleLimiter`](crate::DutyCycleLimiter) is also the core's
//! [`Limiter`](tollgate_core::Limiter) over its sub-bands (`Limiter<usize>`):
//! the key is the sub-band's index, a request's permits are the frame's
//! airtime in whole microseconds ([`airtime_permits`](crate::airtime_permits)
//! rounds up; a frame of the longest airtime any sub-band allows, one hour,
//! is 3.6·10⁹ µs, within a `u32`). Whatever waits on a limiter then waits
//! for a slot through the same path as for a bucket, with no loop to write:
//! the core's [`Wait`](tollgate_core::wait::Wait) over a clock that can
//! sleep, and a runtime layer's waiter built on it (`tollgate`'s guide,
//! *the layers*, shows the one for firmware).
//!
//! - It checks; during the sub-band's time-off it sleeps until the time-off
//!   ends (rounded up to the clock's tick) and checks again.
//! - It resolves to the admission instant: the `now` of the check that
//!   recorded the frame, from which its time-off runs.
//! - A frame that can never be sent (longer than the sub-band ever allows,
//!   or an unknown sub-band index) is
//!   [`WaitError::CapacityExceeded`](tollgate_core::wait::WaitError::CapacityExceeded)
//!   at once, never a wait forever.
//! - A deadline ([`with_deadline`](tollgate_core::wait::Wait::with_deadline),
//!   [`with_timeout`](tollgate_core::wait::Wait::with_timeout)) gives up
//!   with [`WaitError::Timeout`](tollgate_core::wait::WaitError::Timeout) as
//!   soon as the time-off shows it cannot be met, and records nothing.
//! - Dropped before it resolves, a wait records nothing (it is
//!   cancel-safe). Waiters do not queue: whichever checks first after a
//!   time-off ends sends, and every frame keeps to the time-off.
//!
//! ```
//! use core::time::Duration;
//! use tollgate::duty_cycle::{airtime_permits, eu868::Eu868, DutyCycleLimiter};
//! use tollgate::wait::{Wait, WaitError};
//! use tollgate::{Clock, Timestamp};
//! # use core::future::{ready, Ready};
//! # use tollgate::wait::Sleep;
//! use tollgate::ManualClock;
//! # // A test clock whose "sleep" jumps to the wake-up time at once.
//! # struct Jump(ManualClock);
//! # impl Clock for Jump {
//! #     fn now(&self) -> Timestamp { self.0.now() }
//! #     fn resolution(&self) -> Duration { self.0.resolution() }
//! # }
//! # impl Sleep for Jump {
//! #     type Timer = Ready<()>;
//! #     fn sleep_until(&self, at: Timestamp) -> Ready<()> {
//! #         self.0.set(at);
//! #         ready(())
//! #     }
//! # }
//!
//! let clock = Jump(ManualClock::new()); // a clock that can sleep (a runtime's)
//! let radio = DutyCycleLimiter::eu868();
//! let p = Eu868::P.index(); // 10 %: a frame of 2 ms, then 18 ms of time-off
//! let frame = airtime_permits(Duration::from_millis(2));
//! embassy_futures::block_on(async {
//!     let sent = Wait::new(&clock, &radio, &p, frame, true).await?;
//!     // the next slot is 20 ms after `sent`: a 10 ms deadline gives up at once
//!     let hurried = Wait::new(&clock, &radio, &p, frame, true)
//!         .with_timeout(Duration::from_millis(10))
//!         .await;
//!     let Err(WaitError::Timeout { ready_at, .. }) = hurried else {
//!         panic!("expected a timeout, got {hurried:?}");
//!     };
//!     assert_eq!(ready_at, sent + Duration::from_millis(20));
//!     assert_eq!(clock.now(), sent); // it did not sleep
//!     // a 20 ms one is met: the frame goes out on the end of the time-off
//!     let next = Wait::new(&clock, &radio, &p, frame, true)
//!         .with_timeout(Duration::from_millis(20))
//!         .await?;
//!     assert_eq!(next, sent + Duration::from_millis(20));
//!     Ok::<(), WaitError>(())
//! })?;
//! # Ok::<(), WaitError>(())
//! ```
//!
//! # Saving and restoring across a reset or deep sleep
//!
//! The obligations (time-off still to serve, per sub-band) must survive a
//! reset or a deep sleep that stops the clock, or the device would
//! transmit again too early. [`DutyCycleLimiter::save`](crate::DutyCycleLimiter::save) records, for each
//! sub-band, the time-off remaining at the moment of the save (rounded
//! **up** to the microsecond; never more than an hour, so 4 bytes each),
//! and the clock reading it was saved at; [`SavedState::encode`](crate::SavedState::encode) writes it
//! as `12 + 4·N` bytes (36 for EU868) with a version byte and a CRC.
//!
//! [`DutyCycleLimiter::restore`](crate::DutyCycleLimiter::restore) rebuilds the limiter on the new clock
//! (whose zero may be the reset) by the **conservative rule**: each
//! sub-band's time-off resumes from `now` with what was left at the save,
//! minus only the downtime the caller can vouch for ([`Downtime`](crate::Downtime)):
//! none ([`Downtime::Unknown`](crate::Downtime::Unknown)), a lower bound measured by something that
//! kept running ([`Downtime::AtLeast`](crate::Downtime::AtLeast), e.g. an RTC or the wake-up timer
//! that ended the sleep), or the difference of two readings of one clock
//! that survived ([`Downtime::SameClock`](crate::Downtime::SameClock)). Counting too little downtime
//! only delays the next frame; the restored limiter never allows a frame
//! before the limiter that was saved would have. With no saved state at
//! all after an unexpected reset, [`DutyCycleLimiter::after_unknown_reset`](crate::DutyCycleLimiter::after_unknown_reset)
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
//! so a `static` limiter can be shared by tasks, threads and interrupt
//! handlers (on a 32-bit microcontroller the `AtomicU64` is a critical
//! section, as a bucket's is: the firmware provides the implementation).
//! `now` is a [`Timestamp`](tollgate_core::Timestamp) on the caller's monotonic clock; a
//! clock that goes back keeps a sub-band silent until it catches up (it
//! never allows a frame early).
