//! Keys that cannot be extracted get a clear outcome, never a silent
//! bypass: by default a key-less request is charged to its client's
//! address (refused with 429 over it); a shared bucket for key-less
//! requests answers with its own status; no peer address at all is a 500
//! (a server misconfiguration). Header and custom keys partition.

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
    // without a key: the client's address is the key (default fallback)
    assert_eq!(send(s.addr, Req::get("/a")).await.status, 200);
    assert_eq!(send(s.addr, Req::get("/a")).await.status, 429);

    assert_eq!(send(s.addr, Req::get("/t/acme/x")).await.status, 200);
    assert_eq!(send(s.addr, Req::get("/t/acme/y")).await.status, 429);
    assert_eq!(send(s.addr, Req::get("/t/globex")).await.status, 200);
    assert_eq!(send(s.addr, Req::get("/t")).await.status, 200);
    assert_eq!(send(s.addr, Req::get("/t")).await.status, 429);
}

fn api_key_policy(missing: Option<MissingKey>) -> Policy {
    let p = Policy::token_bucket("api", Quota::per_hour(2).unwrap())
        .prefix("/api")
        .key(KeySource::Header(http::HeaderName::from_static(
            "x-api-key",
        )));
    match missing {
        Some(m) => p.missing_key(m),
        None => p,
    }
}

/// Issue 28.2: a client that leaves its key out is limited like one
/// client, by its address (each address its own quota), and a client with
/// a key is not affected.
#[tokio::test]
async fn key_less_requests_are_throttled_by_client_address_by_default() {
    let layer = RateLimitLayer::builder()
        .peer_addr(connect_info)
        .policy(api_key_policy(None))
        .build()
        .unwrap();
    let s = serve(hello(layer)).await;
    let from = |ip| Req::get("/api").from(ip);
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.push(send(s.addr, from([127, 0, 0, 2])).await.status);
    }
    assert_eq!(statuses, [200, 200, 429, 429, 429]);
    let refused = send(s.addr, from([127, 0, 0, 2])).await;
    assert_eq!(refused.status, 429);
    let retry: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    assert!((1_700..=1_800).contains(&retry), "retry-after {retry}");
    // another address has its own quota; a keyed client is untouched
    assert_eq!(send(s.addr, from([127, 0, 0, 3])).await.status, 200);
    let keyed = Req::get("/api")
        .from([127, 0, 0, 2])
        .header("x-api-key", "k");
    assert_eq!(send(s.addr, keyed).await.status, 200);
}

/// Issue 28.2: a shared bucket for key-less requests: every key-less
/// request, from any address, is charged to it, and its refusals carry
/// its own status with `Retry-After`.
#[tokio::test]
async fn a_shared_bucket_limits_all_key_less_requests_with_its_own_status() {
    let layer = RateLimitLayer::builder()
        .peer_addr(connect_info)
        .policy(api_key_policy(Some(MissingKey::SharedBucket(
            StatusCode::UNAUTHORIZED,
        ))))
        .build()
        .unwrap();
    let s = serve(hello(layer)).await;
    let mut statuses = Vec::new();
    for last in 2..8 {
        statuses.push(
            send(s.addr, Req::get("/api").from([127, 0, 0, last]))
                .await
                .status,
        );
    }
    assert_eq!(statuses, [200, 200, 401, 401, 401, 401]);
    let refused = send(s.addr, Req::get("/api").from([127, 0, 0, 9])).await;
    assert_eq!(refused.status, 401);
    assert!(refused.header("retry-after").is_some());
    // keyed clients keep their own quota
    for k in ["a", "b"] {
        let keyed = Req::get("/api").header("x-api-key", k);
        assert_eq!(send(s.addr, keyed).await.status, 200);
    }
}

/// Issue 28.2: a client sending key-less requests as fast as it can costs
/// one warning per interval, not one per request, and each warning counts
/// the requests since the previous one. (Paused time, the layer on
/// tokio's clock: the interval is exact.)
#[tokio::test(start_paused = true)]
async fn missing_key_warnings_come_at_most_once_per_interval_with_a_count() {
    use support::http::{paused_clock, send_paused};
    use tollgate::http::MISSING_KEY_LOG_INTERVAL;
    let (log, _guard) = support::log::capture();
    let layer = RateLimitLayer::builder()
        .clock(paused_clock())
        .peer_addr(connect_info)
        .policy(api_key_policy(Some(MissingKey::SharedBucket(
            StatusCode::TOO_MANY_REQUESTS,
        ))))
        .build()
        .unwrap();
    let s = serve(hello(layer)).await;
    let warnings = |log: &support::log::Log| {
        let text = log.text();
        text.lines()
            .filter(|l| l.contains("requests without a rate limit key"))
            .map(|l| {
                assert!(l.contains("WARN") && l.contains("policy=\"api\""), "{l}");
                let n = l.split("requests=").nth(1).unwrap();
                let n: String = n.chars().take_while(char::is_ascii_digit).collect();
                n.parse::<u64>().unwrap()
            })
            .collect::<Vec<_>>()
    };
    for _ in 0..40 {
        send_paused(s.addr, Req::get("/api")).await;
    }
    assert_eq!(warnings(&log), [1], "{}", log.text());
    tokio::time::advance(MISSING_KEY_LOG_INTERVAL - std::time::Duration::from_millis(1)).await;
    for _ in 0..10 {
        send_paused(s.addr, Req::get("/api")).await;
    }
    assert_eq!(warnings(&log), [1], "none within the interval");
    tokio::time::advance(std::time::Duration::from_millis(1)).await;
    send_paused(s.addr, Req::get("/api")).await;
    // the 39 + 10 held back, and this one
    assert_eq!(warnings(&log), [1, 50], "{}", log.text());
}

/// Issue 28.2: the fallback and its status from a rules file, TOML and
/// JSON alike.
#[tokio::test]
async fn the_fallback_and_its_status_come_from_rules_files() {
    use tollgate::http::LayerConfig;
    let toml = "missing_key = \"shared_bucket\"\nmissing_key_status = 401\n\
        [[rules]]\nname = \"api\"\nprefix = \"/api\"\nrate = 1\nperiod = \"1h\"\n\
        key = \"header\"\nheader = \"x-api-key\"\n";
    let json = r#"{"missing_key": "shared_bucket", "missing_key_status": 401,
        "rules": [{"name": "api", "prefix": "/api", "rate": 1, "period": "1h",
                   "key": "header", "header": "x-api-key"}]}"#;
    for config in [
        LayerConfig::from_toml(toml).unwrap(),
        LayerConfig::from_json(json).unwrap(),
    ] {
        let layer = config
            .into_builder()
            .unwrap()
            .peer_addr(connect_info)
            .build()
            .unwrap();
        let s = serve(hello(layer)).await;
        assert_eq!(
            send(s.addr, Req::get("/api").from([127, 0, 0, 2]))
                .await
                .status,
            200
        );
        assert_eq!(
            send(s.addr, Req::get("/api").from([127, 0, 0, 3]))
                .await
                .status,
            401
        );
    }
}
