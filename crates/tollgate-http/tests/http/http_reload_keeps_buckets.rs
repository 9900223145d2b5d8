//! Reloading the rules file on a running server: rules that stay keep their
//! buckets (a throttled client stays throttled), a rule whose quota changes
//! carries each client's usage over by the chosen inheritance rule, new
//! rules start fresh, removed rules stop limiting, and a bad file changes
//! nothing. Real axum server on loopback, real HTTP client, on tokio's
//! paused time with the layer reading a `TokioClock`: no bucket refills
//! while a test runs, however slow the machine, unless the test advances
//! tokio's time.

use crate::support;

use std::time::Duration;

use support::http::{Req, connect_info, hello, paused_clock, send_paused, serve};
use tollgate::http::{KeySource, LayerConfig, Policy, RateLimitLayer, RateLimitLayerBuilder};
use tollgate::{Inheritance, Quota};

fn rules(login_rate: u32, login_burst: u32, extra: &str) -> String {
    format!(
        r#"
[[rules]]
name = "login"
prefix = "/api/login"
rate = {login_rate}
period = "1m"
burst = {login_burst}
key = "peer_ip"
{extra}
"#
    )
}

/// The rules of `text`, on tokio's clock (a reload keeps the layer's
/// clock: the one given here counts only when the layer is built).
fn builder(text: &str) -> RateLimitLayerBuilder {
    LayerConfig::from_toml(text)
        .unwrap()
        .into_builder()
        .unwrap()
        .clock(paused_clock())
        .peer_addr(connect_info)
}

fn layer(text: &str) -> RateLimitLayer {
    builder(text).build().unwrap()
}

async fn statuses(addr: std::net::SocketAddr, path: &str, n: usize) -> Vec<u16> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(send_paused(addr, Req::get(path)).await.status);
    }
    out
}

#[tokio::test(start_paused = true)]
async fn an_unchanged_rule_keeps_its_buckets() {
    let text = rules(3, 2, "");
    let layer = layer(&text);
    let s = serve(hello(layer.clone())).await;
    assert_eq!(statuses(s.addr, "/api/login", 3).await, [200, 200, 429]);
    let report = layer.reload(builder(&text), Inheritance::Reset).unwrap();
    assert_eq!(report.kept, ["login"]);
    assert!(report.reconfigured.is_empty() && report.fresh.is_empty());
    // even with Reset, an unchanged rule is not touched: still throttled
    assert_eq!(statuses(s.addr, "/api/login", 1).await, [429]);
}

/// The layer's clock survives a reload: the buckets it keeps refill on
/// the clock they were filled on, whatever clock the reload's builder has.
#[tokio::test(start_paused = true)]
async fn a_reload_keeps_the_layers_clock() {
    // 3 per minute, burst 2: one permit every 20 s of tokio's time
    let text = rules(3, 2, "");
    let layer = layer(&text);
    let s = serve(hello(layer.clone())).await;
    assert_eq!(statuses(s.addr, "/api/login", 3).await, [200, 200, 429]);
    // the same rules from a builder that names no clock (the default one)
    let plain = LayerConfig::from_toml(&text)
        .unwrap()
        .into_builder()
        .unwrap()
        .peer_addr(connect_info);
    let report = layer.reload(plain, Inheritance::Reset).unwrap();
    assert_eq!(report.kept, ["login"]);
    assert_eq!(statuses(s.addr, "/api/login", 1).await, [429]);
    // 40 s of tokio's time refill the two permits: the layer still reads
    // tokio's clock
    tokio::time::advance(Duration::from_secs(40)).await;
    assert_eq!(statuses(s.addr, "/api/login", 3).await, [200, 200, 429]);
}

