//! The circuit breaker's state, shared by a store and its probe task.

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
}

impl BreakerState {
    pub(super) fn is_open(&self) -> bool {
        self.open.load(std::sync::atomic::Ordering::Acquire)
    }

    pub(super) fn close(&self) {
        self.consecutive.store(0, Ordering::Relaxed);
        self.open.store(false, std::sync::atomic::Ordering::Release);
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
