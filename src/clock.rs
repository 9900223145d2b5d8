//! Monotonic clocks in `u64` nanoseconds.
//!
//! Every limiter operation takes `now` as a plain `u64` count of nanoseconds
//! on some monotonic clock (584 years of range). The [`Clock`] trait is how a
//! convenience type such as [`RateLimiter`](crate::RateLimiter) reads it; any
//! user type can implement it (a hardware timer, an RTOS tick counter, a
//! cached timestamp).
//!
//! A clock also reports its *resolution*: the smallest step it can show.
//! A quota whose emission interval is finer than the resolution cannot be
//! enforced as written, so pairing them is a construction error
//! ([`QuotaError::BelowClockResolution`](crate::QuotaError::BelowClockResolution)),
//! never a silent clamp.
//!
//! Clocks that go backwards (VM migration, suspend, a non-monotonic driver)
//! never make a limiter admit extra: see the heal rule in [`crate::gcra`].

use core::time::Duration;

use crate::sync::{AtomicU64, Ordering};

/// A source of monotonic time in nanoseconds.
///
/// Implementations should be monotonic; tollgate stays safe when they are
/// not (it never admits extra and heals after a large backwards jump), but
/// a clock that jumps back makes limiters refuse until it catches up or heals.
pub trait Clock {
    /// The current time in nanoseconds since an arbitrary fixed origin.
    fn now(&self) -> u64;

    /// The smallest step, in nanoseconds, by which [`now`](Clock::now) can
    /// advance. Must be at least 1. Defaults to 1 ns.
    fn resolution(&self) -> u64 {
        1
    }
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now(&self) -> u64 {
        (**self).now()
    }
    fn resolution(&self) -> u64 {
        (**self).resolution()
    }
}

/// Converts a [`Duration`] to nanoseconds, saturating at `u64::MAX`
/// (about 584 years) instead of wrapping.
#[must_use]
pub const fn duration_to_nanos(d: Duration) -> u64 {
    let secs = d.as_secs();
    let ns = secs.saturating_mul(1_000_000_000);
    ns.saturating_add(d.subsec_nanos() as u64)
}

/// A clock that moves only when told to: for tests, simulations and
/// deterministic replays.
///
/// It is shareable across threads (`&ManualClock` is `Sync`; wrap it in an
/// `Arc` or keep it in a `static`) and works without `std`. Unlike a real
/// clock it may be [`set`](ManualClock::set) backwards, which is how the
/// backwards-clock tests are written.
///
/// ```
/// use tollgate::{Clock, ManualClock};
/// use core::time::Duration;
///
/// let clock = ManualClock::new(0);
/// clock.advance(Duration::from_millis(250));
/// assert_eq!(clock.now(), 250_000_000);
/// ```
#[derive(Debug)]
pub struct ManualClock {
    now: AtomicU64,
    resolution: u64,
}

impl ManualClock {
    crate::sync::const_fn_unless_loom! {
        /// A clock reading `start` nanoseconds, with 1 ns resolution.
        #[must_use]
        pub fn new(start: u64) -> Self {
            Self { now: AtomicU64::new(start), resolution: 1 }
        }
    }

    crate::sync::const_fn_unless_loom! {
        /// A clock reading `start` nanoseconds that reports `resolution`
        /// nanoseconds as its resolution (values under 1 are taken as 1).
        /// Useful to simulate a tick-based clock.
        #[must_use]
        pub fn with_resolution(start: u64, resolution: u64) -> Self {
            let resolution = if resolution == 0 { 1 } else { resolution };
            Self { now: AtomicU64::new(start), resolution }
        }
    }

    /// Moves the clock forward by `by` (saturating at `u64::MAX`).
    pub fn advance(&self, by: Duration) {
        self.advance_nanos(duration_to_nanos(by));
    }

    /// Moves the clock forward by `by` nanoseconds (saturating).
    pub fn advance_nanos(&self, by: u64) {
        // `fetch_update` with a saturating add: no wrap even at the end of time.
        let _ = self
            .now
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                Some(t.saturating_add(by))
            });
    }

    /// Sets the clock to `now` nanoseconds, forwards or backwards.
    pub fn set(&self, now: u64) {
        // A swap rather than a store: the same effect, but a read-modify-write
        // like `advance`, which loom 0.7 models correctly against it (a plain
        // store racing an RMW yields impossible histories there, tokio-rs/loom
        // #254), so the loom model of `set` racing `advance` is sound.
        let _ = self.now.swap(now, Ordering::Relaxed);
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new(0)
    }
}

impl Clock for ManualClock {
    fn now(&self) -> u64 {
        self.now.load(Ordering::Relaxed)
    }
    fn resolution(&self) -> u64 {
        self.resolution
    }
}

#[cfg(feature = "std")]
mod std_clock {
    extern crate std;
    use std::sync::Arc;
    use std::time::Instant;

    use super::Clock;

    impl<C: Clock + ?Sized> Clock for Arc<C> {
        fn now(&self) -> u64 {
            (**self).now()
        }
        fn resolution(&self) -> u64 {
            (**self).resolution()
        }
    }

