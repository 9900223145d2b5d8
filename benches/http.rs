//! Throughput of a hello-world axum server on loopback: without a limiter,
//! behind tollgate's `RateLimitLayer`, and behind `tower_governor`, both
//! limiters configured alike (per peer IP, a quota far above the load, so
//! every request is admitted and the figures measure the layer's cost).
//! Rounds are interleaved (plain, tollgate, governor, plain, …) so that
//! machine noise hits the three alike; the median round counts.
//!
//! `cargo bench --bench http --features http`; `TOLLGATE_HTTP_BENCH_SECS`
//! (default 1) sets the length of one round, `TOLLGATE_HTTP_BENCH_ROUNDS`
//! (default 5) the number of rounds. Prints `FIGURE name value unit note`.

#[allow(dead_code)]
#[path = "../tests/support/http.rs"]
mod support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::routing::get;
use axum::Router;
use support::{serve, Conn, Server};
use tollgate::http::{KeySource, Policy, RateLimitLayer};
use tollgate::Quota;
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::GovernorLayer;

const CONNECTIONS: usize = 32;

fn app() -> Router {
    Router::new().route("/", get(|| async { "Hello, World!" }))
}

fn tollgate_app() -> Router {
    // one permit per nanosecond per peer IP, bursts of a billion (a tolerance
    // of 1 s, so that a thread preempted between reading the clock and
    // checking is never refused)
    let quota = Quota::new(1, Duration::from_nanos(1))
        .and_then(|q| q.with_burst(1_000_000_000))
        .expect("quota");
    let layer = RateLimitLayer::builder()
        .peer_addr(support::connect_info)
        .policy(
            Policy::token_bucket("ip", quota)
                .prefix("/")
                .key(KeySource::PeerIp),
        )
        .build()
        .expect("layer");
    app().layer(layer)
}

fn governor_app() -> Router {
    // tower_governor's default key is the peer IP (ConnectInfo); the same quota
    let config = GovernorConfigBuilder::default()
        .per_nanosecond(1)
        .burst_size(1_000_000_000)
        .finish()
        .expect("governor config");
    app().layer(GovernorLayer::new(config))
}

/// Requests per second served over `CONNECTIONS` keep-alive connections.
async fn round(addr: SocketAddr, secs: f64) -> f64 {
    let done = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let mut conns = Vec::new();
    for _ in 0..CONNECTIONS {
        conns.push(Conn::open(addr).await);
    }
    let start = Instant::now();
    let tasks: Vec<_> = conns
        .into_iter()
        .map(|mut c| {
            let (done, count) = (Arc::clone(&done), Arc::clone(&count));
            tokio::spawn(async move {
                while !done.load(Ordering::Relaxed) {
                    let r = c.get("/").await;
                    assert_eq!(r.status, 200, "every request admitted by {addr}: {r:?}");
                    count.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    done.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("client task");
    }
    count.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

/// Nanoseconds per request calling the router directly (no network): the
/// layer's own cost on top of axum's routing, without socket noise.
async fn direct_round(mut app: Router, n: u32) -> f64 {
    use axum::body::Body;
    use tower_service::Service;
    let peer = axum::extract::ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40_000)));
    let start = Instant::now();
    for _ in 0..n {
        let mut req = http::Request::get("/")
            .body(Body::empty())
            .expect("request");
        req.extensions_mut().insert(peer);
        std::future::poll_fn(|cx| Service::<http::Request<Body>>::poll_ready(&mut app, cx))
            .await
            .expect("ready");
        let res = Service::<http::Request<Body>>::call(&mut app, req)
            .await
            .expect("infallible");
        assert_eq!(res.status(), 200, "every request admitted");
    }
    start.elapsed().as_nanos() as f64 / f64::from(n)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn env(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let secs = env("TOLLGATE_HTTP_BENCH_SECS", 1.0);
    let rounds = env("TOLLGATE_HTTP_BENCH_ROUNDS", 5.0) as usize;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let servers: [(&str, Server); 3] = [
            ("plain", serve(app()).await),
            ("tollgate", serve(tollgate_app()).await),
            ("tower_governor", serve(governor_app()).await),
        ];
        let mut results = [Vec::new(), Vec::new(), Vec::new()];
        // warm-up
        for (name, s) in &servers {
            eprintln!("warm-up {name} on {}", s.addr);
            round(s.addr, 0.2).await;
        }
        for r in 0..rounds.max(1) {
            // alternate the order so that no server always runs first
            let order: [usize; 3] = if r % 2 == 0 { [0, 1, 2] } else { [2, 1, 0] };
            for i in order {
                results[i].push(round(servers[i].1.addr, secs).await);
            }
        }
        // paired ratios: each round's three runs are seconds apart, so
        // their ratio cancels most of the machine's drift
        let mut vs_plain: Vec<f64> = (0..results[0].len()).map(|r| results[1][r] / results[0][r]).collect();
        let mut vs_gov: Vec<f64> = (0..results[0].len()).map(|r| results[1][r] / results[2][r]).collect();
        let med: Vec<f64> = results.iter_mut().map(|r| median(r)).collect();
        for (i, (name, _)) in servers.iter().enumerate() {
            println!(
                "FIGURE http_{name}_rps {:.0} req/s median of {} interleaved {secs}s rounds, {CONNECTIONS} keep-alive connections, loopback (rounds: {:?})",
                med[i],
                results[i].len(),
                results[i].iter().map(|v| v.round()).collect::<Vec<_>>()
            );
        }
        // direct calls: same three routers, interleaved, 100k calls a round
        type MakeApp = fn() -> Router;
        let makers: [(&str, MakeApp); 3] =
            [("plain", app), ("tollgate", tollgate_app), ("tower_governor", governor_app)];
        let mut direct = [Vec::new(), Vec::new(), Vec::new()];
        for r in 0..rounds.max(1) {
            let order: [usize; 3] = if r % 2 == 0 { [0, 1, 2] } else { [2, 1, 0] };
            for i in order {
                direct[i].push(direct_round(makers[i].1(), 100_000).await);
            }
        }
        let dmed: Vec<f64> = direct.iter_mut().map(|r| median(r)).collect();
        for (i, (name, _)) in makers.iter().enumerate() {
            println!("FIGURE http_direct_{name}_ns {:.0} ns/request median of {} rounds of 100000 direct router calls (no network)", dmed[i], direct[i].len());
        }
        println!("FIGURE http_direct_tollgate_overhead_ns {:.0} ns/request added by tollgate's layer over the plain router", dmed[1] - dmed[0]);
        println!("FIGURE http_direct_governor_overhead_ns {:.0} ns/request added by tower_governor's layer over the plain router", dmed[2] - dmed[0]);

        let loss = 100.0 * (1.0 - median(&mut vs_plain));
        println!("FIGURE http_tollgate_loss_vs_plain {loss:.1} % throughput lost to the layer, median of per-round ratios (target <= 5)");
        println!(
            "FIGURE http_tollgate_vs_governor {:.3} ratio tollgate / tower_governor requests per second, median of per-round ratios (target >= 1)",
            median(&mut vs_gov)
        );
    });
}
