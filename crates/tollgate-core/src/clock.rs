//! Monotonic clocks that read a [`Timestamp`].
//!
//! Every limiter operation takes `now` as a [`Timestamp`] (nanoseconds since
//! the clock's origin, 584 years of range). The [`Clock`] trait is how a
//! convenience type such as [`RateLimiter`](crate::RateLimiter) reads it; any
//! user type can implement it (a hardware timer, an RTOS tick counter, a
//! cached timestamp).
//!
//! A clock also reports its *resolution*: the smallest step it can show.
//! A limiter whose finest step (a GCRA emission interval, a window, a
//! segment) is finer than the resolution cannot be enforced as written, so
//! wherever a limiter meets a clock — [`RateLimiter`](crate::RateLimiter)
//! (direct or over a table), embassy's `acquire` on a
//! `static` bucket, a layer built on this crate — pairing them is a
//! [`ConfigError::ClockTooCoarse`](crate::ConfigError::ClockTooCoarse), never
//! a silent clamp.
//!
//! Clocks that go backwards (VM migration, suspend, a non-monotonic driver)
//! never make a limiter admit extra: see the heal rule in [`crate::gcra`].

pub use crate::ticks::TickRate;
use core::time::Duration;

use crate::sync::{AtomicU64, Ordering};
use crate::time::{Timestamp, duration_to_nanos};

/// A source of monotonic time.
///
/// Implementations should be monotonic; tollgate stays safe when they are
/// not (it never admits extra and heals after a large backwards jump), but
/// a clock that jumps back makes limiters refuse until it catches up or heals.
pub trait Clock {
    /// The current time, as nanoseconds since the clock's fixed origin.
    fn now(&self) -> Timestamp;

    /// The smallest step by which [`now`](Clock::now) can advance (at least
    /// 1 ns). Defaults to 1 ns.
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }
}

impl<C: Clock + ?Sized> Clock for &C {
    #[inline]
    fn now(&self) -> Timestamp {
        (**self).now()
    }
    fn resolution(&self) -> Duration {
        (**self).resolution()
    }
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
/// use tollgate::{Clock, ManualClock, Timestamp};
/// use core::time::Duration;
///
/// let clock = ManualClock::new();
/// clock.advance(Duration::from_millis(250));
/// assert_eq!(clock.now(), Timestamp::from_millis(250));
/// ```
#[derive(Debug)]
pub struct ManualClock {
    now: AtomicU64,
    resolution: u64,
}

impl ManualClock {
    crate::sync::const_fn_unless_loom! {
        /// A clock reading [`Timestamp::ZERO`], with 1 ns resolution.
        #[must_use]
        pub fn new() -> Self {
            Self { now: AtomicU64::new(0), resolution: 1 }
        }
    }

    crate::sync::const_fn_unless_loom! {
        /// A clock reading `start`, with 1 ns resolution.
        #[must_use]
        pub fn starting_at(start: Timestamp) -> Self {
            Self { now: AtomicU64::new(start.as_nanos()), resolution: 1 }
        }
    }

    crate::sync::const_fn_unless_loom! {
        /// A clock reading `start` that reports `resolution` as its
        /// resolution (under 1 ns is taken as 1 ns). Useful to simulate a
        /// tick-based clock.
        #[must_use]
        pub fn with_resolution(start: Timestamp, resolution: Duration) -> Self {
            let resolution = duration_to_nanos(resolution);
            let resolution = if resolution == 0 { 1 } else { resolution };
            Self { now: AtomicU64::new(start.as_nanos()), resolution }
        }
    }

    /// Moves the clock forward by `by` (saturating at [`Timestamp::MAX`]).
    pub fn advance(&self, by: Duration) {
        let by = duration_to_nanos(by);
        // a saturating add: no wrap even at the end of time
        let _ = crate::sync::update_u64(&self.now, |t| Some(t.saturating_add(by)));
    }

