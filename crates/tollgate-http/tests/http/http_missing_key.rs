//! Keys that cannot be extracted get a clear outcome (500 by default, a
//! server misconfiguration), never a silent bypass; header and custom keys
//! partition.

use crate::support;

use http::StatusCode;
use support::http::{Req, connect_info, hello, send, serve};
use tollgate::Quota;
use tollgate::http::{KeySource, MissingKey, PartitionKey, Policy, RateLimitLayer};

#[tokio::test]
async fn no_peer_address_is_a_500_by_default() {
    // axum records ConnectInfo, not a bare SocketAddr: the default reader
    // finds nothing.
    let layer = RateLimitLayer::builder()
        .policy(
            Policy::token_bucket("ip", Quota::per_hour(100).unwrap())
                .prefix("/")
                .key(KeySource::PeerIp),
        )
        .build()
        .unwrap();
    let s = serve(hello(layer)).await;
    let r = send(s.addr, Req::get("/")).await;
    assert_eq!(r.status, 500);
    assert_ne!(r.body, "ok");
}

#[tokio::test]
async fn missing_key_outcome_is_configurable_per_layer_and_policy() {
    let layer = RateLimitLayer::builder()
        .missing_key(MissingKey::Allow)
        .policy(
            Policy::token_bucket("open", Quota::per_hour(1).unwrap())
                .prefix("/open")
                .key(KeySource::PeerIp),
        )
        .policy(
            Policy::token_bucket("keyed", Quota::per_hour(1).unwrap())
                .prefix("/keyed")
                .key(KeySource::Header(http::HeaderName::from_static(
                    "x-api-key",
                )))
                .missing_key(MissingKey::Reject(StatusCode::UNAUTHORIZED)),
        )
        .build()
        .unwrap();
    let s = serve(hello(layer)).await;
    for _ in 0..3 {
        assert_eq!(send(s.addr, Req::get("/open")).await.status, 200);
        assert_eq!(send(s.addr, Req::get("/keyed")).await.status, 401);
    }
}

#[tokio::test]
async fn header_keys_and_custom_keys_partition() {
    let layer = RateLimitLayer::builder()
        .peer_addr(connect_info)
        .policy(
            Policy::token_bucket("apikey", Quota::per_hour(1).unwrap())
                .prefix("/a")
                .key(KeySource::Header(http::HeaderName::from_static(
                    "x-api-key",
                ))),
        )
        .policy(
            Policy::token_bucket("tenant", Quota::per_hour(1).unwrap())
                .prefix("/t")
                .key(KeySource::custom(|head| {
                    // the first path segment after /t is the tenant
                    let seg = head.uri.path().split('/').nth(2)?;
                    Some(PartitionKey::Bytes(seg.as_bytes().into()))
                })),
        )
        .build()
        .unwrap();
    let s = serve(hello(layer)).await;
    let with_key = |k: &'static str| Req::get("/a").header("x-api-key", k);
    assert_eq!(send(s.addr, with_key("k1")).await.status, 200);
    assert_eq!(send(s.addr, with_key("k1")).await.status, 429);
    assert_eq!(send(s.addr, with_key("k2")).await.status, 200);
    assert_eq!(send(s.addr, Req::get("/a")).await.status, 500);

    assert_eq!(send(s.addr, Req::get("/t/acme/x")).await.status, 200);
    assert_eq!(send(s.addr, Req::get("/t/acme/y")).await.status, 429);
    assert_eq!(send(s.addr, Req::get("/t/globex")).await.status, 200);
    assert_eq!(send(s.addr, Req::get("/t")).await.status, 500);
}
