//! 32-bit tick buckets: GCRA in ticks of your timer, in one `u32`, safe to
//! share between an interrupt handler and the code it interrupts on every
//! target.
//!
//! A [`Gcra`](crate::Gcra) bucket keeps its TAT in an `AtomicU64`. Chips
//! without native 64-bit atomics get that from `portable-atomic`, and on
//! thumbv7m/thumbv7em and riscv32imac (which have 32-bit compare-and-swap)
//! that is a global spin-lock table: an interrupt that checks a bucket
//! while the code it interrupted holds the lock spins forever (see
//! [`crate::lock_freedom`] for the exact conditions). A [`TickGcra`]
//! applied to a [`TickState`] is the same token or leaky bucket with its
//! TAT in **ticks** of a clock you name (`tick_hz`), stored in 32 bits:
//!
//! | target | the state's one `u32` is changed by | [`IS_LOCK_FREE`](crate::LockFreedom::IS_LOCK_FREE) | [`IS_INTERRUPT_SAFE`](crate::LockFreedom::IS_INTERRUPT_SAFE) |
//! |---|---|---|---|
//! | thumbv7m, thumbv7em | `LDREX`/`STREX` loop (native compare-and-swap) | yes | yes |
//! | riscv32imac (and any RISC-V with `A`) | `LR.W`/`SC.W` loop | yes | yes |
//! | x86_64, i686, aarch64, wasm32 | native compare-and-swap | yes | yes |
//! | thumbv6m, riscv32imc (no compare-and-swap) | `critical_section::with` around a plain cell | no | yes |
//!
//! The choice is `cfg(target_has_atomic = "32")`, made by this crate and
//! not by `portable-atomic`'s features (which are the final binary's to
//! pick). On thumbv6m and riscv32imc the firmware must provide a
//! `critical-section` implementation (on a single-core Cortex-M, cortex-m's
//! `critical-section-single-core`), as the `no_std` keyed table already
//! requires. The state is 4 bytes, `const`-constructible.
//!
//! # Two ways in
//!
//! - **Tick-native**, for interrupt handlers: [`TickGcra::check_ticks`],
//!   [`check_n_ticks`](TickGcra::check_n_ticks), [`refund_ticks`](TickGcra::refund_ticks)
//!   take `now` as a `u32` tick count straight from a wrapping hardware
//!   timer and answer `Ok(())` or `Err(ticks)`: the exact number of ticks
//!   until the same request would be admitted (a refusal, in the timer's
//!   own unit). 32-bit arithmetic only: no 64-bit division, no
//!   multiplication wider than 32 bits.
//! - **[`Timestamp`]s**, through [`Algorithm`]: `Bucket<TickGcra>` is a
//!   [`Limiter`](crate::Limiter) like any other, so chains, statistics,
//!   embassy's `acquire(n).await` and the keyed tables work with it. A
//!   timestamp is read as the last tick `t` whose start `⌊t · 10⁹ /
//!   tick_hz⌋` ns is at or before it (modulo 2³²): a tick clock at the
//!   same rate that rounds its timestamps down (embassy's `EmbassyClock`)
//!   maps back to its exact ticks (for `tick_hz` up to 1 GHz; above, a
//!   nanosecond holds several ticks and is read as the last), and any other
//!   clock is read at most 1 ns early. A `retry_after` is the exact time
//!   until the start of the tick at which the request would be admitted.
//!
//! ```
//! use tollgate::tick::{TickGcra, TickState};
//! use tollgate::{valid, Quota};
//!
//! // 50 per second with bursts of 4, on a 32 768 Hz timer (656 ticks apart).
//! static RADIO: TickGcra = valid!(TickGcra::token_bucket(
//!     valid!(valid!(Quota::per_second(50)).with_burst(4)),
//!     32_768
//! ));
//! static RADIO_STATE: TickState = TickState::new(); // 4 bytes of RAM
//!
//! // in the interrupt handler: `now` is the timer's 32-bit count
//! let now: u32 = 0xFFFF_FF00; // about to wrap: nothing special happens
//! for _ in 0..4 {
//!     assert!(RADIO.check_ticks(&RADIO_STATE, now).is_ok());
//! }
//! assert_eq!(RADIO.check_ticks(&RADIO_STATE, now), Err(656)); // ticks to wait
//! // 656 ticks later, across the wrap, the next permit is due
//! assert!(RADIO.check_ticks(&RADIO_STATE, now.wrapping_add(656)).is_ok());
//! ```
//!
//! # Arithmetic
//!
//! As [`crate::gcra`], with `T` the emission interval in whole ticks
//! (rounded **up** from the quota, so a tick bucket is never faster than
//! its quota), `max_lead = burst · T` and `lead` the work still queued
//! ahead of `now`: a token bucket admits `n` permits iff `lead + n·T ≤
//! max_lead`, a leaky bucket iff `lead = 0` (then occupies `n·T`). A
//! refusal's `retry_after` is `lead − (max_lead − n·T)` ticks (token) or
//! `lead` (leaky): exactly when the same request would be admitted.
//!
//! # The wrap: how a 32-bit TAT stays exact
//!
//! The state stores `tat mod 2³²` and `now` arrives `mod 2³²`. Let `H =
//! max_lead + heal_threshold`, which construction keeps below 2³¹ (else
//! [`ConfigError::TickHorizonExceeded`]). The bucket reads
//!
//! ```text
//! ahead = tat.wrapping_sub(now)          (equivalently (tat − now) as i32, since H < 2³¹)
//! lead  = 0      if tat = 0              the sentinel: full at every tick
//!         ahead  if 0 < ahead ≤ H        a throttled bucket
//!         0      otherwise               full: ahead = 0, "negative" (idle), or beyond H
//! ```
//!
//! A fresh state holds the sentinel 0; [`TickGcra::refresh_ticks`] stores
//! it in a bucket that has been full for at least the heal threshold (so no
//! caller within the threshold could read it as busy). A write that would
//! store a busy TAT of exactly 0 stores 1 instead: one tick less room, once
//! in 2³² ticks, never more.
//!
//! **Rule.** Let `w` be the tick (on the unwrapped time line) that the
//! last write used as its `now`, `L₀ ∈ [0, max_lead]` the lead it stored
//! (every write stores `now + lead'` with `lead' ≤ max_lead`, or the
//! sentinel), and `e` the ticks from `w` to a reader's `now` (negative for
//! a reader whose `now` is older than the writer's). The true lead is `L =
//! L₀ − e`.
//!
//! 1. *A throttled bucket reads exactly.* If `0 < L ≤ H` then `ahead = L`
//!    (no wrap: `L < 2³¹`), so `lead = L`. Under a monotonic clock `L ≤
//!    max_lead`; a reader whose `now` is stale by `s ≤ heal_threshold`
//!    ticks sees `L ≤ max_lead + s ≤ H`: only a fuller bucket than there is
//!    (it refuses, and it never stores a smaller TAT). (Right after the
//!    once-in-2³² nudge of a TAT from 0 to 1, `L` can be `max_lead + 1`:
//!    keep the threshold a tick above the staleness.)
//! 2. *An idle bucket reads full for `2³² − H` ticks after its last write,
//!    and forever once it holds the sentinel.* If `L ≤ 0` and `e < 2³² −
//!    H`, then `−L = e − L₀ < 2³² − H`, so `ahead = 2³² + L` lies in `(H,
//!    2³²)`, or `ahead = 0`: `lead = 0`, full. At 1 MHz `2³² − H` is more
//!    than 71 minutes minus `H` (never less than 2³¹ ticks, 35.8 minutes);
//!    at 32 768 Hz, more than 36 hours.
//! 3. *Beyond that horizon it can only refuse, never over-admit.* A bucket
//!    whose last write is `2³² − H` ticks old or older, and which does not
//!    hold the sentinel, may read a lead in `(0, H]` for at most `H` ticks
//!    in every 2³² (a full bucket read as throttled: the reading is never
//!    fuller than the truth, which is full), then reads full again. Any
//!    admission writes a fresh TAT, so a bucket in use never gets there;
//!    for one that may sit idle that long after its last admission, call
//!    [`TickGcra::refresh_ticks`] once it is full (it stores the sentinel
//!    and changes nothing else), or keep it in a keyed table, whose
//!    eviction drops idle states.
//!
//! The price of (2): a `now` that goes **back** by more than the heal
//! threshold (a clock that really jumps back, or a caller stale by that
//! much) reads the bucket as full, and can admit up to a burst. In a
//! modular tick domain a step back of `J` ticks is a step forward of `2³² −
//! J`; the 64-bit [`Gcra`](crate::Gcra) can tell them apart and heals to
//! "empty at now" instead. Keep the heal threshold (default one second,
//! [`TickGcra::with_heal_threshold`]) above the longest time a caller can
//! hold its `now` before checking.
//!
//! # Verification
//!
//! Unit and property tests pin the arithmetic against the 64-bit
//! [`Gcra`](crate::Gcra) and against a wrapping reference (every tick
//! offset, across the wrap, idle up to the horizon); loom models check
//! racing checks and refunds, near the horizon too
//! (`loom-tests/tests/tick_bucket_never_over_admits.rs`); the firmware in
//! `examples/firmware` hammers one bucket from SysTick and thread mode on
//! thumbv6m, thumbv7m and thumbv7em under QEMU and checks the exact count.

