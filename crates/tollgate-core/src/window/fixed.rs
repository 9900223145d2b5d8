//! The fixed window: one atomic word, windows aligned on multiples of `w`.

use core::time::Duration;

use super::{DEFAULT_HEAL_THRESHOLD_NANOS, wait_until};
use crate::error::ConfigError;
use crate::limiter::{Algorithm, Bucket, Inheritance};
use crate::quota::Quota;
use crate::refusal::Refusal;
use crate::snapshot::Snapshot;
use crate::sync::{AtomicU64, Ordering};
use crate::time::{Timestamp, duration_to_nanos};

/// At most `limit` permits per aligned window `[k·w, (k+1)·w)`.
///
/// A small `Copy` configuration; apply it to a [`FixedWindowState`] (8
/// bytes) through [`Algorithm`], or bundle both in a [`Bucket`].
///
/// ```
/// use core::time::Duration;
/// use tollgate::{Bucket, FixedWindow, Timestamp};
///
/// let ms = Timestamp::from_millis;
/// // 3 per 100 ms.
/// let window = Bucket::new(FixedWindow::new(3, Duration::from_millis(100))?);
/// assert!(window.check_n(3, ms(10)).is_ok());
/// let refused = window.check(ms(40)).unwrap_err();
/// // Not a whole window: the next one opens at 100 ms.
/// assert_eq!(refused.retry_after(), Duration::from_millis(60));
/// assert!(window.check(ms(100)).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # State protocol (for model checking)
///
/// The state is one `AtomicU64` word `index << bits | count`, where `bits`
/// is the bit width of `limit`, `index` the number of the window the count
/// belongs to and `count` the permits taken in it. Construction rejects
/// windows so short that `u64::MAX / w` would not fit in `64 − bits` bits
/// ([`ConfigError::WindowTooShort`]), so the index never wraps and every
/// `u64` instant is handled exactly. Every operation is a load, a pure
/// computation from `(word, now)` and one `compare_exchange_weak` of the
/// whole word, retried from the fresh value on failure (`Relaxed` throughout:
/// the word publishes nothing else). With `cur = now / w`, the *effective*
/// window of a word is
/// - `(cur, 0)` if `index < cur` (the stored window is over);
/// - `(index, count)` if `index ≥ cur` and the stored window does not start
///   more than the heal threshold after `now` (a stale or slightly backwards
///   `now` is charged to the newer window);
/// - `(cur, count)` otherwise (a clock jump back: the count is re-dated).
///
/// A check of `n` admits iff `count + n ≤ limit` on the effective window and
/// then writes `(index, count + n)`; a refusal writes only when it healed.
/// A refund of `n` writes `(index, count − min(n, count))` on the effective
/// window if that is `now`'s own window (after a heal, too); a refund whose
/// `now` lies before the counted window gives nothing back, since its
/// permits may have been charged to an older window that is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FixedWindow {
    window: u64,
    heal_threshold: u64,
    limit: u32,
    count_bits: u32,
}

impl FixedWindow {
    /// `limit` permits per window of length `window`.
    ///
    /// # Errors
    /// [`ConfigError::ZeroLimit`], [`ConfigError::ZeroWindow`], or
    /// [`ConfigError::WindowTooShort`] when the window is under
    /// `2^bits(limit)` ns (more than about one permit per nanosecond).
    pub const fn new(limit: u32, window: Duration) -> Result<Self, ConfigError> {
        Self::from_nanos(limit, duration_to_nanos(window))
    }

    /// [`FixedWindow::new`] with the window in nanoseconds.
    pub(crate) const fn from_nanos(limit: u32, window_nanos: u64) -> Result<Self, ConfigError> {
        if limit == 0 {
            return Err(ConfigError::ZeroLimit);
        }
        if window_nanos == 0 {
            return Err(ConfigError::ZeroWindow);
        }
        let count_bits = u32::BITS - limit.leading_zeros(); // 1..=32
        let max_index = u64::MAX / window_nanos;
        if max_index >> (u64::BITS - count_bits) != 0 {
            return Err(ConfigError::WindowTooShort {
                window: Duration::from_nanos(window_nanos),
                limit,
                min_window: Duration::from_nanos(1u64 << count_bits),
            });
        }
        Ok(Self {
            window: window_nanos,
            heal_threshold: DEFAULT_HEAL_THRESHOLD_NANOS,
            limit,
            count_bits,
        })
    }

