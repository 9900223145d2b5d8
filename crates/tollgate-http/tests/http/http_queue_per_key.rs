//! Queueing per key on a real server: each client's excess waits in its own
//! line (bounded per key, `max_wait`), a client that disconnects frees its
//! place, and the config file's nginx mapping gives nginx's `limit_req`
//! timings (`nodelay`, `burst` alone, `delay=`). On tokio's paused time,
//! the layer reading a `TokioClock`: every turn comes exactly on time, and
//! no test waits for real time.

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use support::http::{
    Req, connect, connect_info, hello_marked, now, paused_clock, request_bytes, send_paused, serve,
};
use support::recorder::MemoryRecorder;
use tokio::io::AsyncWriteExt;
use tollgate::Quota;
use tollgate::http::{KeySource, LayerConfig, Policy, RateLimitLayer};

/// One response of a [`burst`].
#[derive(Debug, Clone, Copy)]
struct Got {
    status: u16,
    /// When the server had it ready, since the burst began, on tokio's
    /// clock.
    ready: Duration,
    retry_after: bool,
    /// Decided on the first poll: admitted or refused without waiting
    /// (see `support::http::MarkWait`; immune to a slow machine).
    at_once: bool,
}

/// Sends `n` requests at once from `from` to a server built with
/// `hello_marked`, sorted by ready time.
async fn burst(addr: SocketAddr, path: &'static str, from: [u8; 4], n: usize) -> Vec<Got> {
    let start = now();
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            tokio::spawn(async move {
                let r = send_paused(addr, Req::get(path).from(from)).await;
                Got {
                    status: r.status,
                    ready: r.ready_at() - start,
                    retry_after: r.header("retry-after").is_some(),
                    at_once: r.at_once(),
                }
            })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out.sort_by_key(|e| e.ready);
    out
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// `got` was ready exactly at `turn` after the burst began (its timer
/// fires on tokio's 1 ms grid).
fn at_turn(got: &Got, turn: Duration) -> bool {
    got.ready >= turn && got.ready <= turn + ms(1)
}

#[tokio::test(start_paused = true)]
async fn each_client_waits_in_its_own_line() {
    // 4 per second per client (250 ms apart), burst 1, two may wait
    let rec = MemoryRecorder::default();
    let layer = metrics::with_local_recorder(&rec, || {
        RateLimitLayer::builder()
            .clock(paused_clock())
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
            .unwrap()
    });
    let s = serve(hello_marked(layer)).await;
    let (a, b) = tokio::join!(burst(s.addr, "/", [127, 0, 0, 1], 4), async {
        // B comes while A's line is occupied (an explicit signal, not a
        // sleep; yields only: tokio's time stands still meanwhile)
        support::until(|| rec.queued("paced") >= 1.0).await;
        burst(s.addr, "/", [127, 0, 0, 2], 1).await
    });
    // A: one at once, two in its line 250 ms apart, the fourth refused at once
    let ok: Vec<Got> = a.iter().filter(|e| e.status == 200).copied().collect();
    let refused: Vec<_> = a.iter().filter(|e| e.status == 429).collect();
    assert_eq!((ok.len(), refused.len()), (3, 1), "{a:?}");
    assert!(refused[0].at_once && refused[0].retry_after, "{a:?}");
    assert!(ok[0].at_once, "{a:?}");
    // the k-th admission of A's line k intervals after the burst began
    assert!(!ok[1].at_once && at_turn(&ok[1], ms(250)), "{a:?}");
    assert!(!ok[2].at_once && at_turn(&ok[2], ms(500)), "{a:?}");
    // B's line is its own: served at once, behind nobody
    assert_eq!(b[0].status, 200);
    assert!(b[0].at_once, "{b:?}");
}

#[tokio::test(start_paused = true)]
async fn remaining_does_not_count_the_queue_as_free_permits() {
    let layer = RateLimitLayer::builder()
        .clock(paused_clock())
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
    let s = serve(hello_marked(layer)).await;
    // burst 2: one left after the first, none after the second (the three
    // queue slots are not permits anyone gets at once)
    let r = send_paused(s.addr, Req::get("/")).await;
    assert_eq!(r.header("ratelimit-policy"), Some("\"q\";q=2;w=60"));
    assert_eq!(r.remaining("q"), Some(1));
    let r = send_paused(s.addr, Req::get("/")).await;
    assert_eq!(r.remaining("q"), Some(0));
    // the next would wait 30 s, past max_wait: refused at once
    let r = send_paused(s.addr, Req::get("/")).await;
    assert_eq!(r.status, 429);
    assert!(r.at_once());
    assert_eq!(r.header("retry-after"), Some("25"));
}

#[tokio::test(start_paused = true)]
async fn a_client_that_disconnects_frees_its_place_in_its_line() {
    // 1 per 2 s per client, one may wait
    let refill = Duration::from_secs(2);
    let rec = MemoryRecorder::default();
    let layer = metrics::with_local_recorder(&rec, || {
        RateLimitLayer::builder()
            .clock(paused_clock())
            .peer_addr(connect_info)
            .policy(
                Policy::token_bucket("slow", Quota::new(1, refill).unwrap())
                    .prefix("/")
                    .key(KeySource::ClientIp)
                    .queue(Duration::from_secs(5), 1),
            )
            .build()
            .unwrap()
    });
    let s = serve(hello_marked(layer)).await;
    let first = send_paused(s.addr, Req::get("/")).await;
    assert_eq!(first.status, 200);
    let mut waiting = connect(s.addr, "127.0.0.1".parse().unwrap()).await;
    waiting
        .write_all(&request_bytes(s.addr, &Req::get("/")))
        .await
        .unwrap();
    // explicit signals, not sleeps: the queue gauge shows it in, then out
    // (yields only: tokio's time stands still meanwhile)
    support::until(|| rec.queued("slow") == 1.0).await;
    assert_eq!(
        send_paused(s.addr, Req::get("/")).await.status,
        429,
        "line full"
    );
    // another client's line is empty
    let r = send_paused(s.addr, Req::get("/").from([127, 0, 0, 3])).await;
    assert_eq!(r.status, 200);
    assert!(r.at_once());
    drop(waiting);
    support::until(|| rec.queued("slow") == 0.0).await;
    let r = send_paused(s.addr, Req::get("/")).await;
    assert_eq!(r.status, 200, "place freed");
    // it queued and went at the refill, on tokio's clock
    assert!(!r.at_once());
    let served = r.ready_at() - first.ready_at();
    assert!(
        served >= refill && served <= refill + ms(1),
        "waited its turn: served {served:?} after the first"
    );
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
    .clock(paused_clock())
    .peer_addr(connect_info)
    .build()
    .unwrap()
}

/// The admitted and the refused, each in ready order; every refusal has a
/// Retry-After and came at once (not after waiting).
fn split(got: &[Got]) -> (Vec<Got>, Vec<Got>) {
    for g in got {
        assert!(
            g.status == 200 || (g.status == 429 && g.retry_after && g.at_once),
            "{got:?}"
        );
    }
    let ok = got.iter().filter(|e| e.status == 200).copied().collect();
    let refused = got.iter().filter(|e| e.status == 429).copied().collect();
    (ok, refused)
}

#[tokio::test(start_paused = true)]
async fn nginx_delay_passes_d_plus_one_then_spaces_the_rest_then_refuses() {
    let s = serve(hello_marked(nginx_layer())).await;
    // burst=4 delay=2 at 2r/s: 3 at once, 2 more 500 ms apart, 2 refused
    let got = burst(s.addr, "/delay", [127, 0, 0, 1], 7).await;
    let (ok, _refused) = split(&got);
    assert_eq!((ok.len(), got.len() - ok.len()), (5, 2), "{got:?}");
    for g in &ok[..3] {
        assert!(g.at_once, "first D + 1 at once: {got:?}");
    }
    // one interval apart, each at its turn
    assert!(!ok[3].at_once && at_turn(&ok[3], ms(500)), "{got:?}");
    assert!(!ok[4].at_once && at_turn(&ok[4], ms(1000)), "{got:?}");
}

#[tokio::test(start_paused = true)]
async fn nginx_burst_without_nodelay_spaces_every_excess_request() {
    let s = serve(hello_marked(nginx_layer())).await;
    // burst=3 at 4r/s: 1 at once, 3 more 250 ms apart, 2 refused
    let got = burst(s.addr, "/burst", [127, 0, 0, 1], 6).await;
    let (ok, refused) = split(&got);
    assert_eq!((ok.len(), refused.len()), (4, 2), "{got:?}");
    assert!(ok[0].at_once, "{got:?}");
    // paced: the k-th k intervals after the burst began
    for (k, g) in ok.iter().enumerate().skip(1) {
        assert!(!g.at_once && at_turn(g, ms(250) * k as u32), "{got:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn nginx_nodelay_admits_burst_plus_one_at_once() {
    let s = serve(hello_marked(nginx_layer())).await;
    // burst=3 nodelay: 4 at once, the rest refused at once
    let got = burst(s.addr, "/nodelay", [127, 0, 0, 1], 6).await;
    let (ok, refused) = split(&got);
    assert_eq!((ok.len(), refused.len()), (4, 2), "{got:?}");
    for g in ok.iter().chain(&refused) {
        assert!(g.at_once, "{got:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_queueing_global_limiter_delays_before_the_route_policy() {
    // the global limiter: 4 per second, burst 1, two may wait; a route
    // policy of 100 per second on /local (the same with a route policy
    // kept in Redis: `http_redis_backend.rs`, on real time)
    let layer = RateLimitLayer::builder()
        .clock(paused_clock())
        .peer_addr(connect_info)
        .global(
            Policy::token_bucket(
                "global",
                Quota::per_second(4).unwrap().with_burst(1).unwrap(),
            )
            .queue(Duration::from_secs(5), 2),
        )
        .policy(Policy::token_bucket("local", Quota::per_second(100).unwrap()).prefix("/local"))
        .build()
        .unwrap();
    let s = serve(hello_marked(layer)).await;
    for path in ["/local", "/other"] {
        let got = burst(s.addr, path, [127, 0, 0, 1], 4).await;
        let (ok, refused) = split(&got);
        assert_eq!((ok.len(), refused.len()), (3, 1), "{path}: {got:?}");
        assert!(ok[0].at_once, "{path}: {got:?}");
        assert!(
            !ok[1].at_once && at_turn(&ok[1], ms(250)),
            "{path}: the global turn was waited: {got:?}"
        );
        assert!(
            !ok[2].at_once && at_turn(&ok[2], ms(500)),
            "{path}: the global turn was waited: {got:?}"
        );
        // the next burst starts on a refilled bucket: the last admission
        // is done, so 800 ms of tokio's time is past its TAT (+250 ms)
        tokio::time::sleep(ms(800)).await;
    }
}