use core::time::Duration;

use crate::error::ConfigError;
use crate::gcra::BucketKind;
use crate::limiter::{Algorithm, Bucket, BucketRef, Inheritance};
use crate::quota::Quota;
use crate::refusal::Refusal;
use crate::snapshot::Snapshot;
use crate::sync::RmwU32;
use crate::time::Timestamp;

const NANOS_PER_SEC: u64 = 1_000_000_000;

/// The largest `burst × interval + heal threshold`, in ticks: 2³¹ − 1.
pub const MAX_SPAN_TICKS: u32 = (1 << 31) - 1;

/// The default heal threshold is one second, but at most 2³⁰ ticks (a tick
/// clock above 1.07 GHz gets 2³⁰ ticks).
const MAX_DEFAULT_HEAL_TICKS: u32 = 1 << 30;

/// The stored TAT that reads as full at every tick: fresh states hold it,
/// and [`TickGcra::refresh_ticks`] stores it in a bucket that has been full
/// for the heal threshold.
const FULL: u32 = 0;

/// A busy bucket's TAT, moved off the sentinel: a TAT that would be exactly
/// 0 is stored as 1, one tick later (one tick less room, once per 2³²
/// ticks; never more room).
#[inline(always)]
const fn busy_tat(tat: u32) -> u32 {
    if tat == FULL { 1 } else { tat }
}

const fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        let r = a % b;
        a = b;
        b = r;
    }
    a
}

/// One step's outcome, with the lead the snapshot needs.
#[derive(Clone, Copy)]
pub(crate) enum Step {
    Allowed { lead: u32 },
    Denied { lead: u32, retry: u32 },
}

impl Step {
    /// The tick-native answer: `Err` with the ticks to wait.
    #[inline]
    const fn ticks(self) -> Result<(), u32> {
        match self {
            Step::Allowed { .. } => Ok(()),
            Step::Denied { retry, .. } => Err(retry),
        }
    }
}

