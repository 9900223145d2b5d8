//! gRPC refusals on a real tonic server (the standard health service:
//! unary `Check`, server-streaming `Watch`) with a real tonic client over
//! loopback: a refused call is `RESOURCE_EXHAUSTED` with a `RetryInfo`
//! the client decodes, equal to the wait the layer computed (the
//! `Retry-After` it sends along is that wait rounded up to seconds); an
//! admitted call is the service's own answer; a queued call waits its turn.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::RedisServer;
use support::http::{Server, paused_clock};
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tollgate::Quota;
use tollgate::http::{KeySource, Policy, RateLimitLayer};
use tollgate::redis::{RedisConfig, RedisStore};
use tonic::Code;
use tonic::transport::Channel;
use tonic::transport::server::TcpConnectInfo;
use tonic_health::ServingStatus;
use tonic_health::pb::health_check_response::ServingStatus as Wire;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};
use tonic_health::server::HealthReporter;
use tonic_types::StatusExt;

/// A tonic server with `layer` in front of the health service (services
/// "a" to "d" serving), on 127.0.0.1.
async fn serve_health(layer: RateLimitLayer) -> (Server, HealthReporter) {
    let (reporter, health) = tonic_health::server::health_reporter();
    for name in ["a", "b", "c", "d"] {
        reporter
            .set_service_status(name, ServingStatus::Serving)
            .await;
    }
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    let task = tokio::spawn(async move {
        tonic::transport::Server::builder()
            .layer(layer)
            .add_service(health)
            .serve_with_incoming(TcpListenerStream::new(listener))
            .await
            .expect("serve");
    });
    (Server::new(addr, task), reporter)
}

async fn client(server: &Server) -> HealthClient<Channel> {
    let channel = Channel::from_shared(format!("http://{}", server.addr))
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    HealthClient::new(channel)
}

fn check(service: &str) -> HealthCheckRequest {
    HealthCheckRequest {
        service: service.into(),
    }
}

/// What a refused call must carry: RESOURCE_EXHAUSTED, a message naming
/// the policy, a `RetryInfo` the client decodes and a `QuotaFailure`
/// naming the policy; the retry delay is returned.
fn assert_refused_by(status: &tonic::Status, policy: &str) -> Duration {
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        status.message().contains(&format!("\"{policy}\"")),
        "{status:?}"
    );
    let details = status.get_error_details();
    let violations = &details.quota_failure().expect("QuotaFailure").violations;
    assert_eq!(violations.len(), 1);
    assert_eq!(violations[0].subject, policy);
    assert!(!violations[0].description.is_empty());
    let delay = details
        .retry_info()
        .expect("RetryInfo")
        .retry_delay
        .expect("a retry delay");
    // the metadata an HTTP client reads too: the same wait, rounded up
    let retry_after: u64 = status
        .metadata()
        .get("retry-after")
        .expect("retry-after")
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(retry_after, delay.as_nanos().div_ceil(1_000_000_000) as u64);
    delay
}

/// The reproduction: a global policy of 2 per minute; the third
/// unary call is RESOURCE_EXHAUSTED (not the UNAVAILABLE a client makes of
/// HTTP 429) with the exact wait, on the layer's clock standing still
/// (tokio's paused time): 30 s to the nanosecond.
#[tokio::test(start_paused = true)]
async fn a_refused_unary_call_is_resource_exhausted_with_the_exact_wait() {
    let layer = RateLimitLayer::builder()
        .clock(paused_clock())
        .global(Policy::token_bucket(
            "global",
            Quota::per_minute(2).unwrap(),
        ))
        .build()
        .unwrap();
    let (s, _reporter) = serve_health(layer).await;
    let mut c = client(&s).await;
    for _ in 0..2 {
        let ok = c.check(check("a")).await.expect("admitted");
        assert_eq!(ok.get_ref().status, Wire::Serving as i32);
    }
    let refused = c.check(check("a")).await.expect_err("refused");
    let delay = assert_refused_by(&refused, "global");
    assert_eq!(delay, Duration::from_secs(30));
    assert_eq!(
        refused.metadata().get("ratelimit-policy").unwrap(),
        "\"global\";q=2;w=60"
    );
    assert_eq!(
        refused.metadata().get("ratelimit").unwrap(),
        "\"global\";r=0;t=30"
    );
}

/// A refused server-streaming call gets the trailers-only answer before
/// any message: the client's `watch` fails at once, with the wait. A route
/// policy per peer IP this time (tonic's `TcpConnectInfo`, the guide's
/// recipe), on the real clock: the delay is the wait left of the policy's
/// 1 s interval.
#[tokio::test]
async fn a_refused_streaming_call_is_resource_exhausted_before_any_message() {
    let layer = RateLimitLayer::builder()
        .peer_addr(|ext| ext.get::<TcpConnectInfo>()?.remote_addr())
        .policy(
            Policy::token_bucket("health", Quota::per_second(1).unwrap())
                .prefix("/grpc.health.v1.Health")
                .key(KeySource::PeerIp),
        )
        .build()
        .unwrap();
    let (s, _reporter) = serve_health(layer).await;
    let mut c = client(&s).await;
    let first = Instant::now();
    let mut stream = c.watch(check("a")).await.expect("admitted").into_inner();
    let msg: HealthCheckResponse = stream.message().await.unwrap().expect("a first message");
    assert_eq!(msg.status, Wire::Serving as i32);
    let refused = c.watch(check("b")).await.expect_err("refused");
    let delay = assert_refused_by(&refused, "health");
    assert!(delay <= Duration::from_secs(1), "{delay:?}");
    assert!(
        delay >= Duration::from_secs(1).saturating_sub(first.elapsed()),
        "{delay:?}"
    );
}

