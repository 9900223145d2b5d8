//! [`TickGcra`], the configuration of a tick bucket: its constructors, its
//! heal threshold, its read-only accessors and its encoding as words.

use core::time::Duration;

#[cfg(doc)]
use super::TickState;
use crate::error::ConfigError;
use crate::gcra::BucketKind;
use crate::quota::Quota;
#[cfg(doc)]
use crate::time::Timestamp;

const NANOS_PER_SEC: u64 = 1_000_000_000;

/// The largest `burst × interval + heal threshold`, in ticks: 2³¹ − 1.
pub const MAX_SPAN_TICKS: u32 = (1 << 31) - 1;

/// The default heal threshold is one second, but at most 2³⁰ ticks (a tick
/// clock above 1.07 GHz gets 2³⁰ ticks).
const MAX_DEFAULT_HEAL_TICKS: u32 = 1 << 30;

const fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        let r = a % b;
        a = b;
        b = r;
    }
    a
}

/// GCRA in ticks: a token or leaky bucket for a [`TickState`]. Small,
/// `Copy`, `const`-constructible; see the [module documentation](super).
///
/// ```
/// use tollgate::tick::TickGcra;
/// use tollgate::{Bucket, Quota, Timestamp};
///
/// // 10 per second, burst 2, on a 1 MHz timer
/// let gcra = TickGcra::token_bucket(Quota::per_second(10)?.with_burst(2)?, 1_000_000)?;
/// assert_eq!(gcra.interval_ticks(), 100_000);
/// // through Timestamps, like any limiter
/// let bucket = Bucket::new(gcra);
/// let now = Timestamp::from_millis(5);
/// assert!(bucket.check(now).is_ok());
/// assert!(bucket.check(now).is_ok());
/// let refused = bucket.check(now).unwrap_err();
/// assert_eq!(refused.retry_after(), core::time::Duration::from_millis(100));
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TickGcra {
    pub(super) interval: u32,
    /// `capacity × interval` (< 2³¹).
    pub(super) max_lead: u32,
    /// `max_lead + heal_threshold` (< 2³¹): the largest `tat − now` read as
    /// a lead; anything further ahead reads as full.
    pub(super) heal_limit: u32,
    pub(super) heal_threshold: u32,
    pub(super) capacity: u32,
    tick_hz: u32,
    /// `den` ticks last `num` nanoseconds (reduced).
    pub(super) num: u32,
    pub(super) den: u32,
    pub(super) kind: BucketKind,
}

impl TickGcra {
    /// A token bucket enforcing `quota` (rate and burst) on a clock of
    /// `tick_hz` ticks per second. The interval is rounded **up** to whole
    /// ticks (`⌈period · tick_hz / permits⌉`).
    ///
    /// # Errors
    /// [`ConfigError::ZeroTickRate`] for `tick_hz = 0`;
    /// [`ConfigError::TickHorizonExceeded`] if `burst × interval + heal
    /// threshold` is 2³¹ ticks or more.
    ///
    /// ```
    /// use tollgate::tick::TickGcra;
    /// use tollgate::{ConfigError, Quota};
    ///
    /// let q = Quota::per_second(200)?;
    /// assert_eq!(TickGcra::token_bucket(q, 32_768)?.interval_ticks(), 164); // 163.84 rounded up
    /// assert_eq!(TickGcra::token_bucket(q, 0), Err(ConfigError::ZeroTickRate));
    /// # Ok::<(), ConfigError>(())
    /// ```
    pub const fn token_bucket(quota: Quota, tick_hz: u32) -> Result<Self, ConfigError> {
        Self::new(BucketKind::TokenBucket, quota, tick_hz)
    }

