//! [`TokioClock`]: tokio's clock, as tollgate [`Timestamp`]s.

use core::time::Duration;

// Under loom (no tokio; see `super::timer`) the same clock on std's
// `Instant`: it is kept only so the queue's API compiles.
#[cfg(loom)]
use std::time::Instant;
#[cfg(not(loom))]
use tokio::time::Instant;

use tollgate_core::clock::Clock;
use tollgate_core::time::{Timestamp, duration_to_nanos};

/// tokio's monotonic clock (`tokio::time::Instant`), counted in nanoseconds
/// from the process origin every std clock shares (see
/// [`StdClock`](tollgate_core::clock::StdClock)).
///
/// It follows tokio's paused time: under `#[tokio::test(start_paused =
/// true)]` (or `tokio::time::pause`) it stands still until tokio advances
/// it, so a limiter driven by it and the timers of a
/// [`Queue`](crate::Queue) agree exactly. Without paused time it
/// reads the operating system's monotonic clock, and agrees with
/// [`StdClock`](tollgate_core::clock::StdClock) (a `tokio::time::Instant` is a
/// `std::time::Instant`; both are measured from the one origin). Under
/// paused time it reads tokio's time on that same time line: the real time
/// at which tokio's clock was paused (with `start_paused`, when the runtime
/// was built), plus what tokio has advanced since.
///
/// Every `TokioClock` agrees with every other. Resolution is reported as
/// 1 ns; tokio's *timers* fire on a 1 ms grid, which only delays a
/// wake-up, never an admission decision.
///
/// ```
/// use std::time::Duration;
/// use tollgate::{Clock, TokioClock};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let clock = TokioClock::new();
/// let start = clock.now();
/// tokio::time::sleep(Duration::from_millis(5)).await;
/// assert_eq!(clock.now() - start, Duration::from_millis(5)); // paused time: exact
/// // the timer instant of a timestamp, and back
/// let at = start + Duration::from_secs(1);
/// assert_eq!(clock.timestamp(clock.instant_at(at)), at);
/// # }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    /// The process origin, as a tokio `Instant`.
    origin: Instant,
}

impl TokioClock {
    /// tokio's clock on the process's time line (tokio's now: paused time
    /// if paused).
    #[must_use]
    pub fn new() -> Self {
        let origin = tollgate_core::clock::StdClock::new().origin();
        #[cfg(not(loom))]
        let origin = Instant::from_std(origin);
        Self { origin }
    }

    /// The `Instant` that reads as zero: the process origin, the same
    /// instant as [`StdClock::origin`](tollgate_core::clock::StdClock::origin).
    #[must_use]
    pub const fn origin(&self) -> Instant {
        self.origin
    }

    /// The `Instant` at which this clock reads `at`, or, for a time more
    /// than about 30 years from *now* (or beyond what the platform's
    /// `Instant` can represent), the instant 30 years from now: a timer set
    /// there means "never" in practice and, should it fire, is simply set
    /// again. Never an instant in the past for a time in the future, however
    /// long the clock has run.
    #[must_use]
    pub fn instant_at(&self, at: Timestamp) -> Instant {
        const FAR: Duration = Duration::from_secs(86_400 * 365 * 30);
        let now = Instant::now();
        let far = now
            .checked_add(FAR)
            .or_else(|| now.checked_add(Duration::from_secs(86_400)))
            .unwrap_or(now);
        match self.origin.checked_add(at.elapsed_since_origin()) {
            Some(instant) if instant <= far => instant,
            _ => far,
        }
    }

    /// What this clock reads at `instant` ([`Timestamp::ZERO`] before the
    /// origin, saturating at [`Timestamp::MAX`]).
    #[must_use]
    pub fn timestamp(&self, instant: Instant) -> Timestamp {
        Timestamp::from_nanos(duration_to_nanos(
            instant.saturating_duration_since(self.origin),
        ))
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    #[inline]
    fn now(&self) -> Timestamp {
        self.timestamp(Instant::now())
    }
}
