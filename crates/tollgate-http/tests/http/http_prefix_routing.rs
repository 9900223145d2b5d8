//! Which policy a request is charged to: segment-bounded, case-insensitive
//! prefixes, longest prefix wins whatever the registration order, no
//! fallback to a looser rule after a refusal, exemptions, method filters.
//! Real axum server on loopback, real TCP client.

use crate::support;

use http::Method;
use support::http::{Req, connect_info, hello, send, serve};
use tollgate::Quota;
use tollgate::http::{Policy, RateLimitLayer};

fn roomy(name: &str, prefix: &str) -> Policy {
    Policy::token_bucket(name, Quota::per_hour(1000).unwrap()).prefix(prefix)
}

/// The policies the admitted response says it was charged to.
async fn charged(addr: std::net::SocketAddr, req: Req<'_>) -> Vec<String> {
    let r = send(addr, req).await;
    assert_eq!(r.status, 200, "{r:?}");
    r.policies()
}

#[tokio::test]
async fn prefix_table_segment_bounded_case_insensitive_longest_wins() {
    // Registered shortest first, then longest, then middle: order must not matter.
    for order in [[0usize, 1, 2], [2, 1, 0], [1, 2, 0]] {
        let all = [
            roomy("test", "/test"),
            roomy("deep", "/test/limiter/deep/"),
            roomy("limiter", "/TEST/Limiter"),
        ];
        let mut b = RateLimitLayer::builder()
            .peer_addr(connect_info)
            .headers_on_success(true);
        for i in order {
            b = b.policy(all[i].clone());
        }
        let server = serve(hello(b.build().unwrap())).await;
        let table: &[(&str, &[&str])] = &[
            ("/test", &["test"]),
            ("/test/", &["test"]),
            ("/Test/x", &["test"]),
            ("/TEST", &["test"]),
            ("/test/limiter", &["limiter"]),
            ("/test/Limiter/x", &["limiter"]),
            ("/test/limiterx", &["test"]),
            ("/test/limiter/deep", &["deep"]),
            ("/test/limiter/deep/er/still", &["deep"]),
            ("/testxxx", &[]),
            ("/contest", &[]),
            ("/", &[]),
            ("/other/test", &[]),
        ];
        for (path, want) in table {
            let got = charged(server.addr, Req::get(path)).await;
            assert_eq!(got, *want, "order {order:?}, path {path}");
        }
    }
}

#[tokio::test]
async fn refused_by_the_longest_prefix_does_not_fall_back() {
    let layer = RateLimitLayer::builder()
        .peer_addr(connect_info)
        .policy(roomy("api", "/api"))
        .policy(Policy::token_bucket("login", Quota::per_hour(1).unwrap()).prefix("/api/login"))
        .build()
        .unwrap();
    let server = serve(hello(layer)).await;
    assert_eq!(send(server.addr, Req::get("/api/login")).await.status, 200);
    for _ in 0..3 {
        let r = send(server.addr, Req::get("/api/login/")).await;
        assert_eq!(r.status, 429);
        assert_eq!(r.policies(), ["login"]);
    }
    // the looser rule still has room and serves its own paths
    assert_eq!(send(server.addr, Req::get("/api/other")).await.status, 200);
}

#[tokio::test]
async fn exempt_paths_bypass_global_and_policies() {
    let layer = RateLimitLayer::builder()
        .peer_addr(connect_info)
        .global(Policy::token_bucket(
            "global",
            Quota::per_hour(2).unwrap().with_burst(2).unwrap(),
        ))
        .policy(Policy::token_bucket("root", Quota::per_hour(1).unwrap()).prefix("/"))
        .exempt("/health")
        .build()
        .unwrap();
    let server = serve(hello(layer)).await;
    for _ in 0..10 {
        let r = send(server.addr, Req::get("/Health/live")).await;
        assert_eq!(r.status, 200);
        assert!(r.header("ratelimit").is_none());
    }
    assert_eq!(send(server.addr, Req::get("/x")).await.status, 200);
    assert_eq!(send(server.addr, Req::get("/x")).await.status, 429);
    // /healthz is not under /health
    assert_eq!(send(server.addr, Req::get("/healthz")).await.status, 429);
    assert_eq!(send(server.addr, Req::get("/health")).await.status, 200);
}

#[tokio::test]
async fn method_filter_selects_among_matching_prefixes() {
    let layer = RateLimitLayer::builder()
        .peer_addr(connect_info)
        .headers_on_success(true)
        .policy(roomy("api", "/api"))
        .policy(roomy("login-post", "/api/login").methods([Method::POST, Method::PUT]))
        .build()
        .unwrap();
    let server = serve(hello(layer)).await;
    let cases = [
        ("POST", vec!["login-post"]),
        ("PUT", vec!["login-post"]),
        ("GET", vec!["api"]),
        ("DELETE", vec!["api"]),
    ];
    for (m, want) in cases {
        let got = charged(server.addr, Req::get("/api/login").method(m)).await;
        assert_eq!(got, want, "{m}");
    }
}

#[tokio::test]
async fn no_policy_and_no_global_passes_untouched() {
    let layer = RateLimitLayer::builder()
        .peer_addr(connect_info)
        .policy(Policy::token_bucket("a", Quota::per_hour(1).unwrap()).prefix("/a"))
        .build()
        .unwrap();
    let server = serve(hello(layer)).await;
    for _ in 0..5 {
        let r = send(server.addr, Req::get("/b")).await;
        assert_eq!((r.status, r.body.as_str()), (200, "ok"));
        assert!(r.header("ratelimit").is_none() && r.header("retry-after").is_none());
    }
}