    /// A fixed window of `quota.permits()` per `quota.period()`.
    ///
    /// # Errors
    /// As [`FixedWindow::new`], and [`ConfigError::BurstNotSupported`] for a
    /// quota whose burst is not its permits per period (a window has no
    /// burst of its own: it admits `permits` per window).
    pub const fn from_quota(quota: Quota) -> Result<Self, ConfigError> {
        if quota.burst() != quota.permits() {
            return Err(ConfigError::BurstNotSupported {
                burst: quota.burst(),
                permits: quota.permits(),
            });
        }
        Self::from_nanos(quota.permits(), quota.period_nanos())
    }

    /// Sets the heal threshold: how far after `now` the counted window must
    /// start before the clock is taken to have jumped back (see the
    /// [module documentation](crate::window)). It must stay above the
    /// longest time a caller can hold a stale `now`.
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

    /// The heal threshold.
    #[must_use]
    pub const fn heal_threshold(&self) -> Duration {
        Duration::from_nanos(self.heal_threshold)
    }

    #[inline]
    const fn pack(&self, index: u64, count: u64) -> u64 {
        (index << self.count_bits) | count
    }

    /// `(effective index, count, healed)` of `word` at `now`.
    #[inline]
    const fn effective(&self, word: u64, now: u64) -> (u64, u64, bool) {
        let index = word >> self.count_bits;
        let count = word & ((1u64 << self.count_bits) - 1);
        let cur = now / self.window;
        if index < cur {
            (cur, 0, false)
        } else if index == cur {
            (cur, count, false)
        } else {
            // index > cur, so the stored window starts after `now`
            let ahead = index.saturating_mul(self.window).saturating_sub(now);
            if ahead > self.heal_threshold {
                (cur, count, true)
            } else {
                (index, count, false)
            }
        }
    }

    #[inline]
    const fn snapshot_of(&self, index: u64, count: u64, now: u64) -> Snapshot {
        // count ≤ limit always holds for a word this type wrote
        let remaining = (self.limit as u64).saturating_sub(count) as u32;
        let reset = if count == 0 {
            0
        } else {
            wait_until(index.saturating_mul(self.window), self.window, now)
        };
        Snapshot::from_nanos(self.limit, remaining, reset)
    }

    #[inline]
    const fn exceeded(&self, n: u32) -> Refusal<'static> {
        Refusal::above(n, self.limit)
    }
}

/// A [`FixedWindow`]'s state: one atomic `u64` (window index and count).
///
/// `const`-constructible (so it can be a `static`); `Default` is a fresh
/// window.
#[derive(Debug, Default)]
#[repr(transparent)]
pub struct FixedWindowState {
    word: AtomicU64,
}

impl FixedWindowState {
    crate::sync::const_fn_unless_loom! {
        /// A fresh state: nothing counted.
        #[must_use]
        pub fn new() -> Self {
            Self { word: AtomicU64::new(0) }
        }
    }

    /// The raw packed word (`index << bits | count`), for diagnostics.
    #[must_use]
    pub fn raw(&self) -> u64 {
        self.word.load(Ordering::Relaxed)
    }
}

impl Algorithm for FixedWindow {
    type State = FixedWindowState;

    #[cfg(not(loom))]
    #[allow(clippy::declare_interior_mutable_const)]
    const FRESH_STATE: Self::State = FixedWindowState::new();

    #[inline]
    fn new_state(&self) -> FixedWindowState {
        FixedWindowState::new()
    }

    #[inline]
    fn capacity(&self) -> u32 {
        self.limit
    }

    fn check_n(
        &self,
        state: &FixedWindowState,
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
        let mut word = state.word.load(Ordering::Relaxed);
        loop {
            let (index, count, healed) = self.effective(word, now);
            let (new_word, decision) = if count + n as u64 <= self.limit as u64 {
                let count = count + n as u64;
                (
                    self.pack(index, count),
                    Ok(self.snapshot_of(index, count, now).full_at(now)),
                )
            } else {
                let denied = Refusal::from_nanos(
                    wait_until(index.saturating_mul(self.window), self.window, now),
                    self.snapshot_of(index, count, now),
                );
                if !healed {
                    return Err(denied);
                }
                // persist the heal, or every later check would re-date again
                (self.pack(index, count), Err(denied))
            };
            match state.word.compare_exchange_weak(
                word,
                new_word,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return decision,
                Err(current) => word = current,
            }
        }
    }

