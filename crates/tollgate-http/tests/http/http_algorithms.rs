//! Every algorithm behind a policy, in code and in a config file, on a real
//! server: fixed and sliding windows (headers `q=limit;w=window`), an
//! in-flight limit (`q=limit;qu="concurrent-requests"`), and errors that name the
//! field. The window tests run on tokio's paused time, the layer reading a
//! `TokioClock`, from the start of a window: no window ends mid-test, and
//! the retry hints are exact.

use crate::support;

use std::time::Duration;

use support::http::{Req, connect_info, hello, now, paused_clock, send, send_paused, serve};
use tollgate::Quota;
use tollgate::http::{KeySource, LayerConfig, Policy, RateLimitLayer};

async fn statuses(addr: std::net::SocketAddr, req: Req<'_>, n: usize) -> Vec<u16> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(send_paused(addr, req.clone()).await.status);
    }
    out
}

/// Advances tokio's paused time to the start of a window of each length
/// in `lens` (windows, and a sliding window's segments, start at multiples
/// of their length on the layer's clock, which counts from the process
/// origin).
async fn to_a_window_start(lens: &[Duration]) {
    let lcm = lens
        .iter()
        .map(|d| d.as_nanos())
        .fold(1, |a, b| a / gcd(a, b) * b);
    let into = now().as_nanos() % lcm;
    if into != 0 {
        tokio::time::advance(Duration::from_nanos((lcm - into) as u64)).await;
    }
}

fn gcd(a: u128, b: u128) -> u128 {
    if b == 0 { a } else { gcd(b, a % b) }
}

#[tokio::test(start_paused = true)]
async fn windows_in_code_limit_per_key_and_report_their_window() {
    let layer = RateLimitLayer::builder()
        .clock(paused_clock())
        .peer_addr(connect_info)
        .headers_on_success(true)
        .policy(
            Policy::fixed_window("fixed", 3, Duration::from_secs(3600))
                .prefix("/fixed")
                .key(KeySource::PeerIp),
        )
        .policy(
            Policy::sliding_window("sliding", 2, Duration::from_secs(60))
                .prefix("/sliding")
                .key(KeySource::PeerIp),
        )
        .build()
        .unwrap();
    let s = serve(hello(layer)).await;
    to_a_window_start(&[Duration::from_secs(3600), Duration::from_secs(60)]).await;

    let r = send_paused(s.addr, Req::get("/fixed")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("ratelimit-policy"), Some("\"fixed\";q=3;w=3600"));
    assert_eq!(r.remaining("fixed"), Some(2));
    assert_eq!(
        statuses(s.addr, Req::get("/fixed"), 3).await,
        [200, 200, 429]
    );
    let r = send_paused(s.addr, Req::get("/fixed")).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.header("ratelimit-policy"), Some("\"fixed\";q=3;w=3600"));
    // until the window ends: a whole hour, as no time has passed
    assert_eq!(r.header("retry-after"), Some("3600"));
    // another client has its own window
    assert_eq!(
        send_paused(s.addr, Req::get("/fixed").from([127, 0, 0, 9]))
            .await
            .status,
        200
    );

    let r = send_paused(s.addr, Req::get("/sliding")).await;
    assert_eq!(r.header("ratelimit-policy"), Some("\"sliding\";q=2;w=60"));
    assert_eq!(r.remaining("sliding"), Some(1));
    assert_eq!(statuses(s.addr, Req::get("/sliding"), 2).await, [200, 429]);
    let r = send_paused(s.addr, Req::get("/sliding")).await;
    // the first permit leaves the window when its 6 s segment does: 60 s
    // after that segment began, which is now
    assert_eq!(r.header("retry-after"), Some("60"));
    // and it does, with the other one of its segment: a minute later
    // there is room for two again
    tokio::time::advance(Duration::from_secs(60)).await;
    assert_eq!(
        statuses(s.addr, Req::get("/sliding"), 3).await,
        [200, 200, 429]
    );
    // while the fixed window still has 59 minutes to go
    let r = send_paused(s.addr, Req::get("/fixed")).await;
    assert_eq!(r.header("retry-after"), Some("3540"));
}

