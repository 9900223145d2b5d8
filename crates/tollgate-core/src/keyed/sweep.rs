//! When a full table sweeps for idle keys: the hint every table keeps of
//! the last sweep and of the earliest time a key can become idle.

#[cfg(feature = "std")]
use crate::sync::{AtomicU64, Ordering};

/// How far behind the last sweep a caller's `now` may be and still count as
/// stale rather than a clock that went back: the GCRA default heal
/// threshold.
const STALE_LIMIT_NANOS: u64 = crate::gcra::DEFAULT_HEAL_THRESHOLD_NANOS;

/// The time to remember as "the latest sweep" after one at `now`: the
/// later of the two, so that a sweep whose caller's `now` is stale cannot
/// make [`SweepHint::insert_time`] forget an earlier sweep at a later time
/// (whose evictions a stale insert would otherwise judge at the stale
/// time). A `now` behind by more than [`STALE_LIMIT_NANOS`] is a clock
/// that went back: it replaces the old time.
#[inline]
fn latest_sweep(swept_at: u64, now: u64) -> u64 {
    if now < swept_at && swept_at - now <= STALE_LIMIT_NANOS {
        swept_at
    } else {
        now
    }
}

/// The earliest time any tracked key can become idle, as learnt by the last
/// sweep and lowered by every check since: a full table skips sweeping
/// while `swept_at <= now < next_idle_at`. A clock that went back
/// (`now < swept_at`) always sweeps.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SweepHint {
    swept_at: u64,
    next_idle_at: u64,
}

impl SweepHint {
    pub(crate) const fn new() -> Self {
        Self {
            swept_at: 0,
            next_idle_at: 0,
        }
    }

    /// True if a sweep at `now` might evict something.
    #[inline]
    pub(crate) fn worth_sweeping(&self, now: u64) -> bool {
        now < self.swept_at || now >= self.next_idle_at
    }

    /// A key's state will be idle `reset_after` after `now`.
    #[inline]
    pub(crate) fn lower(&mut self, now: u64, reset_after: u64) {
        let at = now.saturating_add(reset_after);
        if at < self.next_idle_at {
            self.next_idle_at = at;
        }
    }

    /// Forget what is known (after a refund, which can make a key idle
    /// sooner than its snapshot said).
    #[inline]
    pub(crate) fn reset(&mut self) {
        self.next_idle_at = 0;
    }

    /// Start recording a sweep at `now`.
    #[inline]
    pub(crate) fn start(&mut self, now: u64) {
        self.swept_at = latest_sweep(self.swept_at, now);
        self.next_idle_at = u64::MAX;
    }

    /// The time at which to evaluate a key inserted at `now`.
    ///
    /// A caller whose `now` is stale (read, then preempted) may insert a key
    /// that a sweep at a later `now` evicted as idle; a fresh state judged at
    /// the stale time would hand out credit for the gap. Judging it at the
    /// sweep's time instead is exactly what the evicted state would have
    /// given. A gap beyond [`STALE_LIMIT_NANOS`] is a clock that went back,
    /// not staleness: the caller's `now` is used.
    #[inline]
    pub(crate) fn insert_time(&self, now: u64) -> u64 {
        latest_sweep(self.swept_at, now)
    }

    /// Nanoseconds from `now` until a slot may free up (at least 1).
    #[inline]
    pub(crate) fn wait_from(&self, now: u64) -> u64 {
        self.next_idle_at.saturating_sub(now).max(1)
    }
}

#[cfg(feature = "std")]
/// The sweep hint of [`SweepHint`](super::SweepHint), lowered concurrently
/// by checks under the read lock (`fetch_min`); started and reset only under
/// the write lock or by refunds (which only lower it). `Relaxed` suffices:
/// the shard's lock orders sweeps against checks. The lock-free table's
/// readers do not wait for its sweeps, so it builds a sweep's hint aside
/// and [`publish`](Self::publish)es it when the sweep ends.
pub(crate) struct AtomicSweepHint {
    swept_at: AtomicU64,
    next_idle_at: AtomicU64,
}

#[cfg(feature = "std")]
impl AtomicSweepHint {
    pub(crate) fn new() -> Self {
        Self {
            swept_at: AtomicU64::new(0),
            next_idle_at: AtomicU64::new(0),
        }
    }

    #[inline]
    pub(crate) fn worth_sweeping(&self, now: u64) -> bool {
        now < self.swept_at.load(Ordering::Relaxed)
            || now >= self.next_idle_at.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn lower(&self, now: u64, reset_after: u64) {
        let at = now.saturating_add(reset_after);
        if at < self.next_idle_at.load(Ordering::Relaxed) {
            self.next_idle_at.fetch_min(at, Ordering::Relaxed);
        }
    }

    #[inline]
    pub(crate) fn reset(&self) {
        self.next_idle_at.store(0, Ordering::Relaxed);
    }

    pub(crate) fn start(&self, now: u64) {
        let swept_at = latest_sweep(self.swept_at.load(Ordering::Relaxed), now);
        self.swept_at.store(swept_at, Ordering::Relaxed);
        self.next_idle_at.store(u64::MAX, Ordering::Relaxed);
    }

    /// A [`SweepHint`] to build a sweep in aside (see
    /// [`publish`](Self::publish)), remembering the latest sweep so far.
    pub(crate) fn resume(&self) -> SweepHint {
        SweepHint {
            swept_at: self.swept_at.load(Ordering::Relaxed),
            next_idle_at: self.next_idle_at.load(Ordering::Relaxed),
        }
    }

    /// Installs a sweep's hint built in a [`SweepHint`], all at once, for
    /// a table whose readers do not wait for its sweeps (the lock-free
    /// one): they see the previous hint or the finished one, never "start"
    /// without its "lower"s.
    pub(crate) fn publish(&self, hint: &SweepHint) {
        self.next_idle_at
            .store(hint.next_idle_at, Ordering::Relaxed);
        self.swept_at.store(hint.swept_at, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn insert_time(&self, now: u64) -> u64 {
        latest_sweep(self.swept_at.load(Ordering::Relaxed), now)
    }

    #[inline]
    pub(crate) fn wait_from(&self, now: u64) -> u64 {
        self.next_idle_at
            .load(Ordering::Relaxed)
            .saturating_sub(now)
            .max(1)
    }
}
