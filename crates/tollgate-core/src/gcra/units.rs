//! The bucket's units of `1/d` ns (see the module docs' *Exact
//! arithmetic*): `now` on the way in, stopped at the horizon, and times in
//! nanoseconds, rounded up, on the way out.

use super::Gcra;
use crate::snapshot::units_to_nanos_ceil;

impl Gcra {
    /// `now` (ns) in the bucket's units. For `d = 1` it is `now` itself;
    /// else `now × d`, stopped at the horizon `u64::MAX − 2 − max_lead`
    /// so that every TAT the bucket stores (at most `now + max_lead`) fits,
    /// below the values the keyed tables and [`crate::live`] reserve.
    #[inline(always)]
    pub(crate) const fn units(&self, now: u64) -> u64 {
        if self.scale == 1 {
            self.clamped(now)
        } else {
            self.scaled(now)
        }
    }

    /// `now` (ns) for a whole-nanosecond bucket (`d = 1`), stopped at its
    /// horizon `u64::MAX − 2 − max_lead`, as [`Gcra::scaled`] stops a
    /// scaled one: past it, a TAT `now + lead` would saturate at
    /// `u64::MAX` and the next check at the same instant would see an
    /// empty lead (over-admission), or land on a value the keyed tables
    /// reserve. Stopped there, the bucket no longer refills: it fails
    /// closed. One compare, predicted not taken.
    #[inline(always)]
    pub(super) const fn clamped(&self, now: u64) -> u64 {
        let horizon = self.horizon;
        if now < horizon { now } else { horizon }
    }

    #[inline]
    pub(super) const fn scaled(&self, now: u64) -> u64 {
        let horizon = self.horizon;
        let units = now.saturating_mul(self.scale as u64);
        if units < horizon { units } else { horizon }
    }

    /// `units` of the bucket in whole nanoseconds, rounded up.
    #[inline(always)]
    pub(super) const fn nanos_ceil(&self, units: u64) -> u64 {
        units_to_nanos_ceil(units, self.scale as u32)
    }

    /// [`Gcra::units`] for a scale known to be 1 (`SCALED` false) or not.
    #[inline(always)]
    pub(super) const fn units_in<const SCALED: bool>(&self, now: u64) -> u64 {
        if SCALED {
            self.scaled(now)
        } else {
            self.clamped(now)
        }
    }

    /// [`Gcra::nanos_ceil`] for a scale known to be 1 (`SCALED` false) or
    /// not.
    #[inline(always)]
    pub(super) const fn nanos_in<const SCALED: bool>(&self, units: u64) -> u64 {
        if SCALED {
            units.div_ceil(self.scale as u64)
        } else {
            units
        }
    }

    /// True if a bucket with stored `tat` is full at `now` (ns): `TAT ≤
    /// now`, in the bucket's units. Such a bucket is indistinguishable from
    /// a fresh one (eviction is lossless).
    #[inline]
    pub(crate) const fn is_idle_at(&self, tat: u64, now: u64) -> bool {
        tat <= self.units(now)
    }

    /// A stored TAT as a time in nanoseconds, rounded up (the first
    /// nanosecond at which the bucket is full).
    #[inline]
    pub(crate) const fn tat_nanos(&self, tat: u64) -> u64 {
        self.nanos_ceil(tat)
    }
}
