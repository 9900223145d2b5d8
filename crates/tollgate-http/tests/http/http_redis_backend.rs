//! A route policy whose buckets live in a real redis-server, behind real
//! HTTP servers and a real HTTP client: two servers (two layers, two
//! connections) share one quota; a config file with `backend = "redis"`
//! builds and limits; with Redis stopped, fail-open admits and flags it
//! (`StoreUnavailable` response extension) and fail-closed answers 429 with
//! `Retry-After`, both within the store timeout.

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::response::Response;
use support::RedisServer;
use support::http::{Req, connect_info, hello, send, serve};
use tollgate::Quota;
use tollgate::http::{KeySource, LayerConfig, Policy, RateLimitLayer, StoreUnavailable};
use tollgate::redis::{RedisConfig, RedisStore};

/// Copies the layer's `StoreUnavailable` extension into a header, so the
/// client on the other side of the socket can see it.
async fn expose_flag(mut res: Response) -> Response {
    if let Some(flag) = res.extensions().get::<StoreUnavailable>().cloned() {
        res.headers_mut()
            .insert("x-store-unavailable", flag.policy.parse().unwrap());
    }
    res
}

fn flagged(router: Router) -> Router {
    router.layer(axum::middleware::map_response(expose_flag))
}

/// One server's layer: a global limiter of 6 per minute (in process) and
/// `/api` at 3 per minute per peer IP, kept in Redis under `prefix`.
async fn fleet_member(url: &str) -> RateLimitLayer {
    let api = Quota::per_minute(3).unwrap();
    // generous timeout: a loaded machine delays replies, and this test is
    // not about the failure policy
    let config = RedisConfig::token_bucket(api)
        .prefix(b"fleet:")
        .timeout(Duration::from_secs(10));
    let store = RedisStore::connect(url, config).await.unwrap();
    RateLimitLayer::builder()
        .global(Policy::token_bucket(
            "global",
            Quota::per_minute(6).unwrap(),
        ))
        .policy(
            Policy::token_bucket("api", api)
                .prefix("/api")
                .key(KeySource::PeerIp)
                .backend(Arc::new(store)),
        )
        .peer_addr(connect_info)
        .headers_on_success(true)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_share_one_redis_quota_and_refusals_refund_the_global_permit() {
    let redis = RedisServer::start();
    let a = serve(hello(fleet_member(&redis.url()).await)).await;
    let b = serve(hello(fleet_member(&redis.url()).await)).await;

    // burst 3 in Redis: two on server A, one on server B
    for _ in 0..2 {
        let r = send(a.addr, Req::get("/api/items")).await;
        assert_eq!(r.status, 200);
    }
    let r = send(b.addr, Req::get("/api/items")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.remaining("api"), Some(0), "B sees A's two permits taken");

    // server B refuses: the quota is shared, not per server
    let r = send(b.addr, Req::get("/api/items")).await;
    assert_eq!(r.status, 429);
    let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((19..=20).contains(&retry), "one permit per 20 s: {retry}");
    assert_eq!(r.policies(), ["api"]);

    // a different client is another key in Redis
    let r = send(b.addr, Req::get("/api/items").from([127, 0, 0, 2])).await;
    assert_eq!(r.status, 200);

    // server A refuses four times; each refusal refunds A's global permit
    for _ in 0..4 {
        let r = send(a.addr, Req::get("/api/items")).await;
        assert_eq!(r.status, 429);
        assert!(r.header("retry-after").is_some());
    }
    // A's global limiter: 6 − 2 admitted − this one = 3 left (without the
    // refunds it would have refused this request)
    let r = send(a.addr, Req::get("/other")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.remaining("global"), Some(3));

    // the keys live in Redis under the prefix, tagged by kind (then named
    // by the digest of the tagged key)
    let mut admin = redis.admin();
    let name = |key: &[u8]| {
        tollgate::redis::RedisConfig::token_bucket(tollgate::Quota::per_second(1).unwrap())
            .prefix(b"fleet:")
            .redis_key(key)
    };
    let exists: u32 = redis::cmd("EXISTS")
        .arg(name(b"ip:127.0.0.1"))
        .arg(name(b"ip:127.0.0.2"))
        .query(&mut admin)
        .unwrap();
    assert_eq!(exists, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_file_with_redis_backend_builds_and_limits() {
    let redis = RedisServer::start();
    let toml = format!(
        r#"
        [[rules]]
        name = "api"
        prefix = "/api"
        rate = 2
        period = "1m"
        key = "peer_ip"
        backend = "redis"
        redis_url = "{}"
        redis_prefix = "cfg:"
        "#,
        redis.url()
    );
    // two replicas built from the same file
    let build = || {
        LayerConfig::from_toml(&toml)
            .unwrap()
            .into_builder()
            .unwrap()
            .peer_addr(connect_info)
            .build()
            .unwrap()
    };
    let a = serve(hello(build())).await;
    let b = serve(hello(build())).await;
    assert_eq!(send(a.addr, Req::get("/api")).await.status, 200);
    assert_eq!(send(b.addr, Req::get("/api")).await.status, 200);
    let r = send(a.addr, Req::get("/api")).await;
    assert_eq!(r.status, 429);
    let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((29..=30).contains(&retry), "one permit per 30 s: {retry}");
    assert_eq!(send(b.addr, Req::get("/api")).await.status, 429);
    // paths outside the rule are not limited
    assert_eq!(send(a.addr, Req::get("/else")).await.status, 200);
    let ttl: i64 = redis::cmd("PTTL")
        // the layer sends `ip:<address>`; the store names it by its digest
        .arg(
            tollgate::redis::RedisConfig::token_bucket(tollgate::Quota::per_second(1).unwrap())
                .prefix(b"cfg:")
                .redis_key(b"ip:127.0.0.1"),
        )
        .query(&mut redis.admin())
        .unwrap();
    assert!(
        ttl > 0 && ttl <= 60_000,
        "the key expires when refilled: {ttl}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_config_errors_name_the_rule_and_field() {
    let err = |text: &str| {
        LayerConfig::from_toml(text)
            .unwrap()
            .build()
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        err("[[rules]]\nname = \"a\"\nprefix = \"/a\"\nrate = 1\nbackend = \"redis\""),
        "rules[0].redis_url: is required with backend = \"redis\""
    );
    assert_eq!(
        err(
            "[[rules]]\nname = \"a\"\nprefix = \"/a\"\nrate = 1\nbackend = \"redis\"\nredis_url = \"nope://x\""
        ),
        "rules[0].redis_url: must be a redis:// URL"
    );
    assert_eq!(
        err(
            "[[rules]]\nname = \"a\"\nprefix = \"/a\"\nrate = 1\nredis_url = \"redis://127.0.0.1/\""
        ),
        "rules[0].redis_url: only applies with backend = \"redis\""
    );
    assert_eq!(
        err("[[rules]]\nname = \"a\"\nprefix = \"/a\"\nrate = 1\nredis_new_keys_per_second = 100"),
        "rules[0].redis_new_keys_per_second: only applies with backend = \"redis\""
    );
    assert_eq!(
        err(
            "[[rules]]\nname = \"a\"\nprefix = \"/a\"\nrate = 1\nbackend = \"redis\"\nredis_url = \"redis://127.0.0.1/\"\nredis_failure = \"maybe\""
        ),
        "rules[0].redis_failure: must be \"open\" or \"closed\""
    );
    assert_eq!(
        err("[global]\nrate = 1\nbackend = \"redis\"\nredis_url = \"redis://127.0.0.1/\""),
        "global.backend: the global limiter runs in process; give a rule the backend"
    );
    assert_eq!(
        err("[[rules]]\nname = \"a\"\nprefix = \"/a\"\nrate = 1\nbackend = \"memcached\""),
        "rules[0].backend: must be \"local\" or \"redis\""
    );
}

#[test]
fn building_a_redis_rule_outside_a_tokio_runtime_is_a_config_error() {
    let err = LayerConfig::from_toml(
        "[[rules]]\nname = \"a\"\nprefix = \"/a\"\nrate = 1\nbackend = \"redis\"\nredis_url = \"redis://127.0.0.1:1/\"",
    )
    .unwrap()
    .build()
    .unwrap_err();
    assert_eq!(err.location(), "rules[0].backend");
    assert!(err.to_string().contains("tokio runtime"), "{err}");
}

const TIMEOUT_MS: u64 = 100;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_stopped_fail_open_admits_flagged_fail_closed_refuses_within_the_timeout() {
    let mut redis = RedisServer::start();
    let toml = format!(
        r#"
        [[rules]]
        name = "open"
        prefix = "/open"
        rate = 100
        backend = "redis"
        redis_url = "{url}"
        redis_timeout = "{TIMEOUT_MS}ms"
        redis_failure = "open"

        [[rules]]
        name = "closed"
        prefix = "/closed"
        rate = 100
        backend = "redis"
        redis_url = "{url}"
        redis_timeout = "{TIMEOUT_MS}ms"
        redis_failure = "closed"
        "#,
        url = redis.url()
    );
    let layer = LayerConfig::from_toml(&toml).unwrap().build().unwrap();
    let server = serve(flagged(hello(layer))).await;

    // Redis up: both admit, nothing flagged
    for path in ["/open", "/closed"] {
        let r = send(server.addr, Req::get(path)).await;
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.header("x-store-unavailable"), None, "{path}");
    }

    redis.stop();
    // Loopback HTTP adds little; a loaded CI machine gets some slack.
    let bound = Duration::from_millis(TIMEOUT_MS + 400);
    for _ in 0..3 {
        let start = Instant::now();
        let r = send(server.addr, Req::get("/open")).await;
        let took = start.elapsed();
        assert_eq!(r.status, 200);
        assert_eq!(r.header("x-store-unavailable"), Some("open"));
        assert!(took <= bound, "fail-open answered after {took:?}");

        let start = Instant::now();
        let r = send(server.addr, Req::get("/closed")).await;
        let took = start.elapsed();
        assert_eq!(r.status, 429);
        assert_eq!(r.header("retry-after"), Some("1"));
        assert_eq!(r.header("x-store-unavailable"), Some("closed"));
        assert!(took <= bound, "fail-closed answered after {took:?}");
    }
}

/// A request waiting on a frozen Redis whose client goes away (its future
/// dropped) gives its global permit back, like a refused one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_request_waiting_on_redis_refunds_the_global_permit() {
    use axum::body::Body;
    use tower_layer::Layer;
    use tower_service::Service;

    let redis = RedisServer::start();
    let api = Quota::per_second(10).unwrap();
    let store = RedisStore::connect(
        redis.url(),
        RedisConfig::token_bucket(api).timeout(Duration::from_secs(5)),
    )
    .await
    .unwrap();
    let layer = RateLimitLayer::builder()
        .global(Policy::token_bucket(
            "global",
            Quota::per_minute(1).unwrap(),
        ))
        .policy(
            Policy::token_bucket("api", api)
                .prefix("/api")
                .backend(Arc::new(store)),
        )
        .build()
        .unwrap();
    let mut app =
        layer.layer(Router::new().route("/{*rest}", axum::routing::any(|| async { "ok" })));
    let request = |path: &str| axum::http::Request::get(path).body(Body::empty()).unwrap();

    redis.freeze(); // the store call hangs until its (5 s) timeout
    std::future::poll_fn(|cx| Service::<axum::http::Request<Body>>::poll_ready(&mut app, cx))
        .await
        .unwrap();
    let mut pending = Box::pin(app.call(request("/api/x")));
    assert!(support::poll_once(&mut pending).await.is_pending());
    // Kept real sleep: not synchronisation but "time passes and the call
    // still hangs on the frozen server". Any length below the store's 5 s
    // timeout gives the same result, so a loaded machine cannot change it.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(support::poll_once(&mut pending).await.is_pending());
    drop(pending); // the client went away
    redis.thaw();

    // the one global permit is back: a path outside /api is admitted
    std::future::poll_fn(|cx| Service::<axum::http::Request<Body>>::poll_ready(&mut app, cx))
        .await
        .unwrap();
    let res = app.call(request("/other")).await.unwrap();
    assert_eq!(res.status(), 200);
    let res = app.call(request("/other")).await.unwrap();
    assert_eq!(res.status(), 429, "and only one: the limit still holds");
}

/// Issue 19: rule names may contain `:`, and Redis keys used to be
/// `tollgate:<rule>:<tagged key>`, so rule `keys` charged for header value
/// `global` (`k:global`) and rule `keys:k` keyed globally (`global`) both
/// used `tollgate:keys:k:global`. Keys are now the prefix and a fixed-length
/// digest, so two rules with different prefixes can never share one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_names_with_colons_never_share_redis_keys() {
    let redis = RedisServer::start();
    let toml = format!(
        r#"
        [[rules]]
        name = "keys"
        prefix = "/a"
        rate = 1
        period = "1h"
        key = "header"
        header = "x-k"
        backend = "redis"
        redis_url = "{url}"

        [[rules]]
        name = "keys:k"
        prefix = "/b"
        rate = 1
        period = "1h"
        key = "global"
        backend = "redis"
        redis_url = "{url}"
        "#,
        url = redis.url()
    );
    let layer = LayerConfig::from_toml(&toml)
        .unwrap()
        .into_builder()
        .unwrap()
        .peer_addr(connect_info)
        .build()
        .unwrap();
    let s = serve(hello(layer)).await;
    // rule `keys:k` (one bucket for everyone) is spent
    assert_eq!(send(s.addr, Req::get("/b")).await.status, 200);
    assert_eq!(send(s.addr, Req::get("/b")).await.status, 429);
    // rule `keys`, header value `global`: its own fresh bucket
    let a = || Req::get("/a").header("x-k", "global");
    assert_eq!(send(s.addr, a()).await.status, 200);
    assert_eq!(send(s.addr, a()).await.status, 429);
    let mut names: Vec<String> = redis::cmd("KEYS")
        .arg("tollgate:*")
        .query(&mut redis.admin())
        .unwrap();
    names.sort();
    assert_eq!(names.len(), 2, "{names:?}");
    let digest = |name: &str, prefix: &str| {
        let rest = name.strip_prefix(prefix)?;
        (rest.len() == 32 && rest.bytes().all(|b| b.is_ascii_hexdigit())).then_some(())
    };
    assert!(
        names.iter().any(|n| digest(n, "tollgate:keys:").is_some())
            && names
                .iter()
                .any(|n| digest(n, "tollgate:keys:k:").is_some()),
        "each rule's key is its prefix and 32 hex digits: {names:?}"
    );
}

/// A global limiter that queues is waited before a route policy kept in
/// Redis is asked: a burst of 4 on a global bucket of 4 per second (burst
/// 1, two may wait) is served at 0, 250 and 500 ms, the fourth refused at
/// once, and Redis sees the three admitted requests only (its policy is
/// never the one that waits). Real time (a real redis-server cannot run
/// on tokio's paused clock), so the turns are checked within 150 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queueing_global_limiter_is_waited_before_redis_is_asked() {
    let redis = RedisServer::start();
    let route = Quota::per_second(100).unwrap();
    let store = RedisStore::connect(
        redis.url(),
        RedisConfig::token_bucket(route)
            .prefix(b"queued:")
            .timeout(Duration::from_secs(10)),
    )
    .await
    .unwrap();
    // the script loaded before anything is counted
    assert!(store.check(b"warm-up").await.is_ok());
    let layer = RateLimitLayer::builder()
        .global(
            Policy::token_bucket(
                "global",
                Quota::per_second(4).unwrap().with_burst(1).unwrap(),
            )
            .queue(Duration::from_secs(5), 2),
        )
        .policy(
            Policy::token_bucket("remote", route)
                .prefix("/remote")
                .backend(Arc::new(store)),
        )
        .peer_addr(connect_info)
        .build()
        .unwrap();
    let s = serve(hello(layer)).await;
    let before = redis.command_calls();
    let start = Instant::now();
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let addr = s.addr;
            tokio::spawn(async move {
                let r = send(addr, Req::get("/remote")).await;
                (r.status, start.elapsed())
            })
        })
        .collect();
    let mut got = Vec::new();
    for t in tasks {
        got.push(t.await.unwrap());
    }
    got.sort_by_key(|(_, at)| *at);
    let ok: Vec<Duration> = got
        .iter()
        .filter(|(st, _)| *st == 200)
        .map(|(_, at)| *at)
        .collect();
    let refused = got.iter().filter(|(st, _)| *st == 429).count();
    assert_eq!((ok.len(), refused), (3, 1), "{got:?}");
    let slack = Duration::from_millis(150);
    for (k, at) in ok.iter().enumerate() {
        let turn = Duration::from_millis(250) * k as u32;
        assert!(
            *at >= turn && *at <= turn + slack,
            "admission {k} at {at:?}: {got:?}"
        );
    }
    // one script call per admitted request, none for the refused one
    let calls = |m: &std::collections::BTreeMap<String, u64>| {
        m.get("evalsha").copied().unwrap_or(0) + m.get("eval").copied().unwrap_or(0)
    };
    assert_eq!(calls(&redis.command_calls()) - calls(&before), 3);
}
