//! Requests through an axum router in a loop, for counting instructions
//! per request under callgrind (a count, not a time: the same on a busy
//! machine). `scripts/instructions-per-check.sh` counts only inside
//! `counted` (callgrind's `--toggle-collect`), at two loop lengths, and
//! prints the difference per request:
//!
//! ```text
//! instructions_per_request CASE CALLS global|per_ip
//! CASE: bare | tollgate | tower_governor
//! ```
//!
//! The routers and quotas are those of `benches/http.rs` (the layer as the
//! README shows it for axum, `for_axum`; tower_governor's `GovernorLayer`
//! with the same quota), every request admitted; the cost a layer adds is
//! its count less `bare`'s.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::process::ExitCode;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::get;
use http::{Request, StatusCode};
use tollgate::Quota;
use tollgate::http::{KeySource, Policy, RateLimitLayer};
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::key_extractor::{GlobalKeyExtractor, PeerIpKeyExtractor};
use tower_service::Service;

const USAGE: &str =
    "usage: instructions_per_request bare|tollgate|tower_governor CALLS global|per_ip";

fn peer(ext: &http::Extensions) -> Option<SocketAddr> {
    ext.get::<ConnectInfo<SocketAddr>>().map(|c| c.0)
}

fn router(case: &str, per_ip: bool) -> Result<Router, Box<dyn std::error::Error>> {
    let app = Router::new().route("/", get(|| async { "Hello, World!" }));
    Ok(match case {
        "bare" => app,
        "tollgate" => {
            // a permit per nanosecond, bursts of a billion: never refuses
            let plenty = Quota::new(1, Duration::from_nanos(1))?.with_burst(1_000_000_000)?;
            let policy = Policy::token_bucket("api", plenty);
            let builder = RateLimitLayer::builder().peer_addr(peer);
            let layer = if per_ip {
                builder.policy(policy.prefix("/").key(KeySource::PeerIp))
            } else {
                builder.global(policy)
            };
            app.layer(layer.build()?.for_axum())
        }
        "tower_governor" => {
            let mut config = GovernorConfigBuilder::default();
            config.per_nanosecond(1).burst_size(1_000_000_000);
            if per_ip {
                let c = config.key_extractor(PeerIpKeyExtractor).finish();
                app.layer(GovernorLayer::new(c.ok_or("config")?))
            } else {
                let c = config.key_extractor(GlobalKeyExtractor).finish();
                app.layer(GovernorLayer::new(c.ok_or("config")?))
            }
        }
        other => return Err(format!("unknown case {other}").into()),
    })
}

/// One request, the only code callgrind counts (`--toggle-collect`): the
/// router's and the layer's set-up, and the TSC clock's calibration, stay
/// out of the count.
#[inline(never)]
fn counted(app: &mut Router) -> Option<StatusCode> {
    call(app)
}

fn call(app: &mut Router) -> Option<StatusCode> {
    let mut req = Request::get("/").body(Body::empty()).ok()?;
    req.extensions_mut()
        .insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40_000))));
    let mut cx = Context::from_waker(Waker::noop());
    match Service::<Request<Body>>::poll_ready(app, &mut cx) {
        Poll::Ready(Ok(())) => {}
        _ => return None,
    }
    match pin!(Service::<Request<Body>>::call(app, req)).poll(&mut cx) {
        Poll::Ready(Ok(res)) => Some(res.status()),
        _ => None,
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [case, calls, keying] = args.as_slice() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let (Ok(calls), true) = (
        calls.parse::<u64>(),
        keying == "global" || keying == "per_ip",
    ) else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let mut app = match router(case, keying == "per_ip") {
        Ok(app) => app,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    // warm up (first-use initialisation), uncounted
    for _ in 0..100 {
        if call(&mut app) != Some(StatusCode::OK) {
            eprintln!("a request was not answered 200 at once");
            return ExitCode::FAILURE;
        }
    }
    for _ in 0..calls {
        if counted(&mut app) != Some(StatusCode::OK) {
            eprintln!("a request was not answered 200 at once");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
