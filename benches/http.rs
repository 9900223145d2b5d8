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
//! After criterion, the bench prints the figures the issue asks for, from
//! this run's estimates (`target/criterion/.../new/estimates.json`):
//! `FIGURE http_<policy>_<path>_added_cost_vs_tower_governor <ratio>` is
//! (tollgate − bare) / (tower_governor − bare), the ratio of the costs the
//! two layers add to the same router (target ≤ 1.0), with both added costs
//! in nanoseconds in the note.
//!
//! `cargo bench --bench http` (about 40 s: 12 entries of 1 s warm-up and
//! 2 s measurement).

use std::future::Future;
use std::hint::black_box;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::get;
use axum::Router;
use criterion::Criterion;
use http::{Request, StatusCode};
use tollgate::http::{KeySource, Policy, RateLimitLayer};
use tollgate::Quota;
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::key_extractor::{GlobalKeyExtractor, PeerIpKeyExtractor};
use tower_governor::GovernorLayer;
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
    router().layer(layer)
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

fn group(c: &mut Criterion, keying: Keying, path: Path) {
    let name = format!(
        "http/{}/{}",
        match keying {
            Keying::Global => "global",
            Keying::PerIp => "per_ip",
        },
        match path {
            Path::Allow => "allow",
            Path::Refuse => "refuse",
        }
    );
    let expected = match path {
        Path::Allow => StatusCode::OK,
        Path::Refuse => StatusCode::TOO_MANY_REQUESTS,
    };
    let mut g = c.benchmark_group(&name);
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));
    let entries: [(&str, Router); 3] = [
        ("tollgate", tollgate(keying, path)),
        ("bare", router()),
        ("tower_governor", governor(keying, path)),
    ];
    for (entry, mut app) in entries {
        // the first request takes the refuse quota's only permit
        let first = call(&mut app);
        assert_eq!(first, StatusCode::OK, "{name}/{entry}: first request");
        let want = if entry == "bare" {
            StatusCode::OK
        } else {
            expected
        };
        assert_eq!(call(&mut app), want, "{name}/{entry}: second request");
        g.bench_function(entry, |b| b.iter(|| black_box(call(&mut app))));
        assert_eq!(call(&mut app), want, "{name}/{entry}: after measuring");
    }
    g.finish();
}

fn benches(c: &mut Criterion) {
    for keying in [Keying::Global, Keying::PerIp] {
        for path in [Path::Allow, Path::Refuse] {
            group(c, keying, path);
        }
    }
}

/// This run's mean estimate of `group/entry`, in nanoseconds.
fn estimate(group: &str, entry: &str) -> Option<f64> {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    let file = dir
        .join("criterion")
        .join(group.replace('/', "_"))
        .join(entry)
        .join("new")
        .join("estimates.json");
    let text = std::fs::read_to_string(file).ok()?;
    // {"mean":{"confidence_interval":{...},"point_estimate":123.4,...},...}
    let mean = &text[text.find("\"mean\"")?..];
    let at = mean.find("\"point_estimate\":")? + "\"point_estimate\":".len();
    let rest = &mean[at..];
    let end = rest.find([',', '}'])?;
    rest[..end].trim().parse().ok()
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
    for keying in ["global", "per_ip"] {
        for path in ["allow", "refuse"] {
            let group = format!("http/{keying}/{path}");
            let (Some(t), Some(b), Some(g)) = (
                estimate(&group, "tollgate"),
                estimate(&group, "bare"),
                estimate(&group, "tower_governor"),
            ) else {
                // a filtered run (`cargo bench --bench http -- allow`)
                continue;
            };
            let (ours, theirs) = (t - b, g - b);
            println!(
                "FIGURE http_{keying}_{path}_added_cost_vs_tower_governor {:.2} ratio (tollgate {ours:.0} ns vs tower_governor {theirs:.0} ns added to the bare router's {b:.0} ns; mean estimates of one criterion run; target <= 1.0)",
                ours / theirs
            );
        }
    }
}
