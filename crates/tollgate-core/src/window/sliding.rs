//! The sliding window: `SEGMENTS` per-segment counters behind a short
//! critical section.

use core::time::Duration;

use super::{DEFAULT_HEAL_THRESHOLD_NANOS, wait_until};
use crate::error::ConfigError;
use crate::limiter::{Algorithm, Bucket, Inheritance};
use crate::quota::Quota;
use crate::refusal::Refusal;
use crate::snapshot::Snapshot;
use crate::sync::{AtomicU32, AtomicU64, Ordering, spin_loop};
use crate::time::{Timestamp, duration_to_nanos};

/// At most `limit` permits in any `SEGMENTS` consecutive segments of length
/// `w / SEGMENTS`: .NET's sliding window with `SegmentsPerWindow`.
///
/// Time is cut into segments `[k·s, (k+1)·s)` with `s = w / SEGMENTS`. A
/// permit taken in segment `k` counts until segment `k + SEGMENTS` begins
/// (when its segment leaves the window), so over any span of `SEGMENTS`
/// whole segments at most `limit` permits are admitted. More segments track
/// a true sliding window more closely; `SEGMENTS = 1` is a fixed window.
///
/// ```
/// use core::time::Duration;
/// use tollgate::{Bucket, SlidingWindow, Timestamp};
///
/// let ms = Timestamp::from_millis;
/// // 4 per second, in 2 segments of 500 ms.
/// let window = Bucket::new(SlidingWindow::<2>::new(4, Duration::from_secs(1))?);
/// assert!(window.check_n(3, ms(0)).is_ok()); // segment 0
/// assert!(window.check(ms(600)).is_ok()); // segment 1: window full
/// // Segment 0 leaves the window at 1 s and gives its 3 permits back.
/// let refused = window.check_n(2, ms(700)).unwrap_err();
/// assert_eq!(refused.retry_after(), Duration::from_millis(300));
/// assert!(window.check_n(3, ms(1_000)).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SlidingWindow<const SEGMENTS: usize> {
    window: u64,
    segment: u64,
    heal_threshold: u64,
    limit: u32,
}

impl<const SEGMENTS: usize> SlidingWindow<SEGMENTS> {
    /// `limit` permits per window of length `window`, split in `SEGMENTS`.
    ///
    /// # Errors
    /// [`ConfigError::ZeroLimit`], [`ConfigError::ZeroWindow`],
    /// [`ConfigError::ZeroSegments`], or [`ConfigError::WindowNotDivisible`]
    /// when `window` is not a whole number of nanoseconds per segment.
    pub const fn new(limit: u32, window: Duration) -> Result<Self, ConfigError> {
        Self::from_nanos(limit, duration_to_nanos(window))
    }

    /// [`SlidingWindow::new`] with the window in nanoseconds.
    pub(crate) const fn from_nanos(limit: u32, window_nanos: u64) -> Result<Self, ConfigError> {
        if limit == 0 {
            return Err(ConfigError::ZeroLimit);
        }
        if window_nanos == 0 {
            return Err(ConfigError::ZeroWindow);
        }
        if SEGMENTS == 0 {
            return Err(ConfigError::ZeroSegments);
        }
        let segments = SEGMENTS as u64;
        if !window_nanos.is_multiple_of(segments) {
            return Err(ConfigError::WindowNotDivisible {
                window: Duration::from_nanos(window_nanos),
                segments,
            });
        }
        Ok(Self {
            window: window_nanos,
            segment: window_nanos / segments, // ≥ 1: window ≥ segments
            heal_threshold: DEFAULT_HEAL_THRESHOLD_NANOS,
            limit,
        })
    }

    /// A sliding window of `quota.permits()` per `quota.period()`.
    ///
    /// # Errors
    /// As [`SlidingWindow::new`], and [`ConfigError::BurstNotSupported`] for
    /// a quota whose burst is not its permits per period.
    pub const fn from_quota(quota: Quota) -> Result<Self, ConfigError> {
        if quota.burst() != quota.permits() {
            return Err(ConfigError::BurstNotSupported {
                burst: quota.burst(),
                permits: quota.permits(),
            });
        }
        Self::from_nanos(quota.permits(), quota.period_nanos())
    }

