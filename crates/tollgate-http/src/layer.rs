//! The tower [`Layer`](tower_layer::Layer) and
//! [`Service`](tower_service::Service): global limiter + per-route policies.
//!
//! This file holds the layer type and its construction, and the compiled
//! configuration every clone and service shares ([`Shared`]); the rest is
//! in submodules, by concept: the clock, how a policy is charged (`gate`),
//! the decision path (`decide`), the service and its future (`service`),
//! the waits (`pending`, `in_line`, `remote`), the responses
//! (`rejection`, and `grpc` for gRPC clients) and the response body
//! (`body`).

pub(crate) mod body;
mod clock;
mod decide;
mod gate;
mod grpc;
mod in_line;
mod missing;
mod pending;
mod rejection;
mod remote;
mod service;

use core::marker::PhantomData;
use std::string::String;
use std::sync::Arc;
use std::vec::Vec;

use arc_swap::ArcSwap;
use http::StatusCode;
use http::header::HeaderValue;

use super::headers::{self, Precomputed, ServiceLimit};
use super::key::{IpNet, KeyDigest, KeySource, PeerAddrFn};
use super::metrics::PolicyMetrics;
use super::policy::{MissingKey, Plan, Policy, RejectionHandler};
use super::routing::{PathPrefix, PrefixTree};
use body::Wrapped;

pub(crate) use clock::LayerClock;
pub(crate) use gate::{Gate, HttpStore};
pub use service::{RateLimitService, ResponseFuture};

/// One policy, ready to check.
pub(crate) struct Compiled {
    pub(crate) name: String,
    pub(crate) policy: Policy,
    /// What its store runs (compared by a reload).
    pub(crate) plan: Plan,
    /// How it is charged; `None` for a remote backend.
    pub(crate) gate: Option<Gate>,
    /// Its network overflow table (see [`Policy::overflow_networks`]):
    /// where a new key goes when the gate's table has no slot for it.
    pub(crate) networks: Option<HttpStore>,
    missing_key: MissingKey,
    /// Its warnings about requests without a key.
    missing_log: missing::MissingLog,
    /// Its `RateLimit-Policy` item.
    pub(crate) policy_item: Option<HeaderValue>,
    /// Its refusals' `RateLimit` values for waits of up to a minute, for
    /// a policy without partition (a partitioned one's carry a `pk`).
    pub(crate) refusal_state: Precomputed,
    pub(crate) metrics: PolicyMetrics,
}

pub(crate) struct Shared {
    pub(crate) global: Option<Compiled>,
    pub(crate) policies: Vec<Compiled>,
    /// Index into `policies` by path prefix.
    routes: PrefixTree<usize>,
    exempt: PrefixTree<()>,
    trusted: Vec<IpNet>,
    peer: PeerAddrFn,
    pub(crate) status: StatusCode,
    pub(crate) on_rejected: Option<RejectionHandler>,
    headers_on_success: bool,
    /// Refusal bodies as `application/problem+json`.
    pub(crate) problem_details: bool,
    /// The secret keyed digest of header and custom keys (carried across
    /// reloads: a kept store's keys stay the same), and of `pk` values.
    pub(crate) digest: KeyDigest,
    /// The clock of every store: [`layer_clock`](clock::layer_clock) (one
    /// TSC read a request) unless the builder was given another; kept by a
    /// reload. Delays are slept on tokio's timer.
    pub(crate) clock: LayerClock,
    no_policy_metrics: PolicyMetrics,
}

/// A policy with the gate it starts with: a fresh store, or the one (and
/// its queue) carried from the configuration a reload replaces (`None` for
/// a remote backend).
pub(crate) struct Rule {
    pub(crate) policy: Policy,
    pub(crate) plan: Plan,
    pub(crate) gate: Option<Gate>,
    pub(crate) networks: Option<HttpStore>,
}