#[tokio::test(start_paused = true)]
async fn a_changed_quota_carries_usage_over_by_the_rule() {
    for (how, expect) in [
        // 2 of 2 used; the new burst is 4: 2 stay used, 2 free
        (Inheritance::UsedAmount, vec![200, 200, 429]),
        // all of the old burst used: all of the new one is used
        (Inheritance::UsedFraction, vec![429, 429, 429]),
        // a fresh bucket of 4
        (Inheritance::Reset, vec![200, 200, 200, 200, 429]),
    ] {
        let layer = layer(&rules(3, 2, ""));
        let s = serve(hello(layer.clone())).await;
        assert_eq!(statuses(s.addr, "/api/login", 3).await, [200, 200, 429]);
        let report = layer.reload(builder(&rules(6, 4, "")), how).unwrap();
        assert_eq!(report.reconfigured, ["login"], "{how:?}");
        assert_eq!(
            statuses(s.addr, "/api/login", expect.len()).await,
            expect,
            "{how:?}"
        );
        let r = send_paused(s.addr, Req::get("/api/login")).await;
        assert_eq!(r.header("ratelimit-policy"), Some("\"login\";q=6;w=60"));
    }
}

#[tokio::test(start_paused = true)]
async fn added_rules_start_fresh_and_removed_rules_stop_limiting() {
    let layer = layer(&rules(3, 2, ""));
    let s = serve(hello(layer.clone())).await;
    assert_eq!(statuses(s.addr, "/api/login", 3).await, [200, 200, 429]);
    let next = r#"
[[rules]]
name = "search"
prefix = "/api/search"
rate = 1
period = "1m"
key = "peer_ip"
"#;
    let report = layer
        .reload(builder(next), Inheritance::UsedAmount)
        .unwrap();
    assert_eq!(report.fresh, ["search"]);
    assert_eq!(report.removed, ["login"]);
    assert_eq!(statuses(s.addr, "/api/login", 4).await, [200; 4]);
    assert_eq!(statuses(s.addr, "/api/search", 2).await, [200, 429]);
}

#[tokio::test(start_paused = true)]
async fn a_changed_key_source_starts_fresh() {
    let layer = layer(&rules(3, 2, ""));
    let s = serve(hello(layer.clone())).await;
    assert_eq!(statuses(s.addr, "/api/login", 3).await, [200, 200, 429]);
    let by_header = rules(3, 2, "").replace(
        "key = \"peer_ip\"",
        "key = \"header\"\nheader = \"x-api-key\"",
    );
    let report = layer
        .reload(builder(&by_header), Inheritance::UsedAmount)
        .unwrap();
    assert_eq!(report.fresh, ["login"]);
    let with_key = || Req::get("/api/login").header("x-api-key", "k1");
    assert_eq!(send_paused(s.addr, with_key()).await.status, 200);
}

#[tokio::test(start_paused = true)]
async fn a_bad_reload_changes_nothing() {
    let layer = layer(&rules(3, 2, ""));
    let s = serve(hello(layer.clone())).await;
    assert_eq!(statuses(s.addr, "/api/login", 3).await, [200, 200, 429]);
    let bad = rules(3, 2, "").replace("prefix = \"/api/login\"", "prefix = \"api/login\"");
    let err = layer.reload(builder(&bad), Inheritance::Reset).unwrap_err();
    assert_eq!(err.location(), "rules[0].prefix");
    assert_eq!(statuses(s.addr, "/api/login", 1).await, [429]);
}

/// A reload whose later rule asks for more keys than a table can hold
/// (`keyed::MAX_KEYS`) is refused before any rule is applied: the earlier
/// rule, whose new quota would reset its bucket, keeps throttling.
#[tokio::test(start_paused = true)]
async fn a_reload_with_too_many_keys_touches_no_bucket() {
    let layer = layer(&rules(3, 2, ""));
    let s = serve(hello(layer.clone())).await;
    assert_eq!(statuses(s.addr, "/api/login", 3).await, [200, 200, 429]);
    let too_many = tollgate::keyed::MAX_KEYS + 1;
    let bad = format!(
        "{}\n[[rules]]\nname = \"big\"\nprefix = \"/api/big\"\nrate = 1\nkey = \"peer_ip\"\nmax_keys = {too_many}\n",
        rules(100, 100, "")
    );
    let err = layer.reload(builder(&bad), Inheritance::Reset).unwrap_err();
    assert_eq!(err.location(), "rules[1].max_keys", "{err}");
    assert_eq!(statuses(s.addr, "/api/login", 1).await, [429]);
}