    /// Sets the heal threshold (see the [module documentation](crate::window)).
    #[must_use]
    pub const fn with_heal_threshold(self, threshold: Duration) -> Self {
        Self {
            heal_threshold: duration_to_nanos(threshold),
            ..self
        }
    }

    /// Permits per window.
    #[must_use]
    pub const fn limit(&self) -> u32 {
        self.limit
    }

    /// The window length.
    #[must_use]
    pub const fn window(&self) -> Duration {
        Duration::from_nanos(self.window)
    }

    /// The segment length (`window / SEGMENTS`).
    #[must_use]
    pub const fn segment(&self) -> Duration {
        Duration::from_nanos(self.segment)
    }

    /// The heal threshold.
    #[must_use]
    pub const fn heal_threshold(&self) -> Duration {
        Duration::from_nanos(self.heal_threshold)
    }

    #[inline]
    const fn exceeded(&self, n: u32) -> Refusal<'static> {
        Refusal::above(n, self.limit)
    }

    /// Brings `w` to the effective segment at `now` (see
    /// [`SlidingWindowState`]); returns `now`'s segment.
    fn settle(&self, w: &mut Counts<SEGMENTS>, now: u64) {
        let cur = now / self.segment;
        if w.head < cur {
            let steps = cur - w.head;
            if steps >= SEGMENTS as u64 {
                w.counts = [0; SEGMENTS];
            } else {
                for i in 1..=steps {
                    w.counts[slot::<SEGMENTS>(w.head + i)] = 0;
                }
            }
            w.head = cur;
        } else if w.head > cur {
            // head > cur, so the head segment starts after `now`
            let ahead = w.head.saturating_mul(self.segment).saturating_sub(now);
            if ahead > self.heal_threshold {
                // clock jump back: re-date every counted permit to `now`
                let total = w.total();
                w.counts = [0; SEGMENTS];
                // total ≤ limit ≤ u32::MAX
                w.counts[slot::<SEGMENTS>(cur)] = u32::try_from(total).unwrap_or(u32::MAX);
                w.head = cur;
            }
            // else: a stale `now` is charged to the newer head segment
        }
    }

    /// Wait until `need` permits have left the window (settled `w`).
    fn wait_for(&self, w: &Counts<SEGMENTS>, need: u64, now: u64) -> u64 {
        let mut freed = 0u64;
        for (index, count) in w.live() {
            freed += count as u64;
            if freed >= need {
                // segment `index` leaves the window when `index + SEGMENTS` begins
                // a live segment has not left the window at `now`
                return wait_until(index.saturating_mul(self.segment), self.window, now);
            }
        }
        // unreachable while need ≤ total; refuse to promise anything sooner
        u64::MAX
    }

    fn snapshot_of(&self, w: &Counts<SEGMENTS>, now: u64) -> Snapshot {
        let total = w.total();
        let remaining = (self.limit as u64).saturating_sub(total) as u32;
        let reset = if total == 0 {
            0
        } else {
            self.wait_for(w, total, now)
        };
        Snapshot::from_nanos(self.limit, remaining, reset)
    }
}

#[inline]
const fn slot<const S: usize>(index: u64) -> usize {
    (index % S as u64) as usize
}

/// A plain copy of the state, worked on inside the critical section.
#[derive(Clone, Copy)]
struct Counts<const S: usize> {
    head: u64,
    counts: [u32; S],
}

impl<const S: usize> Counts<S> {
    fn total(&self) -> u64 {
        self.counts.iter().map(|&c| c as u64).sum()
    }

    /// `(segment index, count)` of the live segments, oldest first.
    fn live(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        let first = self.head.saturating_sub(S as u64 - 1);
        (first..=self.head).map(move |i| (i, self.counts[slot::<S>(i)]))
    }
}

