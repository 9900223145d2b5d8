//! A flood of distinct keys costs fixed memory, and a throttled client
//! stays throttled through it (issue 19, item 2).
//!
//! One layer, two rules: `/api` keyed by a 4 KiB `X-Api-Key` header, `/v6`
//! keyed by the client's IPv6 address behind a trusted proxy (127.0.0.1,
//! `X-Forwarded-For`). The **bulk** — 1,000,000 distinct header keys of
//! 4 KiB, then 1,000,000 distinct IPv6 addresses within one /64 — is driven
//! through the layer's service directly (`poll_ready` + `call`, as tower's
//! `oneshot`), because a million 4 KiB requests over real HTTP take minutes
//! in a debug build; the **throttled-client checks** go through a real axum
//! server on loopback sharing the same layer, before and after the flood.
//!
//! Memory: the process's resident set (`VmRSS` in `/proc/self/status`)
//! may grow by at most [`RSS_GROWTH_BOUND`] over the flood. A table stores
//! a 128-bit digest per header key and one key per IPv6 /64, so the
//! growth is the table's fixed slots (10,000 × a few dozen bytes) and the
//! allocator's slack. Before keys were hashed, the table kept each key's
//! 4 KiB: 10,000 slots × 4 KiB ≈ 40 MiB (and 60 KiB keys, 600 MiB).
//!
//! `TOLLGATE_FLOOD_KEYS` overrides the number of keys of each kind.
#![cfg(feature = "http")]
mod support;

use std::convert::Infallible;
use std::future::{ready, Ready};
use std::net::SocketAddr;
use std::task::{Context, Poll};
use std::time::Instant;

use http::{HeaderValue, Request, Response, StatusCode};
use support::http::{hello, serve, Req};
use tollgate::http::{ForwardedHeader, KeySource, Policy, RateLimitLayer};
use tollgate::Quota;
use tower_layer::Layer;
use tower_service::Service;

/// The most the resident set may grow over the flood.
const RSS_GROWTH_BOUND: u64 = 24 << 20;

/// An inner service answering 200 at once.
#[derive(Clone)]
struct Ok200;

impl Service<Request<()>> for Ok200 {
    type Response = Response<String>;
    type Error = Infallible;
    type Future = Ready<Result<Response<String>, Infallible>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, _: Request<()>) -> Self::Future {
        ready(Ok(Response::new(String::new())))
    }
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS line");
    kb * 1024
}

