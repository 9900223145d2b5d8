//! Warnings about requests without a key, rate-limited: a client leaving
//! its key out on every request must not turn into a log line per request.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::key::KeyError;
use crate::missing_key::MISSING_KEY_LOG_INTERVAL;
use tollgate_core::gcra::Gcra;
use tollgate_core::live::LiveBucket;
use tollgate_core::quota::Quota;
use tollgate_core::time::Timestamp;

/// One policy's missing-key warnings: at most one per
/// [`MISSING_KEY_LOG_INTERVAL`] (a bucket of one permit per interval, on
/// the layer's clock), each counting the requests since the previous one.
pub(crate) struct MissingLog {
    lines: LiveBucket,
    since_line: AtomicU64,
}

impl Default for MissingLog {
    fn default() -> Self {
        const EVERY: Quota = tollgate_core::valid!(Quota::new(1, MISSING_KEY_LOG_INTERVAL));
        Self {
            lines: LiveBucket::new(Gcra::token_bucket(EVERY)),
            since_line: AtomicU64::new(0),
        }
    }
}

impl MissingLog {
    /// Notes one request of policy `policy` without a key (`why`): logs a
    /// warning if the interval allows one.
    pub(crate) fn note(&self, policy: &str, why: KeyError, now: Timestamp) {
        self.since_line.fetch_add(1, Ordering::Relaxed);
        if self.lines.check(now).is_err() {
            return;
        }
        let requests = self.since_line.swap(0, Ordering::Relaxed);
        #[cfg(feature = "tracing")]
        tracing::warn!(
            policy,
            reason = why.as_str(),
            requests,
            interval_s = MISSING_KEY_LOG_INTERVAL.as_secs(),
            "requests without a rate limit key (at most one warning per interval; `requests` counts them since the last)"
        );
        #[cfg(not(feature = "tracing"))]
        let _ = (policy, why, requests);
    }
}
