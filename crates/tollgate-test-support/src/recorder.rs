//! A `metrics` recorder that keeps every counter, gauge and histogram in
//! memory, for tests that read what the HTTP layer recorded (install it
//! with `metrics::with_local_recorder` around the layer's `build`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};
use tollgate::http::metrics::{QUEUED_REQUESTS, REQUESTS};

#[derive(Default)]
pub struct Samples(pub Mutex<Vec<f64>>);

impl HistogramFn for Samples {
    fn record(&self, value: f64) {
        self.0.lock().unwrap().push(value);
    }
}

/// Keeps every registered counter, gauge and histogram by name and labels.
#[derive(Default, Clone)]
pub struct MemoryRecorder {
    pub counters: Arc<Mutex<BTreeMap<String, Arc<AtomicU64>>>>,
    pub gauges: Arc<Mutex<BTreeMap<String, Arc<AtomicU64>>>>,
    pub histograms: Arc<Mutex<BTreeMap<String, Arc<Samples>>>>,
}

/// `name{label=value,...}`, labels sorted.
pub fn id(key: &Key) -> String {
    let mut labels: Vec<String> = key
        .labels()
        .map(|l| format!("{}={}", l.key(), l.value()))
        .collect();
    labels.sort();
    format!("{}{{{}}}", key.name(), labels.join(","))
}

impl MemoryRecorder {
    /// The `requests` counter of `policy` for `result` (0 if never
    /// registered).
    pub fn counter(&self, policy: &str, result: &str) -> u64 {
        let k = format!("{REQUESTS}{{policy={policy},result={result}}}");
        self.counters
            .lock()
            .unwrap()
            .get(&k)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Requests of `policy` waiting in its queue now (the gauge; 0 if never
    /// registered).
    pub fn queued(&self, policy: &str) -> f64 {
        let k = format!("{QUEUED_REQUESTS}{{policy={policy}}}");
        self.gauges
            .lock()
            .unwrap()
            .get(&k)
            .map_or(0.0, |g| f64::from_bits(g.load(Ordering::Relaxed)))
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
