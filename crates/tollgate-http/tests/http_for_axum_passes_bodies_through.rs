//! `RateLimitLayer::for_axum` (feature `axum`): the layer answers with
//! axum's own `Body`, so axum's router does not box every response body
//! again. Pinned here: an admitted request through `Router::layer` costs no
//! heap allocation beyond what the router costs with a layer that does
//! nothing (counted by a counting global allocator), while the default
//! mode costs one more (the box axum makes); and
//! on a real server, refusals, handler text and an in-flight permit held
//! across a streamed body behave as in the default mode.

use tollgate_test_support as support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::SocketAddr;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::get;
use http::{Request, StatusCode};
use support::http::{Req, Ticks, connect_info, send, serve, start_stream};
use tokio::io::AsyncReadExt;
use tollgate::Quota;
use tollgate::http::{KeySource, MissingKey, Policy, RateLimitLayer};
use tower_service::Service;

/// Counts the allocations made on the current thread while counting.
struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    // try_with: the thread-locals may be gone while a thread exits
    let _ = COUNTING.try_with(|c| {
        if c.get() {
            let _ = ALLOCATIONS.try_with(|a| a.set(a.get() + 1));
        }
    });
}

// SAFETY: every call is forwarded to the system allocator unchanged; the
// counters are const-initialised thread-local `Cell`s (no allocation).
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is System's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: the caller's contract is System's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn hello() -> Router {
    Router::new().route("/", get(|| async { "hello" }))
}

fn request() -> Request<Body> {
    let mut req = Request::get("/").body(Body::empty()).unwrap();
    req.extensions_mut()
        .insert(ConnectInfo(SocketAddr::from(([192, 0, 2, 7], 50_000))));
    req
}

/// Allocations per request of `app`, in a steady state (after a warm-up
/// that inserts the key and grows whatever grows once), every request
/// admitted and its body read to the end.
async fn allocations_per_request(app: &mut Router) -> f64 {
    const N: u64 = 1_000;
    async fn one(app: &mut Router) {
        std::future::poll_fn(|cx| Service::<Request<Body>>::poll_ready(app, cx))
            .await
            .unwrap();
        let res = app.call(request()).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let body = axum::body::to_bytes(res.into_body(), 64).await.unwrap();
        assert_eq!(&body[..], b"hello");
    }
    for _ in 0..100 {
        one(app).await;
    }
    ALLOCATIONS.with(|a| a.set(0));
    COUNTING.with(|c| c.set(true));
    for _ in 0..N {
        one(app).await;
    }
    COUNTING.with(|c| c.set(false));
    ALLOCATIONS.with(Cell::get) as f64 / N as f64
}

/// A middleware that forwards every request and its response unchanged,
/// carrying a configuration behind an `Arc` as real middleware does (axum
/// clones the layer for every request to a handler route: a layer of zero
/// size would save that clone's box, which no real layer does).
#[derive(Clone)]
struct Forward(#[allow(dead_code)] std::sync::Arc<u64>);

impl<S> tower_layer::Layer<S> for Forward {
    type Service = Forwarding<S>;

    fn layer(&self, inner: S) -> Forwarding<S> {
        Forwarding(inner)
    }
}

#[derive(Clone)]
struct Forwarding<S>(S);

impl<S: Service<Request<Body>>> Service<Request<Body>> for Forwarding<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Body>) -> S::Future {
        self.0.call(req)
    }
}

fn plenty() -> Quota {
    // never refuses
    Quota::new(1, Duration::from_nanos(1))
        .unwrap()
        .with_burst(1_000_000_000)
        .unwrap()
}

fn global_and_per_ip() -> RateLimitLayer {
    RateLimitLayer::builder()
        .peer_addr(connect_info)
        .global(Policy::token_bucket("global", plenty()))
        .policy(
            Policy::token_bucket("per_ip", plenty())
                .prefix("/")
                .key(KeySource::PeerIp),
        )
        .build()
        .unwrap()
}