/// A 32-bit tick bucket's state: the TAT in ticks, modulo 2³², in one word
/// (4 bytes; see the [module documentation](self) for how it is changed on
/// each target). `Default` and [`TickState::new`] are a full bucket.
///
/// ```
/// use tollgate::tick::TickState;
/// use tollgate::LockFreedom;
///
/// static STATE: TickState = TickState::new();
/// assert_eq!(core::mem::size_of::<TickState>(), 4);
/// // compare-and-swap on this host; a critical section on thumbv6m
/// assert!(TickState::IS_LOCK_FREE && TickState::IS_INTERRUPT_SAFE);
/// # let _ = &STATE;
/// ```
#[derive(Debug, Default)]
pub struct TickState {
    tat: RmwU32,
}

impl TickState {
    crate::sync::const_fn_unless_loom! {
        /// A full bucket.
        #[must_use]
        pub fn new() -> Self {
            Self { tat: RmwU32::new(0) }
        }
    }

    /// The stored theoretical arrival time, in ticks modulo 2³²; 0 is the
    /// sentinel "full" (a fresh state), which reads as full at every tick.
    /// A full bucket may also hold an older TAT that reads as full.
    ///
    /// ```
    /// assert_eq!(tollgate::tick::TickState::new().tat_ticks(), 0);
    /// ```
    #[must_use]
    pub fn tat_ticks(&self) -> u32 {
        self.tat.load()
    }
}

