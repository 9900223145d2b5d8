//! Sequential reference models of the fixed and sliding windows, written
//! from their contract (the `tollgate::window` module documentation), not
//! from `src/window/`: plain `u128` instants, a map of permits per segment,
//! no packing, no ring buffer.
//!
//! Fixed window of length `w` and limit `L` (heal threshold `H`): windows
//! are `[k·w, (k+1)·w)`; the permits counted belong to one window, the one
//! the last charge was made in.
//! - a `now` in a later window than the counted one starts a fresh window;
//! - a `now` in an earlier window (a stale caller) is charged to the
//!   counted, newer window, unless that window starts more than `H` after
//!   `now`: then the clock jumped back and the count is re-dated to `now`'s
//!   window (a check persists the re-dating even when it refuses);
//! - `check(n)`: `n > L` can never succeed, `n = 0` peeks; admitted iff
//!   `count + n ≤ L`, else refused until the end of the charged window;
//! - `refund(0)` changes nothing; `refund(n)` gives back up to `n` permits of the window of `now` only:
//!   a stale caller's refund cannot know which window its permits were
//!   charged to, and giving them to a newer window would let that window
//!   admit more than `L`, so it gives nothing back (fail closed).
//!
//! Sliding window of `S` segments of length `s` (window `w = S·s`): a
//! permit taken in segment `k` counts until segment `k + S` begins; the
//! *head* is the newest segment charged to.
//! - a `now` in a later segment than the head moves the head there
//!   (permits of segments that left the window are forgotten);
//! - a `now` in an earlier segment is charged to the head, unless the head
//!   starts more than `H` after `now`: then every counted permit is
//!   re-dated to `now`'s segment (persisted by checks and refunds);
//! - `check(n)` admits iff the live permits plus `n` are at most `L`
//!   (added to the head segment), else refuses until enough of the oldest
//!   permits have left the window;
//! - `refund(0)` changes nothing; `refund(n)` takes permits back newest first, starting at `now`'s
//!   segment (a stale caller gives nothing back from segments newer than
//!   its own, as for the fixed window).

use std::collections::BTreeMap;

use tollgate::{FixedWindow, SlidingWindow};

use crate::ops::{Op, Outcome};
use crate::orders::SpecLimiter;

/// `max(1, end − now)` as a `u64`: the wait until `end` (a refusal always
/// asks for at least 1 ns).
fn wait(end: u128, now: u128) -> u64 {
    u64::try_from(end.saturating_sub(now).max(1)).unwrap_or(u64::MAX)
}

/// The reference fixed window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecFixedWindow {
    limit: u64,
    len: u128,
    heal: u128,
    /// Start of the window the count belongs to.
    start: u128,
    count: u64,
}

impl SpecFixedWindow {
    /// A fresh reference window configured like `window`.
    #[must_use]
    pub fn like(window: &FixedWindow) -> Self {
        Self {
            limit: u64::from(window.limit()),
            len: window.window().as_nanos(),
            heal: window.heal_threshold().as_nanos(),
            start: 0,
            count: 0,
        }
    }

    /// The window `now` is charged to and its count; `true` if that
    /// re-dated the count after a clock jump back.
    fn charged(&self, now: u128) -> (u128, u64, bool) {
        let here = now - now % self.len;
        if self.start < here {
            (here, 0, false)
        } else if self.start == here {
            (here, self.count, false)
        } else if self.start - now > self.heal {
            (here, self.count, true)
        } else {
            (self.start, self.count, false)
        }
    }
}