    /// Sets the clock to `now`, forwards or backwards.
    pub fn set(&self, now: Timestamp) {
        // A swap rather than a store: the same effect, but a read-modify-write
        // like `advance`, which loom 0.7 models correctly against it (a plain
        // store racing an RMW yields impossible histories there, loom issue
        // #254), so the loom model of `set` racing `advance` is sound.
        let _ = self.now.swap(now.as_nanos(), Ordering::Relaxed);
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    #[inline]
    fn now(&self) -> Timestamp {
        Timestamp::from_nanos(self.now.load(Ordering::Relaxed))
    }
    fn resolution(&self) -> Duration {
        Duration::from_nanos(self.resolution)
    }
}

#[cfg(feature = "std")]
mod std_clock {
    extern crate std;
    use core::time::Duration;
    use std::sync::{Arc, OnceLock};
    use std::time::Instant;

    use super::Clock;
    use crate::time::{Timestamp, duration_to_nanos};

    impl<C: Clock + ?Sized> Clock for Arc<C> {
        #[inline]
        fn now(&self) -> Timestamp {
            (**self).now()
        }
        fn resolution(&self) -> Duration {
            (**self).resolution()
        }
    }

    /// The process-wide origin of every std clock.
    static ORIGIN: OnceLock<Instant> = OnceLock::new();

    /// How far before the first clock of the process its origin lies (see
    /// [`process_origin`]).
    const ORIGIN_MARGIN: Duration = Duration::from_secs(3600);

    /// The one origin of every std clock ([`StdClock`], `CoarseClock`,
    /// `QuantaClock`, and the clocks of the crates built on this one): fixed when the first of them is made,
    /// [`ORIGIN_MARGIN`] before that moment (less where the platform's
    /// `Instant` cannot go back that far, as on a Windows machine booted
    /// within the hour).
    ///
    /// Why the margin: an async runtime's paused (test) time starts at the
    /// real time the runtime was built and then moves only when the test
    /// advances it, so it can read *earlier* than a later real-time
    /// reading. Were the origin that later reading (another thread's first
    /// `StdClock`, say), a clock over that runtime would read zero, standing
    /// still, until the paused time caught up, and a paused test would see its time
    /// shortened by the difference. An hour of margin covers any paused
    /// runtime that has not lagged the real clock by an hour.
    pub(crate) fn process_origin() -> Instant {
        *ORIGIN.get_or_init(|| {
            let now = Instant::now();
            [
                ORIGIN_MARGIN,
                Duration::from_secs(60),
                Duration::from_secs(1),
            ]
            .into_iter()
            .find_map(|margin| now.checked_sub(margin))
            .unwrap_or(now)
        })
    }

    /// The operating system's monotonic clock (`std::time::Instant`),
    /// counted from one origin shared by the whole process and by every
    /// std clock of tollgate ([`CoarseClock`](super::CoarseClock),
    /// `QuantaClock` and the async runtimes' clocks count from it too).
    ///
    /// Every `StdClock` agrees with every other, so a timestamp read from
    /// one can be given to a limiter that another reads (a fresh
    /// `StdClock::new()` per call is fine, if wasteful). The origin is
    /// fixed when the process makes its first std clock, an hour before
    /// that moment (so that a runtime's paused test time, which can lag the real
    /// clock, never reads before it; less where the platform's `Instant`
    /// cannot go back an hour): a timestamp is therefore not "time since
    /// the process started", only a point on the process's one time line.
    /// Resolution is reported as 1 ns (what `Instant` represents on Linux,
    /// macOS and Windows' QueryPerformanceCounter-based clock).
    ///
    /// ```
    /// use tollgate::clock::StdClock;
    /// use tollgate::{Bucket, Clock, Quota};
    ///
    /// let bucket = Bucket::token_bucket(Quota::per_second(1_000)?.with_burst(1)?);
    /// assert!(bucket.check(StdClock::new().now()).is_ok());
    /// std::thread::sleep(std::time::Duration::from_millis(2));
    /// // another StdClock reads the same time line: the bucket has refilled
    /// assert!(bucket.check(StdClock::new().now()).is_ok());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[derive(Debug, Clone, Copy)]
    pub struct StdClock {
        origin: Instant,
    }

    impl StdClock {
        /// The process's clock (every std clock shares one origin).
        #[must_use]
        pub fn new() -> Self {
            Self {
                origin: process_origin(),
            }
        }

        /// The `Instant` that reads as [`Timestamp::ZERO`].
        #[must_use]
        pub fn origin(&self) -> Instant {
            self.origin
        }