#[tokio::test(flavor = "current_thread")]
async fn an_admitted_request_allocates_nothing_beyond_a_forwarding_middleware() {
    // axum's router wraps any layer's service in a boxed `Route` that it
    // clones for every call (a few allocations per request, whatever the
    // layer does): the baseline is the router behind a middleware that
    // only forwards the request
    let bare = allocations_per_request(&mut hello()).await;
    let identity =
        allocations_per_request(&mut hello().layer(Forward(std::sync::Arc::new(0)))).await;
    let axum_mode =
        allocations_per_request(&mut hello().layer(global_and_per_ip().for_axum())).await;
    let wrapped = allocations_per_request(&mut hello().layer(global_and_per_ip())).await;
    println!(
        "allocations per request: bare router {bare}, behind a forwarding middleware {identity}, \
         with tollgate for_axum {axum_mode}, with tollgate's default body {wrapped}"
    );
    assert!(
        bare > 0.0,
        "the counter counts (axum allocates per request)"
    );
    assert!(identity > bare, "axum's layering allocates");
    assert_eq!(
        axum_mode, identity,
        "for_axum adds no allocation of its own"
    );
    // the default body is boxed again by axum's router: one allocation
    // more, which is what for_axum exists to save
    assert_eq!(wrapped, identity + 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_and_handler_text_are_axum_bodies() {
    let layer = RateLimitLayer::builder()
        .peer_addr(connect_info)
        .policy(
            Policy::token_bucket("api", Quota::per_minute(2).unwrap())
                .prefix("/")
                .key(KeySource::PeerIp),
        )
        .policy(
            Policy::token_bucket("texts", Quota::per_minute(1).unwrap())
                .prefix("/text")
                .key(KeySource::PeerIp)
                .on_rejected(|r, _| {
                    let mut res = http::Response::new(format!("slow down ({})", r.policy()));
                    *res.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                    res
                }),
        )
        .policy(
            Policy::token_bucket("keyed", plenty())
                .prefix("/keyed")
                .key(KeySource::Header(http::HeaderName::from_static(
                    "x-api-key",
                )))
                .missing_key(MissingKey::Reject(StatusCode::UNAUTHORIZED)),
        )
        .build()
        .unwrap()
        .for_axum();
    let app = Router::new()
        .route("/", get(|| async { "hello" }))
        .route("/text", get(|| async { "text" }))
        .route("/keyed", get(|| async { "keyed" }))
        .layer(layer);
    let s = serve(app).await;
    for _ in 0..2 {
        let r = send(s.addr, Req::get("/")).await;
        assert_eq!((r.status, r.body.as_str()), (200, "hello"));
    }
    let r = send(s.addr, Req::get("/")).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("30"));
    assert_eq!(r.header("ratelimit-policy"), Some("\"api\";q=2;w=60"));
    assert_eq!(r.header("content-length"), Some("0"));
    assert_eq!(r.body, "");

    let r = send(s.addr, Req::get("/text")).await;
    assert_eq!((r.status, r.body.as_str()), (200, "text"));
    let r = send(s.addr, Req::get("/text")).await;
    assert_eq!((r.status, r.body.as_str()), (503, "slow down (texts)"));
    assert_eq!(r.header("retry-after"), Some("60"));

    let r = send(s.addr, Req::get("/keyed")).await;
    assert_eq!((r.status, r.body.as_str()), (401, ""));
    let r = send(s.addr, Req::get("/keyed").header("x-api-key", "k")).await;
    assert_eq!((r.status, r.body.as_str()), (200, "keyed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_flight_permit_is_held_until_the_streamed_body_ends() {
    let layer = RateLimitLayer::builder()
        .peer_addr(connect_info)
        .policy(
            Policy::concurrency("streams", 1)
                .prefix("/stream")
                .key(KeySource::PeerIp),
        )
        .build()
        .unwrap()
        .for_axum();
    let app = Router::new()
        .route(
            "/stream",
            get(|| async { Body::new(Ticks::new(4, Duration::from_millis(100))) }),
        )
        .layer(layer);
    let s = serve(app).await;
    let (mut a, mut got) = start_stream(s.addr, "/stream", [127, 0, 0, 1]).await;
    let mut buf = [0u8; 1024];
    // the handler returned, the body streams: the permit is still taken
    let r = send(s.addr, Req::get("/stream")).await;
    assert_eq!(r.status, 429);
    // another client is unaffected
    let r = send(s.addr, Req::get("/stream").from([127, 0, 0, 2])).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body.matches("tick").count(), 4);
    // the whole body read (chunked: its last chunk), the slot is free
    while !String::from_utf8_lossy(&got).contains("0\r\n\r\n") {
        let n = a.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed before the end of the stream");
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(String::from_utf8_lossy(&got).matches("tick").count(), 4);
    let r = send(s.addr, Req::get("/stream")).await;
    assert_eq!(r.status, 200);
}