/// GCRA in ticks: a token or leaky bucket for a [`TickState`]. Small,
/// `Copy`, `const`-constructible; see the [module documentation](self).
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
    interval: u32,
    /// `capacity × interval` (< 2³¹).
    max_lead: u32,
    /// `max_lead + heal_threshold` (< 2³¹): the largest `tat − now` read as
    /// a lead; anything further ahead reads as full.
    heal_limit: u32,
    heal_threshold: u32,
    capacity: u32,
    tick_hz: u32,
    /// `den` ticks last `num` nanoseconds (reduced).
    num: u32,
    den: u32,
    kind: BucketKind,
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
    /// [module documentation](self)), so keep it above the longest time a
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

    /// The tick of `now`, modulo 2³²: the last tick `t` whose start,
    /// `⌊t · 10⁹ / tick_hz⌋` ns, is at or before `now`. This is what the
    /// [`Algorithm`] methods pass to the tick-native ones.
    ///
    /// ```
    /// use tollgate::tick::TickGcra;
    /// use tollgate::{Quota, Timestamp};
    /// let gcra = TickGcra::token_bucket(Quota::per_second(10)?, 32_768)?;
    /// // tick 1 of a 32 768 Hz clock starts 30 517.578 ns in; a tick clock
    /// // reports it as 30 517 ns, which maps back to tick 1
    /// assert_eq!(gcra.tick_of(Timestamp::from_nanos(30_516)), 0);
    /// assert_eq!(gcra.tick_of(Timestamp::from_nanos(30_517)), 1);
    /// assert_eq!(gcra.tick_of(Timestamp::from_secs(1)), 32_768);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub const fn tick_of(&self, now: Timestamp) -> u32 {
        self.ticks_at(now.as_nanos()) as u32
    }

    // ---- conversions (the `Timestamp` path only) ----

    /// The last tick whose start `⌊t · num / den⌋` is at or before `ns`:
    /// `⌊(ns · den + den − 1) / num⌋`, wrapping (exact modulo 2⁶⁴, so
    /// modulo 2³²).
    #[inline]
    const fn ticks_at(&self, ns: u64) -> u64 {
        let (num, den) = (self.num as u64, self.den as u64);
        let whole = (ns / num).wrapping_mul(den);
        // (ns % num) · den + den − 1 < (10⁹ + 1) · 2³²: no overflow
        whole.wrapping_add(((ns % num) * den + den - 1) / num)
    }

    /// [`ticks_at`](Self::ticks_at), saturating.
    #[inline]
    const fn ticks_at_saturating(&self, ns: u64) -> u64 {
        let (num, den) = (self.num as u64, self.den as u64);
        let whole = (ns / num).saturating_mul(den);
        whole.saturating_add(((ns % num) * den + den - 1) / num)
    }

    /// `⌊ticks · num / den⌋`, saturating.
    #[inline]
    const fn nanos_floor(&self, ticks: u64) -> u64 {
        let (num, den) = (self.num as u64, self.den as u64);
        let whole = (ticks / den).saturating_mul(num);
        whole.saturating_add((ticks % den) * num / den)
    }

    /// `⌈ticks · num / den⌉`, saturating.
    #[inline]
    const fn nanos_ceil(&self, ticks: u64) -> u64 {
        let (num, den) = (self.num as u64, self.den as u64);
        let whole = (ticks / den).saturating_mul(num);
        whole.saturating_add(((ticks % den) * num).div_ceil(den))
    }

    /// The time from `now_ns` until the tick `ticks` after `now_ns`'s own
    /// starts: the first nanosecond read as that tick (exact; 0 for 0
    /// ticks).
    #[inline]
    fn wait_nanos(&self, now_ns: u64, ticks: u64) -> u64 {
        if ticks == 0 {
            return 0;
        }
        let target = self.ticks_at_saturating(now_ns).saturating_add(ticks);
        self.nanos_floor(target).saturating_sub(now_ns)
    }

    // ---- the bucket ----

    /// The lead of a stored `tat` at `now` (see the module docs: the
    /// sentinel 0 is full; otherwise a lead up to `heal_limit`, anything
    /// further ahead full).
    #[inline(always)]
    pub(crate) const fn lead_at(&self, tat: u32, now: u32) -> u32 {
        let ahead = tat.wrapping_sub(now);
        if tat != FULL && ahead <= self.heal_limit {
            ahead
        } else {
            0
        }
    }

    /// The largest lead with which `n ≤ capacity` permits are admitted.
    #[inline(always)]
    const fn admit_lead(&self, n: u32) -> u32 {
        match self.kind {
            // n ≤ capacity: n·T ≤ max_lead
            BucketKind::TokenBucket => self.max_lead - n * self.interval,
            BucketKind::LeakyBucket => 0,
        }
    }

    /// GCRA on a stored `tat`, `1 ≤ n ≤ capacity`: the outcome and the TAT
    /// to store (`None`: unchanged).
    #[inline(always)]
    pub(crate) const fn step(&self, tat: u32, n: u32, now: u32) -> (Step, Option<u32>) {
        let lead = self.lead_at(tat, now);
        let admit_lead = self.admit_lead(n);
        if lead > admit_lead {
            (
                Step::Denied {
                    lead,
                    retry: lead - admit_lead,
                },
                None,
            )
        } else {
            let new_lead = lead + n * self.interval; // ≤ max_lead
            (
                Step::Allowed { lead: new_lead },
                Some(busy_tat(now.wrapping_add(new_lead))),
            )
        }
    }

    /// The TAT after refunding `n` permits at `now` (`None`: unchanged):
    /// back by `n·T`, never before `now`.
    #[inline]
    pub(crate) const fn refunded(&self, tat: u32, n: u32, now: u32) -> Option<u32> {
        let lead = self.lead_at(tat, now);
        if lead == 0 || n == 0 {
            return None;
        }
        // back to full stores `now` (as the 64-bit bucket does), not the
        // sentinel: a caller whose `now` is older must still see the TAT
        Some(busy_tat(now.wrapping_add(
            lead.saturating_sub(n.saturating_mul(self.interval)),
        )))
    }

    #[inline]
    #[cold]
    pub(crate) fn exceeded(&self, n: u32) -> Refusal<'static> {
        Refusal::above(n, self.capacity)
    }

    /// True if a bucket with stored `tat` has been full since at least the
    /// heal threshold before tick `now`: no caller whose `now` is stale by
    /// up to the threshold can see it busy, so dropping it (a keyed table's
    /// eviction) or storing the sentinel changes no decision.
    #[inline]
    #[cfg(feature = "std")] // the compact keyed table's
    pub(crate) const fn idle_for_threshold(&self, tat: u32, now: u32) -> bool {
        self.lead_at(tat, now) == 0 && self.lead_at(tat, now.wrapping_sub(self.heal_threshold)) == 0
    }

    /// The verdict a step at `ns` (its tick) reports.
    #[inline(always)]
    pub(crate) fn decision_of(&self, step: Step, ns: u64) -> Result<Timestamp, Refusal<'static>> {
        match step {
            Step::Allowed { lead } => Ok(self.snapshot_at(lead, ns).full_at(ns)),
            Step::Denied { lead, retry } => Err(Refusal::from_nanos(
                self.wait_nanos(ns, u64::from(retry)),
                self.snapshot_at(lead, ns),
            )),
        }
    }

    /// Nanoseconds from `ns` until `n` permits would be admitted by a
    /// bucket with stored `tat` (0 if now).
    ///
    /// # Errors
    /// A refusal that [`is_never`](Refusal::is_never) if `n` is above the burst.
    #[cfg(feature = "std")] // the compact keyed table's
    pub(crate) fn wait_of(&self, tat: u32, n: u32, ns: u64) -> Result<u64, Refusal<'static>> {
        if n > self.capacity {
            return Err(self.exceeded(n));
        }
        if n == 0 {
            return Ok(0);
        }
        let lead = self.lead_at(tat, self.ticks_at(ns) as u32);
        Ok(self.wait_nanos(ns, u64::from(lead.saturating_sub(self.admit_lead(n)))))
    }

    /// The wait (ns) for `n` permits after `ahead` others, of a bucket with
    /// stored `tat`: what [`Algorithm::time_until_ready_after`] answers.
    pub(crate) fn wait_after_of(&self, tat: u32, ahead: u64, n: u32, ns: u64) -> Option<u64> {
        if n > self.capacity {
            return None;
        }
        let lead = u64::from(self.lead_at(tat, self.ticks_at(ns) as u32));
        let interval = u64::from(self.interval);
        let ahead_cost = ahead.saturating_mul(interval);
        let ticks = match self.kind {
            BucketKind::TokenBucket => lead
                .saturating_add(ahead_cost)
                .saturating_add(u64::from(n) * interval)
                .saturating_sub(u64::from(self.max_lead)),
            BucketKind::LeakyBucket if n == 0 && ahead == 0 => 0,
            BucketKind::LeakyBucket => lead.saturating_add(ahead_cost),
        };
        Some(self.wait_nanos(ns, ticks))
    }

    /// The snapshot of a stored `tat` at `ns`.
    #[inline]
    #[cfg(feature = "std")] // the compact keyed table's
    pub(crate) fn snapshot_of(&self, tat: u32, ns: u64) -> Snapshot {
        self.snapshot_at(self.lead_at(tat, self.ticks_at(ns) as u32), ns)
    }

    /// Nanoseconds from `ns` until `ticks` ticks later (exact; see
    /// [`TickGcra::wait_nanos`]).
    #[inline]
    #[cfg(feature = "std")] // the compact keyed table's
    pub(crate) fn ticks_to_nanos_from(&self, ns: u64, ticks: u32) -> u64 {
        self.wait_nanos(ns, u64::from(ticks))
    }

    /// The TAT carrying a bucket stored as `tat` under `self` over to
    /// `next` by `how` at `now` (the rules of [`Algorithm::carry_over`]).
    pub(crate) fn carried_tat(
        &self,
        next: &Self,
        tat: u32,
        how: Inheritance,
        now: Timestamp,
    ) -> u32 {
        let old_now = self.tick_of(now);
        let lead = u64::from(self.lead_at(tat, old_now));
        if lead == 0 {
            let long_full = self.lead_at(tat, old_now.wrapping_sub(self.heal_threshold)) == 0;
            return if long_full {
                FULL
            } else {
                busy_tat(next.tick_of(now))
            };
        }
        let new_lead = match how {
            Inheritance::Reset => 0,
            // lead ≤ 2³¹ and the factors < 2³²: no overflow in u64
            Inheritance::UsedAmount => {
                (lead * u64::from(next.interval)).div_ceil(u64::from(self.interval))
            }
            Inheritance::UsedFraction => {
                (lead * u64::from(next.max_lead)).div_ceil(u64::from(self.max_lead))
            }
        };
        let new_lead = new_lead.min(u64::from(next.max_lead)) as u32;
        busy_tat(next.tick_of(now).wrapping_add(new_lead))
    }

    /// The configuration as five words (for a table's seqlocked cell).
    #[cfg(feature = "std")] // the compact keyed table's
    pub(crate) const fn to_words(self) -> [u64; 5] {
        let kind = match self.kind {
            BucketKind::TokenBucket => 0,
            BucketKind::LeakyBucket => 1,
        };
        [
            (self.interval as u64) << 32 | self.max_lead as u64,
            (self.heal_limit as u64) << 32 | self.heal_threshold as u64,
            (self.capacity as u64) << 32 | self.tick_hz as u64,
            (self.num as u64) << 32 | self.den as u64,
            kind,
        ]
    }

    /// The configuration back from [`TickGcra::to_words`].
    #[inline(always)]
    #[cfg(feature = "std")] // the compact keyed table's
    pub(crate) const fn from_words(w: [u64; 5]) -> Self {
        Self {
            interval: (w[0] >> 32) as u32,
            max_lead: w[0] as u32,
            heal_limit: (w[1] >> 32) as u32,
            heal_threshold: w[1] as u32,
            capacity: (w[2] >> 32) as u32,
            tick_hz: w[2] as u32,
            num: (w[3] >> 32) as u32,
            den: w[3] as u32,
            kind: if w[4] == 0 {
                BucketKind::TokenBucket
            } else {
                BucketKind::LeakyBucket
            },
        }
    }

    #[inline(always)]
    fn update(&self, state: &TickState, n: u32, now: u32) -> Step {
        state.tat.update(|tat| self.step(tat, n, now))
    }

    /// The wait a tick-native check reports for a request of more permits
    /// than the burst: it can never be admitted. No other wait is this
    /// long (every wait is below 2³¹ ticks).
    pub const NEVER: u32 = u32::MAX;

    /// Takes one permit at tick `now`: the interrupt handler's call. One
    /// compare-and-swap (or one critical section), 32-bit arithmetic.
    ///
    /// # Errors
    /// The exact number of ticks until the same request would be admitted
    /// (at least 1, not one tick sooner) if nothing else takes capacity
    /// meanwhile; nothing was taken.
    ///
    /// ```
    /// use tollgate::tick::{TickGcra, TickState};
    /// use tollgate::BucketKind;
    ///
    /// let leaky = TickGcra::from_ticks(BucketKind::LeakyBucket, 50, 1, 1_000)?;
    /// let state = TickState::new();
    /// assert!(leaky.check_ticks(&state, 10).is_ok());
    /// assert_eq!(leaky.check_ticks(&state, 30), Err(30));
    /// assert!(leaky.check_ticks(&state, 60).is_ok());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[inline]
    pub fn check_ticks(&self, state: &TickState, now: u32) -> Result<(), u32> {
        // every valid configuration has capacity ≥ 1
        self.update(state, 1, now).ticks()
    }

    /// Takes `n` permits at tick `now`; `n = 0` is a peek (changes nothing,
    /// `Ok`).
    ///
    /// # Errors
    /// The ticks until the same request would be admitted, as
    /// [`check_ticks`](Self::check_ticks); [`TickGcra::NEVER`] if `n` is
    /// above the burst (it could never be granted).
    ///
    /// ```
    /// use tollgate::tick::{TickGcra, TickState};
    /// use tollgate::BucketKind;
    ///
    /// let gcra = TickGcra::from_ticks(BucketKind::TokenBucket, 10, 4, 1_000)?;
    /// let state = TickState::new();
    /// assert!(gcra.check_n_ticks(&state, 3, 0).is_ok());
    /// assert_eq!(gcra.check_n_ticks(&state, 2, 0), Err(10));
    /// assert_eq!(gcra.check_n_ticks(&state, 5, 0), Err(TickGcra::NEVER));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[inline]
    pub fn check_n_ticks(&self, state: &TickState, n: u32, now: u32) -> Result<(), u32> {
        if n > self.capacity {
            return Err(Self::NEVER);
        }
        if n == 0 {
            return Ok(());
        }
        self.update(state, n, now).ticks()
    }

    /// Gives back `n` permits of an earlier admission at tick `now` (the TAT
    /// moves back by `n·T`, never before `now`, so never above the burst).
    /// A refund that leaves the bucket full stores `now` as its TAT, so a
    /// caller whose `now` is older still sees the permits as taken; at tick
    /// 0 itself that would be the sentinel, so it stores 1 (one tick less
    /// room).
    ///
    /// ```
    /// use tollgate::tick::{TickGcra, TickState};
    /// use tollgate::BucketKind;
    ///
    /// let gcra = TickGcra::from_ticks(BucketKind::TokenBucket, 10, 2, 1_000)?;
    /// let state = TickState::new();
    /// assert!(gcra.check_n_ticks(&state, 2, 5).is_ok());
    /// gcra.refund_ticks(&state, 1, 5);
    /// assert_eq!(gcra.available_ticks(&state, 5), 1);
    /// gcra.refund_ticks(&state, 9, 5);
    /// assert_eq!(gcra.available_ticks(&state, 5), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn refund_ticks(&self, state: &TickState, n: u32, now: u32) {
        state.tat.update(|tat| ((), self.refunded(tat, n, now)));
    }

    /// The lead at tick `now`: ticks until the bucket is full again (0 when
    /// full).
    ///
    /// ```
    /// use tollgate::tick::{TickGcra, TickState};
    /// use tollgate::BucketKind;
    ///
    /// let gcra = TickGcra::from_ticks(BucketKind::TokenBucket, 10, 4, 1_000)?;
    /// let state = TickState::new();
    /// let _ = gcra.check_ticks(&state, 100);
    /// assert_eq!(gcra.lead_ticks(&state, 100), 10);
    /// assert_eq!(gcra.lead_ticks(&state, 104), 6);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn lead_ticks(&self, state: &TickState, now: u32) -> u32 {
        self.lead_at(state.tat.load(), now)
    }

    /// Permits that could be taken at tick `now` (one 32-bit division).
    ///
    /// ```
    /// use tollgate::tick::{TickGcra, TickState};
    /// use tollgate::BucketKind;
    ///
    /// let gcra = TickGcra::from_ticks(BucketKind::TokenBucket, 10, 4, 1_000)?;
    /// let state = TickState::new();
    /// assert_eq!(gcra.available_ticks(&state, 0), 4);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn available_ticks(&self, state: &TickState, now: u32) -> u32 {
        self.slack(self.lead_ticks(state, now)) / self.interval
    }

    /// Ticks from `now` until `n` permits would be admitted (0 if now).
    ///
    /// # Errors
    /// A refusal that [`is_never`](Refusal::is_never) if `n` is above the burst.
    ///
    /// ```
    /// use tollgate::tick::{TickGcra, TickState};
    /// use tollgate::BucketKind;
    ///
    /// let gcra = TickGcra::from_ticks(BucketKind::TokenBucket, 10, 4, 1_000)?;
    /// let state = TickState::new();
    /// assert!(gcra.check_n_ticks(&state, 4, 0).is_ok());
    /// assert_eq!(gcra.time_until_ready_ticks(&state, 2, 0)?, 20);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn time_until_ready_ticks(
        &self,
        state: &TickState,
        n: u32,
        now: u32,
    ) -> Result<u32, Refusal<'static>> {
        if n > self.capacity {
            return Err(self.exceeded(n));
        }
        if n == 0 {
            return Ok(0);
        }
        Ok(self
            .lead_ticks(state, now)
            .saturating_sub(self.admit_lead(n)))
    }

    /// Marks an idle bucket as full for good: if it has been full for at
    /// least the heal threshold (so that no caller within the threshold can
    /// see it otherwise), it stores the sentinel TAT 0, which reads as full
    /// at every tick, and the bucket can then sit unused for any time; any
    /// other bucket is left alone. Call it (from any periodic task, more
    /// often than every [`horizon_ticks`](Self::horizon_ticks)) for buckets
    /// that may sit unused for longer than the horizon after their last
    /// admission.
    ///
    /// ```
    /// use tollgate::tick::{TickGcra, TickState};
    /// use tollgate::BucketKind;
    ///
    /// let gcra = TickGcra::from_ticks(BucketKind::TokenBucket, 10, 4, 1_000)?
    ///     .with_heal_threshold_ticks(20)?;
    /// let state = TickState::new();
    /// assert!(gcra.check_ticks(&state, 5).is_ok());
    /// // full again at tick 15; a caller 20 ticks stale could still see it busy
    /// gcra.refresh_ticks(&state, 30);
    /// assert_eq!(state.tat_ticks(), 15);
    /// gcra.refresh_ticks(&state, 35);
    /// assert_eq!(state.tat_ticks(), 0);
    /// // however long it then sits, it reads as full
    /// for now in [16, u32::MAX / 2, u32::MAX - 5, u32::MAX] {
    ///     assert_eq!(gcra.available_ticks(&state, now), 4);
    /// }
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn refresh_ticks(&self, state: &TickState, now: u32) {
        let stale = now.wrapping_sub(self.heal_threshold);
        state.tat.update(|tat| {
            let idle = tat != FULL && self.lead_at(tat, now) == 0 && self.lead_at(tat, stale) == 0;
            ((), if idle { Some(FULL) } else { None })
        });
    }

    /// Ticks of room at lead `lead`.
    #[inline]
    const fn slack(&self, lead: u32) -> u32 {
        match self.kind {
            BucketKind::TokenBucket => self.max_lead.saturating_sub(lead),
            BucketKind::LeakyBucket if lead == 0 => self.max_lead,
            BucketKind::LeakyBucket => 0,
        }
    }

    /// The snapshot of a bucket whose lead is `lead` ticks at `now_ns`.
    fn snapshot_at(&self, lead: u32, now_ns: u64) -> Snapshot {
        let remaining = u64::from(self.slack(lead) / self.interval);
        let per_permit = self.nanos_ceil(u64::from(self.interval)).max(1);
        Snapshot::from_slack(
            self.capacity,
            remaining * per_permit,
            per_permit,
            self.wait_nanos(now_ns, u64::from(lead)),
            1,
        )
    }
}

