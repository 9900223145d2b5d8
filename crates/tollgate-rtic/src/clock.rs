//! [`RticClock`]: an RTIC timebase as a tollgate [`Clock`], with the wraps
//! of a 32-bit tick count counted.

use core::fmt;
use core::marker::PhantomData;
use core::time::Duration;

use rtic_time::Timebase;
use tollgate_core::clock::{Clock, TickRate};
use tollgate_core::time::{Timestamp, duration_to_nanos};
use tollgate_core::wrapping_clock::{WrappingClock, WrappingCounter};

use crate::tick_count::{TickCount, ratio_of};

/// The low 32 bits of `M`'s ticks: the counter that the 32-bit extension
/// reads.
pub(crate) struct LowTicks<M>(PhantomData<fn() -> M>);

impl<M: Timebase> WrappingCounter for LowTicks<M>
where
    M::Instant: TickCount,
{
    type Ticks = u32;

    #[inline]
    fn read(&self) -> u32 {
        // a 32-bit instant's whole count
        M::now().ticks() as u32
    }
}

/// An RTIC timebase ([`rtic_time::Monotonic`], or any
/// [`Timebase`]) as a tollgate [`Clock`]: the time since the timebase's
/// tick 0, converted exactly.
///
/// - With 64-bit ticks (`systick-64bit`, most timer drivers) it reads
///   `M::now()` and converts it; nothing else.
/// - With 32-bit ticks (rtic-monotonics' SysTick monotonic without
///   `systick-64bit`, a `fugit::WrappingTimerInstantU32` timebase) the
///   count wraps to 0 every `2^32` ticks, and the clock counts the wraps
///   (lock-free, interrupt-safe, in one `AtomicU32`), so its timestamps go
///   on growing across the wrap. It must then be **read at least once per
///   [`MAX_READ_GAP`](Self::MAX_READ_GAP)** (15/16 of the wrap period: 46.6
///   days at 1 kHz); see [the wrap](crate#the-wrap-32-bit-monotonics).
///
/// Keep **one** clock per timebase, in a `static`, and share `&CLOCK`:
/// with 32-bit ticks two clocks first read in different wrap periods
/// disagree by whole periods. See the [crate documentation](crate).
pub struct RticClock<M> {
    /// The extension of a 32-bit tick count (unused with 64-bit ticks).
    wraps: WrappingClock<LowTicks<M>>,
}

