//! The GCRA arithmetic on a stored 32-bit TAT: the lead it reads as, one
//! step's outcome ([`Step`]) and the TAT it stores, refunds, and the room
//! left at a lead.

use super::{FULL, TickGcra, busy_tat};
use crate::gcra::BucketKind;
use crate::refusal::Refusal;

/// One step's outcome, with the lead the snapshot needs.
#[derive(Clone, Copy)]
pub(crate) enum Step {
    Allowed { lead: u32 },
    Denied { lead: u32, retry: u32 },
}

impl Step {
    /// The tick-native answer: `Err` with the ticks to wait.
    #[inline]
    pub(super) const fn ticks(self) -> Result<(), u32> {
        match self {
            Step::Allowed { .. } => Ok(()),
            Step::Denied { retry, .. } => Err(retry),
        }
    }
}

impl TickGcra {
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
    pub(super) const fn admit_lead(&self, n: u32) -> u32 {
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

    /// Ticks of room at lead `lead`.
    #[inline]
    pub(super) const fn slack(&self, lead: u32) -> u32 {
        match self.kind {
            BucketKind::TokenBucket => self.max_lead.saturating_sub(lead),
            BucketKind::LeakyBucket if lead == 0 => self.max_lead,
            BucketKind::LeakyBucket => 0,
        }
    }
}
