//! An axum server behind tollgate's HTTP middleware, configured from
//! `examples/tollgate.toml`:
//!
//! ```text
//! cargo run --example server --features axum,config,tracing
//! for i in 1 2 3; do curl -si -X POST localhost:3000/api/login | head -n 1; done
//! curl -si -X POST localhost:3000/api/login     # 429, Retry-After, RateLimit
//! curl -si localhost:3000/health                # exempt: always 200
//! # /api/search queues: 3 at once, the 4th waits its turn (~10 s), then 200
//! for i in 1 2 3 4; do curl -s -o /dev/null -w '%{http_code} %{time_total}s\n' localhost:3000/api/search; done
//! ```
//!
//! Arguments: an optional path to another rules file. The address is
//! `127.0.0.1:3000` unless `TOLLGATE_ADDR` says otherwise; the log level is
//! `debug` unless `TOLLGATE_LOG` says otherwise (`error` … `trace`).
//!
//! A response decided by a Redis-backed rule's failure policy (Redis down
//! or too slow) carries `x-tollgate-store-unavailable: <rule name>`, from
//! the layer's `StoreUnavailable` extension (`scripts/soak.sh` checks it).
//!
//! The rules file is read again every second; a change is applied once two
//! reads in a row are identical (`SettledText`: a file caught halfway
//! through being written is not applied), all at once or not at all (a
//! refused file is logged and changes nothing; the buckets of unchanged
//! rules carry on). Replace the file by renaming a complete one over it
//! (`mv tollgate.toml.new tollgate.toml`): then no read ever sees a part.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::response::Response;
use axum::routing::{get, post};
use tollgate::Inheritance;
use tollgate::http::config::SettledText;
use tollgate::http::{
    ConfigError, LayerConfig, RateLimitLayer, RateLimitLayerBuilder, StoreUnavailable,
};

/// How often the rules file is read again.
const POLL: Duration = Duration::from_secs(1);

/// Copies the layer's `StoreUnavailable` extension into a header.
async fn expose_store_unavailable(mut res: Response) -> Response {
    if let Some(flag) = res.extensions().get::<StoreUnavailable>().cloned()
        && let Ok(value) = flag.policy.parse()
    {
        res.headers_mut()
            .insert("x-tollgate-store-unavailable", value);
    }
    res
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let level = std::env::var("TOLLGATE_LOG")
        .ok()
        .and_then(|l| l.parse().ok())
        .unwrap_or(tracing::Level::DEBUG);
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stdout)
        .init();

    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/examples/tollgate.toml").into());
    let (layer, text) = match load(&path) {
        Ok(loaded) => loaded,
        Err(e) => {
            // the error's Display text, after the file it is about
            eprintln!("{path}: {e}");
            std::process::exit(2);
        }
    };
    tracing::info!(?layer, rules = %path, "rate limiting");
    let (watched, rt) = (layer.clone(), tokio::runtime::Handle::current());
    std::thread::spawn(move || watch(&path, text, &watched, &rt));

    let app = Router::new()
        .route("/", get(|| async { "hello\n" }))
        .route("/health", get(|| async { "ok\n" }))
        .route("/api/hello", get(|| async { "hello from the api\n" }))
        .route("/api/search", get(|| async { "no results\n" }))
        .route("/api/login", post(|| async { "logged in\n" }))
        .layer(layer.for_axum())
        .layer(axum::middleware::map_response(expose_store_unavailable));

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

/// The rules of `text`, with where axum records the peer.
fn rules(text: &str) -> Result<RateLimitLayerBuilder, ConfigError> {
    Ok(LayerConfig::from_toml(text)?
        .into_builder()?
        // axum records the peer as ConnectInfo<SocketAddr>
        .peer_addr(|ext| ext.get::<ConnectInfo<SocketAddr>>().map(|c| c.0)))
}

/// Reads and builds the rules file at `path`; the layer and the text.
fn load(path: &str) -> Result<(RateLimitLayer, String), Box<dyn std::error::Error>> {
    let text = std::fs::read_to_string(path)?;
    Ok((rules(&text)?.build()?, text))
}

/// Reads the rules file at `path` every [`POLL`] and reloads `layer` from
/// it once it has settled on a new text. Runs on its own thread (the reads
/// block), within `rt` (a Redis rule is built within a tokio runtime).
fn watch(path: &str, loaded: String, layer: &RateLimitLayer, rt: &tokio::runtime::Handle) {
    let _rt = rt.enter();
    let mut file = SettledText::new(loaded);
    let mut unreadable = false;
    loop {
        std::thread::sleep(POLL);
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) => {
                if !std::mem::replace(&mut unreadable, true) {
                    tracing::warn!("{path}: {e}; the rules in force stay");
                }
                continue;
            }
        };
        unreadable = false;
        let Some(text) = file.observe(text) else {
            continue;
        };
        match rules(text).and_then(|b| layer.reload(b, Inheritance::UsedAmount)) {
            Ok(report) => tracing::info!(?report, rules = %path, "rules reloaded"),
            Err(e) => tracing::warn!("{path}: {e}; the rules in force stay"),
        }
    }
}