/// Settings shared by every policy of a layer (built by
/// [`RateLimitLayerBuilder`](super::RateLimitLayerBuilder)).
pub(crate) struct LayerSettings {
    pub(crate) global: Option<Rule>,
    pub(crate) policies: Vec<Rule>,
    pub(crate) exempt: Vec<(String, PathPrefix)>,
    pub(crate) trusted: Vec<IpNet>,
    pub(crate) peer: PeerAddrFn,
    pub(crate) status: StatusCode,
    pub(crate) missing_key: MissingKey,
    pub(crate) on_rejected: Option<RejectionHandler>,
    pub(crate) headers_on_success: bool,
    pub(crate) problem_details: bool,
    pub(crate) digest: KeyDigest,
    pub(crate) clock: LayerClock,
}

impl Shared {
    pub(crate) fn build(s: LayerSettings) -> Self {
        let compile = |r: Rule| Compiled::new(r, s.missing_key);
        let global = s.global.map(compile);
        let policies: Vec<Compiled> = s.policies.into_iter().map(compile).collect();
        let mut routes = PrefixTree::default();
        for (i, c) in policies.iter().enumerate() {
            for raw in &c.policy.prefixes {
                if let Ok(p) = PathPrefix::parse(raw) {
                    // a prefix's policies are tried in registration order
                    routes.insert(&p, i);
                }
            }
        }
        let mut exempt = PrefixTree::default();
        for (_, p) in &s.exempt {
            exempt.insert(p, ());
        }
        Self {
            global,
            policies,
            routes,
            exempt,
            trusted: s.trusted,
            peer: s.peer,
            status: s.status,
            on_rejected: s.on_rejected,
            headers_on_success: s.headers_on_success,
            problem_details: s.problem_details,
            digest: s.digest,
            clock: s.clock,
            no_policy_metrics: PolicyMetrics::new(""),
        }
    }

    fn metrics_of(&self, route: Option<usize>) -> &PolicyMetrics {
        route
            .and_then(|i| self.policies.get(i))
            .map_or(&self.no_policy_metrics, |c| &c.metrics)
    }
}

/// A policy charged for an admitted request: the policy, its state after
/// the request and the key it was charged to (for the success headers).
pub(crate) type ChargedPolicy<'a> = (
    &'a Compiled,
    &'a tollgate_core::snapshot::Snapshot,
    Option<headers::ChargedKey<'a>>,
);

/// Seconds of refusal `RateLimit` values precomputed per policy.
const REFUSAL_STATE_PRECOMPUTED: u64 = 60;

impl Compiled {
    pub(crate) fn new(rule: Rule, default_missing: MissingKey) -> Self {
        let Rule {
            policy,
            plan,
            gate,
            networks,
        } = rule;
        Self {
            name: policy.name.clone(),
            missing_key: policy.missing_key.unwrap_or(default_missing),
            missing_log: missing::MissingLog::default(),
            metrics: PolicyMetrics::new(&policy.name),
            policy_item: headers::policy_item(&policy),
            // a partitioned policy's refusals carry their key's `pk`:
            // formatted each time, so nothing to precompute
            refusal_state: match policy.key {
                KeySource::Global => Precomputed::build(REFUSAL_STATE_PRECOMPUTED, |t, secs| {
                    let limit =
                        ServiceLimit::refused(&plan.alg, secs.saturating_mul(1_000_000_000));
                    headers::write_state_item(t, &policy.name, limit, None)
                }),
                _ => Precomputed::none(),
            },
            plan,
            gate,
            networks,
            policy,
        }
    }

    /// The store that granted admission `a`: the network overflow table's
    /// or the gate's.
    pub(crate) fn store_of(&self, a: &gate::Admitted) -> Option<&HttpStore> {
        if a.overflow {
            self.networks.as_ref()
        } else {
            self.gate.as_ref().map(Gate::store)
        }
    }

