//! An in-flight (concurrency) policy that queues, on a real server: a
//! request over the limit waits in its key's line and is served when a
//! running request's response body ends; the line is bounded (a request
//! beyond it is refused at once) and a request still waiting at `max_wait`
//! is refused then. Streams end when the test says so (a signal, not a
//! timer).

use crate::support;

use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use support::CountPolls;
use support::http::{Req, connect, connect_info, request_bytes, send, serve, start_stream};
use support::recorder::MemoryRecorder;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use tollgate::http::{KeySource, LayerConfig, Policy, RateLimitLayer};

/// A body that sends `tick\n`, then ends once the test's signal reaches
/// its number (the `n`-th stream served ends when the signal is `n`).
struct Gated {
    first: bool,
    until: Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
}

impl Gated {
    fn new(n: u32, mut signal: watch::Receiver<u32>) -> Self {
        Self {
            first: true,
            until: Box::pin(async move {
                let _ = signal.wait_for(|ended| *ended >= n).await;
            }),
        }
    }
}

impl http_body::Body for Gated {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
        if std::mem::take(&mut self.first) {
            return Poll::Ready(Some(Ok(http_body::Frame::data(bytes::Bytes::from_static(
                b"tick\n",
            )))));
        }
        std::task::ready!(self.until.as_mut().poll(cx));
        Poll::Ready(None)
    }
}

/// `/stream` behind `layer`: the `n`-th request served streams until the
/// signal reaches `n`; `served` counts the requests the handler saw.
fn gated(layer: RateLimitLayer, signal: watch::Receiver<u32>, served: Arc<AtomicU32>) -> Router {
    Router::new()
        .route(
            "/stream",
            get(move || {
                let n = served.fetch_add(1, Ordering::SeqCst) + 1;
                let signal = signal.clone();
                async move { Body::new(Gated::new(n, signal)) }
            }),
        )
        .layer(layer)
}

/// Counts the polls of every request's response future (outside the
/// rate-limit layer), in the order the requests came.
#[derive(Clone, Default)]
struct CountPollsLayer(Arc<Mutex<Vec<Arc<AtomicUsize>>>>);

impl CountPollsLayer {
    fn polls(&self, request: usize) -> usize {
        self.0.lock().unwrap()[request].load(Ordering::SeqCst)
    }
}

impl<S> tower_layer::Layer<S> for CountPollsLayer {
    type Service = CountPollsService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        CountPollsService(inner, self.clone())
    }
}

#[derive(Clone)]
struct CountPollsService<S>(S, CountPollsLayer);

impl<S: tower_service::Service<Q>, Q> tower_service::Service<Q> for CountPollsService<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = CountPolls<S::Future>;
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }
    fn call(&mut self, req: Q) -> Self::Future {
        let polls = Arc::new(AtomicUsize::new(0));
        (self.1).0.lock().unwrap().push(Arc::clone(&polls));
        CountPolls::new(self.0.call(req), polls)
    }
}

fn one_stream_per_client(max_wait: &str, queue_limit: u32) -> String {
    format!(
        r#"
[[rules]]
name = "streams"
prefix = "/stream"
algorithm = "concurrency"
limit = 1
key = "peer_ip"
queue = {{ max_wait = "{max_wait}", limit = {queue_limit} }}
"#
    )
}

