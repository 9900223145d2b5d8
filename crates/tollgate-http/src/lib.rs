//! HTTP middleware (feature `http`): a tower [`Layer`](tower_layer::Layer)
//! for axum, hyper and tonic, with a global limiter, per-route policies of
//! any algorithm (token and leaky buckets, fixed and sliding windows,
//! in-flight limits), partition keys, standard headers, queueing per key
//! and metrics. A refused gRPC call is answered as gRPC
//! (RESOURCE_EXHAUSTED, with the wait in a `RetryInfo` under feature
//! `grpc`): see [gRPC (tonic)](guide#grpc-tonic).
//!
//! ```
//! use std::net::SocketAddr;
//! use axum::{body::Body, routing::get, Router};
//! use http::{Request, StatusCode};
//! use tollgate::http::{KeySource, Policy, RateLimitLayer};
//! use tollgate::Quota;
//! use tower_service::Service;
//! use tower_layer::Layer;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let layer = RateLimitLayer::builder()
//!     // every request: 1000 per second in total
//!     .global(Policy::token_bucket("global", Quota::per_second(1000)?))
//!     // /api: 2 per minute per peer IP
//!     .policy(
//!         Policy::token_bucket("api", Quota::per_minute(2)?)
//!             .prefix("/api")
//!             .key(KeySource::PeerIp),
//!     )
//!     .exempt("/health")
//!     .build()?;
//!
//! let mut app = layer.layer(Router::new().route("/api/items", get(|| async { "items" })));
//!
//! // A server puts the peer address in the request (axum: ConnectInfo,
//! // see `RateLimitLayerBuilder::peer_addr`).
//! let request = || {
//!     let mut req = Request::get("/api/items").body(Body::empty()).unwrap();
//!     req.extensions_mut().insert(SocketAddr::from(([192, 0, 2, 7], 50_000)));
//!     req
//! };
//! for _ in 0..2 {
//!     std::future::poll_fn(|cx| Service::<Request<Body>>::poll_ready(&mut app, cx)).await?;
//!     assert_eq!(app.call(request()).await?.status(), StatusCode::OK);
//! }
//! std::future::poll_fn(|cx| Service::<Request<Body>>::poll_ready(&mut app, cx)).await?;
//! let refused = app.call(request()).await?;
//! assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
//! assert_eq!(refused.headers()["retry-after"], "30");
//! assert_eq!(refused.headers()["ratelimit-policy"], "\"api\";q=2;w=60");
//! // nothing available for 30 s, for this client's partition (`pk`: a
//! // digest of its key, never the address itself)
//! let state = refused.headers()["ratelimit"].to_str()?;
//! assert!(state.starts_with("\"api\";r=0;t=30;pk=:"), "{state}");
//! # Ok(())
//! # }
//! ```
//!
//! # Map
//!
//! | type | what |
//! |---|---|
//! | [`RateLimitLayer`], [`RateLimitLayerBuilder`] | the layer and its builder: a global limiter, route policies, exemptions, trusted proxies, headers |
//! | [`Policy`], [`KeySource`] | one rule: an algorithm and its quota, the requests it covers (path prefixes, methods), how it keys them |
//! | [`ConfigError`] | what a builder, a policy or a rules file got wrong |
//! | [`LayerConfig`] (feature `config`) | the same rules from TOML or JSON ([`config`]) |
//! | [`RATELIMIT`], [`RATELIMIT_POLICY`], [`metrics`] | what a client and an operator see |
//!
//! The [`guide`] explains each part, one section each:
//! [Two mechanisms, both must allow](guide#two-mechanisms-both-must-allow),
//! [Algorithms](guide#algorithms),
//! [Routing](guide#routing),
//! [Partition keys](guide#partition-keys),
//! [Refusals and headers](guide#refusals-and-headers),
//! [gRPC (tonic)](guide#grpc-tonic),
//! [Queueing (per key)](guide#queueing-per-key),
//! [Observability](guide#observability),
//! [Remote backends (Redis)](guide#remote-backends-redis),
//! [Reloading](guide#reloading),
//! [Configuration files](guide#configuration-files),
//! [Every option, one example each](guide#every-option-one-example-each),
//! [Service requirements and per-request cost](guide#service-requirements-and-per-request-cost).
//!

#![forbid(unsafe_code)]
#![warn(missing_debug_implementations)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc(test(attr(deny(unused_imports))))]
// Without every feature, links to the feature-gated items (rules files,
// `for_axum`, Redis rules) have nothing to point at and render as text;
// every other broken link is still an error in the all-features build.
#![cfg_attr(
    not(all(
        feature = "axum",
        feature = "config",
        feature = "redis",
        feature = "metrics"
    )),
    allow(rustdoc::broken_intra_doc_links)
)]

mod backend;
mod builder;
#[cfg(feature = "config")]
pub mod config;
mod error;
#[cfg(all(fuzzing, feature = "config"))]
pub mod fuzzing;
pub mod guide;
mod headers;
pub(crate) mod key;
mod layer;
pub mod metrics;
mod missing_key;
mod policy;
mod problem;
pub(crate) mod routing;

pub use backend::StoreUnavailable;
pub use builder::RateLimitLayerBuilder;
pub use builder::ReloadReport;
#[cfg(feature = "config")]
pub use config::LayerConfig;
pub use headers::{RATELIMIT, RATELIMIT_POLICY};
pub use key::{DEFAULT_IPV6_PREFIX, IpNet, KeySource, PartitionKey, RequestHead};
#[cfg(feature = "axum")]
pub use layer::body::AxumBody;
pub use layer::body::{BodyMode, RateLimitBody, Wrapped};
pub use layer::{RateLimitLayer, RateLimitService, ResponseFuture};
pub use policy::{
    ConfigError, ConfigErrorKind, DEFAULT_MAX_KEYS, MISSING_KEY_LOG_INTERVAL, MissingKey, Policy,
    SLIDING_WINDOW_SEGMENTS,
};
