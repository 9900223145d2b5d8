//! HTTP middleware (feature `http`): a tower [`Layer`](tower_layer::Layer)
//! for axum, hyper and tonic.
//!
//! placeholder
mod builder;
pub mod config;
mod headers;
mod key;
mod layer;
pub mod metrics;
mod policy;
mod routing;

pub use builder::RateLimitLayerBuilder;
pub use config::LayerConfig;
pub use headers::{RATELIMIT, RATELIMIT_POLICY};
pub use key::{
    ForwardedHeader, IpNet, IpNetError, KeyFn, KeySource, PartitionKey, PeerAddrFn, RequestHead,
};
pub use layer::{RateLimitLayer, RateLimitService, ResponseFuture, SuccessHeaders};
pub use policy::{
    ConfigError, ConfigErrorKind, MissingKey, Policy, QueueMode, Rejection, RejectionHandler,
    DEFAULT_MAX_KEYS,
};