#[tokio::test(start_paused = true)]
async fn every_algorithm_from_a_config_file() {
    let layer = LayerConfig::from_toml(
        r#"
headers_on_success = true

[[rules]]
name = "leaky"
prefix = "/leaky"
algorithm = "leaky_bucket"
rate = 1
period = "1h"

[[rules]]
name = "fixed"
prefix = "/fixed"
algorithm = "fixed_window"
rate = 2
period = "1h"
key = "peer_ip"

[[rules]]
name = "sliding"
prefix = "/sliding"
algorithm = "sliding_window"
rate = 2
period = "10m"
key = "peer_ip"

[[rules]]
name = "inflight"
prefix = "/inflight"
algorithm = "concurrency"
limit = 2
key = "peer_ip"
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
    to_a_window_start(&[Duration::from_secs(3600), Duration::from_secs(600)]).await;
    assert_eq!(statuses(s.addr, Req::get("/leaky"), 2).await, [200, 429]);
    assert_eq!(
        statuses(s.addr, Req::get("/fixed"), 3).await,
        [200, 200, 429]
    );
    let r = send_paused(s.addr, Req::get("/sliding")).await;
    assert_eq!(r.header("ratelimit-policy"), Some("\"sliding\";q=2;w=600"));
    assert_eq!(statuses(s.addr, Req::get("/sliding"), 2).await, [200, 429]);
    // a quick handler gives its in-flight permit back at once: never refused
    for _ in 0..10 {
        let r = send_paused(s.addr, Req::get("/inflight")).await;
        assert_eq!(r.status, 200);
        // an in-flight limit reports its quota in concurrent requests, no
        // window, and the permits free beside this request's own, with
        // the client's partition key (a 9-byte digest)
        assert_eq!(
            r.header("ratelimit-policy"),
            Some("\"inflight\";q=2;qu=\"concurrent-requests\"")
        );
        let state = r.sf_members("ratelimit");
        assert_eq!(state.len(), 1);
        let (name, params) = &state[0];
        assert_eq!(name, "inflight");
        let keys: Vec<&str> = params.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["r", "pk"]);
        assert_eq!(params[0].1.as_integer().map(i64::from), Some(1));
        assert_eq!(params[1].1.as_byte_sequence().map(<[u8]>::len), Some(9));
    }
}

#[tokio::test]
async fn a_global_in_flight_limit_and_a_route_window_report_both() {
    let layer = RateLimitLayer::builder()
        .peer_addr(connect_info)
        .headers_on_success(true)
        .global(Policy::concurrency("global", 100))
        .policy(Policy::fixed_window("api", 5, Duration::from_secs(60)).prefix("/api"))
        .build()
        .unwrap();
    let s = serve(hello(layer)).await;
    let r = send(s.addr, Req::get("/api")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.policies(), ["global", "api"]);
    let r = send(s.addr, Req::get("/elsewhere")).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("ratelimit-policy"),
        Some("\"global\";q=100;qu=\"concurrent-requests\"")
    );
    // one shared limit: no partition key; 99 free beside this request
    assert_eq!(r.header("ratelimit"), Some("\"global\";r=99"));
}

#[test]
fn code_errors_name_the_policy_and_field() {
    let err = |p: Policy| {
        RateLimitLayer::builder()
            .policy(Policy::token_bucket("ok", Quota::per_second(1).unwrap()).prefix("/ok"))
            .policy(p.prefix("/x"))
            .build()
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        err(Policy::concurrency("c", 0)),
        "policies[1].limit: must be at least 1"
    );
    assert_eq!(
        err(Policy::fixed_window("f", 0, Duration::from_secs(1))),
        "policies[1].limit: must be at least 1"
    );
    assert_eq!(
        err(Policy::fixed_window("f", 1, Duration::ZERO)),
        "policies[1].window: must be positive"
    );
    assert_eq!(
        err(Policy::sliding_window("s", 1, Duration::from_nanos(15))),
        "policies[1].window: must be a whole number of nanoseconds per segment (10 segments)"
    );
    assert_eq!(
        err(Policy::concurrency("c", 1).queue(Duration::from_secs(1), 0)),
        "policies[1].queue.limit: must be at least 1"
    );
    assert_eq!(
        err(Policy::concurrency("c", 1).queue(Duration::ZERO, 1)),
        "policies[1].queue.max_wait: must be positive"
    );
    assert_eq!(
        err(Policy::token_bucket("q", Quota::per_second(1).unwrap())
            .queue(Duration::from_secs(1), 0)),
        "policies[1].queue.limit: must be at least 1"
    );
    {
        // a store made lazily (nothing listens on port 1, nothing is asked)
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _in_runtime = rt.enter();
        let store = tollgate::redis::RedisStore::connect_lazy(
            "redis://127.0.0.1:1/",
            tollgate::redis::RedisConfig::token_bucket(Quota::per_second(1).unwrap()),
        )
        .unwrap();
        assert_eq!(
            err(Policy::concurrency("c", 1).backend(std::sync::Arc::new(store))),
            "policies[1].backend: an in-flight limit is held in process; it cannot use a remote backend"
        );
    }
    // the policy says what it enforces (its algorithm is no longer a
    // public type: its Debug form names it)
    let p = Policy::sliding_window("s", 4, Duration::from_secs(2));
    let shown = format!("{p:?}");
    assert!(
        shown.contains("SlidingWindow { limit: 4, window: 2s }"),
        "{shown}"
    );
    assert!(p.quota().is_none());
}
