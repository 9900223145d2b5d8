//! HTTP middleware (feature `http`): a tower [`Layer`](tower_layer::Layer)
//! for axum, hyper and tonic, with a global limiter, per-route policies,
//! partition keys, standard headers, queueing and metrics.
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
//! assert_eq!(refused.headers()["ratelimit"], "\"api\";r=0;t=30");
//! # Ok(())
//! # }
//! ```
//!
//! # Two mechanisms, both must allow
//!
//! As in ASP.NET Core: the **global** limiter
//! ([`RateLimitLayerBuilder::global`]) charges every non-exempt request;
//! the **route policy** that matches charges it too. When the global
//! limiter admits and the route policy refuses, the global permit is
//! refunded, so refused requests cost no global quota. A request under no
//! policy with no global limiter passes untouched (no headers added).
//!
//! # Routing
//!
//! - **Path prefixes** ([`Policy::prefix`]) are segment-bounded and ASCII
//!   case-insensitive: `/test` matches `/test`, `/test/limiter`, `/Test/x`,
//!   not `/testxxx` or `/contest`; `/` matches every path. When several
//!   match, the **longest wins** whatever the registration order, only
//!   that policy is charged, and a refused request never falls back to a
//!   looser rule.
//! - **Method filter** ([`Policy::methods`]): a policy applies only to
//!   those methods; for other methods the next-longest matching prefix is
//!   chosen (a POST-only `/api/login` policy leaves `GET /api/login` to
//!   the `/api` policy).
//! - **Exemptions** ([`RateLimitLayerBuilder::exempt`]): neither the global
//!   limiter nor any policy applies (ASP.NET's `DisableRateLimiting`).
//!   Exemptions are by path prefix, because the outer layer runs before
//!   axum's router knows the route.
//! - **Attached to axum routes** by name: [`RateLimitLayer::policy`] gives a
//!   layer applying only that policy (sharing its buckets), for
//!   `Router::route_layer`.
//!
//! # Partition keys
//!
//! [`KeySource`] per policy: [`Global`](KeySource::Global) (one bucket),
//! [`PeerIp`](KeySource::PeerIp), [`ClientIp`](KeySource::ClientIp) (behind
//! proxies), [`Header`](KeySource::Header) (an API key),
//! [`Custom`](KeySource::custom). Keys live in a
//! [`ShardedKeyedTable`](crate::keyed::ShardedKeyedTable) of
//! [`Policy::max_keys`] slots: memory is fixed, refilled keys are evicted
//! losslessly, throttled keys are never evicted, and when every slot is
//! busy new keys share one overflow bucket.
//!
//! **Client IP behind proxies.** Forwarding headers (`X-Forwarded-For`, or
//! RFC 7239 `Forwarded` with [`ForwardedHeader::Forwarded`]) are read only
//! when the TCP peer is in [`RateLimitLayerBuilder::trusted_proxies`]; then
//! the chain is walked from the right and the first address that is not a
//! trusted proxy is the key (never the left-most entry, which the client
//! writes). An entry that does not parse stops the walk at the trusted hop
//! that reported it, so garbage is charged to that proxy's address, never
//! to a fresh key.
//!
//! **Missing keys** (no peer address because the server does not record
//! it, no key header, a custom function returning `None`) answer 500 by
//! default ([`MissingKey`]), per layer or per policy; never a silent
//! bypass unless [`MissingKey::Allow`] is chosen.
//!
//! # Refusals and headers
//!
//! Status 429 by default ([`RateLimitLayerBuilder::status`], e.g. 503).
//! `Retry-After` is in whole seconds rounded **up** (a 300 ms wait sends
//! `1`, never `0`). The IETF draft fields (draft-ietf-httpapi-ratelimit-headers,
//! structured-field lists) name the refusing policy:
//! `RateLimit-Policy: "api";q=100;w=60` (the quota's permits per period,
//! the period in seconds rounded up) and `RateLimit: "api";r=0;t=5`
//! (remaining, seconds until it could succeed).
//! [`RateLimitLayerBuilder::headers_on_success`] adds both to admitted
//! responses, one list member per limiter charged (`"global"…, "api"…`,
//! with `t` the time until the bucket is full again).
//!
//! A rejection handler ([`RateLimitLayerBuilder::on_rejected`]) builds a
//! custom response; a policy's own [`Policy::on_rejected`] overrides it
//! (ASP.NET's `OnRejected` precedence). The layer adds the standard
//! headers the handler did not set. The default path (no handler) builds
//! the response with an empty body (`Default` of the response body type)
//! and no `String`; the header values are formatted on the stack. (The
//! `http` crate's `HeaderMap` and `HeaderValue` still allocate their own
//! storage when a header is inserted: that is outside tollgate's hands.)
//!
//! # Queueing
//!
//! [`Policy::queue`]`(max_wait, queue_limit)`: a request over the limit
//! waits in a [`Queue`](crate::queue::Queue) (FIFO) instead of being
//! refused at once, like nginx `limit_req burst=…` without `nodelay`. A
//! request whose estimated wait exceeds `max_wait`, or that finds
//! `queue_limit` requests waiting, is refused at once. A client that
//! disconnects while queued (its response future is dropped) leaves the
//! queue with no capacity lost, and its global permit is refunded.
//! Queueing needs [`KeySource::Global`] (one queue per policy).
//!
//! # Observability
//!
//! `tracing` events: refusals at `debug`, dry-run refusals at `info`,
//! missing keys (a misconfiguration) at `warn`. Counters through the
//! `metrics` facade, named like ASP.NET Core's (see [`metrics`]),
//! labelled with the policy name. **Dry run** ([`Policy::dry_run`]):
//! a shadow policy counts (`result = "dry_run"`) and logs what it would
//! refuse and refuses nothing (nginx `limit_req_dry_run`, Envoy shadow
//! mode).
//!
//! # Remote backends (Redis)
//!
//! [`Policy::backend`] keeps a route policy's buckets in a shared store:
//! any [`AsyncKeyedLimiter`](crate::remote::AsyncKeyedLimiter), such as
//! `tollgate::redis::RedisStore` (feature `redis`), or `backend = "redis"`
//! with `redis_url` in a config file. The layer awaits the store's
//! decision for the policy's key (sent as `global`, `ip:<address>` or
//! `k:<bytes>`), refunds the global permit when it refuses, and marks a
//! decision made by the store's failure policy (store down or too slow)
//! with the [`StoreUnavailable`] **response extension**. The global
//! limiter and queueing policies stay in process.
//!
//! # Configuration files
//!
//! [`LayerConfig`] reads the same settings from TOML or JSON; errors name
//! the rule and the field (`rules[2].burst: must be at least 1`). See
//! [`config`] for the format, and `examples/tollgate.toml`.
//!
//! # Service requirements
//!
//! The wrapped service must be `Clone + Send + 'static` (axum's `Router`
//! and tonic's services are) and its response body must implement
//! `Default` (for the empty refusal body) and `From<String>` (for handler
//! bodies): axum's `Body`, `http_body_util::Full` and `String` do. The
//! layer and its services are `Clone` and share one state: every clone and
//! every connection draws from the same buckets.

mod backend;
mod body;
mod builder;
pub mod config;
mod headers;
mod key;
mod layer;
pub mod metrics;
mod policy;
mod rejection;
mod reload;
mod routing;

pub use backend::{BoxFuture, PolicyBackend, StoreUnavailable};
pub use body::RateLimitBody;
pub use builder::RateLimitLayerBuilder;
pub use config::LayerConfig;
pub use headers::{RATELIMIT, RATELIMIT_POLICY};
pub use key::{
    ForwardedHeader, IpNet, IpNetError, KeyFn, KeySource, PartitionKey, PeerAddrFn, RequestHead,
};
pub use layer::{RateLimitLayer, RateLimitService, ResponseFuture};
pub use policy::{
    ConfigError, ConfigErrorKind, MissingKey, Policy, PolicyAlgorithm, QueueMode, Rejection,
    RejectionHandler, DEFAULT_MAX_KEYS, SLIDING_WINDOW_SEGMENTS,
};
pub use reload::ReloadReport;