    /// `c`'s admission `a` as the success headers report it (`None`
    /// without a snapshot: headers off, or nothing charged).
    pub(crate) fn charged<'a>((c, a): (&'a Self, &'a gate::Admitted)) -> Option<ChargedPolicy<'a>> {
        let key = headers::ChargedKey::Table(&a.key);
        Some((c, a.snapshot.as_ref()?, Some(key)))
    }

    /// True if the policy queues.
    fn queues(&self) -> bool {
        matches!(self.gate, Some(Gate::Queued(_)))
    }
}

/// The rate-limiting [`Layer`](tower_layer::Layer). Cloning it (and the
/// services it makes) shares one state: every connection and clone draws
/// from the same buckets. See the [module docs](super) for a full request
/// round trip.
///
/// ```
/// use axum::{routing::post, Router};
/// use tollgate::http::{KeySource, Policy, RateLimitLayer};
/// use tollgate::Quota;
///
/// let layer = RateLimitLayer::builder()
///     .global(Policy::token_bucket("global", Quota::per_second(500)?))
///     .policy(Policy::token_bucket("writes", Quota::per_minute(30)?).key(KeySource::PeerIp))
///     .build()?;
/// // "writes" has no prefix: attach it to the routes that need it
/// let writes = layer.policy("writes").expect("registered above");
/// let app: Router = Router::new()
///     .route("/items", post(|| async { "created" }))
///     .route_layer(writes)
///     .layer(layer);
/// # let _ = app;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RateLimitLayer<M = Wrapped> {
    /// The configuration every clone and service reads; a reload swaps it.
    pub(crate) cell: Arc<ArcSwap<Shared>>,
    only: Option<Arc<str>>,
    mode: PhantomData<fn() -> M>,
}

impl<M> Clone for RateLimitLayer<M> {
    fn clone(&self) -> Self {
        Self {
            cell: Arc::clone(&self.cell),
            only: self.only.clone(),
            mode: PhantomData,
        }
    }
}

impl<M> core::fmt::Debug for RateLimitLayer<M> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let shared = self.cell.load();
        f.debug_struct("RateLimitLayer")
            .field("global", &shared.global.as_ref().map(|c| &c.name))
            .field(
                "policies",
                &shared.policies.iter().map(|c| &c.name).collect::<Vec<_>>(),
            )
            .field("only", &self.only)
            .finish()
    }
}

impl RateLimitLayer {
    pub(crate) fn from_shared(shared: Shared) -> Self {
        Self {
            cell: Arc::new(ArcSwap::from_pointee(shared)),
            only: None,
            mode: PhantomData,
        }
    }
}

impl<M> RateLimitLayer<M> {
    /// The same layer (the same buckets, reloads and all), answering with
    /// axum's own `Body` (feature `axum`): axum's `Router::layer` and
    /// `route_layer` then take its responses as they are instead of boxing
    /// each body. The layer for an axum router; see [`AxumBody`].
    ///
    /// [`AxumBody`]: super::AxumBody
    #[cfg(feature = "axum")]
    #[must_use]
    pub fn for_axum(self) -> RateLimitLayer<super::AxumBody> {
        RateLimitLayer {
            cell: self.cell,
            only: self.only,
            mode: PhantomData,
        }
    }

    /// A layer that applies only the policy `name`, sharing its buckets:
    /// attach it to specific routes (axum `route_layer`). It ignores path
    /// prefixes, method filters and the global limiter, but not
    /// [exemptions](crate::RateLimitLayerBuilder::exempt): an exempt path is never
    /// charged, however the policy is attached. `None` if no policy
    /// has that name. (After a [`reload`](Self::reload) that removes the
    /// policy, the layer lets requests through.)
    pub fn policy(&self, name: &str) -> Option<Self> {
        self.cell.load().policies.iter().find(|c| c.name == name)?;
        Some(Self {
            cell: Arc::clone(&self.cell),
            only: Some(Arc::from(name)),
            mode: PhantomData,
        })
    }
}