impl<M: Timebase> RticClock<M>
where
    M::Instant: TickCount,
{
    const RATIO: TickRate = ratio_of::<M::Instant>();

    /// The width of `M`'s tick count, checked when a clock is built.
    pub(crate) const BITS: u32 = {
        let bits = <M::Instant as TickCount>::BITS;
        assert!(
            bits == 32 || bits == 64,
            "RticClock: the monotonic's instant must count its ticks in 32 or 64 bits (TickCount::BITS)"
        );
        bits
    };

    /// The instant's ticks are the extended count modulo `2^BITS`.
    const MASK: u64 = if Self::BITS >= 64 {
        u64::MAX
    } else {
        (1u64 << Self::BITS) - 1
    };

    /// One tick of `M`, rounded up to whole nanoseconds: what
    /// [`Clock::resolution`] reports, usable in `const` quota checks
    /// ([`Quota::check_resolution`](tollgate_core::Quota::check_resolution)).
    pub const RESOLUTION: Duration = Duration::from_nanos(Self::RATIO.resolution_nanos());

    /// How long the clock may go unread (rounded down to the nanosecond):
    /// `Some(15/16 of the wrap period)` for a 32-bit tick count (46.6 days
    /// at 1 kHz, 67.1 minutes at 1 MHz), `None` for a 64-bit one, which
    /// has no such rule. See [the wrap](crate#the-wrap-32-bit-monotonics).
    pub const MAX_READ_GAP: Option<Duration> = if Self::BITS == 32 {
        Some(Duration::from_nanos(Self::RATIO.ticks_to_nanos(
            WrappingClock::<LowTicks<M>>::max_read_gap_ticks(),
        )))
    } else {
        None
    };

    tollgate_core::const_fn_unless_loom! {
        /// The clock of timebase `M`. `const`: keep it in a `static`.
        ///
        /// A tick count of another width than 32 or 64 bits
        /// ([`TickCount::BITS`]) fails the build here.
        #[must_use]
        pub fn new() -> Self {
            let _ = Self::MASK;
            Self {
                wraps: WrappingClock::with_rate(LowTicks(PhantomData), Self::RATIO),
            }
        }
    }

    /// The ticks since `M`'s tick 0: `M::now()` as it is (64 bits), or
    /// extended across the wraps (32 bits).
    #[inline]
    pub(crate) fn ticks(&self) -> u64 {
        if Self::BITS == 64 {
            M::now().ticks()
        } else {
            self.wraps.ticks()
        }
    }

    /// The timestamp of an (extended) tick count.
    #[inline]
    pub(crate) const fn timestamp_of_ticks(ticks: u64) -> Timestamp {
        Timestamp::from_nanos(Self::RATIO.ticks_to_nanos(ticks))
    }

    /// The first (extended) tick count at which the clock reads at least
    /// `at`.
    #[inline]
    pub(crate) const fn ticks_at(at: Timestamp) -> u64 {
        Self::RATIO.nanos_to_ticks_ceil(at.as_nanos())
    }

    /// The instant of `M` at an (extended) tick count: the count modulo
    /// `2^BITS`, exactly what `M::now()` showed at that tick.
    #[inline]
    pub(crate) fn instant_of_ticks(ticks: u64) -> M::Instant {
        M::Instant::from_ticks_saturating(ticks & Self::MASK)
    }

    /// The extended tick count of `instant`, taken as the nearest one to
    /// the extended count `near` (within half a wrap either way, for
    /// 32-bit ticks).
    pub(crate) fn extend(instant: M::Instant, near: u64) -> u64 {
        if Self::BITS == 64 {
            instant.ticks()
        } else {
            let ahead = (instant.ticks() as u32).wrapping_sub(near as u32) as i32;
            near.saturating_add_signed(i64::from(ahead))
        }
    }

    /// The timestamp of an instant of `M`: its ticks since `M`'s tick 0,
    /// rounded down to the nanosecond, saturating.
    ///
    /// This converts the instant's own tick count: for a 32-bit tick count
    /// that is the time since the count last wrapped, which is what
    /// [`now`](Clock::now) reads only until the first wrap. Compare
    /// instants of a 32-bit monotonic as RTIC does (within half a wrap),
    /// or timestamps from [`now`](Clock::now).
    #[must_use]
    pub fn timestamp(instant: M::Instant) -> Timestamp {
        Self::timestamp_of_ticks(instant.ticks())
    }

    /// The first instant of `M` at which this clock reads at least `at`:
    /// the time rounded **up** to a whole tick. Pass it to
    /// `M::delay_until` to sleep until a limiter's retry time. For a 64-bit
    /// tick count it saturates at the largest instant; for a 32-bit one it
    /// wraps, as the count does (`M::delay_until` then wants it within
    /// half a wrap of now).
    #[must_use]
    pub fn instant_at(at: Timestamp) -> M::Instant {
        Self::instant_of_ticks(Self::ticks_at(at))
    }
}

impl<M> RticClock<M> {
    /// A fugit duration (such as `M::Duration`) as a
    /// [`core::time::Duration`], exactly (rounded down to the nanosecond,
    /// saturating).
    #[must_use]
    pub fn duration<D: TickCount>(d: D) -> Duration {
        let ratio = const { ratio_of::<D>() };
        Duration::from_nanos(ratio.ticks_to_nanos(d.ticks()))
    }

    /// A [`core::time::Duration`] as a fugit duration (such as
    /// `M::Duration`), rounded **up** to whole ticks (saturating): a
    /// tollgate `retry_after` for `M::delay`, never short.
    #[must_use]
    pub fn fugit_duration<D: TickCount>(d: Duration) -> D {
        let ratio = const { ratio_of::<D>() };
        D::from_ticks_saturating(ratio.nanos_to_ticks_ceil(duration_to_nanos(d)))
    }
}

impl<M: Timebase> Clock for RticClock<M>
where
    M::Instant: TickCount,
{
    #[inline]
    fn now(&self) -> Timestamp {
        Self::timestamp_of_ticks(self.ticks())
    }

    fn resolution(&self) -> Duration {
        Self::RESOLUTION
    }
}

impl<M: Timebase> Default for RticClock<M>
where
    M::Instant: TickCount,
{
    fn default() -> Self {
        Self::new()
    }
}

impl<M> fmt::Debug for RticClock<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RticClock<{}>", core::any::type_name::<M>())
    }
}
