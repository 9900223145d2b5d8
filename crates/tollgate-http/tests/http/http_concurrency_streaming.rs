//! In-flight limits per key (nginx `limit_conn`), on a real server with a
//! streaming handler: the permit is held until the response BODY has been
//! sent (not when the handler returns), a client that disconnects
//! mid-stream frees its slot, and another client is never affected.

use crate::support;

use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use support::http::{Req, Ticks, connect, connect_info, request_bytes, send, serve, start_stream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tollgate::http::{KeySource, LayerConfig, Policy, RateLimitLayer};

/// `/stream` streams `chunks` chunks `every` apart, behind `layer`.
fn streaming(layer: RateLimitLayer, chunks: u32, every: Duration) -> Router {
    Router::new()
        .route(
            "/stream",
            get(move || async move { Body::new(Ticks::new(chunks, every)) }),
        )
        .route("/quick", get(|| async { "ok" }))
        .layer(layer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_permit_is_held_until_the_last_chunk_is_sent() {
    // from a config file: one stream at a time per client IP
    let layer = LayerConfig::from_toml(
        r#"
[[rules]]
name = "streams"
prefix = "/stream"
algorithm = "concurrency"
limit = 1
key = "peer_ip"
"#,
    )
    .unwrap()
    .into_builder()
    .unwrap()
    .peer_addr(connect_info)
    .build()
    .unwrap();
    let s = serve(streaming(layer, 6, Duration::from_millis(100))).await;

    let start = Instant::now();
    let (mut a, mut got) = start_stream(s.addr, "/stream", [127, 0, 0, 1]).await;
    // the handler has returned (a chunk arrived) but the body is still
    // streaming: the same client is refused, with Retry-After and the
    // RateLimit items of a quota in concurrent requests (none free; no
    // window, since none comes back with time)
    let r = send(s.addr, Req::get("/stream")).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(
        r.header("ratelimit-policy"),
        Some("\"streams\";q=1;qu=\"concurrent-requests\"")
    );
    assert_eq!(
        r.sf_list("ratelimit"),
        [("streams".to_string(), vec![("r".to_string(), 0)])]
    );
    // another client is unaffected (its whole stream: 6 chunks)
    let r = send(s.addr, Req::get("/stream").from([127, 0, 0, 2])).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body.matches("tick").count(), 6);
    // paths outside the policy are not limited
    assert_eq!(send(s.addr, Req::get("/quick")).await.status, 200);

    // A reads its stream to the end; then its slot is free at once
    a.read_to_end(&mut got).await.unwrap();
    assert_eq!(String::from_utf8_lossy(&got).matches("tick").count(), 6);
    assert!(start.elapsed() >= Duration::from_millis(550));
    let (_again, _) = start_stream(s.addr, "/stream", [127, 0, 0, 1]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_disconnects_mid_stream_frees_its_slot() {
    let layer = RateLimitLayer::builder()
        .peer_addr(connect_info)
        .policy(
            Policy::concurrency("streams", 1)
                .prefix("/stream")
                .key(KeySource::PeerIp),
        )
        .build()
        .unwrap();
    // a 30 s stream: "freed by the disconnect" must not be confused with
    // "freed when the stream ended", however slow the machine
    let s = serve(streaming(layer, 600, Duration::from_millis(50))).await;
    let (a, _) = start_stream(s.addr, "/stream", [127, 0, 0, 1]).await;
    assert_eq!(send(s.addr, Req::get("/stream")).await.status, 429);
    let hung_up = Instant::now();
    drop(a);
    // the server notices at its next write; the slot is free long before
    // the stream would have ended
    loop {
        let mut c = connect(s.addr, [127, 0, 0, 1].into()).await;
        c.write_all(&request_bytes(s.addr, &Req::get("/stream")))
            .await
            .unwrap();
        let mut head = [0u8; 12];
        c.read_exact(&mut head).await.unwrap();
        if &head[9..12] == b"200" {
            break;
        }
        assert_eq!(&head[9..12], b"429");
        assert!(
            hung_up.elapsed() < Duration::from_secs(20),
            "the slot was not freed by the disconnect"
        );
        // polls a condition (the slot is free) until well before the end
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // the other client was never affected
    let (_b, _) = start_stream(s.addr, "/stream", [127, 0, 0, 2]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_layer_accepts_the_body_and_holds_the_permit() {
    let layer = RateLimitLayer::builder()
        .peer_addr(connect_info)
        .policy(Policy::concurrency("streams", 1).key(KeySource::PeerIp))
        .build()
        .unwrap();
    let app = Router::new()
        .route(
            "/stream",
            get(|| async { Body::new(Ticks::new(4, Duration::from_millis(100))) }),
        )
        .route_layer(layer.policy("streams").unwrap())
        .route("/quick", get(|| async { "ok" }));
    let s = serve(app).await;
    let (_a, _) = start_stream(s.addr, "/stream", [127, 0, 0, 1]).await;
    assert_eq!(send(s.addr, Req::get("/stream")).await.status, 429);
    assert_eq!(send(s.addr, Req::get("/quick")).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_in_flight_stay_held_across_a_reload() {
    let rules = |limit: u32| {
        LayerConfig::from_toml(&format!(
            "[[rules]]\nname = \"streams\"\nprefix = \"/stream\"\nalgorithm = \"concurrency\"\nlimit = {limit}\nkey = \"peer_ip\"\n"
        ))
        .unwrap()
        .into_builder()
        .unwrap()
        .peer_addr(connect_info)
    };
    let layer = rules(1).build().unwrap();
    let s = serve(streaming(layer.clone(), 40, Duration::from_millis(50))).await;
    let (_a, _) = start_stream(s.addr, "/stream", [127, 0, 0, 1]).await;
    let report = layer
        .reload(rules(2), tollgate::Inheritance::UsedAmount)
        .unwrap();
    assert_eq!(report.reconfigured, ["streams"]);
    // the stream started before the reload still holds one of the two
    let (_b, _) = start_stream(s.addr, "/stream", [127, 0, 0, 1]).await;
    assert_eq!(send(s.addr, Req::get("/stream")).await.status, 429);
}
