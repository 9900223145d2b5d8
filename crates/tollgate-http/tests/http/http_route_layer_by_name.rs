//! A policy attached to specific axum routes by name (`route_layer`),
//! sharing its buckets with the layer it came from.

use crate::support;

use axum::Router;
use axum::routing::{get, post};
use support::http::{Req, connect_info, send, serve};
use tollgate::Quota;
use tollgate::http::{Policy, RateLimitLayer};

#[tokio::test]
async fn named_policy_on_axum_routes() {
    let layer = RateLimitLayer::builder()
        .peer_addr(connect_info)
        // no prefix: applied only where attached
        .policy(Policy::token_bucket(
            "writes",
            Quota::per_hour(2).unwrap().with_burst(2).unwrap(),
        ))
        .build()
        .unwrap();
    assert!(layer.policy("nope").is_none());
    let writes = layer.policy("writes").unwrap();
    let app = Router::new()
        .route("/a", post(|| async { "a" }))
        .route("/b", post(|| async { "b" }))
        .route_layer(writes)
        .route("/read", get(|| async { "read" }))
        .layer(layer);
    let s = serve(app).await;
    // /a and /b share the "writes" bucket; /read is not limited
    assert_eq!(
        send(s.addr, Req::get("/a").method("POST")).await.status,
        200
    );
    assert_eq!(
        send(s.addr, Req::get("/b").method("POST")).await.status,
        200
    );
    let r = send(s.addr, Req::get("/a").method("POST")).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.policies(), ["writes"]);
    for _ in 0..5 {
        assert_eq!(send(s.addr, Req::get("/read")).await.status, 200);
    }
}

#[tokio::test]
async fn exempt_wins_over_a_policy_attached_by_name() {
    let layer = RateLimitLayer::builder()
        .peer_addr(connect_info)
        .exempt("/health")
        .policy(Policy::token_bucket("writes", Quota::per_hour(1).unwrap()))
        .build()
        .unwrap();
    let writes = layer.policy("writes").unwrap();
    // the named policy is attached to an exempt route and to a limited one
    let app = Router::new()
        .route("/health", post(|| async { "ok" }))
        .route("/a", post(|| async { "a" }))
        .route_layer(writes)
        .layer(layer);
    let s = serve(app).await;
    for _ in 0..5 {
        let r = send(s.addr, Req::get("/health").method("POST")).await;
        assert_eq!(r.status, 200);
        assert!(r.policies().is_empty(), "an exempt path is not charged");
    }
    // the bucket was never charged by /health: /a still gets its one permit
    assert_eq!(
        send(s.addr, Req::get("/a").method("POST")).await.status,
        200
    );
    assert_eq!(
        send(s.addr, Req::get("/a").method("POST")).await.status,
        429
    );
}