/// An admitted call is the service's own answer, a refused one is the
/// layer's: the same client sees NOT_FOUND from the service for an unknown
/// name (the layer does not touch it), then RESOURCE_EXHAUSTED.
#[tokio::test]
async fn an_admitted_call_is_untouched() {
    let layer = RateLimitLayer::builder()
        .global(Policy::fixed_window("global", 2, Duration::from_secs(60)))
        .build()
        .unwrap();
    let (s, _reporter) = serve_health(layer).await;
    let mut c = client(&s).await;
    let ok = c.check(check("a")).await.expect("admitted");
    assert_eq!(ok.get_ref().status, Wire::Serving as i32);
    let not_found = c
        .check(check("nobody"))
        .await
        .expect_err("the service's own error");
    assert_eq!(not_found.code(), Code::NotFound);
    assert!(not_found.details().is_empty());
    let refused = c.check(check("a")).await.expect_err("refused");
    assert_refused_by(&refused, "global");
}

/// Calls over a policy that queues wait their turn and are served in
/// arrival order, as HTTP requests are: 4 calls at once under 1 per
/// 200 ms, each admitted 200 ms after the one before.
#[tokio::test]
async fn queued_calls_are_served_in_arrival_order() {
    let layer = RateLimitLayer::builder()
        .global(
            Policy::leaky_bucket("paced", Quota::per_second(5).unwrap())
                .queue(Duration::from_secs(5), 16),
        )
        .build()
        .unwrap();
    let (s, _reporter) = serve_health(layer).await;
    let c = client(&s).await;
    let order = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for name in ["a", "b", "c", "d"] {
        let mut c = c.clone();
        let order = Arc::clone(&order);
        tasks.push(tokio::spawn(async move {
            let res = c.check(check(name)).await;
            order.lock().unwrap().push((name, start.elapsed()));
            res
        }));
        // arrival order: a, b, c, d
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for t in tasks {
        let res = t.await.unwrap().expect("served after waiting");
        assert_eq!(res.get_ref().status, Wire::Serving as i32);
    }
    let order = order.lock().unwrap().clone();
    let names: Vec<_> = order.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, ["a", "b", "c", "d"]);
    // the last waited three intervals
    assert!(order[3].1 >= Duration::from_millis(590), "{order:?}");
}

/// A gRPC call refused after waiting in a queue gets the same gRPC answer
/// as one refused at once: an in-flight limit of 1, held by an open
/// `Watch` stream; a `Check` waits in line for its `max_wait`, then is
/// refused.
#[tokio::test]
async fn a_call_refused_after_waiting_in_line_is_resource_exhausted() {
    let layer = RateLimitLayer::builder()
        .global(Policy::concurrency("streams", 1).queue(Duration::from_millis(200), 16))
        .build()
        .unwrap();
    let (s, _reporter) = serve_health(layer).await;
    let mut c = client(&s).await;
    let mut stream = c.watch(check("a")).await.expect("admitted").into_inner();
    stream.message().await.unwrap().expect("a first message");
    let asked = Instant::now();
    let refused = c.check(check("a")).await.expect_err("refused");
    assert!(
        asked.elapsed() >= Duration::from_millis(200),
        "waited in line first"
    );
    assert_refused_by(&refused, "streams");
    // an in-flight limit reports its concurrency quota (draft-11 `qu`)
    let policy = refused.metadata().get("ratelimit-policy").unwrap();
    assert_eq!(
        policy.to_str().unwrap(),
        "\"streams\";q=1;qu=\"concurrent-requests\""
    );
    drop(stream);
}

/// A route policy whose buckets live in a real redis-server refuses a
/// gRPC call the same way: one more rendering of the same refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_a_redis_policy_refuses_is_resource_exhausted() {
    let redis = RedisServer::start();
    let quota = Quota::per_minute(1).unwrap();
    let config = RedisConfig::token_bucket(quota)
        .prefix(b"grpc:")
        .timeout(Duration::from_secs(10));
    let store = RedisStore::connect(redis.url(), config).await.unwrap();
    let layer = RateLimitLayer::builder()
        .policy(
            Policy::token_bucket("shared", quota)
                .prefix("/grpc.health.v1.Health/Check")
                .backend(Arc::new(store)),
        )
        .build()
        .unwrap();
    let (s, _reporter) = serve_health(layer).await;
    let mut c = client(&s).await;
    c.check(check("a")).await.expect("admitted");
    let refused = c.check(check("a")).await.expect_err("refused");
    let delay = assert_refused_by(&refused, "shared");
    // Redis's clock: the minute, less what passed between the two calls
    assert!(delay <= Duration::from_secs(60), "{delay:?}");
    assert!(delay > Duration::from_secs(50), "{delay:?}");
}

/// The layer's gRPC rendering answers when no rejection handler is set; a
/// handler set by the user answers as it wants (here: its own gRPC
/// status), and the standard headers are still added.
#[tokio::test]
async fn a_rejection_handler_wins_over_the_grpc_rendering() {
    let layer = RateLimitLayer::builder()
        .global(Policy::fixed_window("global", 1, Duration::from_secs(60)))
        .on_rejected(|r, _| {
            http::Response::builder()
                .header("content-type", "application/grpc")
                .header("grpc-status", "14")
                .header("grpc-message", format!("busy: {}", r.policy()))
                .body(String::new())
                .unwrap()
        })
        .build()
        .unwrap();
    let (s, _reporter) = serve_health(layer).await;
    let mut c = client(&s).await;
    c.check(check("a")).await.expect("admitted");
    let refused = c.check(check("a")).await.expect_err("refused");
    assert_eq!(refused.code(), Code::Unavailable);
    assert_eq!(refused.message(), "busy: global");
    assert!(refused.metadata().get("retry-after").is_some());
}
