//! Problem details (opt-in): a refusal's body is `application/problem+json`
//! with draft-ietf-httpapi-ratelimit-headers-11's `quota-exceeded` type,
//! parsed back with `serde_json`; status and headers are the same as
//! without it; without the option, and under a rejection handler, the
//! body is what it was. On a real server, on tokio's paused time.

use crate::support;

use http::Response;
use serde_json::Value;
use support::http::{Req, Resp, connect_info, hello, paused_clock, send_paused, serve};
use tollgate::Quota;
use tollgate::http::{KeySource, LayerConfig, Policy, RateLimitLayer, RateLimitLayerBuilder};

const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";

fn builder() -> RateLimitLayerBuilder {
    RateLimitLayer::builder()
        .clock(paused_clock())
        .peer_addr(connect_info)
        .global(Policy::token_bucket(
            "global",
            Quota::per_minute(4).unwrap(),
        ))
        .policy(
            Policy::token_bucket("api/v1", Quota::per_minute(2).unwrap())
                .prefix("/api")
                .key(KeySource::PeerIp),
        )
}

/// The refusals of `layer`: the route policy's (3rd request to /api),
/// then the global limiter's (the 5th request in all).
async fn refusals(layer: RateLimitLayer) -> (Resp, Resp) {
    let s = serve(hello(layer)).await;
    for _ in 0..2 {
        assert_eq!(send_paused(s.addr, Req::get("/api")).await.status, 200);
    }
    let route = send_paused(s.addr, Req::get("/api")).await;
    assert_eq!(route.status, 429);
    for _ in 0..2 {
        assert_eq!(send_paused(s.addr, Req::get("/other")).await.status, 200);
    }
    let global = send_paused(s.addr, Req::get("/other")).await;
    assert_eq!(global.status, 429);
    (route, global)
}

fn problem(r: &Resp) -> Value {
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    serde_json::from_str(&r.body).unwrap_or_else(|e| panic!("{:?}: {e}", r.body))
}

/// The headers of `r` but the body's own.
fn without_body_headers(r: &Resp) -> Vec<(String, String)> {
    r.headers
        .iter()
        .filter(|(k, _)| !["content-type", "content-length", "date"].contains(&k.as_str()))
        .cloned()
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_refusal_is_problem_json_with_the_drafts_members() {
    let (route, global) = refusals(builder().problem_details(true).build().unwrap()).await;
    for (r, policy) in [(&route, "api/v1"), (&global, "global")] {
        let p = problem(r);
        let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
        assert_eq!(p["type"], QUOTA_EXCEEDED);
        assert!(p["title"].as_str().is_some_and(|t| !t.is_empty()));
        assert!(
            p["detail"].as_str().is_some_and(|d| d.contains(policy)),
            "{p}"
        );
        assert_eq!(p["status"], 429);
        assert_eq!(p["retry-after"].as_u64(), Some(retry), "{p}");
        // only the policy that refused: the layer stops at the first
        assert_eq!(p["violated-policies"], serde_json::json!([policy]));
        let members: Vec<&str> = p.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(members.len(), 6, "{members:?}");
    }
    assert_eq!(route.header("retry-after"), Some("30"));
}

#[tokio::test(start_paused = true)]
async fn clients_that_ignore_bodies_see_no_change_and_off_is_the_default() {
    let (plain_route, plain_global) = refusals(builder().build().unwrap()).await;
    let (pd_route, pd_global) = refusals(builder().problem_details(true).build().unwrap()).await;
    for (plain, pd) in [(&plain_route, &pd_route), (&plain_global, &pd_global)] {
        assert_eq!(plain.status, pd.status);
        assert_eq!(plain.body, "");
        assert_eq!(plain.header("content-type"), None);
        // the same headers but pk, whose secret is each layer's own
        let strip_pk = |h: Vec<(String, String)>| -> Vec<(String, String)> {
            h.into_iter()
                .map(|(k, v)| (k, v.split(";pk=").next().unwrap().to_string()))
                .collect()
        };
        assert_eq!(
            strip_pk(without_body_headers(plain)),
            strip_pk(without_body_headers(pd))
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_rejection_handler_still_writes_the_body() {
    let layer = builder()
        .problem_details(true)
        .on_rejected(|refusal, status| {
            let mut res = Response::new(format!("slow down ({})", refusal.policy()));
            *res.status_mut() = status;
            res
        })
        .build()
        .unwrap();
    let (route, global) = refusals(layer).await;
    assert_eq!(route.body, "slow down (api/v1)");
    assert_eq!(global.body, "slow down (global)");
    assert_ne!(
        route.header("content-type"),
        Some("application/problem+json")
    );
}

#[tokio::test(start_paused = true)]
async fn a_rules_file_turns_it_on() {
    let layer = LayerConfig::from_toml(
        r#"
problem_details = true

[[rules]]
name = "api"
prefix = "/api"
rate = 1
period = "1m"
"#,
    )
    .unwrap()
    .into_builder()
    .unwrap()
    .clock(paused_clock())
    .peer_addr(connect_info)
    .build()
    .unwrap();
    let s = serve(hello(layer)).await;
    assert_eq!(send_paused(s.addr, Req::get("/api")).await.status, 200);
    let r = send_paused(s.addr, Req::get("/api")).await;
    assert_eq!(r.status, 429);
    let p = problem(&r);
    assert_eq!(p["violated-policies"], serde_json::json!(["api"]));
    assert_eq!(p["retry-after"], 60);
}