    /// The operating system's monotonic clock (`std::time::Instant`),
    /// counted in nanoseconds from the moment the clock value was created.
    ///
    /// Copies share the origin, so they agree with each other. Resolution is
    /// reported as 1 ns (what `Instant` represents on Linux, macOS and
    /// Windows' QueryPerformanceCounter-based clock).
    ///
    /// ```
    /// use tollgate::{Clock, StdClock};
    /// let clock = StdClock::new();
    /// let a = clock.now();
    /// let b = clock.now();
    /// assert!(b >= a);
    /// ```
    #[derive(Debug, Clone, Copy)]
    pub struct StdClock {
        origin: Instant,
    }

    impl StdClock {
        /// A clock whose zero is now.
        #[must_use]
        pub fn new() -> Self {
            Self {
                origin: Instant::now(),
            }
        }

        /// The `Instant` that reads as zero on this clock.
        #[must_use]
        pub fn origin(&self) -> Instant {
            self.origin
        }
    }

    impl Default for StdClock {
        fn default() -> Self {
            Self::new()
        }
    }

    impl Clock for StdClock {
        fn now(&self) -> u64 {
            // Saturates after 584 years of uptime rather than wrapping.
            u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
        }
    }
}

#[cfg(feature = "std")]
mod coarse {
    extern crate std;
    use std::sync::{Arc, Weak};
    use std::thread;
    use std::time::Duration;

    use super::{duration_to_nanos, Clock, StdClock};
    use crate::sync::{AtomicU64, Ordering};

    /// A cached timestamp refreshed by a background thread every `period`:
    /// reading it is one relaxed atomic load, for callers that trade
    /// precision for speed.
    ///
    /// Its honest [`resolution`](Clock::resolution) is the refresh period,
    /// so a quota whose interval is finer than the period is rejected when
    /// paired with it. Clones share one timestamp and one thread; the
    /// thread ends within one period after the last clone is dropped.
    ///
    /// The timestamp may lag the true time by up to one period (more if the
    /// thread is descheduled); a limiter on it never admits extra, it only
    /// sees time advance in steps.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Clock, CoarseClock};
    ///
    /// let clock = CoarseClock::start(Duration::from_millis(1))?;
    /// assert_eq!(clock.resolution(), 1_000_000);
    /// let a = clock.now();
    /// std::thread::sleep(Duration::from_millis(5));
    /// assert!(clock.now() > a);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[derive(Debug, Clone)]
    pub struct CoarseClock {
        now: Arc<AtomicU64>,
        period: u64,
    }

    impl CoarseClock {
        /// Starts the refresh thread with the given period (at least 1 µs;
        /// shorter periods are raised to 1 µs).
        ///
        /// # Errors
        /// The operating system's error if the thread cannot be spawned.
        pub fn start(period: Duration) -> std::io::Result<Self> {
            let period = period.max(Duration::from_micros(1));
            let source = StdClock::new();
            let now = Arc::new(AtomicU64::new(source.now()));
            let weak: Weak<AtomicU64> = Arc::downgrade(&now);
            thread::Builder::new()
                .name("tollgate-coarse-clock".into())
                .spawn(move || {
                    while let Some(shared) = weak.upgrade() {
                        shared.store(source.now(), Ordering::Relaxed);
                        drop(shared);
                        thread::sleep(period);
                    }
                })?;
            Ok(Self {
                now,
                period: duration_to_nanos(period),
            })
        }
    }

    impl Clock for CoarseClock {
        #[inline]
        fn now(&self) -> u64 {
            self.now.load(Ordering::Relaxed)
        }
        fn resolution(&self) -> u64 {
            self.period
        }
    }
}

#[cfg(feature = "std")]
pub use coarse::CoarseClock;
#[cfg(feature = "std")]
pub use std_clock::StdClock;

#[cfg(feature = "quanta")]
mod tsc {
    use super::Clock;

    /// A TSC-based clock through the `quanta` crate (feature `quanta`), the
    /// clock governor uses: cheaper to read than `std::time::Instant` on
    /// x86_64 with an invariant TSC.
    ///
    /// Caveat: TSCs of different cores or sockets can disagree slightly, so
    /// readings from two threads may not be monotonic with respect to each
    /// other. tollgate stays safe under that: a reading behind the bucket's
    /// state only makes the bucket look fuller (no extra admission), and
    /// only a jump back larger than the heal threshold resets the bucket.
    /// Readings before the clock's origin saturate to 0.
    #[derive(Debug, Clone)]
    pub struct QuantaClock {
        clock: quanta::Clock,
        origin: u64,
    }

    impl QuantaClock {
        /// A clock whose zero is now.
        #[must_use]
        pub fn new() -> Self {
            let clock = quanta::Clock::new();
            let origin = clock.raw();
            Self { clock, origin }
        }
    }

    impl Default for QuantaClock {
        fn default() -> Self {
            Self::new()
        }
    }

    impl Clock for QuantaClock {
        #[inline]
        fn now(&self) -> u64 {
            // quanta returns 0 for a reading before the origin
            self.clock.delta_as_nanos(self.origin, self.clock.raw())
        }
    }
}

#[cfg(feature = "quanta")]
pub use tsc::QuantaClock;