        /// The timestamp of `instant` on this clock ([`Timestamp::ZERO`] for
        /// an instant before the origin).
        #[must_use]
        #[inline]
        pub fn timestamp(&self, instant: Instant) -> Timestamp {
            Timestamp::from_nanos(duration_to_nanos(
                instant.saturating_duration_since(self.origin),
            ))
        }
    }

    impl Default for StdClock {
        fn default() -> Self {
            Self::new()
        }
    }

    impl Clock for StdClock {
        #[inline]
        fn now(&self) -> Timestamp {
            // Saturates after 584 years of uptime rather than wrapping.
            self.timestamp(Instant::now())
        }
    }
}

#[cfg(feature = "std")]
mod coarse {
    extern crate std;
    use std::sync::{Arc, Weak};
    use std::thread;
    use std::time::Duration;

    use super::{Clock, StdClock};
    use crate::sync::{AtomicU64, Ordering};
    use crate::time::{Timestamp, duration_to_nanos};

    /// A cached timestamp refreshed by a background thread every `period`:
    /// reading it is one relaxed atomic load, for callers that trade
    /// precision for speed.
    ///
    /// Its honest [`resolution`](Clock::resolution) is the refresh period,
    /// so a quota whose interval is finer than the period is rejected when
    /// paired with it. It reads the same time line as [`StdClock`] (the
    /// process-wide origin every std clock shares), one period behind at
    /// most. Clones share one timestamp and one thread; the
    /// thread ends within one period after the last clone is dropped.
    ///
    /// The timestamp may lag the true time by up to one period (more if the
    /// thread is descheduled); a limiter on it never admits extra, it only
    /// sees time advance in steps.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::clock::CoarseClock;
    /// use tollgate::Clock;
    ///
    /// let clock = CoarseClock::start(Duration::from_millis(1))?;
    /// assert_eq!(clock.resolution(), Duration::from_millis(1));
    /// let a = clock.now();
    /// // the refresh thread moves it every 1 ms (later on a busy machine)
    /// while clock.now() == a {
    ///     std::thread::sleep(Duration::from_millis(1));
    /// }
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
            let now = Arc::new(AtomicU64::new(source.now().as_nanos()));
            let weak: Weak<AtomicU64> = Arc::downgrade(&now);
            thread::Builder::new()
                .name("tollgate-coarse-clock".into())
                .spawn(move || {
                    while let Some(shared) = weak.upgrade() {
                        shared.store(source.now().as_nanos(), Ordering::Relaxed);
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
        fn now(&self) -> Timestamp {
            Timestamp::from_nanos(self.now.load(Ordering::Relaxed))
        }
        fn resolution(&self) -> Duration {
            Duration::from_nanos(self.period)
        }
    }
}

#[cfg(feature = "std")]
pub use coarse::CoarseClock;
#[cfg(feature = "std")]
pub use std_clock::StdClock;

#[cfg(feature = "quanta")]
mod tsc {
    extern crate std;
    use std::sync::OnceLock;
    use std::time::Instant;

    use super::{Clock, StdClock};
    use crate::time::Timestamp;

    /// Where every `QuantaClock` meets the process's time line: a raw TSC
    /// reading and the [`StdClock`] timestamp of the same moment.
    #[derive(Debug, Clone, Copy)]
    struct Anchor {
        raw: u64,
        at: u64,
    }

    static ANCHOR: OnceLock<Anchor> = OnceLock::new();

    /// Reads the TSC between two reads of the OS clock and takes the
    /// midpoint of those as its time: the anchor is off by at most half
    /// the (sub-microsecond) gap.
    fn anchor(clock: &quanta::Clock) -> Anchor {
        *ANCHOR.get_or_init(|| {
            let std_clock = StdClock::new();
            let before = Instant::now();
            let raw = clock.raw();
            let after = Instant::now();
            let mid = before + (after - before) / 2;
            Anchor {
                raw,
                at: std_clock.timestamp(mid).as_nanos(),
            }
        })
    }

    /// A TSC-based clock through the `quanta` crate (feature `quanta`), the
    /// clock governor uses: cheaper to read than `std::time::Instant` on
    /// x86_64 with an invariant TSC.
    ///
    /// It counts from the process origin every std clock shares (see
    /// [`StdClock`]): the first `QuantaClock` of the process anchors the
    /// TSC to that time line once (one TSC read between two OS clock
    /// reads), and every reading is that anchor plus the TSC ticks since,
    /// scaled — one TSC read, a multiply and a subtraction (the anchor's
    /// offset is worked out once, when the clock is made). All `QuantaClock`s
    /// share the anchor, so they agree exactly with each other; with a
    /// [`StdClock`] they agree at the anchor and then drift apart at
    /// quanta's rate error (below).
    ///
    /// Caveat: TSCs of different cores or sockets can disagree slightly, so
    /// readings from two threads may not be monotonic with respect to each
    /// other. tollgate stays safe under that: a reading behind the bucket's
    /// state only makes the bucket look fuller (no extra admission), and
    /// only a jump back larger than the heal threshold resets the bucket.
    /// A TSC reading before the anchor (another core's slightly behind)
    /// reads as that much before the anchor's time, which is at least an
    /// hour after the origin.
    ///
    /// Rate: `quanta` turns TSC ticks into nanoseconds by a ratio it
    /// calibrates once per process against the OS monotonic clock (over
    /// about a millisecond). So this clock and `Instant` run at slightly
    /// different rates: on our 2-core CI machine, 96 processes calibrating
    /// 16 at a time beside two busy loops ran between 1.7e-5 slower and
    /// 3.9e-5 faster than `Instant`. A limit holds exactly on the clock it
    /// reads; measured on `Instant`, a bucket on this clock may admit that
    /// fraction more over a long interval (at 4e-5, one permit more per
    /// 25,000 permits). The same fraction is how far its timestamps drift
    /// from a [`StdClock`]'s (at 4e-5, 0.14 s an hour after the anchor):
    /// the two share an origin, so a mix is close, but a limiter should
    /// still read one clock. Use [`StdClock`] where a limit must hold to
    /// the OS clock.
    ///
    /// The calibration runs in `quanta`'s own code, so it is only as good
    /// as that code is optimised: in a debug build, 48 processes beside a
    /// compiler on the same 2 cores calibrated up to 1.95e-4 fast; with
    /// `quanta` alone optimised, at most 2.4e-5. A debug build that needs
    /// the better figure can optimise just that dependency:
    ///
    /// ```toml
    /// [profile.dev.package.quanta]
    /// opt-level = 3
    /// ```
    ///
    /// ```
    /// use tollgate::clock::{QuantaClock, StdClock};
    /// use tollgate::Clock;
    ///
    /// let tsc = QuantaClock::new();
    /// let os = StdClock::new();
    /// // one time line: readings taken together are close (microseconds
    /// // apart, plus the rate drift since the anchor)
    /// let (a, b) = (tsc.now(), os.now());
    /// assert!(a.max(b) - a.min(b) < std::time::Duration::from_millis(50));
    /// ```
    #[derive(Debug, Clone)]
    pub struct QuantaClock {
        clock: quanta::Clock,
        /// The TSC's scaled reading at the anchor less the anchor's time,
        /// modulo 2⁶⁴: a reading is the scaled TSC less this.
        offset: u64,
    }

    impl QuantaClock {
        /// The TSC clock, on the process's time line (see the type's docs).
        #[must_use]
        pub fn new() -> Self {
            let clock = quanta::Clock::new();
            let anchor = anchor(&clock);
            // wrapping: the TSC's own count may be smaller than the
            // anchor's time (a machine booted less than an hour ago); the
            // difference of two readings is right modulo 2⁶⁴ all the same
            let offset = clock.delta_as_nanos(0, anchor.raw).wrapping_sub(anchor.at);
            Self { clock, offset }
        }
    }

    impl Default for QuantaClock {
        fn default() -> Self {
            Self::new()
        }
    }

    impl Clock for QuantaClock {
        #[inline]
        fn now(&self) -> Timestamp {
            // the anchor's time plus the scaled ticks since the anchor:
            // right whenever the result is below 2⁶⁴ (it is at least an
            // hour after the origin for any reading near the anchor)
            let scaled = self.clock.delta_as_nanos(0, self.clock.raw());
            Timestamp::from_nanos(scaled.wrapping_sub(self.offset))
        }
    }
}

#[cfg(feature = "quanta")]
pub use tsc::QuantaClock;
