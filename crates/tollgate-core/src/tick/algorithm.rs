//! The [`Timestamp`] path: a [`TickGcra`] as an [`Algorithm`], and the
//! verdicts, waits, snapshots and carried-over TATs it (and the keyed
//! tables) compute from a stored TAT.

use core::time::Duration;

use super::step::Step;
use super::{FULL, TickGcra, TickState, busy_tat};
use crate::gcra::BucketKind;
use crate::limiter::{Algorithm, Inheritance};
use crate::refusal::Refusal;
use crate::snapshot::Snapshot;
use crate::time::Timestamp;

impl TickGcra {
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