impl Algorithm for TickGcra {
    type State = TickState;

    #[cfg(not(loom))]
    #[allow(clippy::declare_interior_mutable_const)]
    const FRESH_STATE: Self::State = TickState::new();

    #[inline]
    fn new_state(&self) -> TickState {
        TickState::new()
    }

    #[inline]
    fn capacity(&self) -> u32 {
        self.capacity
    }

    fn check_n(
        &self,
        state: &TickState,
        n: u32,
        now: Timestamp,
    ) -> Result<Timestamp, Refusal<'static>> {
        if n > self.capacity {
            return Err(self.exceeded(n));
        }
        let ns = now.as_nanos();
        let tick = self.ticks_at(ns) as u32;
        if n == 0 {
            return Ok(self
                .snapshot_at(self.lead_ticks(state, tick), ns)
                .full_at(ns));
        }
        self.decision_of(self.update(state, n, tick), ns)
    }

    #[inline]
    fn refund(&self, state: &TickState, n: u32, now: Timestamp) {
        self.refund_ticks(state, n, self.tick_of(now));
    }

    fn snapshot(&self, state: &TickState, now: Timestamp) -> Snapshot {
        let ns = now.as_nanos();
        self.snapshot_at(self.lead_ticks(state, self.ticks_at(ns) as u32), ns)
    }

    fn time_until_ready(
        &self,
        state: &TickState,
        n: u32,
        now: Timestamp,
    ) -> Result<Duration, Refusal<'static>> {
        let ns = now.as_nanos();
        let ticks = self.time_until_ready_ticks(state, n, self.ticks_at(ns) as u32)?;
        Ok(Duration::from_nanos(self.wait_nanos(ns, u64::from(ticks))))
    }

    #[inline]
    fn is_idle(&self, state: &TickState, now: Timestamp) -> bool {
        self.lead_ticks(state, self.tick_of(now)) == 0
    }

    #[inline]
    fn required_resolution(&self) -> Duration {
        self.interval()
    }

    /// Carries the lead over in ticks (`UsedAmount`: `⌈lead · T_next /
    /// T⌉`, `UsedFraction`: `⌈lead · max_lead_next / max_lead⌉`, capped at
    /// the new largest lead, stored as `now + lead` at the new rate); a
    /// full bucket gets the sentinel (or `now`, if it has been full for
    /// less than the heal threshold), so that it reads as full under the
    /// new heal threshold too. Works across tick rates: each configuration
    /// reads `now` at its own.
    fn carry_over(&self, next: &Self, state: &TickState, how: Inheritance, now: Timestamp) {
        state
            .tat
            .store(self.carried_tat(next, state.tat.load(), how, now));
    }

    /// Exact for both kinds when the `ahead` permits come in requests of at
    /// most the capacity each (as [`Gcra`](crate::Gcra)'s).
    fn time_until_ready_after(
        &self,
        state: &TickState,
        ahead: u64,
        n: u32,
        now: Timestamp,
    ) -> Option<Duration> {
        self.wait_after_of(state.tat.load(), ahead, n, now.as_nanos())
            .map(Duration::from_nanos)
    }
}