impl SpecLimiter for SpecFixedWindow {
    fn apply(&mut self, op: Op, previous: Option<Outcome>) -> Outcome {
        match op {
            Op::Check { n, now } => {
                let (n, now) = (u64::from(n), u128::from(now));
                if n > self.limit {
                    return Outcome::Exceeded;
                }
                if n == 0 {
                    return Outcome::Allowed;
                }
                let (start, count, healed) = self.charged(now);
                if count + n <= self.limit {
                    (self.start, self.count) = (start, count + n);
                    Outcome::Allowed
                } else {
                    if healed {
                        (self.start, self.count) = (start, count);
                    }
                    Outcome::Denied {
                        retry_after: wait(start + self.len, now),
                    }
                }
            }
            Op::RefundIfAllowed { .. } if previous != Some(Outcome::Allowed) => Outcome::Skipped,
            Op::Refund { n: 0, .. } | Op::RefundIfAllowed { n: 0, .. } => Outcome::Refunded,
            Op::Refund { n, now } | Op::RefundIfAllowed { n, now } => {
                let now = u128::from(now);
                let (start, count, _) = self.charged(now);
                if count > 0 && start <= now {
                    (self.start, self.count) = (start, count - count.min(u64::from(n)));
                }
                Outcome::Refunded
            }
        }
    }

    fn snapshot(&self, now: u64) -> (u32, u64) {
        let now = u128::from(now);
        let (start, count, _) = self.charged(now);
        let remaining = u32::try_from(self.limit - count).unwrap_or(u32::MAX);
        let reset = if count == 0 {
            0
        } else {
            wait(start + self.len, now)
        };
        (remaining, reset)
    }
}

/// The reference sliding window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecSlidingWindow {
    limit: u64,
    segment: u128,
    segments: u128,
    heal: u128,
    /// The newest segment charged to.
    head: u128,
    /// Permits by the segment they count in (only live segments matter).
    permits: BTreeMap<u128, u64>,
}

impl SpecSlidingWindow {
    /// A fresh reference window configured like `window`.
    #[must_use]
    pub fn like<const S: usize>(window: &SlidingWindow<S>) -> Self {
        Self {
            limit: u64::from(window.limit()),
            segment: window.segment().as_nanos(),
            segments: S as u128,
            heal: window.heal_threshold().as_nanos(),
            head: 0,
            permits: BTreeMap::new(),
        }
    }

    /// The window as seen at `now`: head moved forward, or re-dated after
    /// a clock jump back.
    fn at(&self, now: u128) -> Self {
        let mut w = self.clone();
        let cur = now / self.segment;
        if w.head < cur {
            w.head = cur;
        } else if w.head > cur && w.head * w.segment - now > w.heal {
            let total = w.live_total();
            w.permits.clear();
            w.permits.insert(cur, total);
            w.head = cur;
        }
        let first = w.first_live();
        w.permits.retain(|&k, &mut c| k >= first && c > 0);
        w
    }

    /// The oldest segment still in the window that ends with the head.
    fn first_live(&self) -> u128 {
        (self.head + 1).saturating_sub(self.segments)
    }

    fn live_total(&self) -> u64 {
        let first = self.first_live();
        self.permits.range(first..).map(|(_, c)| c).sum()
    }

    /// Wait at `now` until `need` of the live permits have left the window
    /// (oldest first).
    fn wait_for(&self, need: u64, now: u128) -> u64 {
        let mut freed = 0;
        for (&k, &c) in self.permits.range(self.first_live()..) {
            freed += c;
            if freed >= need {
                return wait((k + self.segments) * self.segment, now);
            }
        }
        u64::MAX
    }
}

impl SpecLimiter for SpecSlidingWindow {
    fn apply(&mut self, op: Op, previous: Option<Outcome>) -> Outcome {
        match op {
            Op::Check { n, now } => {
                let (n, now) = (u64::from(n), u128::from(now));
                if n > self.limit {
                    return Outcome::Exceeded;
                }
                if n == 0 {
                    return Outcome::Allowed;
                }
                *self = self.at(now);
                let total = self.live_total();
                if total + n <= self.limit {
                    *self.permits.entry(self.head).or_insert(0) += n;
                    Outcome::Allowed
                } else {
                    Outcome::Denied {
                        retry_after: self.wait_for(total + n - self.limit, now),
                    }
                }
            }
            Op::RefundIfAllowed { .. } if previous != Some(Outcome::Allowed) => Outcome::Skipped,
            Op::Refund { n: 0, .. } | Op::RefundIfAllowed { n: 0, .. } => Outcome::Refunded,
            Op::Refund { n, now } | Op::RefundIfAllowed { n, now } => {
                let now = u128::from(now);
                *self = self.at(now);
                let newest = self.head.min(now / self.segment);
                let first = self.first_live();
                let mut left = u64::from(n);
                if newest >= first {
                    for (_, c) in self.permits.range_mut(first..=newest).rev() {
                        let take = (*c).min(left);
                        *c -= take;
                        left -= take;
                    }
                }
                Outcome::Refunded
            }
        }
    }

