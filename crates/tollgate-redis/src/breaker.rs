//! The circuit breaker's state and the failure counter, shared by a store
//! and its probe task.

use tollgate_core::sync::{AtomicU64, Ordering};

/// A circuit breaker's state: see [`RedisConfig::circuit_breaker`].
#[derive(Debug, Default)]
pub(super) struct BreakerState {
    /// Consecutive calls that could not reach the server.
    pub(super) consecutive: AtomicU64,
    /// Open: calls are answered without asking the server.
    open: std::sync::atomic::AtomicBool,
    /// Times the breaker opened (for metrics and tests).
    pub(super) opened: AtomicU64,
    /// Times the breaker closed again (for metrics and tests).
    pub(super) closed: AtomicU64,
    /// Calls answered by the failure policy (`store_failures`): here, not
    /// in the store, so that the probe can tell how many it answered while
    /// the breaker was open.
    pub(super) failures: AtomicU64,
}

impl BreakerState {
    pub(super) fn is_open(&self) -> bool {
        self.open.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Closes the breaker; true if it was open (the closing is counted).
    pub(super) fn close(&self) -> bool {
        self.consecutive.store(0, Ordering::Relaxed);
        self.open.swap(false, std::sync::atomic::Ordering::AcqRel) && {
            self.closed.fetch_add(1, Ordering::Relaxed);
            true
        }
    }

    /// Counts a failed call; true if this one opened the breaker.
    pub(super) fn fail(&self, threshold: u32) -> bool {
        let n = self
            .consecutive
            .fetch_add(1, Ordering::Relaxed)
            .saturating_add(1);
        n >= u64::from(threshold) && !self.open.swap(true, std::sync::atomic::Ordering::AcqRel) && {
            self.opened.fetch_add(1, Ordering::Relaxed);
            true
        }
    }
}