    fn refund(&self, state: &FixedWindowState, n: u32, now: Timestamp) {
        if n == 0 {
            return;
        }
        let now = now.as_nanos();
        let mut word = state.word.load(Ordering::Relaxed);
        loop {
            let (index, count, _) = self.effective(word, now);
            if count == 0 {
                return; // a window that is over has nothing to give back
            }
            if index > now / self.window {
                // A stale `now`: its permits were charged either to this
                // newer window or to an older one that is over, and which
                // is unknowable. Giving them to the newer window could let
                // it admit more than `limit`, so give nothing (fail closed).
                return;
            }
            let new_word = self.pack(index, count.saturating_sub(n as u64));
            match state.word.compare_exchange_weak(
                word,
                new_word,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(current) => word = current,
            }
        }
    }

    #[inline]
    fn snapshot(&self, state: &FixedWindowState, now: Timestamp) -> Snapshot {
        let now = now.as_nanos();
        let (index, count, _) = self.effective(state.word.load(Ordering::Relaxed), now);
        self.snapshot_of(index, count, now)
    }

    fn time_until_ready(
        &self,
        state: &FixedWindowState,
        n: u32,
        now: Timestamp,
    ) -> Result<Duration, Refusal<'static>> {
        if n > self.limit {
            return Err(self.exceeded(n));
        }
        let now = now.as_nanos();
        let (index, count, _) = self.effective(state.word.load(Ordering::Relaxed), now);
        if count + n as u64 <= self.limit as u64 {
            Ok(Duration::ZERO)
        } else {
            Ok(Duration::from_nanos(wait_until(
                index.saturating_mul(self.window),
                self.window,
                now,
            )))
        }
    }

    #[inline]
    fn required_resolution(&self) -> Duration {
        Duration::from_nanos(self.window)
    }

    /// Exact when the `ahead` permits come in requests that each fit in
    /// one window: they fill the current window's free permits, then whole
    /// windows in turn; the request of `n` starts a new window if it does
    /// not fit in what they leave.
    fn time_until_ready_after(
        &self,
        state: &FixedWindowState,
        ahead: u64,
        n: u32,
        now: Timestamp,
    ) -> Option<Duration> {
        if n > self.limit {
            return None;
        }
        let now = now.as_nanos();
        let (index, count, _) = self.effective(state.word.load(Ordering::Relaxed), now);
        let limit = u64::from(self.limit);
        let free = limit.saturating_sub(count);
        // (windows after `index` the ahead permits reach, permits used in it)
        let (mut later, used) = if ahead <= free {
            (0, count + ahead)
        } else {
            let rest = ahead - free;
            (
                rest.div_ceil(limit),
                rest - (rest.div_ceil(limit) - 1) * limit,
            )
        };
        if used + u64::from(n) > limit {
            later += 1;
        }
        if later == 0 {
            return Some(Duration::ZERO);
        }
        let first = wait_until(index.saturating_mul(self.window), self.window, now);
        Some(Duration::from_nanos(
            first.saturating_add((later - 1).saturating_mul(self.window)),
        ))
    }

    /// The count of `now`'s window carries over (scaled for
    /// [`Inheritance::UsedFraction`], capped at the new limit); with a new
    /// window length it is charged to `now`'s window of the new length.
    fn carry_over(&self, next: &Self, state: &FixedWindowState, how: Inheritance, now: Timestamp) {
        let now = now.as_nanos();
        let (index, count, _) = self.effective(state.word.load(Ordering::Relaxed), now);
        let count = carried_count(count, self.limit, next.limit, how);
        let index = if next.window == self.window {
            index
        } else {
            now / next.window
        };
        let word = if count == 0 {
            0
        } else {
            next.pack(index, count)
        };
        state.word.store(word, Ordering::Relaxed);
    }

    #[inline]
    fn is_idle(&self, state: &FixedWindowState, now: Timestamp) -> bool {
        let now = now.as_nanos();
        let word = state.word.load(Ordering::Relaxed);
        let index = word >> self.count_bits;
        let cur = now / self.window;
        index < cur || (index == cur && word & ((1u64 << self.count_bits) - 1) == 0)
    }
}