    fn snapshot(&self, now: u64) -> (u32, u64) {
        let now128 = u128::from(now);
        let w = self.at(now128);
        let total = w.live_total();
        let remaining = u32::try_from(w.limit - total).unwrap_or(u32::MAX);
        let reset = if total == 0 {
            0
        } else {
            w.wait_for(total, now128)
        };
        (remaining, reset)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    //! The reference windows agree with the real ones on any sequential
    //! run, stale and backwards clocks included (so a loom model's
    //! "no sequential order gives this" means a concurrency bug).

    use core::time::Duration;

    use proptest::prelude::*;
    use tollgate::{Algorithm, FixedWindow, SlidingWindow, Timestamp};

    use super::{SpecFixedWindow, SpecSlidingWindow};
    use crate::ops::{Op, Outcome, apply};
    use crate::orders::SpecLimiter;

    fn op(limit: u32, horizon: u64) -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..=limit + 1, 0..horizon).prop_map(|(n, now)| Op::Check { n, now }),
            1 => (0..=limit + 1, 0..horizon).prop_map(|(n, now)| Op::Refund { n, now }),
            1 => (0..=limit + 1, 0..horizon).prop_map(|(n, now)| Op::RefundIfAllowed { n, now }),
        ]
    }

    /// Runs `ops` on both, comparing every outcome and the snapshot after
    /// each operation (at that operation's `now`).
    fn agree<A: Algorithm, S: SpecLimiter>(
        alg: &A,
        spec: &mut S,
        ops: &[Op],
    ) -> Result<(), TestCaseError> {
        let state = alg.new_state();
        let mut previous: Option<Outcome> = None;
        for &op in ops {
            let real = apply(alg, &state, op, previous);
            let expected = spec.apply(op, previous);
            previous = Some(expected);
            prop_assert_eq!(real, expected, "op {:?}", op);
            let snap = alg.snapshot(&state, Timestamp::from_nanos(op.now()));
            prop_assert_eq!(
                (snap.remaining(), snap.reset_after_nanos()),
                spec.snapshot(op.now()),
                "snapshot after {:?}",
                op
            );
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn reference_fixed_window_matches_the_real_one(
            limit in 1u32..=4,
            window in 8u64..=40,
            heal in 0u64..=100,
            ops in prop::collection::vec(op(4, 300), 1..40),
        ) {
            let alg = FixedWindow::new(limit, Duration::from_nanos(window)).unwrap().with_heal_threshold(Duration::from_nanos(heal));
            agree(&alg, &mut SpecFixedWindow::like(&alg), &ops)?;
        }

        #[test]
        fn reference_sliding_window_matches_the_real_one(
            limit in 1u32..=4,
            segment in 1u64..=20,
            heal in 0u64..=100,
            ops in prop::collection::vec(op(4, 300), 1..40),
        ) {
            let two = SlidingWindow::<2>::new(limit, Duration::from_nanos(segment * 2)).unwrap().with_heal_threshold(Duration::from_nanos(heal));
            agree(&two, &mut SpecSlidingWindow::like(&two), &ops)?;
            let three = SlidingWindow::<3>::new(limit, Duration::from_nanos(segment * 3)).unwrap().with_heal_threshold(Duration::from_nanos(heal));
            agree(&three, &mut SpecSlidingWindow::like(&three), &ops)?;
        }
    }
}