impl Bucket<TickGcra> {
    /// [`TickGcra::check_ticks`] on this bucket's state.
    ///
    /// ```
    /// use tollgate::tick::{TickGcra, TickState};
    /// use tollgate::{valid, Bucket, BucketKind};
    ///
    /// static SENSOR: Bucket<TickGcra> = Bucket::from_parts(
    ///     valid!(TickGcra::from_ticks(BucketKind::TokenBucket, 8, 2, 1_000)),
    ///     TickState::new(),
    /// );
    /// assert!(SENSOR.check_ticks(0).is_ok());
    /// assert!(SENSOR.check_ticks(0).is_ok());
    /// assert_eq!(SENSOR.check_ticks(0), Err(8)); // ticks to wait
    /// ```
    ///
    /// # Errors
    /// The ticks until the same request would be admitted.
    #[inline]
    pub fn check_ticks(&self, now: u32) -> Result<(), u32> {
        self.algorithm().check_ticks(self.state(), now)
    }

    /// [`TickGcra::check_n_ticks`] on this bucket's state.
    ///
    /// # Errors
    /// The ticks until the same request would be admitted;
    /// [`TickGcra::NEVER`] if `n` is above the burst.
    ///
    /// ```
    /// use tollgate::tick::TickGcra;
    /// use tollgate::{Bucket, BucketKind};
    /// let bucket = Bucket::new(TickGcra::from_ticks(BucketKind::TokenBucket, 8, 2, 1_000)?);
    /// assert!(bucket.check_n_ticks(2, 0).is_ok());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[inline]
    pub fn check_n_ticks(&self, n: u32, now: u32) -> Result<(), u32> {
        self.algorithm().check_n_ticks(self.state(), n, now)
    }

