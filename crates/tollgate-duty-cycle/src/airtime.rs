//! The duty-cycle limiter as the core's [`Limiter`]: keyed by sub-band,
//! airtime in microseconds as the permits. Whatever waits on a limiter
//! (the core's [`Wait`](tollgate_core::wait::Wait), and a runtime's waiter
//! built on it) then waits for a transmission slot the way it waits for a
//! bucket.

use core::time::Duration;

use super::{DutyCycleLimiter, Transmit};
use tollgate_core::limiter::{Grant, Limiter};
use tollgate_core::refusal::Refusal;
use tollgate_core::snapshot::Snapshot;
use tollgate_core::sync::Ordering;
use tollgate_core::time::{Timestamp, duration_to_nanos};

/// Nanoseconds of airtime in one permit of the [`Limiter`] view.
const NANOS_PER_PERMIT: u64 = 1_000;

/// The permits a frame of `airtime` costs when the duty-cycle limiter is
/// used as a [`Limiter`] (to wait for a slot): its airtime in whole
/// microseconds, rounded **up** (a frame is never counted shorter than it
/// is), saturating at `u32::MAX` (more than any sub-band allows: a
/// request that can never succeed).
///
/// ```
/// use core::time::Duration;
/// use tollgate::duty_cycle::airtime_permits;
///
/// assert_eq!(airtime_permits(Duration::from_millis(500)), 500_000);
/// assert_eq!(airtime_permits(Duration::from_nanos(1_000_001)), 1_001);
/// assert_eq!(airtime_permits(Duration::from_secs(1 << 40)), u32::MAX);
/// ```
#[must_use]
pub const fn airtime_permits(airtime: Duration) -> u32 {
    let micros = duration_to_nanos(airtime).div_ceil(NANOS_PER_PERMIT);
    if micros > u32::MAX as u64 {
        u32::MAX
    } else {
        micros as u32
    }
}

/// The airtime of `permits`.
fn airtime_of(permits: u32) -> Duration {
    Duration::from_micros(u64::from(permits))
}

/// The longest frame in permits: whole microseconds, rounded down, so that
/// `n` permits fit exactly when `n` µs fit.
fn max_permits(max_airtime: Duration) -> u32 {
    let micros = duration_to_nanos(max_airtime) / NANOS_PER_PERMIT;
    u32::try_from(micros).unwrap_or(u32::MAX)
}

/// The duty-cycle limiter is a limiter per sub-band: the key is the
/// sub-band's index ([`band_index`](DutyCycleLimiter::band_index),
/// [`Eu868::index`](crate::eu868::Eu868::index)) and a request's permits
/// are the frame's airtime in microseconds ([`airtime_permits`]). What
/// waits on any [`Limiter`] waits for a transmission slot with it: the
/// core's [`Wait`](tollgate_core::wait::Wait) on a clock that can sleep,
/// resolving to the instant the frame was admitted (the time-off runs from
/// it), with deadlines; dropped before it resolves, it records nothing.
///
/// ```
/// use core::time::Duration;
/// use tollgate::duty_cycle::{airtime_permits, eu868::Eu868, DutyCycleLimiter};
/// use tollgate::wait::{Wait, WaitError};
/// # use core::future::{ready, Ready};
/// # use tollgate::wait::Sleep;
/// # use tollgate::{Clock, ManualClock, Timestamp};
/// # // A test clock whose "sleep" jumps to the wake-up time at once.
/// # struct Jump(ManualClock);
/// # impl Clock for Jump {
/// #     fn now(&self) -> Timestamp { self.0.now() }
/// #     fn resolution(&self) -> Duration { self.0.resolution() }
/// # }
/// # impl Sleep for Jump {
/// #     type Timer = Ready<()>;
/// #     fn sleep_until(&self, at: Timestamp) -> Ready<()> {
/// #         self.0.set(at);
/// #         ready(())
/// #     }
/// # }
///
/// static RADIO: DutyCycleLimiter<6> = DutyCycleLimiter::eu868();
/// let clock = Jump(ManualClock::new()); // a clock that can sleep (a runtime's)
/// let m = Eu868::M.index(); // 1 %
/// let frame = airtime_permits(Duration::from_millis(500));
///
/// embassy_futures::block_on(async {
///     let first = Wait::new(&clock, &RADIO, &m, frame, true).await?; // at once
///     // 0.5 s at 1 %: the next frame starts 50 s after this one
///     let second = Wait::new(&clock, &RADIO, &m, frame, true).await?;
///     assert_eq!(second - first, Duration::from_secs(50));
///     // longer than M's 36 s an hour: never, so an error at once
///     let too_long = airtime_permits(Duration::from_secs(37));
///     assert!(matches!(
///         Wait::new(&clock, &RADIO, &m, too_long, true).await,
///         Err(WaitError::CapacityExceeded(_))
///     ));
///     Ok::<(), WaitError>(())
/// })?;
/// # Ok::<(), WaitError>(())
/// ```
///
/// Each method answers as the inherent ones do, in permits:
///
/// - [`try_acquire_n`](Limiter::try_acquire_n) is
///   [`try_transmit`](DutyCycleLimiter::try_transmit) of `n` µs (its
///   [`Grant::full_at`] is the end of the time-off); a frame that must
///   wait is a [`Refusal`] with the time until the sub-band is free; a
///   frame longer than the sub-band ever allows, or an unknown sub-band,
///   is a refusal that [`is_never`](Refusal::is_never). `n = 0` is a peek,
///   admitted on any known sub-band.
/// - [`capacity`](Limiter::capacity) is the longest frame
///   ([`SubBand::max_airtime`](crate::SubBand::max_airtime)) in whole µs
///   (0 for an unknown sub-band).
/// - [`snapshot`](Limiter::snapshot): `limit` is that capacity,
///   `remaining` all of it while the sub-band is free and 0 during its
///   time-off, `reset_after` the time until the time-off ends.
/// - [`cancel`](Limiter::cancel) takes back a frame's time-off, as if the
///   frame was never admitted, while it is the sub-band's last one.
/// - [`refund`](Limiter::refund) of `n` µs (the frame was that much
///   shorter) shortens the time-off by `⌊n / d⌋`, never to before `now`:
///   never less than a frame of the shorter airtime leaves.
/// - [`required_resolution`](Limiter::required_resolution) is zero: a
///   coarser clock only wakes a waiter later, never early.
impl<const N: usize> Limiter<usize> for DutyCycleLimiter<N> {
    type Permit = Grant;

