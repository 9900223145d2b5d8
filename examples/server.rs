//! An axum server behind tollgate's HTTP middleware, configured from
//! `examples/tollgate.toml`:
//!
//! ```text
//! cargo run --example server --features http,config,tracing
//! for i in 1 2 3; do curl -si -X POST localhost:3000/api/login | head -n 1; done
//! curl -si -X POST localhost:3000/api/login     # 429, Retry-After, RateLimit
//! curl -si localhost:3000/health                # exempt: always 200
//! ```
//!
//! Arguments: an optional path to another rules file. The address is
//! `127.0.0.1:3000` unless `TOLLGATE_ADDR` says otherwise.

use std::net::SocketAddr;

use axum::extract::ConnectInfo;
use axum::routing::{get, post};
use axum::Router;
use tollgate::http::LayerConfig;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_writer(std::io::stdout)
        .init();

    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/examples/tollgate.toml").into());
    let text = std::fs::read_to_string(&path)?;
    let layer = LayerConfig::from_toml(&text)?
        .into_builder()?
        // axum records the peer as ConnectInfo<SocketAddr>
        .peer_addr(|ext| ext.get::<ConnectInfo<SocketAddr>>().map(|c| c.0))
        .build()?;
    tracing::info!(?layer, rules = %path, "rate limiting");

    let app = Router::new()
        .route("/", get(|| async { "hello\n" }))
        .route("/health", get(|| async { "ok\n" }))
        .route("/api/hello", get(|| async { "hello from the api\n" }))
        .route("/api/login", post(|| async { "logged in\n" }))
        .layer(layer);

    let addr = std::env::var("TOLLGATE_ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    tracing::info!("listening on http://{}", listener.local_addr()?);
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
