//! Conversions between nanoseconds and ticks (the `Timestamp` path only:
//! the tick-native calls never convert).

use super::TickGcra;

impl TickGcra {
    /// The last tick whose start `⌊t · num / den⌋` is at or before `ns`:
    /// `⌊(ns · den + den − 1) / num⌋`, wrapping (exact modulo 2⁶⁴, so
    /// modulo 2³²).
    #[inline]
    pub(super) const fn ticks_at(&self, ns: u64) -> u64 {
        let (num, den) = (self.num as u64, self.den as u64);
        let whole = (ns / num).wrapping_mul(den);
        // (ns % num) · den + den − 1 < (10⁹ + 1) · 2³²: no overflow
        whole.wrapping_add(((ns % num) * den + den - 1) / num)
    }

    /// [`ticks_at`](Self::ticks_at), saturating.
    #[inline]
    pub(super) const fn ticks_at_saturating(&self, ns: u64) -> u64 {
        let (num, den) = (self.num as u64, self.den as u64);
        let whole = (ns / num).saturating_mul(den);
        whole.saturating_add(((ns % num) * den + den - 1) / num)
    }

    /// `⌊ticks · num / den⌋`, saturating.
    #[inline]
    pub(super) const fn nanos_floor(&self, ticks: u64) -> u64 {
        let (num, den) = (self.num as u64, self.den as u64);
        let whole = (ticks / den).saturating_mul(num);
        whole.saturating_add((ticks % den) * num / den)
    }

    /// `⌈ticks · num / den⌉`, saturating.
    #[inline]
    pub(super) const fn nanos_ceil(&self, ticks: u64) -> u64 {
        let (num, den) = (self.num as u64, self.den as u64);
        let whole = (ticks / den).saturating_mul(num);
        whole.saturating_add(((ticks % den) * num).div_ceil(den))
    }

    /// The time from `now_ns` until the tick `ticks` after `now_ns`'s own
    /// starts: the first nanosecond read as that tick (exact; 0 for 0
    /// ticks).
    #[inline]
    pub(super) fn wait_nanos(&self, now_ns: u64, ticks: u64) -> u64 {
        if ticks == 0 {
            return 0;
        }
        let target = self.ticks_at_saturating(now_ns).saturating_add(ticks);
        self.nanos_floor(target).saturating_sub(now_ns)
    }
}
