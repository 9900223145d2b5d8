//! [`TickCount`]: what [`RticClock`](crate::RticClock) converts, and how
//! wide it is.

use rtic_time::fugit;
use tollgate_core::clock::TickRate;

/// An instant or duration that counts ticks of `NOM / DENOM` seconds in an
/// integer of [`BITS`](Self::BITS) bits: what [`RticClock`](crate::RticClock)
/// converts.
///
/// Implemented for `fugit::Instant<u32 | u64, NOM, DENOM, K>` (monotonic
/// or wrapping) and `fugit::Duration<u32 | u64, NOM, DENOM>`. Implement it
/// for a monotonic with instant types of its own: an instant of 64 bits is
/// read as it is, one of 32 bits is taken to wrap (see
/// [the wrap](crate#the-wrap-32-bit-monotonics)).
///
/// ```
/// use tollgate::rtic::rtic_time::fugit;
/// use tollgate::rtic::TickCount;
///
/// let d = fugit::MillisDurationU32::from_ticks(1_500);
/// assert_eq!(d.ticks(), 1_500);
/// assert_eq!(<fugit::MillisDurationU32 as TickCount>::BITS, 32);
/// assert_eq!(<fugit::MillisDurationU32 as TickCount>::from_ticks_saturating(u64::MAX).ticks(), u64::from(u32::MAX));
/// ```
pub trait TickCount: Copy {
    /// A tick lasts `NOM / DENOM` seconds: numerator.
    const NOM: u64;
    /// A tick lasts `NOM / DENOM` seconds: denominator.
    const DENOM: u64;
    /// The width of the tick count: 32 or 64. An instant type of 32 bits
    /// wraps to 0 after `2^32 − 1`, and [`RticClock`](crate::RticClock)
    /// extends it to 64 bits; other widths are refused when an
    /// `RticClock` is built.
    const BITS: u32;

    /// The tick count.
    fn ticks(self) -> u64;

    /// The value of `ticks` ticks, saturating at the type's largest.
    fn from_ticks_saturating(ticks: u64) -> Self;
}

/// `TickCount` for a fugit type over `u32` or `u64` ticks (`BITS` is the
/// tick type's width).
macro_rules! tick_count {
    ($(#[$doc:meta])* [$($kind:tt)*] $ty:ty, $int:ty) => {
        $(#[$doc])*
        impl<const NOM: u64, const DENOM: u64 $($kind)*> TickCount for $ty {
            const NOM: u64 = NOM;
            const DENOM: u64 = DENOM;
            const BITS: u32 = <$int>::BITS;
            #[inline]
            fn ticks(self) -> u64 {
                u64::from(self.as_ticks())
            }
            fn from_ticks_saturating(ticks: u64) -> Self {
                Self::from_ticks(<$int>::try_from(ticks).unwrap_or(<$int>::MAX))
            }
        }
    };
}

tick_count!(
    /// Monotonic and wrapping instants alike (fugit's `Kind`).
    [, K: fugit::kind::Kind] fugit::Instant<u64, NOM, DENOM, K>, u64
);
tick_count!(
    /// Monotonic and wrapping instants alike (fugit's `Kind`).
    [, K: fugit::kind::Kind] fugit::Instant<u32, NOM, DENOM, K>, u32
);
tick_count!([] fugit::Duration<u64, NOM, DENOM>, u64);
tick_count!([] fugit::Duration<u32, NOM, DENOM>, u32);

/// The tick length of `T` as nanoseconds per tick, in `const`.
pub(crate) const fn ratio_of<T: TickCount>() -> TickRate {
    TickRate::from_seconds_per_tick(T::NOM, T::DENOM)
}