/// A [`SlidingWindow`]'s state: a lock word, the head segment index and one
/// counter per segment (`4·SEGMENTS + 12` bytes, rounded up to a multiple of
/// 8).
///
/// # Protocol (for model checking)
///
/// A sliding window's decision depends on `SEGMENTS + 1` words at once, and
/// its admission must be linearisable with the expiry of old segments: a
/// lock-free scheme would need a multi-word compare-and-swap (or segment
/// counts packed into one word, which caps both `limit` and `SEGMENTS`).
/// So every operation runs in a *critical section* guarded by `lock`:
///
/// 1. acquire: `lock.compare_exchange_weak(0, 1, Acquire, Relaxed)`; on
///    failure spin (`spin_loop` hint) on a `Relaxed` load until it reads 0,
///    then retry;
/// 2. copy `head` and the counters into a local value (`Relaxed` loads),
///    compute the answer on the copy: *settle* it to `now` (zero the
///    counters of segments that left the window, re-date on a clock jump
///    back, see below), then admit iff `total + n ≤ limit` by adding `n` to
///    the head segment's counter, or take back a refund from the newest
///    live segments first, starting at `now`'s own segment (a refund whose
///    `now` lies before the head gives nothing back from newer segments:
///    its permits may have been charged to an older one);
/// 3. if the operation mutates (check with `n > 0`, refund), store the copy
///    back (`Relaxed` stores);
/// 4. release: `lock.store(0, Release)`.
///
/// The section is a few dozen instructions with no user code, no
/// allocation and no panics, so it is held very briefly; peeks, snapshots
/// and `is_idle` take it too, so they never see a half-written state.
///
/// Settling with `cur = now / segment`: if `head < cur`, the segments
/// `head+1 ..= cur` are zeroed (all of them if `SEGMENTS` or more) and
/// `head = cur`; if `head > cur` and the head segment starts at most the
/// heal threshold after `now`, the request is charged to the head segment
/// (a stale `now` never opens an older window); beyond the threshold every
/// counted permit is moved to segment `cur`.
///
/// **Interrupts:** like any spin lock, a `SlidingWindowState` must not be
/// used both by an interrupt handler and by the code it interrupts on the
/// same core (the handler would spin on a lock its victim holds; its
/// [`LockFreedom::IS_INTERRUPT_SAFE`](crate::LockFreedom::IS_INTERRUPT_SAFE)
/// is `false` on every target). In an interrupt handler use a tick bucket
/// ([`crate::tick`]: one `u32`, interrupt-safe on every target), or a
/// 64-bit limiter (a [`FixedWindow`](crate::FixedWindow), a
/// [`Gcra`](crate::Gcra) bucket: native atomics or a critical section, see
/// [`crate::lock_freedom`]). Calling the sliding window inside
/// `critical_section::with` on both sides also avoids its lock's deadlock.
#[derive(Debug)]
pub struct SlidingWindowState<const SEGMENTS: usize> {
    lock: AtomicU32,
    head: AtomicU64,
    counts: [AtomicU32; SEGMENTS],
}

impl<const SEGMENTS: usize> SlidingWindowState<SEGMENTS> {
    #[cfg(not(loom))]
    /// A fresh state: nothing counted.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            lock: AtomicU32::new(0),
            head: AtomicU64::new(0),
            counts: [const { AtomicU32::new(0) }; SEGMENTS],
        }
    }

    #[cfg(loom)]
    /// A fresh state: nothing counted.
    #[must_use]
    pub fn new() -> Self {
        Self {
            lock: AtomicU32::new(0),
            head: AtomicU64::new(0),
            counts: core::array::from_fn(|_| AtomicU32::new(0)),
        }
    }

    /// Runs `f` on a copy of the state inside the critical section, storing
    /// the copy back if `f` returns `true` as its second value.
    fn with<R>(&self, f: impl FnOnce(&mut Counts<SEGMENTS>) -> (R, bool)) -> R {
        while self
            .lock
            .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            while self.lock.load(Ordering::Relaxed) != 0 {
                spin_loop();
            }
        }
        let mut copy = Counts {
            head: self.head.load(Ordering::Relaxed),
            counts: [0; SEGMENTS],
        };
        for (c, a) in copy.counts.iter_mut().zip(self.counts.iter()) {
            *c = a.load(Ordering::Relaxed);
        }
        let (result, store) = f(&mut copy);
        if store {
            self.head.store(copy.head, Ordering::Relaxed);
            for (c, a) in copy.counts.iter().zip(self.counts.iter()) {
                a.store(*c, Ordering::Relaxed);
            }
        }
        self.lock.store(0, Ordering::Release);
        result
    }
}