#[tokio::test(start_paused = true)]
async fn a_route_layer_follows_its_policy_across_reloads() {
    // a policy without a prefix, attached to a route by name
    let login = |rate: u32, burst: u32| {
        RateLimitLayer::builder()
            .clock(paused_clock())
            .policy(
                Policy::token_bucket(
                    "login",
                    Quota::per_minute(rate).unwrap().with_burst(burst).unwrap(),
                )
                .key(KeySource::PeerIp),
            )
            .peer_addr(connect_info)
    };
    let layer = login(3, 2).build().unwrap();
    let app = axum::Router::new()
        .route("/login", axum::routing::get(|| async { "ok" }))
        .route_layer(layer.policy("login").unwrap());
    let s = serve(app).await;
    assert_eq!(statuses(s.addr, "/login", 3).await, [200, 200, 429]);
    let report = layer.reload(login(6, 4), Inheritance::UsedAmount).unwrap();
    assert_eq!(report.reconfigured, ["login"]);
    assert_eq!(statuses(s.addr, "/login", 3).await, [200, 200, 429]);
}

fn window_rule(algorithm: &str, rate: u32) -> String {
    format!(
        r#"
[[rules]]
name = "win"
prefix = "/win"
algorithm = "{algorithm}"
rate = {rate}
period = "1h"
key = "peer_ip"
"#
    )
}

#[tokio::test(start_paused = true)]
async fn a_window_rule_is_reconfigured_and_a_new_kind_starts_fresh() {
    let layer = layer(&window_rule("fixed_window", 2));
    let s = serve(hello(layer.clone())).await;
    assert_eq!(statuses(s.addr, "/win", 3).await, [200, 200, 429]);
    // a larger window limit: the 2 used stay used
    let report = layer
        .reload(
            builder(&window_rule("fixed_window", 4)),
            Inheritance::UsedAmount,
        )
        .unwrap();
    assert_eq!(report.reconfigured, ["win"]);
    assert_eq!(statuses(s.addr, "/win", 3).await, [200, 200, 429]);
    let r = send_paused(s.addr, Req::get("/win")).await;
    assert_eq!(r.header("ratelimit-policy"), Some("\"win\";q=4;w=3600"));
    // another kind of algorithm: fresh windows
    let report = layer
        .reload(
            builder(&window_rule("sliding_window", 4)),
            Inheritance::UsedAmount,
        )
        .unwrap();
    assert_eq!(report.fresh, ["win"]);
    assert_eq!(statuses(s.addr, "/win", 5).await, [200, 200, 200, 200, 429]);
}

#[tokio::test(start_paused = true)]
async fn adding_a_queue_reconfigures_the_bucket_it_carries() {
    let layer = layer(&rules(1, 1, ""));
    let s = serve(hello(layer.clone())).await;
    assert_eq!(statuses(s.addr, "/api/login", 2).await, [200, 429]);
    let queued = rules(1, 1, "queue = { limit = 1, max_wait = \"10s\" }");
    let report = layer
        .reload(builder(&queued), Inheritance::UsedAmount)
        .unwrap();
    assert_eq!(report.reconfigured, ["login"]);
    // still throttled: the next turn is 60 s away, past max_wait, so it is
    // refused at once (a fresh bucket would have admitted it)
    let r = send_paused(s.addr, Req::get("/api/login")).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("50"));
    // the same rule again: kept, queue and all
    let report = layer.reload(builder(&queued), Inheritance::Reset).unwrap();
    assert_eq!(report.kept, ["login"]);
    assert_eq!(statuses(s.addr, "/api/login", 1).await, [429]);
}

#[tokio::test(start_paused = true)]
async fn an_in_flight_rule_keeps_its_store() {
    let conc = |limit: u32| {
        format!(
            "[[rules]]\nname = \"inflight\"\nprefix = \"/c\"\nalgorithm = \"concurrency\"\nlimit = {limit}\nkey = \"peer_ip\"\n"
        )
    };
    let layer = layer(&conc(1));
    let s = serve(hello(layer.clone())).await;
    assert_eq!(statuses(s.addr, "/c", 3).await, [200; 3]);
    let report = layer.reload(builder(&conc(1)), Inheritance::Reset).unwrap();
    assert_eq!(report.kept, ["inflight"]);
    let report = layer
        .reload(builder(&conc(3)), Inheritance::UsedAmount)
        .unwrap();
    assert_eq!(report.reconfigured, ["inflight"]);
    assert_eq!(statuses(s.addr, "/c", 3).await, [200; 3]);
}
