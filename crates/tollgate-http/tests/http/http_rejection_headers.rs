//! Refusals: 429 (or the configured status), `Retry-After` in whole seconds
//! rounded up (a 300 ms wait gives 1), IETF `RateLimit-Policy` / `RateLimit`
//! structured-field lists parsed back with the `sfv` crate, and handler
//! precedence (policy over layer). On tokio's paused time, the layer
//! reading a `TokioClock`: no time passes between two requests, so every
//! wait is exact however slow the machine.

use crate::support;

use std::time::Duration;

use http::{Response, StatusCode};
use support::http::{Req, connect_info, hello, paused_clock, send_paused, serve};
use tollgate::Quota;
use tollgate::http::{Policy, RateLimitLayer};

fn params(list: &[(String, Vec<(String, i64)>)], name: &str) -> Vec<(String, i64)> {
    list.iter()
        .find(|(n, _)| n == name)
        .map(|(_, p)| p.clone())
        .unwrap_or_else(|| panic!("no member {name} in {list:?}"))
}

#[tokio::test(start_paused = true)]
async fn sub_second_wait_gives_retry_after_1_and_structured_headers() {
    // One request per 300 ms: the second, sent at once, waits 300 ms.
    let quota = Quota::new(1, Duration::from_millis(300)).unwrap();
    let layer = RateLimitLayer::builder()
        .clock(paused_clock())
        .peer_addr(connect_info)
        .policy(Policy::token_bucket("api", quota).prefix("/api"))
        .build()
        .unwrap();
    let server = serve(hello(layer)).await;
    assert_eq!(send_paused(server.addr, Req::get("/api")).await.status, 200);
    let r = send_paused(server.addr, Req::get("/api")).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(r.body, "");
    let policy = r.sf_list("ratelimit-policy");
    assert_eq!(policy.len(), 1);
    // one per 300 ms is 3 (rounded down) per whole second
    assert_eq!(
        params(&policy, "api"),
        [("q".to_string(), 3), ("w".to_string(), 1)]
    );
    let state = r.sf_list("ratelimit");
    assert_eq!(
        params(&state, "api"),
        [("r".to_string(), 0), ("t".to_string(), 1)]
    );
}

#[tokio::test(start_paused = true)]
async fn per_minute_policy_headers_match_the_draft_example() {
    let layer = RateLimitLayer::builder()
        .clock(paused_clock())
        .peer_addr(connect_info)
        .policy(
            Policy::token_bucket(
                "api",
                Quota::per_minute(100).unwrap().with_burst(1).unwrap(),
            )
            .prefix("/"),
        )
        .build()
        .unwrap();
    let server = serve(hello(layer)).await;
    assert_eq!(send_paused(server.addr, Req::get("/")).await.status, 200);
    let r = send_paused(server.addr, Req::get("/")).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.header("ratelimit-policy"), Some("\"api\";q=100;w=60"));
    // interval 600 ms: a wait of 600 ms, rounded up to 1 s
    assert_eq!(r.header("ratelimit"), Some("\"api\";r=0;t=1"));
    assert_eq!(r.header("retry-after"), Some("1"));
    let state = r.sf_list("ratelimit");
    assert_eq!(params(&state, "api")[0], ("r".to_string(), 0));
}

#[tokio::test(start_paused = true)]
async fn longer_waits_round_up_to_whole_seconds() {
    // one per 2.5 s: the refusal right after waits 2.5 s -> 3
    let quota = Quota::new(2, Duration::from_secs(5))
        .unwrap()
        .with_burst(1)
        .unwrap();
    let layer = RateLimitLayer::builder()
        .clock(paused_clock())
        .peer_addr(connect_info)
        .global(Policy::token_bucket("g", quota))
        .build()
        .unwrap();
    let server = serve(hello(layer)).await;
    assert_eq!(send_paused(server.addr, Req::get("/")).await.status, 200);
    let r = send_paused(server.addr, Req::get("/")).await;
    assert_eq!(r.header("retry-after"), Some("3"));
    assert_eq!(
        params(&r.sf_list("ratelimit"), "g")[1],
        ("t".to_string(), 3)
    );
    assert_eq!(
        params(&r.sf_list("ratelimit-policy"), "g"),
        [("q".to_string(), 2), ("w".to_string(), 5)]
    );
}

#[tokio::test(start_paused = true)]
async fn configurable_status_and_handler_precedence() {
    let layer = RateLimitLayer::builder()
        .clock(paused_clock())
        .peer_addr(connect_info)
        .status(StatusCode::SERVICE_UNAVAILABLE)
        .on_rejected(|rej, status| {
            Response::builder()
                .status(status)
                .body(format!("layer handler: {}", rej.policy()))
                .unwrap()
        })
        .policy(Policy::token_bucket("plain", Quota::per_hour(1).unwrap()).prefix("/plain"))
        .policy(
            Policy::token_bucket("own", Quota::per_hour(1).unwrap())
                .prefix("/own")
                .on_rejected(|rej, _| {
                    Response::builder()
                        .status(StatusCode::TOO_MANY_REQUESTS)
                        .header("x-policy", rej.policy())
                        .body(format!(
                            "own handler, retry in {} s",
                            rej.retry_after().as_secs()
                        ))
                        .unwrap()
                }),
        )
        .build()
        .unwrap();
    let server = serve(hello(layer)).await;
    for p in ["/plain", "/own"] {
        assert_eq!(send_paused(server.addr, Req::get(p)).await.status, 200);
    }
    let r = send_paused(server.addr, Req::get("/plain")).await;
    assert_eq!((r.status, r.body.as_str()), (503, "layer handler: plain"));
    assert_eq!(r.header("retry-after"), Some("3600"));
    let r = send_paused(server.addr, Req::get("/own")).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.header("x-policy"), Some("own"));
    // no time has passed: the whole hour
    assert_eq!(r.body, "own handler, retry in 3600 s");
    // the layer still adds the standard headers the handler did not set
    assert_eq!(r.header("retry-after"), Some("3600"));
    assert_eq!(r.policies(), ["own"]);
}