impl<const SEGMENTS: usize> Default for SlidingWindowState<SEGMENTS> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const SEGMENTS: usize> Algorithm for SlidingWindow<SEGMENTS> {
    type State = SlidingWindowState<SEGMENTS>;

    #[cfg(not(loom))]
    #[allow(clippy::declare_interior_mutable_const)]
    const FRESH_STATE: Self::State = SlidingWindowState::new();

    #[inline]
    fn new_state(&self) -> Self::State {
        SlidingWindowState::new()
    }

    #[inline]
    fn capacity(&self) -> u32 {
        self.limit
    }

    fn check_n(
        &self,
        state: &Self::State,
        n: u32,
        now: Timestamp,
    ) -> Result<Timestamp, Refusal<'static>> {
        if n > self.limit {
            return Err(self.exceeded(n));
        }
        if n == 0 {
            return Ok(self.snapshot(state, now).full_at(now.as_nanos()));
        }
        let now = now.as_nanos();
        state.with(|w| {
            self.settle(w, now);
            let total = w.total();
            let n = n as u64;
            if total + n <= self.limit as u64 {
                // ≤ limit, fits in u32
                w.counts[slot::<SEGMENTS>(w.head)] += n as u32;
                (Ok(self.snapshot_of(w, now).full_at(now)), true)
            } else {
                let retry = self.wait_for(w, total + n - self.limit as u64, now);
                let denied = Refusal::from_nanos(retry, self.snapshot_of(w, now));
                (Err(denied), true)
            }
        })
    }

    fn refund(&self, state: &Self::State, n: u32, now: Timestamp) {
        if n == 0 {
            return;
        }
        let now = now.as_nanos();
        state.with(|w| {
            self.settle(w, now);
            // Newest first, from `now`'s own segment: a stale `now` (before
            // the head) cannot know whether its permits were charged to the
            // head or to an older segment, and giving them to a newer
            // segment could let it admit more than `limit` (fail closed).
            let oldest = w.head.saturating_sub(SEGMENTS as u64 - 1);
            let mut segment = core::cmp::min(w.head, now / self.segment);
            let mut left = n;
            while left > 0 && segment >= oldest {
                let c = &mut w.counts[slot::<SEGMENTS>(segment)];
                let take = core::cmp::min(*c, left);
                *c -= take;
                left -= take;
                match segment.checked_sub(1) {
                    Some(older) => segment = older,
                    None => break,
                }
            }
            ((), true)
        });
    }

    fn snapshot(&self, state: &Self::State, now: Timestamp) -> Snapshot {
        let now = now.as_nanos();
        state.with(|w| {
            self.settle(w, now);
            (self.snapshot_of(w, now), false)
        })
    }

    fn time_until_ready(
        &self,
        state: &Self::State,
        n: u32,
        now: Timestamp,
    ) -> Result<Duration, Refusal<'static>> {
        if n > self.limit {
            return Err(self.exceeded(n));
        }
        let now = now.as_nanos();
        Ok(Duration::from_nanos(state.with(|w| {
            self.settle(w, now);
            let total = w.total() + n as u64;
            let wait = if total <= self.limit as u64 {
                0
            } else {
                self.wait_for(w, total - self.limit as u64, now)
            };
            (wait, false)
        })))
    }

    #[inline]
    fn required_resolution(&self) -> Duration {
        Duration::from_nanos(self.segment)
    }

    /// Simulates the window: the `ahead` permits are admitted as soon as
    /// segments expire (in requests that may be split), then the request
    /// of `n` when it fits whole. Exact for the first two windows' worth of
    /// segment expiries; beyond that each further `limit` permits are
    /// counted a whole window later (an upper bound: never too early).
    fn time_until_ready_after(
        &self,
        state: &Self::State,
        ahead: u64,
        n: u32,
        now: Timestamp,
    ) -> Option<Duration> {
        if n > self.limit {
            return None;
        }
        let now = now.as_nanos();
        let mut w = state.with(|w| {
            self.settle(w, now);
            (*w, false)
        });
        let limit = u64::from(self.limit);
        let mut ahead = ahead;
        let mut t = now;
        for _ in 0..=2 * SEGMENTS {
            let free = limit.saturating_sub(w.total());
            let take = core::cmp::min(free, ahead);
            if take > 0 {
                w.counts[slot::<SEGMENTS>(w.head)] += take as u32; // ≤ limit
                ahead -= take;
            }
            if ahead == 0 && w.total() + u64::from(n) <= limit {
                return Some(Duration::from_nanos(t - now));
            }
            // the next segment boundary: the oldest live segment expires
            let next = (w.head + 1).saturating_mul(self.segment);
            t = next;
            self.settle(&mut w, next);
        }
        // still waiting after two windows: a window per further `limit`
        let rest = ahead + u64::from(n);
        Some(Duration::from_nanos((t - now).saturating_add(
            rest.div_ceil(limit).saturating_mul(self.window),
        )))
    }

    /// With the same segment length each live segment keeps its (scaled)
    /// count, the oldest trimmed first if they exceed the new limit; with
    /// another length every counted permit is charged to `now`'s segment of
    /// the new length, so it leaves the window no sooner than before
    /// would have been allowed by the new window.
    fn carry_over(&self, next: &Self, state: &Self::State, how: Inheritance, now: Timestamp) {
        let now = now.as_nanos();
        state.with(|w| {
            self.settle(w, now);
            if next.segment == self.segment {
                for c in &mut w.counts {
                    *c = super::fixed::carried_count(u64::from(*c), self.limit, next.limit, how)
                        as u32;
                }
                // trim the oldest live segments down to the new limit
                let mut excess = w.total().saturating_sub(u64::from(next.limit));
                let first = w.head.saturating_sub(SEGMENTS as u64 - 1);
                for i in first..=w.head {
                    let c = &mut w.counts[slot::<SEGMENTS>(i)];
                    let take = core::cmp::min(u64::from(*c), excess);
                    *c -= take as u32;
                    excess -= take;
                }
            } else {
                let total = super::fixed::carried_count(w.total(), self.limit, next.limit, how);
                w.counts = [0; SEGMENTS];
                w.head = now / next.segment;
                w.counts[slot::<SEGMENTS>(w.head)] = total as u32;
            }
            ((), true)
        });
    }

    fn is_idle(&self, state: &Self::State, now: Timestamp) -> bool {
        let now = now.as_nanos();
        state.with(|w| {
            self.settle(w, now);
            (w.head <= now / self.segment && w.total() == 0, false)
        })
    }
}

impl<const SEGMENTS: usize> Bucket<SlidingWindow<SEGMENTS>> {
    #[cfg(not(loom))]
    /// A fresh sliding-window limiter (usable in a `static`).
    #[must_use]
    pub const fn sliding_window(window: SlidingWindow<SEGMENTS>) -> Self {
        Self::from_parts(window, SlidingWindowState::new())
    }

    #[cfg(loom)]
    /// A fresh sliding-window limiter.
    #[must_use]
    pub fn sliding_window(window: SlidingWindow<SEGMENTS>) -> Self {
        Self::from_parts(window, SlidingWindowState::new())
    }
}

#[cfg(test)]
mod tests;
