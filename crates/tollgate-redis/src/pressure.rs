//! Memory pressure: the server refused a write because it is at its
//! `maxmemory` (`OOM command not allowed when used memory > 'maxmemory'`).
//! Counted, and logged at WARN (feature `tracing`) at most once per
//! [`LOG_INTERVAL`] with the number of refusals since the last line.

use core::time::Duration;

use ::redis::RedisError;

use tollgate_core::gcra::Gcra;
use tollgate_core::live::LiveBucket;
use tollgate_core::quota::Quota;
use tollgate_core::sync::{AtomicU64, Ordering};
use tollgate_core::time::Timestamp;

/// The shortest time between two memory-pressure log lines.
pub(crate) const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// True when the server refused the call for memory (error code `OOM`).
pub(crate) fn is_out_of_memory(e: &RedisError) -> bool {
    e.code() == Some("OOM")
}

/// The memory-pressure counter and its rate-limited log line: a core
/// bucket of one line per [`LOG_INTERVAL`] decides when a line is due.
#[derive(Debug)]
pub(crate) struct MemoryPressure {
    /// Calls the server refused for memory, ever.
    pub(crate) events: AtomicU64,
    /// Refusals not yet reported in a log line.
    unlogged: AtomicU64,
    /// One log line per [`LOG_INTERVAL`].
    lines: LiveBucket,
}

impl Default for MemoryPressure {
    fn default() -> Self {
        const EVERY: Quota = tollgate_core::valid!(Quota::new(1, LOG_INTERVAL));
        Self {
            events: AtomicU64::new(0),
            unlogged: AtomicU64::new(0),
            lines: LiveBucket::new(Gcra::token_bucket(EVERY)),
        }
    }
}

impl MemoryPressure {
    /// Counts one refusal at local time `now` (nanoseconds) and, if no line
    /// was logged in the last [`LOG_INTERVAL`], logs one with the count of
    /// refusals since the previous line. Returns that count when this call
    /// logged (for the tests), else `None`.
    pub(crate) fn record(&self, prefix: &[u8], now: u64, cause: &RedisError) -> Option<u64> {
        self.events.fetch_add(1, Ordering::Relaxed);
        self.unlogged.fetch_add(1, Ordering::Relaxed);
        self.lines.check(Timestamp::from_nanos(now)).ok()?;
        let count = self.unlogged.swap(0, Ordering::Relaxed);
        #[cfg(feature = "tracing")]
        tracing::warn!(
            prefix = %String::from_utf8_lossy(prefix),
            refused_for_memory = count,
            interval_s = LOG_INTERVAL.as_secs(),
            cause = %cause,
            "rate-limit store at maxmemory: writes refused, the failure policy answers new and unthrottled keys (see the tollgate-redis guide, Memory)"
        );
        #[cfg(not(feature = "tracing"))]
        let _ = (prefix, cause);
        Some(count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    const SECOND: u64 = 1_000_000_000;

    #[test]
    fn the_out_of_memory_error_is_told_by_its_code() {
        let oom = ::redis::make_extension_error(
            "OOM".to_string(),
            Some("command not allowed when used memory > 'maxmemory'.".to_string()),
        );
        assert!(is_out_of_memory(&oom));
        let other = ::redis::make_extension_error("BUSY".to_string(), None);
        assert!(!is_out_of_memory(&other));
    }

    #[test]
    fn one_line_per_interval_carries_the_count_since_the_last() {
        let oom = ::redis::make_extension_error("OOM".to_string(), None);
        let p = MemoryPressure::default();
        assert_eq!(p.record(b"p:", 5 * SECOND, &oom), Some(1), "the first logs");
        for t in 6..15 {
            assert_eq!(p.record(b"p:", t * SECOND, &oom), None, "at {t} s");
        }
        // 10 s after the first line: the 9 unlogged and this one
        assert_eq!(p.record(b"p:", 15 * SECOND, &oom), Some(10));
        assert_eq!(p.record(b"p:", 15 * SECOND + 1, &oom), None);
        assert_eq!(p.record(b"p:", 40 * SECOND, &oom), Some(2));
        assert_eq!(p.events.load(Ordering::Relaxed), 13);
    }
}
