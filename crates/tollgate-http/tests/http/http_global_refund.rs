//! Global limiter and route policy are both charged; when the route refuses,
//! the global permit is refunded (no quota lost to refused requests).

use crate::support;

use support::http::{Req, connect_info, hello, send, serve};
use tollgate::Quota;
use tollgate::http::{Policy, RateLimitLayer};

#[tokio::test]
async fn both_charged_and_global_refunded_on_route_refusal() {
    let layer = RateLimitLayer::builder()
        .peer_addr(connect_info)
        .headers_on_success(true)
        .global(Policy::token_bucket(
            "global",
            Quota::per_hour(10).unwrap().with_burst(10).unwrap(),
        ))
        .policy(
            Policy::token_bucket("tight", Quota::per_hour(2).unwrap().with_burst(2).unwrap())
                .prefix("/tight"),
        )
        .build()
        .unwrap();
    let server = serve(hello(layer)).await;

    // Admitted under both: each response lists both with their remaining.
    let r = send(server.addr, Req::get("/tight")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.policies(), ["global", "tight"]);
    assert_eq!(
        (r.remaining("global"), r.remaining("tight")),
        (Some(9), Some(1))
    );
    let r = send(server.addr, Req::get("/tight")).await;
    assert_eq!(
        (r.remaining("global"), r.remaining("tight")),
        (Some(8), Some(0))
    );

    // Five route refusals cost the global limiter nothing.
    for _ in 0..5 {
        let r = send(server.addr, Req::get("/tight/x")).await;
        assert_eq!(r.status, 429);
        assert_eq!(r.policies(), ["tight"]);
    }
    let r = send(server.addr, Req::get("/elsewhere")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.policies(), ["global"]);
    assert_eq!(
        r.remaining("global"),
        Some(7),
        "refused requests were refunded"
    );
}

#[tokio::test]
async fn global_refusal_names_the_global_limiter() {
    let layer = RateLimitLayer::builder()
        .peer_addr(connect_info)
        .global(Policy::token_bucket("global", Quota::per_hour(1).unwrap()))
        .policy(Policy::token_bucket("api", Quota::per_hour(100).unwrap()).prefix("/api"))
        .build()
        .unwrap();
    let server = serve(hello(layer)).await;
    assert_eq!(send(server.addr, Req::get("/api")).await.status, 200);
    let r = send(server.addr, Req::get("/api")).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.policies(), ["global"]);
}

#[tokio::test]
async fn clones_and_connections_share_one_state() {
    let layer = RateLimitLayer::builder()
        .peer_addr(connect_info)
        .global(Policy::token_bucket(
            "global",
            Quota::per_hour(3).unwrap().with_burst(3).unwrap(),
        ))
        .build()
        .unwrap();
    // Two servers built from clones of one layer draw from the same bucket.
    let a = serve(hello(layer.clone())).await;
    let b = serve(hello(layer)).await;
    let statuses = [
        send(a.addr, Req::get("/")).await.status,
        send(b.addr, Req::get("/")).await.status,
        send(a.addr, Req::get("/")).await.status,
        send(b.addr, Req::get("/")).await.status,
    ];
    assert_eq!(statuses, [200, 200, 200, 429]);
}