fn flood_keys() -> u64 {
    std::env::var("TOLLGATE_FLOOD_KEYS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000)
}

fn layer() -> RateLimitLayer {
    // one request per hour per key: every key the flood touches stays
    // throttled, the worst case for a table (nothing can be evicted)
    let quota = Quota::per_hour(1).unwrap();
    RateLimitLayer::builder()
        .trusted_proxies(["127.0.0.1/32".parse().unwrap()])
        .peer_addr(support::http::connect_info)
        .policy(
            Policy::token_bucket("api", quota)
                .prefix("/api")
                .key(KeySource::Header("x-api-key".parse().unwrap())),
        )
        .policy(
            Policy::token_bucket("v6", quota)
                .prefix("/v6")
                .key(KeySource::ClientIp(ForwardedHeader::XForwardedFor)),
        )
        .build()
        .unwrap()
}

/// Sends `count` requests to `path`, the i-th carrying `header(i)`, through
/// the layer's service (no server); returns how many were admitted.
fn drive(
    layer: &RateLimitLayer,
    path: &str,
    count: u64,
    header: impl Fn(u64, &mut Vec<u8>) -> (&'static str, HeaderValue),
) -> u64 {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut svc = layer.layer(Ok200);
    let peer = SocketAddr::from(([127, 0, 0, 1], 40_000));
    let mut buf = Vec::new();
    let mut admitted = 0;
    rt.block_on(async {
        for i in 0..count {
            let (name, value) = header(i, &mut buf);
            let mut req = Request::get(path).body(()).unwrap();
            req.headers_mut().insert(name, value);
            req.extensions_mut()
                .insert(axum::extract::ConnectInfo(peer));
            std::future::poll_fn(|cx| Service::<Request<()>>::poll_ready(&mut svc, cx))
                .await
                .unwrap();
            let res = svc.call(req).await.unwrap();
            if res.status() == StatusCode::OK {
                admitted += 1;
            }
        }
    });
    admitted
}

#[test]
fn a_million_hostile_keys_keep_memory_fixed_and_the_throttled_client_throttled() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let layer = layer();
    let server = rt.block_on(serve(hello(layer.clone())));
    let victim_key = "victim-".repeat(600); // 4 KiB
    let api = |k: &'static str| Req::get("/api").header("x-api-key", k);
    let v6 = |ip: &'static str| Req::get("/v6").header("x-forwarded-for", ip);
    let victim: &'static str = Box::leak(victim_key.into_boxed_str());
    rt.block_on(async {
        assert_eq!(
            support::http::send(server.addr, api(victim)).await.status,
            200
        );
        assert_eq!(
            support::http::send(server.addr, api(victim)).await.status,
            429
        );
        let first = support::http::send(server.addr, v6("2001:db8:1:2::1")).await;
        assert_eq!(first.status, 200);
        let again = support::http::send(server.addr, v6("2001:db8:1:2:ffff::9")).await;
        assert_eq!(again.status, 429, "the same /64 is the same client");
    });

    // warm up the allocator with a few keys (far fewer than the table's
    // 10,000 slots: filling them is part of what is measured)
    let n = flood_keys();
    let warm = drive(&layer, "/api", 100, |i, buf| {
        header_key(i + u64::MAX / 2, buf)
    });
    assert_eq!(warm, 100);
    let before = rss_bytes();
    let started = Instant::now();
    let admitted = drive(&layer, "/api", n, header_key);
    let header_secs = started.elapsed().as_secs_f64();
    let after_headers = rss_bytes();
    let started = Instant::now();
    let admitted_v6 = drive(&layer, "/v6", n, |i, _| {
        let ip = format!(
            "2001:db8:1:2:{:x}:{:x}:{:x}:{:x}",
            i >> 48,
            (i >> 32) & 0xffff,
            (i >> 16) & 0xffff,
            i & 0xffff
        );
        ("x-forwarded-for", HeaderValue::from_str(&ip).unwrap())
    });
    let v6_secs = started.elapsed().as_secs_f64();
    let after = rss_bytes();
    eprintln!(
        "{n} header keys of 4 KiB: {admitted} admitted in {header_secs:.1} s; {n} IPv6 addresses in one /64: {admitted_v6} admitted in {v6_secs:.1} s; VmRSS {} KiB before, {} KiB after the header keys, {} KiB after the IPv6 addresses",
        before / 1024,
        after_headers / 1024,
        after / 1024
    );
    assert!(
        after.saturating_sub(before) <= RSS_GROWTH_BOUND,
        "VmRSS grew by {} KiB (bound {} KiB)",
        after.saturating_sub(before) / 1024,
        RSS_GROWTH_BOUND / 1024
    );
    // the table holds at most max_keys keys: the rest shared the overflow
    assert!(
        admitted < n,
        "a full table of throttled keys shares one overflow bucket"
    );
    assert_eq!(admitted_v6, 0, "one /64 is one key, already throttled");

    rt.block_on(async {
        assert_eq!(
            support::http::send(server.addr, api(victim)).await.status,
            429,
            "the throttled client is still throttled"
        );
        let r = support::http::send(server.addr, v6("2001:db8:1:2::7")).await;
        assert_eq!(r.status, 429, "the flooding /64 is still throttled");
        let other = support::http::send(server.addr, v6("2001:db8:1:3::1")).await;
        assert_eq!(other.status, 200, "another /64 is another client");
    });
}

/// A distinct 4 KiB header value for `i`.
fn header_key(i: u64, buf: &mut Vec<u8>) -> (&'static str, HeaderValue) {
    if buf.len() != 4096 {
        *buf = vec![b'k'; 4096];
    }
    buf[..16].copy_from_slice(format!("{i:016x}").as_bytes());
    ("x-api-key", HeaderValue::from_bytes(buf).unwrap())
}
