//! The cost the HTTP layer adds to an axum router, in process, side by side
//! with `tower_governor` on the same router and the same requests.
//!
//! Every group runs three entries on the same `Router` (one `GET /`
//! handler answering "Hello, World!"):
//!
//! - `tollgate`: behind `RateLimitLayer`,
//! - `bare`: the router alone,
//! - `tower_governor`: behind `GovernorLayer`, configured alike.
//!
//! Groups: `http/<policy>/<path>` where `policy` is `global` (one bucket for
//! every request) or `per_ip` (a bucket per peer IP, from axum's
//! `ConnectInfo`), and `path` is `allow` (a quota far above the load, every
//! request admitted) or `refuse` (one request per hour, exhausted before
//! measuring: every request answered 429 with its headers). Each iteration
//! builds the request (the same for the three entries), calls the service
//! and polls its future once (every handler here is ready at once), then
//! drops the response.
//!
//! Each sample of `tollgate` and `tower_governor` is paired with as many
//! requests through the bare router, timed just before or after it (in
//! turn); after each group the bench prints
//! `FIGURE http_<policy>_<path>_added_cost_vs_tower_governor <ratio>`: the
//! median over the samples of tollgate's added time per request, over the
//! same for tower_governor (the ratio of the costs the two layers add to
//! the same router; target ≤ 1.0), with both added costs in nanoseconds.
//! Pairing cancels the drift of a shared machine between samples, which
//! comparing separate estimates does not.
//!
//! `cargo bench --bench http` (about 40 s: 12 entries of 1 s warm-up and
//! 2 s measurement).

use std::future::Future;
use std::hint::black_box;
use std::net::SocketAddr;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::get;
use criterion::Criterion;
use http::{Request, StatusCode};
use tollgate::Quota;
use tollgate::http::{KeySource, Policy, RateLimitLayer};
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::key_extractor::{GlobalKeyExtractor, PeerIpKeyExtractor};
use tower_service::Service;

fn router() -> Router {
    Router::new().route("/", get(|| async { "Hello, World!" }))
}

fn connect_info(ext: &http::Extensions) -> Option<SocketAddr> {
    ext.get::<ConnectInfo<SocketAddr>>().map(|c| c.0)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Keying {
    Global,
    PerIp,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Path {
    Allow,
    Refuse,
}

/// The tollgate quota: far above the load (a permit per nanosecond, bursts
/// of a billion), or one per hour.
fn quota(path: Path) -> Quota {
    match path {
        Path::Allow => Quota::new(1, Duration::from_nanos(1))
            .and_then(|q| q.with_burst(1_000_000_000))
            .expect("quota"),
        Path::Refuse => Quota::per_hour(1).expect("quota"),
    }
}

fn tollgate(keying: Keying, path: Path) -> Router {
    let policy = Policy::token_bucket("api", quota(path));
    let builder = RateLimitLayer::builder().peer_addr(connect_info);
    let layer = match keying {
        Keying::Global => builder.global(policy),
        Keying::PerIp => builder.policy(policy.prefix("/").key(KeySource::PeerIp)),
    }
    .build()
    .expect("layer");
    // as the README and the crate docs show it for an axum router
    router().layer(layer.for_axum())
}

fn governor(keying: Keying, path: Path) -> Router {
    // the same quotas: a permit per nanosecond with bursts of a billion, or
    // one per hour
    let mut config = GovernorConfigBuilder::default();
    match path {
        Path::Allow => config.per_nanosecond(1).burst_size(1_000_000_000),
        Path::Refuse => config.period(Duration::from_secs(3600)).burst_size(1),
    };
    match keying {
        Keying::Global => {
            let config = config
                .key_extractor(GlobalKeyExtractor)
                .finish()
                .expect("config");
            router().layer(GovernorLayer::new(config))
        }
        Keying::PerIp => {
            let config = config
                .key_extractor(PeerIpKeyExtractor)
                .finish()
                .expect("config");
            router().layer(GovernorLayer::new(config))
        }
    }
}

fn request() -> Request<Body> {
    let mut req = Request::get("/").body(Body::empty()).expect("request");
    req.extensions_mut()
        .insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40_000))));
    req
}

/// One request through `app`, polled to completion on this thread (the
/// handlers are ready at once; a pending poll is a bench bug).
fn call(app: &mut Router) -> StatusCode {
    let mut cx = Context::from_waker(Waker::noop());
    match Service::<Request<Body>>::poll_ready(app, &mut cx) {
        Poll::Ready(Ok(())) => {}
        _ => panic!("the router is always ready"),
    }
    let fut = pin!(Service::<Request<Body>>::call(app, request()));
    match fut.poll(&mut cx) {
        Poll::Ready(Ok(res)) => res.status(),
        _ => panic!("the handler answers at once"),
    }
}

/// `iters` requests through `app`, timed.
fn time(app: &mut Router, iters: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        black_box(call(app));
    }
    start.elapsed()
}

/// The median of `v`.
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn group(c: &mut Criterion, keying: Keying, path: Path) {
    let keying_name = match keying {
        Keying::Global => "global",
        Keying::PerIp => "per_ip",
    };
    let path_name = match path {
        Path::Allow => "allow",
        Path::Refuse => "refuse",
    };
    let name = format!("http/{keying_name}/{path_name}");
    let expected = match path {
        Path::Allow => StatusCode::OK,
        Path::Refuse => StatusCode::TOO_MANY_REQUESTS,
    };
    let mut g = c.benchmark_group(&name);
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));
    let mut bare = router();
    assert_eq!(call(&mut bare), StatusCode::OK);
    g.bench_function("bare", |b| b.iter(|| black_box(call(&mut bare))));
    // each sample of a limited router is paired with as many requests
    // through the bare router, timed right before or after it (in turn):
    // the difference is the added cost, with the machine's drift between
    // samples cancelled
    let mut added = [Vec::new(), Vec::new()];
    let limited: [(&str, Router); 2] = [
        ("tollgate", tollgate(keying, path)),
        ("tower_governor", governor(keying, path)),
    ];
    for (i, (entry, mut app)) in limited.into_iter().enumerate() {
        // the first request takes the refuse quota's only permit
        assert_eq!(call(&mut app), StatusCode::OK, "{name}/{entry}: first");
        assert_eq!(call(&mut app), expected, "{name}/{entry}: second");
        let diffs = &mut added[i];
        g.bench_function(entry, |b| {
            b.iter_custom(|iters| {
                let before = diffs.len() % 2 == 0;
                let base_a = if before {
                    time(&mut bare, iters)
                } else {
                    Duration::ZERO
                };
                let limited = time(&mut app, iters);
                let base = if before {
                    base_a
                } else {
                    time(&mut bare, iters)
                };
                diffs.push((limited.as_secs_f64() - base.as_secs_f64()) * 1e9 / iters as f64);
                limited
            })
        });
        assert_eq!(call(&mut app), expected, "{name}/{entry}: after");
    }
    g.finish();
    let (ours, theirs) = (median(&mut added[0]), median(&mut added[1]));
    println!(
        "FIGURE http_{keying_name}_{path_name}_added_cost_vs_tower_governor {:.2} ratio (tollgate adds {ours:.0} ns, tower_governor {theirs:.0} ns to the bare router: medians of {} and {} paired samples, each the limited router's time per request less the bare router's timed beside it, in one criterion run; target <= 1.0)",
        ours / theirs,
        added[0].len(),
        added[1].len(),
    );
}

fn benches(c: &mut Criterion) {
    for keying in [Keying::Global, Keying::PerIp] {
        for path in [Path::Allow, Path::Refuse] {
            group(c, keying, path);
        }
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
}
