//! Which rejection handler answers (ASP.NET Core's precedence, issue 16.2):
//! a route policy's handler answers only that policy's refusals; a global
//! refusal gets the global policy's own handler, else the layer's, else the
//! default 429 with headers. Every cell of the table in the http module
//! docs, on a real server.

use crate::support;

use http::{HeaderName, Response, StatusCode};
use support::http::{Resp, Server, connect_info, hello, send, serve};
use tollgate::Quota;
use tollgate::http::{KeySource, Policy, RateLimitLayer};

fn header_key(name: &'static str) -> KeySource {
    KeySource::Header(HeaderName::from_static(name))
}

/// Global: 1 per hour per `x-client`; `/with` (a handler answering 404)
/// and `/without` (no handler): 1 per hour per `x-user`. `layer_handler`:
/// a layer handler answering 503 "layer: <policy>".
async fn server(layer_handler: bool, global_handler: bool) -> Server {
    let mut global =
        Policy::token_bucket("global", Quota::per_hour(1).unwrap()).key(header_key("x-client"));
    if global_handler {
        global = global.on_rejected(|rej, _| {
            Response::builder()
                .status(StatusCode::FORBIDDEN)
                .body(format!("global's own: {}", rej.policy()))
                .unwrap()
        });
    }
    let mut b = RateLimitLayer::builder()
        .peer_addr(connect_info)
        .global(global)
        .policy(
            Policy::token_bucket("with", Quota::per_hour(1).unwrap())
                .prefix("/with")
                .key(header_key("x-user"))
                .on_rejected(|rej, _| {
                    assert_eq!(
                        rej.stage(),
                        1,
                        "a route handler never sees a global refusal"
                    );
                    assert_eq!(rej.snapshot().limit(), 1, "the policy's quota");
                    assert!(rej.retry_after() > std::time::Duration::ZERO);
                    Response::builder()
                        .status(StatusCode::NOT_FOUND)
                        .body(format!("route: {}", rej.policy()))
                        .unwrap()
                }),
        )
        .policy(
            Policy::token_bucket("without", Quota::per_hour(1).unwrap())
                .prefix("/without")
                .key(header_key("x-user")),
        );
    if layer_handler {
        b = b.on_rejected(|rej, _| {
            Response::builder()
                .status(StatusCode::SERVICE_UNAVAILABLE)
                .body(format!(
                    "layer: {} global={}",
                    rej.policy(),
                    rej.stage() == 0
                ))
                .unwrap()
        });
    }
    serve(hello(b.build().unwrap())).await
}

async fn get(s: &Server, path: &str, client: &str, user: &str) -> Resp {
    send(
        s.addr,
        support::http::Req::get(path)
            .header("x-client", client)
            .header("x-user", user),
    )
    .await
}

/// A refusal by the global limiter on `path`: the client's second request,
/// as a fresh user (the route would admit it).
async fn global_refusal(s: &Server, path: &str) -> Resp {
    assert_eq!(get(s, path, "g", "u1").await.status, 200);
    get(s, path, "g", "u2").await
}

/// A refusal by the route policy on `path`: the user's second request, as
/// a fresh client (the global limiter admits it).
async fn route_refusal(s: &Server, path: &str) -> Resp {
    let (c1, c2) = (format!("{path}-1"), format!("{path}-2"));
    assert_eq!(get(s, path, &c1, "r").await.status, 200);
    get(s, path, &c2, "r").await
}

fn assert_default_429(r: &Resp, policy: &str) {
    assert_eq!(r.status, 429, "{r:?}");
    assert_eq!(r.body, "");
    assert_eq!(r.header("retry-after"), Some("3600"));
    assert_eq!(r.policies(), [policy]);
}

#[tokio::test]
async fn global_refusal_with_a_layer_handler() {
    // route handler set: the layer's answers, not the route's 404
    let s = server(true, false).await;
    let r = global_refusal(&s, "/with").await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (503, "layer: global global=true")
    );
    assert_eq!(r.header("retry-after"), Some("3600"));
    assert_eq!(r.policies(), ["global"]);
    // route handler unset: the layer's
    let s = server(true, false).await;
    let r = global_refusal(&s, "/without").await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (503, "layer: global global=true")
    );
}

#[tokio::test]
async fn global_refusal_without_a_layer_handler_is_the_default_429() {
    // route handler set: still the default 429, never the route's 404
    let s = server(false, false).await;
    assert_default_429(&global_refusal(&s, "/with").await, "global");
    let s = server(false, false).await;
    assert_default_429(&global_refusal(&s, "/without").await, "global");
}

#[tokio::test]
async fn route_refusal_with_a_layer_handler() {
    // route handler set: the route's
    let s = server(true, false).await;
    let r = route_refusal(&s, "/with").await;
    assert_eq!((r.status, r.body.as_str()), (404, "route: with"));
    // the layer still adds the standard headers the handler did not set
    assert_eq!(r.header("retry-after"), Some("3600"));
    assert_eq!(r.policies(), ["with"]);
    // route handler unset: the layer's
    let r = route_refusal(&s, "/without").await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (503, "layer: without global=false")
    );
    assert_eq!(r.policies(), ["without"]);
}

#[tokio::test]
async fn route_refusal_without_a_layer_handler() {
    let s = server(false, false).await;
    let r = route_refusal(&s, "/with").await;
    assert_eq!((r.status, r.body.as_str()), (404, "route: with"));
    assert_default_429(&route_refusal(&s, "/without").await, "without");
}

#[tokio::test]
async fn the_global_policys_own_handler_answers_its_refusals() {
    let s = server(true, true).await;
    let r = global_refusal(&s, "/with").await;
    assert_eq!((r.status, r.body.as_str()), (403, "global's own: global"));
    assert_eq!(r.policies(), ["global"]);
    // and never a route refusal
    let r = route_refusal(&s, "/without").await;
    assert_eq!(r.status, 503);
}
