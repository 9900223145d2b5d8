//! Observability: `metrics` counters named like ASP.NET Core's, labelled
//! with the policy, recorded by a real in-test recorder; dry-run (shadow)
//! policies count what they would refuse and refuse nothing.
#![cfg(all(feature = "http", feature = "metrics"))]

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};
use support::http::{connect, connect_info, hello, request_bytes, send, serve, Req};
use tokio::io::AsyncWriteExt;
use tollgate::http::metrics::{QUEUED_REQUESTS, REQUESTS, TIME_IN_QUEUE};
use tollgate::http::{Policy, RateLimitLayer};
use tollgate::Quota;

#[derive(Default)]
struct Samples(Mutex<Vec<f64>>);

impl HistogramFn for Samples {
    fn record(&self, value: f64) {
        self.0.lock().unwrap().push(value);
    }
}

/// Keeps every registered counter, gauge and histogram by name and labels.
#[derive(Default, Clone)]
struct MemoryRecorder {
    counters: Arc<Mutex<BTreeMap<String, Arc<AtomicU64>>>>,
    gauges: Arc<Mutex<BTreeMap<String, Arc<AtomicU64>>>>,
    histograms: Arc<Mutex<BTreeMap<String, Arc<Samples>>>>,
}

fn id(key: &Key) -> String {
    let mut labels: Vec<String> = key
        .labels()
        .map(|l| format!("{}={}", l.key(), l.value()))
        .collect();
    labels.sort();
    format!("{}{{{}}}", key.name(), labels.join(","))
}

impl MemoryRecorder {
    fn counter(&self, policy: &str, result: &str) -> u64 {
        let k = format!("{REQUESTS}{{policy={policy},result={result}}}");
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
        let c = self
            .counters
            .lock()
            .unwrap()
            .entry(id(key))
            .or_default()
            .clone();
        Counter::from_arc(c)
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        let g = self
            .gauges
            .lock()
            .unwrap()
            .entry(id(key))
            .or_default()
            .clone();
        Gauge::from_arc(g)
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        let h = self
            .histograms
            .lock()
            .unwrap()
            .entry(id(key))
            .or_default()
            .clone();
        Histogram::from_arc(h)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_by_result_and_policy_and_a_shadow_policy() {
    let rec = MemoryRecorder::default();
    let layer = metrics::with_local_recorder(&rec, || {
        RateLimitLayer::builder()
            .peer_addr(connect_info)
            .global(Policy::token_bucket(
                "global",
                Quota::per_hour(6).unwrap().with_burst(6).unwrap(),
            ))
            .policy(Policy::token_bucket("api", Quota::per_hour(1).unwrap()).prefix("/api"))
            .policy(
                Policy::token_bucket("shadow", Quota::per_hour(1).unwrap())
                    .prefix("/shadow")
                    .dry_run(true),
            )
            .policy(
                Policy::token_bucket("queued", Quota::per_second(1).unwrap())
                    .prefix("/queued")
                    .queue(Duration::from_secs(5), 5),
            )
            .build()
            .unwrap()
    });
    let s = serve(hello(layer)).await;

    // api: 1 admitted, 2 refused by the policy (global refunded)
    let api: Vec<u16> = [
        send(s.addr, Req::get("/api")).await.status,
        send(s.addr, Req::get("/api")).await.status,
        send(s.addr, Req::get("/api")).await.status,
    ]
    .into();
    assert_eq!(api, [200, 429, 429]);
    // shadow: 3 admitted although 2 are over its limit
    for _ in 0..3 {
        assert_eq!(send(s.addr, Req::get("/shadow")).await.status, 200);
    }
    assert_eq!(rec.counter("api", "acquired"), 1);
    assert_eq!(rec.counter("api", "endpoint_limiter"), 2);
    assert_eq!(rec.counter("shadow", "acquired"), 3);
    assert_eq!(rec.counter("shadow", "dry_run"), 2);
    assert_eq!(rec.counter("shadow", "endpoint_limiter"), 0);

    // queued: one served at once, one queued then cancelled by its client
    assert_eq!(send(s.addr, Req::get("/queued")).await.status, 200);
    let mut gone = connect(s.addr, "127.0.0.1".parse().unwrap()).await;
    gone.write_all(&request_bytes(s.addr, &Req::get("/queued")))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    let queued_key = format!("{QUEUED_REQUESTS}{{policy=queued}}");
    let queued_now =
        || f64::from_bits(rec.gauges.lock().unwrap()[&queued_key].load(Ordering::Relaxed));
    assert_eq!(queued_now(), 1.0);
    drop(gone);
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(queued_now(), 0.0);
    assert_eq!(rec.counter("queued", "request_canceled"), 1);
    // the global permit of the cancelled request was refunded: 6 per hour,
    // used by api 1 + shadow 3 + queued 1 = 5, so one more gets through
    // and the next is refused by the global limiter
    assert_eq!(send(s.addr, Req::get("/other")).await.status, 200);
    let r = send(s.addr, Req::get("/other")).await;
    assert_eq!(r.status, 429);
    assert_eq!(rec.counter("", "global_limiter"), 1);
    assert_eq!(rec.counter("", "acquired"), 1);

    // the served queued request recorded its (near-zero) time in the
    // queue; the cancelled one recorded none
    let hist = format!("{TIME_IN_QUEUE}{{policy=queued}}");
    let samples = rec.histograms.lock().unwrap()[&hist]
        .0
        .lock()
        .unwrap()
        .clone();
    assert_eq!(samples.len(), 1, "{samples:?}");
    assert!(samples[0] < 0.5, "{samples:?}");
}
