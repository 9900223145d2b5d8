//! The server `scripts/loopback-bench.sh` loads with wrk over loopback: a
//! hello-world axum server, with or without tollgate's layer.
//!
//! ```text
//! cargo run --release --example loopback --features axum -- MODE [ADDR]
//! ```
//!
//! `MODE`:
//! - `plain`: no limiter;
//! - `limited`: a global limit and a per-peer-IP policy on every path,
//!   both far above any load (every request is checked twice and
//!   admitted), `/health` exempt;
//! - `flood`: a per-peer-IP policy of one request per hour on every path
//!   (almost every request is refused: 429 with `Retry-After` and the
//!   `RateLimit` headers), `/health` exempt.
//!
//! `ADDR` defaults to `127.0.0.1:3001`. Nothing is logged per request.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::routing::get;
use tollgate::Quota;
use tollgate::http::{KeySource, Policy, RateLimitLayer};

fn peer(ext: &http::Extensions) -> Option<SocketAddr> {
    ext.get::<ConnectInfo<SocketAddr>>().map(|c| c.0)
}

fn layer(mode: &str) -> Result<Option<RateLimitLayer>, Box<dyn std::error::Error>> {
    // a permit per nanosecond, bursts of a billion: never refuses
    let plenty = Quota::new(1, Duration::from_nanos(1))?.with_burst(1_000_000_000)?;
    let builder = RateLimitLayer::builder().peer_addr(peer).exempt("/health");
    Ok(Some(match mode {
        "plain" => return Ok(None),
        "limited" => builder
            .global(Policy::token_bucket("global", plenty))
            .policy(
                Policy::token_bucket("per_ip", plenty)
                    .prefix("/")
                    .key(KeySource::PeerIp),
            )
            .build()?,
        "flood" => builder
            .policy(
                Policy::token_bucket("per_ip", Quota::per_hour(1)?)
                    .prefix("/")
                    .key(KeySource::PeerIp),
            )
            .build()?,
        other => return Err(format!("unknown mode {other:?}: plain, limited or flood").into()),
    }))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "plain".into());
    let addr = std::env::args()
        .nth(2)
        .unwrap_or_else(|| "127.0.0.1:3001".into());
    let app = Router::new()
        .route("/", get(|| async { "Hello, World!" }))
        .route("/health", get(|| async { "ok" }));
    let app = match layer(&mode)? {
        Some(l) => app.layer(l.for_axum()),
        None => app,
    };
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("{mode} server on http://{}", listener.local_addr()?);
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
