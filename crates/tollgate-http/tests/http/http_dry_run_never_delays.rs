//! Issue 16.3: a dry-run (shadow) policy never changes what a client
//! sees: a queueing shadow policy neither delays nor refuses; it logs
//! "dry run: would delay" / "would refuse", counts `result = "dry_run"`,
//! and gives its reservation back. (Its own test binary: `tracing` caches
//! each call site's interest process-wide, so the subscriber of this test
//! must be the first to see the layer's events.)

use crate::support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use support::http::{Req, connect_info, hello, now, paused_clock, send_paused, serve};
use tollgate::Quota;
use tollgate::http::metrics::REQUESTS;
use tollgate::http::{Policy, RateLimitLayer};

/// Keeps the requests counters by labels.
#[derive(Default, Clone)]
struct MemoryRecorder {
    counters: Arc<Mutex<BTreeMap<String, Arc<AtomicU64>>>>,
}

impl MemoryRecorder {
    fn counter(&self, policy: &str, result: &str) -> u64 {
        let k = format!("policy={policy},result={result}");
        self.counters
            .lock()
            .unwrap()
            .get(&k)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }
}

impl Recorder for MemoryRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        if key.name() != REQUESTS {
            return Counter::noop();
        }
        let mut labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        labels.sort();
        let c = self
            .counters
            .lock()
            .unwrap()
            .entry(labels.join(","))
            .or_default()
            .clone();
        Counter::from_arc(c)
    }
    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }
    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

/// Issue 16.3: a dry-run policy that queues never delays nor refuses: it
/// logs and counts what it would do and answers at once. (Current-thread
/// runtime: the server runs on this thread, under this test's subscriber.
/// On tokio's paused time, the layer reading a `TokioClock`: a delay slept
/// would move tokio's time, so "at once" is exact.)
#[tokio::test(start_paused = true)]
async fn a_dry_run_queue_never_delays_what_a_client_sees() {
    let (log, _guard) = support::log::capture();
    let rec = MemoryRecorder::default();
    let layer = metrics::with_local_recorder(&rec, || {
        RateLimitLayer::builder()
            .clock(paused_clock())
            .peer_addr(connect_info)
            .headers_on_success(true)
            // 1 per minute, up to 10 waiting 5 minutes: would delay
            .policy(
                Policy::token_bucket("shadow_delay", Quota::per_minute(1).unwrap())
                    .prefix("/delay")
                    .queue(Duration::from_secs(300), 10)
                    .dry_run(true),
            )
            // 1 per minute, waiting at most 30 s: would refuse
            .policy(
                Policy::token_bucket("shadow_refuse", Quota::per_minute(1).unwrap())
                    .prefix("/refuse")
                    .queue(Duration::from_secs(30), 10)
                    .dry_run(true),
            )
            .build()
            .unwrap()
    });
    let s = serve(hello(layer)).await;
    let start = now();
    for path in ["/delay", "/refuse"] {
        for i in 0..5 {
            let r = send_paused(s.addr, Req::get(path)).await;
            assert_eq!(r.status, 200, "{path} #{i}");
            assert_eq!(r.body, "ok");
        }
    }
    // no timer ran: tokio's time has not moved
    assert_eq!(now() - start, Duration::ZERO, "answered at once");
    for policy in ["shadow_delay", "shadow_refuse"] {
        assert_eq!(rec.counter(policy, "acquired"), 5, "{policy}");
        assert_eq!(rec.counter(policy, "dry_run"), 4, "{policy}");
        assert_eq!(rec.counter(policy, "endpoint_limiter"), 0, "{policy}");
    }
    let text = log.text();
    assert_eq!(text.matches("dry run: would delay").count(), 4, "{text}");
    assert_eq!(text.matches("dry run: would refuse").count(), 4, "{text}");
    assert!(text.contains("shadow_delay") && text.contains("shadow_refuse"));
    // the shadow bucket holds what it admitted at once, not the delays it
    // gave back: each would-be wait is one interval (exactly: no time
    // passed), not 1, 2, 3, 4 of them
    let delays: Vec<u64> = text
        .split("delay_ms=")
        .skip(1)
        .map(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().unwrap()
        })
        .collect();
    assert_eq!(delays.len(), 4, "{text}");
    assert_eq!(delays, [60_000; 4], "{text}");
}