/// A window's used count carried from `old_limit` to `new_limit`.
pub(super) fn carried_count(count: u64, old_limit: u32, new_limit: u32, how: Inheritance) -> u64 {
    let count = match how {
        Inheritance::Reset => 0,
        Inheritance::UsedAmount => count,
        Inheritance::UsedFraction => (u128::from(count) * u128::from(new_limit))
            .div_ceil(u128::from(old_limit.max(1))) as u64,
    };
    count.min(u64::from(new_limit))
}

impl Bucket<FixedWindow> {
    crate::sync::const_fn_unless_loom! {
        /// A fresh fixed-window limiter (usable in a `static`).
        #[must_use]
        pub fn fixed_window(window: FixedWindow) -> Self {
            Self::from_parts(window, FixedWindowState::new())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ns: u64) -> Timestamp {
        Timestamp::from_nanos(ns)
    }

    #[test]
    fn validation() {
        assert_eq!(FixedWindow::from_nanos(0, 10), Err(ConfigError::ZeroLimit));
        assert_eq!(FixedWindow::from_nanos(1, 0), Err(ConfigError::ZeroWindow));
        // limit 1 needs 1 count bit, so windows of at least 2 ns
        assert!(matches!(
            FixedWindow::from_nanos(1, 1),
            Err(ConfigError::WindowTooShort { min_window, .. }) if min_window == Duration::from_nanos(2)
        ));
        assert!(FixedWindow::from_nanos(1, 2).is_ok());
        assert!(FixedWindow::from_nanos(u32::MAX, 1 << 32).is_ok());
        assert!(FixedWindow::from_nanos(u32::MAX, (1 << 32) - 1).is_err());
        assert!(FixedWindow::from_nanos(u32::MAX, u64::MAX).is_ok());
        let w = FixedWindow::from_nanos(5, 100).unwrap();
        assert_eq!(w.required_resolution(), Duration::from_nanos(100));
    }

    #[test]
    fn last_window_before_the_end_of_time() {
        let w = FixedWindow::from_nanos(2, 7).unwrap(); // the last window is partial
        let b = Bucket::new(w);
        let t = Timestamp::MAX;
        assert!(b.check_n(2, t).is_ok());
        let d = b.check(t);
        assert!(d.unwrap_err().retry_after().as_nanos() >= 1);
        assert!(!b.is_idle(t));
        b.refund(2, t);
        assert!(b.is_idle(t));
    }

    #[test]
    fn wait_behind_queued_permits() {
        // 2 per 20 s, both used at t = 0
        let w = FixedWindow::new(2, Duration::from_secs(20)).unwrap();
        let st = FixedWindowState::new();
        assert!(w.check_n(&st, 2, t(0)).is_ok());
        let s = |d: Option<Duration>| d.map(|d| d.as_secs());
        let at = t(0);
        assert_eq!(s(w.time_until_ready_after(&st, 0, 1, at)), Some(20));
        // one permit queued ahead fits in the next window with this one
        assert_eq!(s(w.time_until_ready_after(&st, 1, 1, at)), Some(20));
        // two ahead fill the next window: this one waits for the one after
        assert_eq!(s(w.time_until_ready_after(&st, 2, 1, at)), Some(40));
        assert_eq!(s(w.time_until_ready_after(&st, 1, 2, at)), Some(40));
        assert_eq!(s(w.time_until_ready_after(&st, 5, 1, at)), Some(60));
        assert_eq!(w.time_until_ready_after(&st, 0, 3, at), None);
        // at 5 s the next window is 15 s away
        assert_eq!(
            w.time_until_ready_after(&st, 0, 1, t(5_000_000_000)),
            Some(Duration::from_secs(15))
        );
        let fresh = FixedWindowState::new();
        assert_eq!(
            w.time_until_ready_after(&fresh, 1, 1, at),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn heal_redates_the_count() {
        let w = FixedWindow::from_nanos(2, 1_000)
            .unwrap()
            .with_heal_threshold(Duration::from_nanos(5_000));
        let b = Bucket::new(w);
        assert!(b.check_n(2, t(1_000_000)).is_ok());
        // a small step back is charged to the newer window
        let d = b.check(t(1_000_000 - 3_000));
        assert_eq!(d.unwrap_err().retry_after_nanos(), 4_000);
        // a jump back beyond the threshold re-dates the 2 permits to now
        let d = b.check(t(10_000));
        assert_eq!(d.unwrap_err().retry_after_nanos(), 1_000);
        assert!(b.check(t(11_000)).is_ok());
    }
}