    fn capacity(&self, band: &usize) -> u32 {
        self.bands
            .get(*band)
            .map_or(0, |b| max_permits(b.max_airtime))
    }

    fn try_acquire_n(
        &self,
        band: &usize,
        n: u32,
        now: Timestamp,
    ) -> Result<Grant, Refusal<'static>> {
        if n == 0 {
            // a peek: admitted, nothing recorded
            let snapshot = self.snapshot(band, now);
            return if *band < N {
                Ok(Grant::new(0, now + snapshot.reset_after()))
            } else {
                Err(Refusal::never(0, snapshot))
            };
        }
        match self.try_transmit(*band, airtime_of(n), now) {
            Ok(Transmit::Allowed { free_at }) => Ok(Grant::new(n, free_at)),
            Ok(Transmit::Wait { retry_after }) => {
                let limit = self.capacity(band);
                Err(Refusal::new(
                    retry_after,
                    Snapshot::new(limit, 0, retry_after),
                ))
            }
            // an unknown sub-band or a frame that never fits
            Err(_) => Err(Refusal::never(n, self.snapshot(band, now))),
        }
    }

    fn cancel(&self, band: &usize, grant: Grant, _now: Timestamp) {
        let (Some(config), Some(slot)) = (self.bands.get(*band), self.free_at.get(*band)) else {
            return;
        };
        if grant.permits() == 0 {
            return;
        }
        let cycle = config
            .duty_cycle
            .cycle_nanos(u64::from(grant.permits()) * NANOS_PER_PERMIT);
        let end = grant.full_at().as_nanos();
        // Back to the admission's `now`, unless a later frame has been
        // admitted since (then this one's time-off was already served).
        let _ = slot.compare_exchange(
            end,
            end.saturating_sub(cycle),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    fn refund(&self, band: &usize, n: u32, now: Timestamp) {
        let (Some(config), Some(slot)) = (self.bands.get(*band), self.free_at.get(*band)) else {
            return;
        };
        let credit = config
            .duty_cycle
            .credit_nanos(u64::from(n) * NANOS_PER_PERMIT);
        let now_ns = now.as_nanos();
        let mut current = slot.load(Ordering::Relaxed);
        while current > now_ns {
            let shorter = current.saturating_sub(credit).max(now_ns);
            match slot.compare_exchange_weak(current, shorter, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(seen) => current = seen,
            }
        }
    }

    fn snapshot(&self, band: &usize, now: Timestamp) -> Snapshot {
        let (Some(config), Some(slot)) = (self.bands.get(*band), self.free_at.get(*band)) else {
            return Snapshot::from_nanos(0, 0, 0);
        };
        let limit = max_permits(config.max_airtime);
        let left = Timestamp::from_nanos(slot.load(Ordering::Relaxed)) - now;
        let remaining = if left.is_zero() { limit } else { 0 };
        Snapshot::new(limit, remaining, left)
    }

    fn time_until_ready(
        &self,
        band: &usize,
        n: u32,
        now: Timestamp,
    ) -> Result<Duration, Refusal<'static>> {
        let snapshot = self.snapshot(band, now);
        if *band >= N || n > snapshot.limit() {
            return Err(Refusal::never(n, snapshot));
        }
        Ok(if n == 0 {
            Duration::ZERO
        } else {
            snapshot.reset_after()
        })
    }
}