    /// A strict-pacing leaky bucket enforcing `quota`'s rate on a clock of
    /// `tick_hz` ticks per second, accepting requests of up to
    /// `quota.burst()` permits.
    ///
    /// # Errors
    /// As [`TickGcra::token_bucket`].
    ///
    /// ```
    /// use tollgate::tick::TickGcra;
    /// use tollgate::Quota;
    ///
    /// let gcra = TickGcra::leaky_bucket(Quota::per_second(4)?, 1_000)?;
    /// assert_eq!(gcra.interval_ticks(), 250);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub const fn leaky_bucket(quota: Quota, tick_hz: u32) -> Result<Self, ConfigError> {
        Self::new(BucketKind::LeakyBucket, quota, tick_hz)
    }

    /// A bucket of the given kind for `quota` on a `tick_hz` clock.
    ///
    /// # Errors
    /// As [`TickGcra::token_bucket`].
    ///
    /// ```
    /// use tollgate::tick::TickGcra;
    /// use tollgate::{BucketKind, Quota};
    ///
    /// // 3 per second on a 3 Hz clock: exactly one tick apart
    /// let gcra = TickGcra::new(BucketKind::TokenBucket, Quota::per_second(3)?, 3)?;
    /// assert_eq!(gcra.interval_ticks(), 1);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub const fn new(kind: BucketKind, quota: Quota, tick_hz: u32) -> Result<Self, ConfigError> {
        if tick_hz == 0 {
            return Err(ConfigError::ZeroTickRate);
        }
        // exact: period / permits seconds, in ticks, rounded up (≥ 1, as a
        // valid quota's period is at least its permits in nanoseconds)
        let ticks = (quota.period_nanos() as u128 * tick_hz as u128)
            .div_ceil(quota.permits() as u128 * NANOS_PER_SEC as u128);
        if ticks > MAX_SPAN_TICKS as u128 {
            let ticks = if ticks > u64::MAX as u128 {
                u64::MAX
            } else {
                ticks as u64
            };
            return Err(ConfigError::TickHorizonExceeded {
                ticks,
                max: MAX_SPAN_TICKS,
            });
        }
        Self::from_ticks(kind, ticks as u32, quota.burst(), tick_hz)
    }

    /// A bucket of the given kind admitting one permit every
    /// `interval_ticks` ticks with bursts of up to `burst`, on a clock of
    /// `tick_hz` ticks per second (used only to convert [`Timestamp`]s and
    /// durations; the tick-native calls never look at it).
    ///
    /// # Errors
    /// [`ConfigError::ZeroTickRate`], [`ConfigError::ZeroBurst`],
    /// [`ConfigError::IntervalTooShort`] for `interval_ticks = 0`,
    /// [`ConfigError::TickHorizonExceeded`].
    ///
    /// ```
    /// use tollgate::tick::{TickGcra, TickState};
    /// use tollgate::{valid, BucketKind};
    ///
    /// // one every 100 ticks, bursts of 5, on a 10 kHz SysTick
    /// static LIMIT: TickGcra = valid!(TickGcra::from_ticks(BucketKind::TokenBucket, 100, 5, 10_000));
    /// static STATE: TickState = TickState::new();
    /// let admitted = (0..10).filter(|_| LIMIT.check_ticks(&STATE, 7).is_ok()).count();
    /// assert_eq!(admitted, 5);
    /// ```
    pub const fn from_ticks(
        kind: BucketKind,
        interval_ticks: u32,
        burst: u32,
        tick_hz: u32,
    ) -> Result<Self, ConfigError> {
        if tick_hz == 0 {
            return Err(ConfigError::ZeroTickRate);
        }
        if burst == 0 {
            return Err(ConfigError::ZeroBurst);
        }
        if interval_ticks == 0 {
            return Err(ConfigError::IntervalTooShort {
                permits: 1,
                period: Duration::ZERO,
            });
        }
        let heal = if tick_hz > MAX_DEFAULT_HEAL_TICKS {
            MAX_DEFAULT_HEAL_TICKS
        } else {
            tick_hz // one second
        };
        let max_lead = burst as u64 * interval_ticks as u64;
        let span = max_lead + heal as u64;
        if span > MAX_SPAN_TICKS as u64 {
            return Err(ConfigError::TickHorizonExceeded {
                ticks: span,
                max: MAX_SPAN_TICKS,
            });
        }
        let g = gcd(tick_hz as u64, NANOS_PER_SEC);
        Ok(Self {
            interval: interval_ticks,
            max_lead: max_lead as u32,
            heal_limit: span as u32,
            heal_threshold: heal,
            capacity: burst,
            tick_hz,
            num: (NANOS_PER_SEC / g) as u32,
            den: (tick_hz as u64 / g) as u32,
            kind,
        })
    }

    /// Sets the heal threshold (rounded up to whole ticks): how far beyond
    /// its largest lead a TAT may be and still read as a lead (a caller
    /// whose `now` is that stale sees the bucket fuller than it is, never
    /// emptier). Further ahead reads as full (see the
    /// [module documentation](super)), so keep it above the longest time a
    /// caller can hold its `now` before checking. Default: one second (at
    /// most 2³⁰ ticks).
    ///
    /// # Errors
    /// [`ConfigError::TickHorizonExceeded`] if `burst × interval +
    /// threshold` reaches 2³¹ ticks.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::tick::TickGcra;
    /// use tollgate::{ConfigError, Quota};
    ///
    /// let gcra = TickGcra::token_bucket(Quota::per_second(10)?, 1_000_000)?
    ///     .with_heal_threshold(Duration::from_millis(5))?;
    /// assert_eq!(gcra.heal_threshold_ticks(), 5_000);
    /// let too_long = TickGcra::token_bucket(Quota::per_second(10)?, 1_000_000)?
    ///     .with_heal_threshold(Duration::from_secs(3600));
    /// assert!(matches!(too_long, Err(ConfigError::TickHorizonExceeded { .. })));
    /// # Ok::<(), ConfigError>(())
    /// ```
    pub const fn with_heal_threshold(self, threshold: Duration) -> Result<Self, ConfigError> {
        let ticks = (threshold.as_nanos() * self.tick_hz as u128).div_ceil(NANOS_PER_SEC as u128);
        if ticks > MAX_SPAN_TICKS as u128 {
            return Err(ConfigError::TickHorizonExceeded {
                ticks: if ticks > u64::MAX as u128 {
                    u64::MAX
                } else {
                    ticks as u64
                },
                max: MAX_SPAN_TICKS,
            });
        }
        self.with_heal_threshold_ticks(ticks as u32)
    }

    /// [`TickGcra::with_heal_threshold`] in ticks.
    ///
    /// # Errors
    /// [`ConfigError::TickHorizonExceeded`] if `burst × interval +
    /// threshold` reaches 2³¹ ticks.
    ///
    /// ```
    /// use tollgate::tick::TickGcra;
    /// use tollgate::BucketKind;
    ///
    /// let gcra = TickGcra::from_ticks(BucketKind::TokenBucket, 10, 4, 1_000)?
    ///     .with_heal_threshold_ticks(100)?;
    /// assert_eq!(gcra.horizon_ticks(), u32::MAX - 140 + 1);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub const fn with_heal_threshold_ticks(self, threshold: u32) -> Result<Self, ConfigError> {
        let span = self.max_lead as u64 + threshold as u64;
        if span > MAX_SPAN_TICKS as u64 {
            return Err(ConfigError::TickHorizonExceeded {
                ticks: span,
                max: MAX_SPAN_TICKS,
            });
        }
        Ok(Self {
            heal_threshold: threshold,
            heal_limit: span as u32,
            ..self
        })
    }

    /// The emission interval `T` in ticks.
    #[must_use]
    pub const fn interval_ticks(&self) -> u32 {
        self.interval
    }

    /// The emission interval, rounded up to whole nanoseconds.
    ///
    /// ```
    /// use tollgate::tick::TickGcra;
    /// use tollgate::Quota;
    /// let gcra = TickGcra::token_bucket(Quota::per_second(200)?, 32_768)?;
    /// assert_eq!(gcra.interval().as_nanos(), 5_004_883); // 164 ticks
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub const fn interval(&self) -> Duration {
        Duration::from_nanos(self.nanos_ceil(self.interval as u64))
    }

    /// `burst × interval`: the largest lead, in ticks.
    #[must_use]
    pub const fn max_lead_ticks(&self) -> u32 {
        self.max_lead
    }

    /// The heal threshold in ticks.
    #[must_use]
    pub const fn heal_threshold_ticks(&self) -> u32 {
        self.heal_threshold
    }

    /// The heal threshold, rounded up to whole nanoseconds.
    #[must_use]
    pub const fn heal_threshold(&self) -> Duration {
        Duration::from_nanos(self.nanos_ceil(self.heal_threshold as u64))
    }

    /// The clock rate the bucket converts timestamps at.
    #[must_use]
    pub const fn tick_hz(&self) -> u32 {
        self.tick_hz
    }

    /// Token or leaky bucket.
    #[must_use]
    pub const fn kind(&self) -> BucketKind {
        self.kind
    }

    /// The idle horizon: `2³² − (max_lead + heal_threshold)` ticks. A
    /// bucket last written fewer ticks ago reads exactly; one left longer
    /// may read as throttled (never as fuller than it is) until
    /// [`refresh_ticks`](Self::refresh_ticks) or a write. Always more than
    /// 2³¹.
    ///
    /// ```
    /// use tollgate::tick::TickGcra;
    /// use tollgate::Quota;
    /// let gcra = TickGcra::token_bucket(Quota::per_second(10)?, 1_000_000)?;
    /// // 10 × 100 000 ticks of lead, 1 s = 1 000 000 ticks of heal threshold
    /// assert_eq!(gcra.horizon_ticks(), 4_292_967_296);
    /// assert_eq!(gcra.idle_horizon().as_secs(), 4292); // 71.5 minutes
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub const fn horizon_ticks(&self) -> u32 {
        0u32.wrapping_sub(self.heal_limit)
    }

    /// [`horizon_ticks`](Self::horizon_ticks) as a duration (rounded down).
    #[must_use]
    pub const fn idle_horizon(&self) -> Duration {
        Duration::from_nanos(self.nanos_floor(self.horizon_ticks() as u64))
    }
}
