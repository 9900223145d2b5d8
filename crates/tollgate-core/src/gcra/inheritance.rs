//! Carrying a bucket's TAT over to a new quota, per an [`Inheritance`]
//! rule: the arithmetic of a live reconfiguration.

use super::Gcra;
use crate::limiter::Inheritance;

/// `carried` (a TAT in the new quota's units, `now_new` is `now` in them),
/// moved off `tat` (the stored word) where that changes nothing: a
/// lock-free check that read `tat` before a conversion froze it must not be
/// able to install its result over the converted value (its
/// compare-and-swap expects `tat`). A bucket full since before `now`
/// (`before_now`) moves one unit later: still full at `now` and after, and
/// one unit less room for a caller stale before it — never more room (an
/// earlier value would give a stale caller credit). A busy bucket, or one
/// whose TAT is exactly `now`, keeps its exact TAT (any other value would
/// change its room at `now`); for it the check's last look at the change
/// counter just before its swap is what keeps the old quota out (see
/// [`crate::live`]).
#[inline]
const fn distinct_from(tat: u64, before_now: bool, carried: u64) -> u64 {
    if carried == tat && before_now {
        carried.saturating_add(1)
    } else {
        carried
    }
}

impl Gcra {
    /// The TAT that carries a bucket kept under `old` over to `self`, per
    /// `how`, at `now` (ns): the whole of a live reconfiguration for one
    /// bucket (see [`crate::live`]). `tat` is in `old`'s units, the result
    /// in `self`'s. Exact arithmetic in `u128`, rounded so that the bucket
    /// never ends up with more room than the inheritance rule gives it.
    ///
    /// For a word that lock-free checks compare-and-swap on (a
    /// [`LiveBucket`](crate::LiveBucket), the lock-free table's slot): never
    /// the very word it replaces when that can be avoided (see
    /// [`distinct_from`]). Tables that convert under a lock use
    /// [`Gcra::inherit_tat_exact`].
    pub(crate) fn inherit_tat(&self, old: &Gcra, tat: u64, now: u64, how: Inheritance) -> u64 {
        let before_now = tat < old.units(now);
        let carried = self.inherit_tat_exact(old, tat, now, how);
        distinct_from(tat, before_now, carried)
    }

    /// The carried-over TAT, exactly (see [`Gcra::inherit_tat`]).
    pub(crate) fn inherit_tat_exact(
        &self,
        old: &Gcra,
        tat: u64,
        now: u64,
        how: Inheritance,
    ) -> u64 {
        let now_old = old.units(now);
        let now_new = self.units(now);
        let lead = old.lead_at(tat, now_old);
        if lead == 0 {
            // full under any quota: nothing to carry; the same instant in
            // the new units, rounded down (still full at now)
            let same = if old.scale == self.scale {
                tat
            } else {
                let same = u128::from(tat) * u128::from(self.scale) / u128::from(old.scale);
                u64::try_from(same).unwrap_or(u64::MAX)
            };
            return same.min(now_new);
        }
        let new_lead: u128 = match how {
            Inheritance::Reset => return now_new,
            // permits used = lead / T_old, charged again at T_new
            Inheritance::UsedAmount => {
                (u128::from(lead) * u128::from(self.interval)).div_ceil(u128::from(old.interval))
            }
            // fraction used = lead / max_lead_old, of the new max lead
            Inheritance::UsedFraction => (u128::from(lead) * u128::from(self.max_lead()))
                .div_ceil(u128::from(old.max_lead().max(1))),
        };
        // More used than the new bucket holds: it is empty, no debt beyond.
        let new_lead = u64::try_from(new_lead)
            .unwrap_or(u64::MAX)
            .min(self.max_lead());
        now_new.saturating_add(new_lead)
    }
}