/// The layer of a rules file, its metrics recorded in `rec`.
fn layer_from(rec: &MemoryRecorder, rules: &str) -> RateLimitLayer {
    metrics::with_local_recorder(rec, || {
        LayerConfig::from_toml(rules)
            .unwrap()
            .into_builder()
            .unwrap()
            .peer_addr(connect_info)
            .build()
            .unwrap()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_request_is_served_when_the_running_response_body_ends() {
    let rec = MemoryRecorder::default();
    let layer = layer_from(&rec, &one_stream_per_client("30s", 1));
    let (end, signal) = watch::channel(0u32);
    let served = Arc::new(AtomicU32::new(0));
    let counted = CountPollsLayer::default();
    let s = serve(gated(layer, signal, Arc::clone(&served)).layer(counted.clone())).await;

    // A streams: its body is open, its permit held
    let (mut a, mut got_a) = start_stream(s.addr, "/stream", [127, 0, 0, 1]).await;
    // B comes from the same client: it waits in the line
    let addr = s.addr;
    let b = tokio::spawn(async move {
        let (conn, _) = start_stream(addr, "/stream", [127, 0, 0, 1]).await;
        (Instant::now(), conn)
    });
    support::eventually("B waits in the line", || rec.queued("streams") >= 1.0).await;
    assert_eq!(
        served.load(Ordering::SeqCst),
        1,
        "B was served while A streams"
    );
    // C finds the line full (1): refused at once, with Retry-After
    let c = send(s.addr, Req::get("/stream")).await;
    assert_eq!(c.status, 429);
    assert_eq!(c.header("retry-after"), Some("1"));
    assert_eq!(served.load(Ordering::SeqCst), 1);
    assert!(!b.is_finished());

    // A's body ends: B is served right after, without a retry
    let ended = Instant::now();
    end.send(1).unwrap();
    a.read_to_end(&mut got_a).await.unwrap();
    let (b_started, _b_conn) = b.await.unwrap();
    assert!(b_started >= ended);
    assert!(
        b_started - ended < Duration::from_secs(5),
        "B served {:?} after A's body ended",
        b_started - ended
    );
    assert_eq!(served.load(Ordering::SeqCst), 2);
    // B's response future: its first poll, then woken by the release only
    // (no timer, no retries) — at most 2 wake-ups
    assert!(counted.polls(1) <= 3, "B polled {} times", counted.polls(1));
    assert_eq!(rec.queued("streams"), 0.0);
    assert_eq!(rec.counter("streams", "acquired"), 2);
    assert_eq!(rec.counter("streams", "endpoint_limiter"), 1);
    end.send(2).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_request_is_refused_when_its_max_wait_passes() {
    let layer = RateLimitLayer::builder()
        .peer_addr(connect_info)
        .policy(
            Policy::concurrency("streams", 1)
                .prefix("/stream")
                .key(KeySource::PeerIp)
                .queue(Duration::from_millis(300), 5),
        )
        .build()
        .unwrap();
    let (end, signal) = watch::channel(0u32);
    let served = Arc::new(AtomicU32::new(0));
    let s = serve(gated(layer, signal, Arc::clone(&served))).await;
    let (_a, _) = start_stream(s.addr, "/stream", [127, 0, 0, 1]).await;
    let asked = Instant::now();
    let b = send(s.addr, Req::get("/stream")).await;
    assert_eq!(b.status, 429);
    assert_eq!(b.header("retry-after"), Some("1"));
    assert!(asked.elapsed() >= Duration::from_millis(300));
    assert_eq!(served.load(Ordering::SeqCst), 1);
    // another client has its own line (and its own permit)
    let (_other, _) = start_stream(s.addr, "/stream", [127, 0, 0, 2]).await;
    end.send(u32::MAX).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_global_in_flight_limit_queues_too() {
    let rec = MemoryRecorder::default();
    let layer = metrics::with_local_recorder(&rec, || {
        RateLimitLayer::builder()
            .peer_addr(connect_info)
            .global(Policy::concurrency("global", 1).queue(Duration::from_secs(30), 4))
            .build()
            .unwrap()
    });
    let (end, signal) = watch::channel(0u32);
    let served = Arc::new(AtomicU32::new(0));
    let s = serve(gated(layer, signal, Arc::clone(&served))).await;
    let (mut a, mut got_a) = start_stream(s.addr, "/stream", [127, 0, 0, 1]).await;
    let addr = s.addr;
    // from another client: the global limit is one for everybody
    let b = tokio::spawn(async move {
        let (conn, _) = start_stream(addr, "/stream", [127, 0, 0, 2]).await;
        (Instant::now(), conn)
    });
    // no route policy: the global limiter's queue is counted without one
    support::eventually("B waits in the global line", || rec.queued("") >= 1.0).await;
    assert_eq!(served.load(Ordering::SeqCst), 1);
    let ended = Instant::now();
    end.send(1).unwrap();
    a.read_to_end(&mut got_a).await.unwrap();
    let (b_started, _b_conn) = b.await.unwrap();
    assert!(b_started >= ended);
    assert_eq!(served.load(Ordering::SeqCst), 2);
    end.send(2).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_client_that_disconnects_frees_its_place_and_takes_no_permit() {
    let rec = MemoryRecorder::default();
    let layer = layer_from(&rec, &one_stream_per_client("30s", 1));
    let (end, signal) = watch::channel(0u32);
    let served = Arc::new(AtomicU32::new(0));
    let s = serve(gated(layer, signal, Arc::clone(&served))).await;
    let (mut a, mut got_a) = start_stream(s.addr, "/stream", [127, 0, 0, 1]).await;

    // B queues, then hangs up
    let mut b = connect(s.addr, [127, 0, 0, 1].into()).await;
    b.write_all(&request_bytes(s.addr, &Req::get("/stream")))
        .await
        .unwrap();
    support::eventually("B waits in the line", || rec.queued("streams") >= 1.0).await;
    assert_eq!(
        send(s.addr, Req::get("/stream")).await.status,
        429,
        "line full"
    );
    drop(b);
    support::eventually("B left the line", || rec.queued("streams") == 0.0).await;
    assert_eq!(rec.counter("streams", "request_canceled"), 1);

    // D takes the place B left, and gets A's permit when A's body ends
    let addr = s.addr;
    let d = tokio::spawn(async move { start_stream(addr, "/stream", [127, 0, 0, 1]).await });
    support::eventually("D waits in the line", || rec.queued("streams") >= 1.0).await;
    end.send(1).unwrap();
    a.read_to_end(&mut got_a).await.unwrap();
    let (_d, _) = d.await.unwrap();
    assert_eq!(served.load(Ordering::SeqCst), 2, "A and D; never B");
    end.send(u32::MAX).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_raises_the_limit_serves_the_waiter_without_a_release() {
    let rec = MemoryRecorder::default();
    let rules = |limit: u32| {
        one_stream_per_client("30s", 1).replace("limit = 1\n", &format!("limit = {limit}\n"))
    };
    let layer = layer_from(&rec, &rules(1));
    let (end, signal) = watch::channel(0u32);
    let served = Arc::new(AtomicU32::new(0));
    let s = serve(gated(layer.clone(), signal, Arc::clone(&served))).await;

    // A streams and holds the one permit; B waits in the line
    let (_a, _) = start_stream(s.addr, "/stream", [127, 0, 0, 1]).await;
    let addr = s.addr;
    let b = tokio::spawn(async move { start_stream(addr, "/stream", [127, 0, 0, 1]).await });
    support::eventually("B waits in the line", || rec.queued("streams") >= 1.0).await;
    assert_eq!(served.load(Ordering::SeqCst), 1);

    // the same rule with a limit of 2 and the same queue: the rule keeps
    // its store and its queue, and B fits now, while A still streams
    let report = layer
        .reload(
            LayerConfig::from_toml(&rules(2))
                .unwrap()
                .into_builder()
                .unwrap()
                .peer_addr(connect_info),
            tollgate::Inheritance::UsedAmount,
        )
        .unwrap();
    assert_eq!(report.reconfigured, ["streams"]);
    let _b = tokio::time::timeout(Duration::from_secs(10), b)
        .await
        .expect("B served after the reload, A still streaming")
        .unwrap();
    assert_eq!(served.load(Ordering::SeqCst), 2);
    assert_eq!(rec.queued("streams"), 0.0);
    end.send(2).unwrap();
}
