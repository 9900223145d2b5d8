//! A sequential reference model of the 32-bit tick bucket, written from its
//! contract (the `tollgate::tick` module documentation), not from
//! `crates/tollgate-core/src/tick.rs`: the TAT is a `u32` on the circle of ticks modulo 2³², and
//! every `now` is read modulo 2³². With interval `T`, capacity `c`,
//! `max_lead = c·T` and `H = max_lead + heal threshold`:
//!
//! - the stored TAT 0 is the sentinel "full"; otherwise `ahead = tat − now`
//!   (mod 2³²) is the lead if `0 < ahead ≤ H`, and the bucket is full (lead
//!   0) for any other `ahead`;
//! - `n > c` can never succeed; `n = 0` is a peek that changes nothing;
//! - token bucket: admitted iff `lead + n·T ≤ max_lead`, then `tat = now +
//!   lead + n·T`; else refused with `retry_after = lead + n·T − max_lead`;
//! - leaky bucket: admitted iff `lead = 0`, then `tat = now + n·T`; else
//!   refused with `retry_after = lead`;
//! - refund of `n`: nothing if the lead is 0 (or `n = 0`), else `tat = now +
//!   max(lead − n·T, 0)`;
//! - a busy TAT that would be exactly 0 is stored as 1.
//!
//! The models run the tick bucket at 1 GHz, so a tick is a nanosecond and
//! the `Op`s' `now`s (and `retry_after`s) are ticks; `now`s above 2³² wrap
//! in the bucket and in this model alike.

use tollgate::tick::TickGcra;
use tollgate::{Algorithm, BucketKind};

use crate::ops::{Op, Outcome};
use crate::orders::SpecLimiter;

/// The reference tick bucket: configuration plus the stored TAT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecTick {
    leaky: bool,
    interval: u32,
    capacity: u32,
    heal_limit: u32,
    tat: u32,
}

impl SpecTick {
    /// A fresh reference bucket configured like `gcra` (interval, capacity,
    /// kind and heal threshold, in ticks).
    #[must_use]
    pub fn like(gcra: &TickGcra) -> Self {
        Self {
            leaky: gcra.kind() == BucketKind::LeakyBucket,
            interval: gcra.interval_ticks(),
            capacity: gcra.capacity(),
            heal_limit: gcra.max_lead_ticks() + gcra.heal_threshold_ticks(),
            tat: 0,
        }
    }

    /// The stored TAT.
    #[must_use]
    pub const fn tat(&self) -> u32 {
        self.tat
    }

    fn max_lead(&self) -> u32 {
        self.capacity * self.interval
    }

    /// The lead at `now` by the reading rule.
    #[must_use]
    pub fn lead(&self, now: u64) -> u32 {
        if self.tat == 0 {
            return 0;
        }
        let ahead = self.tat.wrapping_sub(now as u32);
        if ahead >= 1 && ahead <= self.heal_limit {
            ahead
        } else {
            0
        }
    }

    fn store(&mut self, now: u64, lead: u32) {
        let tat = (now as u32).wrapping_add(lead);
        self.tat = if tat == 0 { 1 } else { tat };
    }

    fn check(&mut self, n: u32, now: u64) -> Outcome {
        if n > self.capacity {
            return Outcome::Exceeded;
        }
        if n == 0 {
            return Outcome::Allowed;
        }
        let lead = self.lead(now);
        let cost = n * self.interval;
        if self.leaky {
            if lead == 0 {
                self.store(now, cost);
                Outcome::Allowed
            } else {
                Outcome::Denied {
                    retry_after: u64::from(lead),
                }
            }
        } else if lead + cost <= self.max_lead() {
            self.store(now, lead + cost);
            Outcome::Allowed
        } else {
            Outcome::Denied {
                retry_after: u64::from(lead + cost - self.max_lead()),
            }
        }
    }

    fn refund(&mut self, n: u32, now: u64) {
        let lead = self.lead(now);
        if lead > 0 && n > 0 {
            let back = u64::from(n) * u64::from(self.interval);
            let left = u64::from(lead).saturating_sub(back) as u32;
            self.store(now, left);
        }
    }
}

impl SpecLimiter for SpecTick {
    fn apply(&mut self, op: Op, previous: Option<Outcome>) -> Outcome {
        match op {
            Op::Check { n, now } => self.check(n, now),
            Op::RefundIfAllowed { .. } if previous != Some(Outcome::Allowed) => Outcome::Skipped,
            Op::Refund { n, now } | Op::RefundIfAllowed { n, now } => {
                self.refund(n, now);
                Outcome::Refunded
            }
        }
    }

    fn snapshot(&self, now: u64) -> (u32, u64) {
        let lead = self.lead(now);
        let room = if self.leaky {
            if lead == 0 { self.capacity } else { 0 }
        } else {
            self.max_lead().saturating_sub(lead) / self.interval
        };
        (room, u64::from(lead))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    //! The reference model agrees with the real tick bucket on any
    //! sequential run, across the wrap, with stale callers, beyond the heal
    //! threshold and beyond the idle horizon: a loom model's "no sequential
    //! order gives this" then means a concurrency bug.

    use proptest::prelude::*;
    use tollgate::tick::{TickGcra, TickState};
    use tollgate::{Algorithm, BucketKind, Timestamp};

    use super::SpecTick;
    use crate::ops::{Op, Outcome, apply};
    use crate::orders::SpecLimiter;

    fn op() -> impl Strategy<Value = (u8, u32, u64)> {
        (0u8..3, 0u32..4, any::<u64>())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        #[test]
        fn the_model_is_the_tick_bucket(
            leaky in any::<bool>(),
            interval in 1u32..20,
            capacity in 1u32..4,
            heal in 0u32..60,
            start in any::<u32>(),
            steps in prop::collection::vec(op(), 1..60),
        ) {
            let kind = if leaky { BucketKind::LeakyBucket } else { BucketKind::TokenBucket };
            let gcra = TickGcra::from_ticks(kind, interval, capacity, 1_000_000_000)
                .and_then(|g| g.with_heal_threshold_ticks(heal))
                .unwrap();
            let state = TickState::new();
            let mut spec = SpecTick::like(&gcra);
            let mut now = u64::from(start);
            let mut previous = None;
            for (kind, n, r) in steps {
                // mostly small steps forward, sometimes back (stale or a
                // jump), sometimes far (idle across the horizon)
                now = match r % 8 {
                    0 => now.wrapping_sub(r % 100),
                    1 => now.wrapping_add(r >> 32),
                    _ => now.wrapping_add(r % 40),
                };
                let op = match kind {
                    0 => Op::Check { n, now },
                    1 => Op::Refund { n, now },
                    _ => Op::RefundIfAllowed { n, now },
                };
                let got = apply(&gcra, &state, op, previous);
                let want = spec.apply(op, previous);
                prop_assert_eq!(got, want, "{:?}", op);
                prop_assert_eq!(state.tat_ticks(), spec.tat());
                let s = gcra.snapshot(&state, Timestamp::from_nanos(now));
                prop_assert_eq!((s.remaining(), s.reset_after_nanos()), spec.snapshot(now));
                previous = Some(got);
                if got == Outcome::Exceeded {
                    prop_assert!(n > gcra.capacity());
                }
            }
        }
    }
}
