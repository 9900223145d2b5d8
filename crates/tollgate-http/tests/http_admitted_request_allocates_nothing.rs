//! An admitted request costs the layer no heap allocation: a counting
//! global allocator counts the allocations made on this thread while the
//! layer's service is called and its response future polled, around an
//! inner service that allocates nothing itself.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use tollgate::Quota;
use tollgate::http::{KeySource, Policy, RateLimitLayer};
use tollgate_test_support::http::EmptyOk;
use tower_layer::Layer;
use tower_service::Service;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded to the system allocator unchanged; the
// counter is a const-initialised thread-local `Cell` (no allocation).
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is System's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract is System's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

fn peer(ext: &http::Extensions) -> Option<SocketAddr> {
    ext.get::<SocketAddr>().copied()
}

fn request(path: &str, ip: [u8; 4]) -> Request<()> {
    let mut req = Request::get(path).body(()).expect("request");
    req.extensions_mut().insert(SocketAddr::from((ip, 40_000)));
    req
}

/// The allocations made while calling `layer`'s service for each request
/// (built beforehand) and polling its response, and the statuses.
fn allocations_per_call(
    layer: &RateLimitLayer,
    requests: Vec<Request<()>>,
) -> (u64, Vec<StatusCode>) {
    let mut svc = layer.layer(EmptyOk);
    let mut cx = Context::from_waker(Waker::noop());
    let mut statuses = Vec::with_capacity(requests.len());
    let mut responses = Vec::with_capacity(requests.len());
    let before = allocations();
    for req in requests {
        assert!(matches!(
            Service::<Request<()>>::poll_ready(&mut svc, &mut cx),
            Poll::Ready(Ok(()))
        ));
        let fut = pin!(svc.call(req));
        match fut.poll(&mut cx) {
            Poll::Ready(Ok(res)) => responses.push(res),
            _ => panic!("the inner service answers at once"),
        }
    }
    let during = allocations() - before;
    // read (and drop) the responses outside the counted region
    statuses.extend(responses.iter().map(Response::status));
    (during, statuses)
}

fn quota() -> Quota {
    Quota::per_second(1_000_000)
        .and_then(|q| q.with_burst(1_000_000))
        .expect("quota")
}

fn check(layer: RateLimitLayer, paths: &[&str]) {
    // warm up: the first calls may initialise the clock and per-thread
    // state, and insert each client's key into its table (allocated once)
    let ips = [[192, 0, 2, 1], [192, 0, 2, 2], [198, 51, 100, 7]];
    let warm = paths
        .iter()
        .flat_map(|p| ips.iter().map(move |ip| request(p, *ip)))
        .collect();
    let (_, statuses) = allocations_per_call(&layer, warm);
    assert!(
        statuses.iter().all(|s| *s == StatusCode::OK),
        "{statuses:?}"
    );
    let requests: Vec<_> = (0..1000)
        .map(|i| request(paths[i % paths.len()], ips[i % ips.len()]))
        .collect();
    let (allocated, statuses) = allocations_per_call(&layer, requests);
    assert!(
        statuses.iter().all(|s| *s == StatusCode::OK),
        "{statuses:?}"
    );
    assert_eq!(allocated, 0, "allocations in 1000 admitted requests");
}

#[test]
fn a_global_limit_allocates_nothing() {
    let layer = RateLimitLayer::builder()
        .peer_addr(peer)
        .global(Policy::token_bucket("global", quota()))
        .build()
        .expect("layer");
    check(layer, &["/", "/api/items"]);
}

#[test]
fn a_per_ip_route_policy_under_a_global_limit_allocates_nothing() {
    let layer = RateLimitLayer::builder()
        .peer_addr(peer)
        .global(Policy::token_bucket("global", quota()))
        .policy(
            Policy::token_bucket("api", quota())
                .prefix("/api")
                .key(KeySource::PeerIp),
        )
        .policy(Policy::fixed_window("pages", 1_000_000, Duration::from_secs(1)).prefix("/pages"))
        .policy(
            Policy::sliding_window("search", 1_000_000, Duration::from_secs(1))
                .prefix("/api/search")
                .key(KeySource::PeerIp),
        )
        .exempt("/health")
        .build()
        .expect("layer");
    check(
        layer,
        &[
            "/api/items",
            "/API/items/7",
            "/pages/a",
            "/api/search",
            "/health",
            "/other",
        ],
    );
}

#[test]
fn the_counter_sees_allocations() {
    // the test would be vacuous if the counter missed them
    let before = allocations();
    let v: Vec<u8> = Vec::with_capacity(16);
    std::hint::black_box(&v);
    assert!(allocations() > before);
}
