//! Counters through the `metrics` facade, named like ASP.NET Core's
//! rate-limiting meters, labelled with the policy name.
//!
//! | name | kind | labels |
//! |---|---|---|
//! | `tollgate.rate_limiting.requests` | counter | `policy`, `result` = `acquired` / `global_limiter` / `endpoint_limiter` / `request_canceled` / `dry_run` |
//! | `tollgate.rate_limiting.queued_requests` | gauge | `policy` |
//! | `tollgate.rate_limiting.request.time_in_queue` | histogram (seconds) | `policy` |
//!
//! `policy` is the route policy that matched (empty when only the global
//! limiter applied); `dry_run` is counted on the shadow policy itself, once
//! for each request it would have refused or delayed. A request admitted
//! under a queueing policy records its time in the queue (zero when it
//! passed at once); `queued_requests` counts the requests waiting their
//! turn, and `request_canceled` those whose client went away meanwhile.
//! The handles are registered when the layer is built: install the
//! recorder first.
//!
//! **Without feature `metrics`** nothing is recorded, the `metrics` crate
//! is not a dependency, and the names below **do not exist**: code that
//! reads these counters by their names (a test suite, a dashboard check)
//! then fails to compile, saying `cannot find value REQUESTS in module
//! metrics`, instead of reading zeros. (A counter read by its literal name
//! bypasses that check: use the constants.)

#[cfg(feature = "metrics")]
use metrics::{Counter, Gauge, Histogram};
#[cfg(not(feature = "metrics"))]
use noop::{Counter, Gauge, Histogram};
#[cfg(feature = "metrics")]
use std::string::ToString;

/// Name of the requests counter.
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub const REQUESTS: &str = "tollgate.rate_limiting.requests";
/// Name of the queued-requests gauge.
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub const QUEUED_REQUESTS: &str = "tollgate.rate_limiting.queued_requests";
/// Name of the time-in-queue histogram (seconds).
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub const TIME_IN_QUEUE: &str = "tollgate.rate_limiting.request.time_in_queue";

pub(crate) struct PolicyMetrics {
    pub(crate) acquired: Counter,
    pub(crate) global_limiter: Counter,
    pub(crate) endpoint_limiter: Counter,
    pub(crate) request_canceled: Counter,
    pub(crate) dry_run: Counter,
    pub(crate) queued: Gauge,
    pub(crate) time_in_queue: Histogram,
}

#[cfg(feature = "metrics")]
impl PolicyMetrics {
    pub(crate) fn new(policy: &str) -> Self {
        let requests = |result: &'static str| metrics::counter!(REQUESTS, "policy" => policy.to_string(), "result" => result);
        Self {
            acquired: requests("acquired"),
            global_limiter: requests("global_limiter"),
            endpoint_limiter: requests("endpoint_limiter"),
            request_canceled: requests("request_canceled"),
            dry_run: requests("dry_run"),
            queued: metrics::gauge!(QUEUED_REQUESTS, "policy" => policy.to_string()),
            time_in_queue: metrics::histogram!(TIME_IN_QUEUE, "policy" => policy.to_string()),
        }
    }
}

#[cfg(not(feature = "metrics"))]
impl PolicyMetrics {
    pub(crate) fn new(_policy: &str) -> Self {
        Self {
            acquired: Counter,
            global_limiter: Counter,
            endpoint_limiter: Counter,
            request_canceled: Counter,
            dry_run: Counter,
            queued: Gauge,
            time_in_queue: Histogram,
        }
    }
}

/// Handles that record nothing, with the methods the layer calls, so that
/// the layer's code is the same with and without feature `metrics`.
#[cfg(not(feature = "metrics"))]
mod noop {
    pub(crate) struct Counter;
    impl Counter {
        #[inline(always)]
        pub(crate) fn increment(&self, _: u64) {}
    }
    pub(crate) struct Gauge;
    impl Gauge {
        #[inline(always)]
        pub(crate) fn increment(&self, _: f64) {}
        #[inline(always)]
        pub(crate) fn decrement(&self, _: f64) {}
    }
    pub(crate) struct Histogram;
    impl Histogram {
        #[inline(always)]
        pub(crate) fn record(&self, _: f64) {}
    }
}
