//! Queueing per key on a real server: each client's excess waits in its own
//! line (bounded per key, `max_wait`), a client that disconnects frees its
//! place, and the config file's nginx mapping gives nginx's `limit_req`
//! timings (`nodelay`, `burst` alone, `delay=`).
#![cfg(all(feature = "http", feature = "config"))]

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use support::http::{connect, connect_info, hello, request_bytes, send, serve, Req};
use tokio::io::AsyncWriteExt;
use tollgate::http::{KeySource, LayerConfig, Policy, RateLimitLayer};
use tollgate::Quota;

/// Sends `n` requests at once from `from`; (status, elapsed, has
/// Retry-After), sorted by elapsed time.
async fn burst(
    addr: SocketAddr,
    path: &'static str,
    from: [u8; 4],
    n: usize,
) -> Vec<(u16, Duration, bool)> {
    let start = Instant::now();
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            tokio::spawn(async move {
                let r = send(addr, Req::get(path).from(from)).await;
                (r.status, start.elapsed(), r.header("retry-after").is_some())
            })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out.sort_by_key(|e| e.1);
    out
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_client_waits_in_its_own_line() {
    // 4 per second per client (250 ms apart), burst 1, two may wait
    let layer = RateLimitLayer::builder()
        .peer_addr(connect_info)
        .headers_on_success(true)
        .policy(
            Policy::token_bucket(
                "paced",
                Quota::per_second(4).unwrap().with_burst(1).unwrap(),
            )
            .prefix("/")
            .key(KeySource::PeerIp)
            .queue(Duration::from_secs(5), 2),
        )
        .build()
        .unwrap();
    let s = serve(hello(layer)).await;
    let (a, b) = tokio::join!(burst(s.addr, "/", [127, 0, 0, 1], 4), async {
        tokio::time::sleep(ms(20)).await;
        burst(s.addr, "/", [127, 0, 0, 2], 1).await
    });
    // A: one at once, two in its line 250 ms apart, the fourth refused at once
    let ok: Vec<Duration> = a.iter().filter(|e| e.0 == 200).map(|e| e.1).collect();
    let refused: Vec<_> = a.iter().filter(|e| e.0 == 429).collect();
    assert_eq!((ok.len(), refused.len()), (3, 1), "{a:?}");
    assert!(refused[0].1 < ms(200) && refused[0].2, "{a:?}");
    assert!(ok[0] < ms(200), "{a:?}");
    assert!(ok[1] >= ms(200) && ok[1] < ms(800), "{a:?}");
    assert!(ok[2] >= ms(450) && ok[2] < ms(1300), "{a:?}");
    assert!(ok[2] - ok[1] >= ms(150), "paced: {a:?}");
    // B's line is its own: served at once, behind nobody
    assert_eq!(b[0].0, 200);
    assert!(b[0].1 < ms(200), "{b:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remaining_does_not_count_the_queue_as_free_permits() {
    let layer = RateLimitLayer::builder()
        .peer_addr(connect_info)
        .headers_on_success(true)
        .policy(
            Policy::token_bucket("q", Quota::per_minute(2).unwrap())
                .prefix("/")
                .key(KeySource::PeerIp)
                .queue(Duration::from_secs(5), 3),
        )
        .build()
        .unwrap();
    let s = serve(hello(layer)).await;
    // burst 2: one left after the first, none after the second (the three
    // queue slots are not permits anyone gets at once)
    let r = send(s.addr, Req::get("/")).await;
    assert_eq!(r.header("ratelimit-policy"), Some("\"q\";q=2;w=60"));
    assert_eq!(r.remaining("q"), Some(1));
    let r = send(s.addr, Req::get("/")).await;
    assert_eq!(r.remaining("q"), Some(0));
    // the next would wait 30 s, past max_wait: refused at once
    let t = Instant::now();
    let r = send(s.addr, Req::get("/")).await;
    assert_eq!(r.status, 429);
    assert!(t.elapsed() < ms(500));
    assert_eq!(r.header("retry-after"), Some("25"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_disconnects_frees_its_place_in_its_line() {
    // 1 per second per client, one may wait
    let layer = RateLimitLayer::builder()
        .peer_addr(connect_info)
        .policy(
            Policy::token_bucket("slow", Quota::per_second(1).unwrap())
                .prefix("/")
                .key(KeySource::ClientIp(Default::default()))
                .queue(Duration::from_secs(5), 1),
        )
        .build()
        .unwrap();
    let s = serve(hello(layer)).await;
    assert_eq!(send(s.addr, Req::get("/")).await.status, 200);
    let mut waiting = connect(s.addr, "127.0.0.1".parse().unwrap()).await;
    waiting
        .write_all(&request_bytes(s.addr, &Req::get("/")))
        .await
        .unwrap();
    tokio::time::sleep(ms(150)).await;
    assert_eq!(send(s.addr, Req::get("/")).await.status, 429, "line full");
    // another client's line is empty
    let t = Instant::now();
    assert_eq!(
        send(s.addr, Req::get("/").from([127, 0, 0, 3]))
            .await
            .status,
        200
    );
    assert!(t.elapsed() < ms(300));
    drop(waiting);
    tokio::time::sleep(ms(150)).await;
    let t = Instant::now();
    assert_eq!(send(s.addr, Req::get("/")).await.status, 200, "place freed");
    assert!(t.elapsed() >= ms(300), "waited its turn: {:?}", t.elapsed());
}

/// nginx `limit_req` equivalents, per the mapping in the config docs.
fn nginx_layer() -> RateLimitLayer {
    LayerConfig::from_toml(
        r#"
# limit_req zone=z burst=3 nodelay (rate 2r/s)
[[rules]]
name = "nodelay"
prefix = "/nodelay"
rate = 2
burst = 4
key = "peer_ip"

# limit_req zone=z burst=3 (rate 4r/s)
[[rules]]
name = "burst"
prefix = "/burst"
rate = 4
burst = 1
key = "peer_ip"
queue = { limit = 3, max_wait = "10s" }

# limit_req zone=z burst=4 delay=2 (rate 2r/s)
[[rules]]
name = "delay"
prefix = "/delay"
rate = 2
burst = 3
key = "peer_ip"
queue = { limit = 2, max_wait = "10s" }
"#,
    )
    .unwrap()
    .into_builder()
    .unwrap()
    .peer_addr(connect_info)
    .build()
    .unwrap()
}

fn split(got: &[(u16, Duration, bool)]) -> (Vec<Duration>, Vec<Duration>) {
    for (status, _, retry_after) in got {
        assert!(
            *status == 200 || (*status == 429 && *retry_after),
            "{got:?}"
        );
    }
    let ok = got.iter().filter(|e| e.0 == 200).map(|e| e.1).collect();
    let refused = got.iter().filter(|e| e.0 == 429).map(|e| e.1).collect();
    (ok, refused)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_delay_passes_d_plus_one_then_spaces_the_rest_then_refuses() {
    let s = serve(hello(nginx_layer())).await;
    // burst=4 delay=2 at 2r/s: 3 at once, 2 more 500 ms apart, 2 refused
    let got = burst(s.addr, "/delay", [127, 0, 0, 1], 7).await;
    let (ok, refused) = split(&got);
    assert_eq!((ok.len(), refused.len()), (5, 2), "{got:?}");
    for t in &ok[..3] {
        assert!(*t < ms(300), "first D + 1 at once: {got:?}");
    }
    for t in &refused {
        assert!(*t < ms(300), "refused at once: {got:?}");
    }
    assert!(ok[3] >= ms(450) && ok[3] < ms(1200), "{got:?}");
    assert!(ok[4] >= ms(950) && ok[4] < ms(1900), "{got:?}");
    assert!(ok[4] - ok[3] >= ms(400), "one interval apart: {got:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_burst_without_nodelay_spaces_every_excess_request() {
    let s = serve(hello(nginx_layer())).await;
    // burst=3 at 4r/s: 1 at once, 3 more 250 ms apart, 2 refused
    let got = burst(s.addr, "/burst", [127, 0, 0, 1], 6).await;
    let (ok, refused) = split(&got);
    assert_eq!((ok.len(), refused.len()), (4, 2), "{got:?}");
    assert!(ok[0] < ms(200), "{got:?}");
    assert!(ok[1] >= ms(200), "{got:?}");
    assert!(ok[3] >= ms(700) && ok[3] < ms(1500), "{got:?}");
    assert!(ok[3] - ok[1] >= ms(400), "paced: {got:?}");
    for t in &refused {
        assert!(*t < ms(300), "refused at once: {got:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_nodelay_admits_burst_plus_one_at_once() {
    let s = serve(hello(nginx_layer())).await;
    // burst=3 nodelay: 4 at once, the rest refused at once
    let got = burst(s.addr, "/nodelay", [127, 0, 0, 1], 6).await;
    let (ok, refused) = split(&got);
    assert_eq!((ok.len(), refused.len()), (4, 2), "{got:?}");
    for t in ok.iter().chain(&refused) {
        assert!(*t < ms(300), "{got:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queueing_global_limiter_delays_before_any_route_policy() {
    // the global limiter: 4 per second, burst 1, two may wait; a route
    // policy whose buckets live in a (here in-memory) remote backend
    let backend = tollgate::RateLimiter::token_bucket(
        Quota::per_second(100).unwrap(),
        tollgate::StdClock::new(),
    )
    .unwrap();
    let layer = RateLimitLayer::builder()
        .peer_addr(connect_info)
        .global(
            Policy::token_bucket(
                "global",
                Quota::per_second(4).unwrap().with_burst(1).unwrap(),
            )
            .queue(Duration::from_secs(5), 2),
        )
        .policy(
            Policy::token_bucket("remote", Quota::per_second(100).unwrap())
                .prefix("/remote")
                .backend(std::sync::Arc::new(backend)),
        )
        .build()
        .unwrap();
    let s = serve(hello(layer)).await;
    for path in ["/remote", "/local"] {
        let got = burst(s.addr, path, [127, 0, 0, 1], 4).await;
        let (ok, refused) = split(&got);
        assert_eq!((ok.len(), refused.len()), (3, 1), "{path}: {got:?}");
        assert!(ok[0] < ms(200), "{path}: {got:?}");
        assert!(
            ok[2] >= ms(450),
            "{path}: the global turn was waited: {got:?}"
        );
        // the next burst starts on a spent bucket
        tokio::time::sleep(ms(800)).await;
    }
}