    /// [`TickGcra::refund_ticks`] on this bucket's state.
    ///
    /// ```
    /// use tollgate::tick::TickGcra;
    /// use tollgate::{Bucket, BucketKind};
    /// let bucket = Bucket::new(TickGcra::from_ticks(BucketKind::TokenBucket, 8, 1, 1_000)?);
    /// assert!(bucket.check_ticks(5).is_ok());
    /// bucket.refund_ticks(1, 5);
    /// assert!(bucket.check_ticks(5).is_ok());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[inline]
    pub fn refund_ticks(&self, n: u32, now: u32) {
        self.algorithm().refund_ticks(self.state(), n, now);
    }
}

impl BucketRef<'_, TickGcra> {
    /// [`TickGcra::check_ticks`] on this bucket's state.
    ///
    /// ```
    /// use tollgate::tick::{TickGcra, TickState};
    /// use tollgate::{valid, BucketKind, BucketRef};
    ///
    /// static CONFIG: TickGcra = valid!(TickGcra::from_ticks(BucketKind::LeakyBucket, 8, 1, 1_000)); // flash
    /// static STATE: TickState = TickState::new(); // 4 bytes of RAM
    /// static UART: BucketRef<'static, TickGcra> = BucketRef::new(&CONFIG, &STATE);
    /// assert!(UART.check_ticks(3).is_ok());
    /// assert_eq!(UART.check_ticks(3), Err(8)); // ticks to wait
    /// ```
    ///
    /// # Errors
    /// The ticks until the same request would be admitted.
    #[inline]
    pub fn check_ticks(&self, now: u32) -> Result<(), u32> {
        self.algorithm().check_ticks(self.state(), now)
    }

    /// [`TickGcra::check_n_ticks`] on this bucket's state.
    ///
    /// # Errors
    /// The ticks until the same request would be admitted;
    /// [`TickGcra::NEVER`] if `n` is above the burst.
    ///
    /// ```
    /// use tollgate::tick::{TickGcra, TickState};
    /// use tollgate::{BucketKind, BucketRef};
    /// let config = TickGcra::from_ticks(BucketKind::TokenBucket, 8, 2, 1_000)?;
    /// let state = TickState::new();
    /// let bucket = BucketRef::new(&config, &state);
    /// assert_eq!(bucket.check_n_ticks(3, 0), Err(TickGcra::NEVER));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[inline]
    pub fn check_n_ticks(&self, n: u32, now: u32) -> Result<(), u32> {
        self.algorithm().check_n_ticks(self.state(), n, now)
    }

    /// [`TickGcra::refund_ticks`] on this bucket's state.
    ///
    /// ```
    /// use tollgate::tick::{TickGcra, TickState};
    /// use tollgate::{BucketKind, BucketRef};
    /// let config = TickGcra::from_ticks(BucketKind::TokenBucket, 8, 1, 1_000)?;
    /// let state = TickState::new();
    /// let bucket = BucketRef::new(&config, &state);
    /// assert!(bucket.check_ticks(5).is_ok());
    /// bucket.refund_ticks(1, 5);
    /// assert!(bucket.check_ticks(5).is_ok());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[inline]
    pub fn refund_ticks(&self, n: u32, now: u32) {
        self.algorithm().refund_ticks(self.state(), n, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gcra(hz: u32) -> TickGcra {
        TickGcra::from_ticks(BucketKind::TokenBucket, 1, 1, hz)
            .and_then(|g| g.with_heal_threshold_ticks(0))
            .unwrap()
    }

    #[test]
    fn a_tick_clock_round_trips_and_ticks_start_where_it_says() {
        for hz in [
            1,
            3,
            7,
            1_000,
            32_768,
            1_000_000,
            999_999_937,
            1_000_000_000,
        ] {
            let g = gcra(hz);
            for t in [
                0u64,
                1,
                2,
                3,
                1 << 20,
                (1 << 32) + 5,
                1 << 40,
                u64::MAX / 4_000_000_000,
            ] {
                // a tick clock reports tick t as ⌊t·10⁹/hz⌋ ns
                let Ok(ns) = u64::try_from(u128::from(t) * 1_000_000_000 / u128::from(hz)) else {
                    assert_eq!(g.nanos_floor(t), u64::MAX); // saturates
                    continue;
                };
                assert_eq!(g.nanos_floor(t), ns, "hz={hz} t={t}");
                assert_eq!(g.ticks_at(ns), t, "hz={hz} t={t}");
                if t > 0 && ns > 0 {
                    assert_eq!(g.ticks_at(ns - 1), t - 1, "hz={hz} t={t}");
                }
                assert!(g.nanos_ceil(t) >= ns && g.nanos_ceil(t) - ns <= 1);
            }
        }
    }

    #[test]
    fn extreme_timestamps_saturate_or_wrap_without_panicking() {
        for hz in [1, 32_768, 1_000_000_000, u32::MAX] {
            let g = gcra(hz);
            let _ = g.ticks_at(u64::MAX);
            assert!(g.ticks_at_saturating(u64::MAX) >= g.ticks_at_saturating(u64::MAX - 1));
            let _ = g.nanos_floor(u64::MAX);
            let _ = g.nanos_ceil(u64::MAX);
            let _ = g.wait_nanos(u64::MAX, u64::MAX);
            let _ = g.wait_nanos(0, u64::MAX);
            let state = TickState::new();
            let _ = g.check_n(&state, 1, Timestamp::MAX);
            let _ = g.check_n(&state, 1, Timestamp::MAX);
            let _ = g.time_until_ready_after(&state, u64::MAX, 1, Timestamp::MAX);
        }
    }

    #[test]
    fn wrapping_reads_follow_the_rule() {
        let g = TickGcra::from_ticks(BucketKind::TokenBucket, 10, 3, 1_000)
            .and_then(|g| g.with_heal_threshold_ticks(5))
            .unwrap();
        let h = 35;
        assert_eq!(g.heal_limit, h);
        for tat in [1u32, 17, u32::MAX, 1 << 31] {
            for ahead in [0u32, 1, 30, 35, 36, 1 << 31, u32::MAX] {
                let now = tat.wrapping_sub(ahead);
                let want = if ahead <= h { ahead } else { 0 };
                assert_eq!(g.lead_at(tat, now), want, "tat={tat} ahead={ahead}");
            }
        }
        for now in [0, 1, 35, u32::MAX - 35, u32::MAX] {
            assert_eq!(g.lead_at(FULL, now), 0);
        }
    }
}
