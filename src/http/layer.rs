//! The tower [`Layer`] and [`Service`]: global limiter + per-route policies.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::boxed::Box;
use std::string::String;
use std::sync::Arc;
use std::vec::Vec;

use arc_swap::ArcSwap;
use http::header::HeaderValue;
use http::{Request, Response, StatusCode};
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use super::backend::StoreUnavailable;
use super::headers::{self, StackText, RATELIMIT, RATELIMIT_POLICY};
use super::key::{self, IpNet, PartitionKey, PeerAddrFn, RequestHead};
use super::metrics::PolicyMetrics;
use super::policy::{MissingKey, Policy, RejectionHandler};
use super::reload::Carried;
use super::routing::PathPrefix;
use crate::clock::{Clock, StdClock};
use crate::decision::Decision;
use crate::gcra::Gcra;
use crate::keyed::{KeyedLimiter, ShardedKeyedTable};
use crate::limiter::Bucket;
use crate::queue::{Queue, TokioClock};
use crate::time::Timestamp;

pub(crate) type Table = ShardedKeyedTable<PartitionKey, Gcra>;

/// One policy, ready to check.
pub(crate) struct Compiled {
    pub(crate) name: String,
    pub(crate) policy: Policy,
    /// Shared with the layer's next configuration when a reload keeps it.
    pub(crate) table: Arc<Table>,
    pub(crate) queue: Option<Arc<Queue<Bucket<Gcra>>>>,
    missing_key: MissingKey,
    pub(crate) policy_item: HeaderValue,
    pub(crate) metrics: PolicyMetrics,
}

pub(crate) struct Shared {
    pub(crate) global: Option<Compiled>,
    pub(crate) policies: Vec<Compiled>,
    /// (prefix, index into `policies`), longest prefix first.
    routes: Vec<(PathPrefix, usize)>,
    exempt: Vec<PathPrefix>,
    trusted: Vec<IpNet>,
    peer: PeerAddrFn,
    pub(crate) status: StatusCode,
    pub(crate) on_rejected: Option<RejectionHandler>,
    headers_on_success: bool,
    /// The clock of the keyed tables. Queued policies keep their own
    /// bucket on the queue's `TokioClock`; the tables use the std clock,
    /// which costs one `Instant::now()` (tokio's `Instant::now` is slower
    /// when tokio's `test-util` is compiled in).
    clock: StdClock,
    no_policy_metrics: PolicyMetrics,
}

/// Settings shared by every policy of a layer (built by
/// [`RateLimitLayerBuilder`](super::RateLimitLayerBuilder)).
pub(crate) struct LayerSettings {
    pub(crate) global: Option<(Policy, Carried)>,
    pub(crate) policies: Vec<(Policy, Carried)>,
    pub(crate) exempt: Vec<(String, PathPrefix)>,
    pub(crate) trusted: Vec<IpNet>,
    pub(crate) peer: PeerAddrFn,
    pub(crate) status: StatusCode,
    pub(crate) missing_key: MissingKey,
    pub(crate) on_rejected: Option<RejectionHandler>,
    pub(crate) headers_on_success: bool,
}

impl Shared {
    pub(crate) fn build(s: LayerSettings) -> Self {
        let clock = StdClock::new();
        let queue_clock = TokioClock::new();
        let global = s
            .global
            .map(|(p, c)| Compiled::new(p, c, s.missing_key, &queue_clock));
        let policies: Vec<Compiled> = s
            .policies
            .into_iter()
            .map(|(p, c)| Compiled::new(p, c, s.missing_key, &queue_clock))
            .collect();
        let mut routes = Vec::new();
        for (i, c) in policies.iter().enumerate() {
            for raw in &c.policy.prefixes {
                if let Ok(p) = PathPrefix::parse(raw) {
                    routes.push((p, i));
                }
            }
        }
        // Longest first; stable, so equal lengths keep registration order.
        routes.sort_by_key(|r| core::cmp::Reverse(r.0.len()));
        Self {
            global,
            policies,
            routes,
            exempt: s.exempt.into_iter().map(|(_, p)| p).collect(),
            trusted: s.trusted,
            peer: s.peer,
            status: s.status,
            on_rejected: s.on_rejected,
            headers_on_success: s.headers_on_success,
            clock,
            no_policy_metrics: PolicyMetrics::new(""),
        }
    }
}

impl Compiled {
    pub(crate) fn new(
        policy: Policy,
        carried: Carried,
        default_missing: MissingKey,
        clock: &TokioClock,
    ) -> Self {
        let gcra = Gcra::new(policy.kind, policy.quota);
        let queue = match carried.queue {
            Some(q) => Some(q),
            None => policy.queue.map(|q| {
                Arc::new(
                    Queue::builder(Bucket::new(gcra))
                        .clock(*clock)
                        .max_wait(q.max_wait)
                        .queue_limit(q.queue_limit)
                        .build(),
                )
            }),
        };
        let table = carried.table;
        let mut item = StackText::new();
        let _ = headers::write_policy_item(&mut item, &policy.name, &policy.quota);
        let policy_item = item
            .header_value()
            .unwrap_or_else(|| HeaderValue::from_static(""));
        Self {
            name: policy.name.clone(),
            missing_key: policy.missing_key.unwrap_or(default_missing),
            metrics: PolicyMetrics::new(&policy.name),
            policy,
            table,
            queue,
            policy_item,
        }
    }
}

/// The rate-limiting [`Layer`]. Cloning it (and the services it makes)
/// shares one state: every connection and clone draws from the same
/// buckets. See the [module docs](super) for a full request round trip.
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
#[derive(Clone)]
pub struct RateLimitLayer {
    /// The configuration every clone and service reads; a reload swaps it.
    pub(crate) cell: Arc<ArcSwap<Shared>>,
    only: Option<Arc<str>>,
}

impl core::fmt::Debug for RateLimitLayer {
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
        }
    }

    /// A layer that applies only the policy `name`, sharing its buckets:
    /// attach it to specific routes (axum `route_layer`). It ignores path
    /// prefixes, method filters and the global limiter. `None` if no policy
    /// has that name. (After a [`reload`](Self::reload) that removes the
    /// policy, the layer lets requests through.)
    pub fn policy(&self, name: &str) -> Option<Self> {
        self.cell.load().policies.iter().find(|c| c.name == name)?;
        Some(Self {
            cell: Arc::clone(&self.cell),
            only: Some(Arc::from(name)),
        })
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimitService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimitService {
            inner,
            cell: Arc::clone(&self.cell),
            only: self.only.clone(),
        }
    }
}

/// The service made by [`RateLimitLayer`].
#[derive(Clone)]
pub struct RateLimitService<S> {
    inner: S,
    cell: Arc<ArcSwap<Shared>>,
    only: Option<Arc<str>>,
}

impl<S: core::fmt::Debug> core::fmt::Debug for RateLimitService<S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RateLimitService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

/// Headers to add to an admitted response.
#[derive(Debug)]
pub(crate) struct SuccessHeaders {
    pub(crate) policy: HeaderValue,
    pub(crate) state: HeaderValue,
}

pin_project! {
    /// The future of [`RateLimitService`].
    pub struct ResponseFuture<F, R, E> {
        #[pin]
        kind: Kind<F, R, E>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F, R, E> {
        // Admitted: the inner service's future, then headers to add.
        Inner { #[pin] fut: F, headers: Option<SuccessHeaders> },
        // Refused (or no key): the response is ready.
        Ready { response: Option<Response<R>> },
        // Waiting in a policy's queue, then the inner service.
        Queued { fut: Pin<Box<dyn Future<Output = Result<Response<R>, E>> + Send>> },
    }
}

impl<F, R, E> core::fmt::Debug for ResponseFuture<F, R, E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("ResponseFuture")
    }
}

impl<F, R, E> Future for ResponseFuture<F, R, E>
where
    F: Future<Output = Result<Response<R>, E>>,
{
    type Output = Result<Response<R>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Inner { fut, headers } => {
                let mut res = core::task::ready!(fut.poll(cx))?;
                if let Some(h) = headers.take() {
                    let map = res.headers_mut();
                    map.insert(RATELIMIT_POLICY, h.policy);
                    map.insert(RATELIMIT, h.state);
                }
                Poll::Ready(Ok(res))
            }
            KindProj::Ready { response } => match response.take() {
                Some(r) => Poll::Ready(Ok(r)),
                None => Poll::Pending,
            },
            KindProj::Queued { fut } => fut.as_mut().poll(cx),
        }
    }
}

/// What the checks decided.
enum Verdict<R> {
    Pass(Option<SuccessHeaders>),
    Respond(Response<R>),
    /// Queue on policy `usize`; the global permit (if any) was charged to
    /// this key.
    Queue(usize, Option<PartitionKey>),
    /// Ask policy `usize`'s remote backend for this key; the global charge
    /// (if any) is refunded if it refuses.
    Remote(usize, PartitionKey, Option<(PartitionKey, Decision)>),
}

/// Outcome of charging one compiled policy.
enum Charge {
    Admitted(Option<(PartitionKey, Decision)>),
    Refused(u64),
    NoKey(StatusCode),
}

impl Shared {
    fn head_of<'a, B>(req: &'a Request<B>) -> RequestHead<'a> {
        RequestHead {
            method: req.method(),
            uri: req.uri(),
            headers: req.headers(),
            extensions: req.extensions(),
        }
    }

    /// The policy's key, or the charge to report when there is none.
    fn key_of(&self, c: &Compiled, head: &RequestHead<'_>) -> Result<PartitionKey, Charge> {
        key::extract(&c.policy.key, head, self.peer, &self.trusted).map_err(|e| {
            tracing::warn!(policy = %c.name, reason = e.as_str(), "rate limit key missing");
            match c.missing_key {
                MissingKey::Allow => Charge::Admitted(None),
                MissingKey::Reject(status) => Charge::NoKey(status),
            }
        })
    }

    fn charge(&self, c: &Compiled, head: &RequestHead<'_>, now: Timestamp) -> Charge {
        let key = match self.key_of(c, head) {
            Ok(k) => k,
            Err(charge) => return charge,
        };
        let d = c.table.check(&key, now);
        match d.decision() {
            Decision::Allowed(_) => Charge::Admitted(Some((key, *d.decision()))),
            Decision::Denied(denied) if c.policy.dry_run => {
                tracing::info!(policy = %c.name, retry_after_ms = denied.retry_after().as_millis() as u64, "dry run: would refuse");
                c.metrics.dry_run.increment(1);
                Charge::Admitted(None)
            }
            Decision::Denied(denied) => Charge::Refused(denied.retry_after_nanos()),
        }
    }

    fn decide<B, R: Default + From<String>>(
        &self,
        req: &Request<B>,
        only: Option<&str>,
    ) -> Verdict<R> {
        let only = match only {
            // a route layer whose policy a reload removed lets requests through
            Some(name) => match self.policies.iter().position(|c| c.name == name) {
                Some(i) => Some(i),
                None => return Verdict::Pass(None),
            },
            None => None,
        };
        let route = match only {
            Some(i) => Some(i),
            None => {
                let path = req.uri().path();
                if self.exempt.iter().any(|p| p.matches(path)) {
                    return Verdict::Pass(None);
                }
                self.routes
                    .iter()
                    .find(|(p, i)| {
                        p.matches(path)
                            && self.policies[*i]
                                .policy
                                .methods
                                .as_ref()
                                .is_none_or(|m| m.contains(req.method()))
                    })
                    .map(|(_, i)| *i)
            }
        };
        let global = if only.is_some() {
            None
        } else {
            self.global.as_ref()
        };
        let route_c = route.map(|i| &self.policies[i]);
        let metrics = route_c.map_or(&self.no_policy_metrics, |c| &c.metrics);
        if global.is_none() && route_c.is_none() {
            return Verdict::Pass(None);
        }
        let head = Self::head_of(req);
        let now = self.clock.now();
        let mut global_charge = None;
        if let Some(g) = global {
            match self.charge(g, &head, now) {
                Charge::Admitted(k) => global_charge = k,
                Charge::Refused(wait) => {
                    metrics.global_limiter.increment(1);
                    return Verdict::Respond(self.reject(g, route_c, true, wait));
                }
                Charge::NoKey(status) => {
                    return Verdict::Respond(super::rejection::status_only(status))
                }
            }
        }
        let refund_global = || {
            if let (Some(g), Some((k, _))) = (global, global_charge.as_ref()) {
                g.table.refund(k, 1, now);
            }
        };
        let mut route_charge = None;
        if let Some(c) = route_c {
            if c.queue.is_some() {
                let key = global_charge.map(|(k, _)| k);
                return Verdict::Queue(route.unwrap_or(0), key);
            }
            let charge = if c.policy.backend.is_some() {
                match self.key_of(c, &head) {
                    Ok(k) => return Verdict::Remote(route.unwrap_or(0), k, global_charge),
                    Err(charge) => charge,
                }
            } else {
                self.charge(c, &head, now)
            };
            match charge {
                Charge::Admitted(k) => route_charge = k,
                Charge::Refused(wait) => {
                    refund_global();
                    metrics.endpoint_limiter.increment(1);
                    return Verdict::Respond(self.reject(c, Some(c), false, wait));
                }
                Charge::NoKey(status) => {
                    refund_global();
                    return Verdict::Respond(super::rejection::status_only(status));
                }
            }
        }
        metrics.acquired.increment(1);
        if !self.headers_on_success {
            return Verdict::Pass(None);
        }
        Verdict::Pass(self.success_headers(
            global.zip(global_charge.as_ref()),
            route_c.zip(route_charge.as_ref()),
        ))
    }
}

/// Refunds the global permit unless disarmed: a request whose client went
/// away while its remote backend was being asked (its future dropped).
struct GlobalRefund {
    shared: Arc<Shared>,
    key: Option<PartitionKey>,
    armed: bool,
}

impl GlobalRefund {
    fn refund(&self) {
        if let (Some(g), Some(k)) = (self.shared.global.as_ref(), self.key.as_ref()) {
            g.table.refund(k, 1, self.shared.clock.now());
        }
    }
}

impl Drop for GlobalRefund {
    fn drop(&mut self) {
        if self.armed {
            self.refund();
        }
    }
}

/// A [`GlobalRefund`] for a queued request that also counts the
/// cancellation when its client went away (its future dropped).
struct QueueGuard {
    refund: GlobalRefund,
    policy: usize,
}

impl Drop for QueueGuard {
    fn drop(&mut self) {
        // the global permit itself is refunded by `self.refund`'s own drop
        if self.refund.armed {
            let m = &self.refund.shared.policies[self.policy].metrics;
            m.request_canceled.increment(1);
            m.queued.decrement(1.0);
        }
    }
}

impl<S, B, R> Service<Request<B>> for RateLimitService<S>
where
    S: Service<Request<B>, Response = Response<R>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
    R: Default + From<String> + Send + 'static,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, R, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let current = self.cell.load();
        match current.decide::<B, R>(&req, self.only.as_deref()) {
            Verdict::Pass(headers) => ResponseFuture {
                kind: Kind::Inner {
                    fut: self.inner.call(req),
                    headers,
                },
            },
            Verdict::Respond(r) => ResponseFuture {
                kind: Kind::Ready { response: Some(r) },
            },
            Verdict::Remote(policy, key, global_charge) => {
                let clone = self.inner.clone();
                let mut inner = core::mem::replace(&mut self.inner, clone);
                let shared = Arc::clone(&current);
                ResponseFuture {
                    kind: Kind::Queued {
                        fut: Box::pin(async move {
                            let mut guard = GlobalRefund {
                                shared,
                                key: global_charge.as_ref().map(|(k, _)| k.clone()),
                                armed: true,
                            };
                            let shared = &guard.shared;
                            let c = &shared.policies[policy];
                            let bytes = super::backend::key_bytes(&key);
                            let result = match c.policy.backend.as_ref() {
                                Some(b) => b.check_n(&bytes, 1).await,
                                None => Err(crate::decision::CapacityExceeded {
                                    requested: 1,
                                    capacity: 0,
                                }),
                            };
                            let unavailable = matches!(&result, Ok(d) if d.store_unavailable());
                            let admitted = match result {
                                Ok(d) => match d.into_decision() {
                                    Decision::Allowed(s) => Ok(Decision::Allowed(s)),
                                    Decision::Denied(denied) if c.policy.dry_run => {
                                        tracing::info!(policy = %c.name, retry_after_ms = denied.retry_after().as_millis() as u64, "dry run: would refuse");
                                        c.metrics.dry_run.increment(1);
                                        Ok(Decision::Denied(denied))
                                    }
                                    Decision::Denied(denied) => Err(denied.retry_after_nanos()),
                                },
                                // n = 1 exceeds only a zero capacity: never admissible
                                Err(_) => Err(c.policy.quota.interval_nanos()),
                            };
                            guard.armed = false;
                            let mut res = match admitted {
                                Ok(decision) => {
                                    c.metrics.acquired.increment(1);
                                    let headers = if shared.headers_on_success {
                                        let route = (key, decision);
                                        shared.success_headers(
                                            shared.global.as_ref().zip(global_charge.as_ref()),
                                            Some((c, &route)),
                                        )
                                    } else {
                                        None
                                    };
                                    let mut res = inner.call(req).await?;
                                    if let Some(h) = headers {
                                        res.headers_mut().insert(RATELIMIT_POLICY, h.policy);
                                        res.headers_mut().insert(RATELIMIT, h.state);
                                    }
                                    res
                                }
                                Err(wait) => {
                                    guard.refund();
                                    c.metrics.endpoint_limiter.increment(1);
                                    shared.reject(c, Some(c), false, wait.max(1))
                                }
                            };
                            if unavailable {
                                res.extensions_mut().insert(StoreUnavailable {
                                    policy: c.name.clone(),
                                });
                            }
                            Ok(res)
                        }),
                    },
                }
            }
            Verdict::Queue(policy, global_key) => {
                let clone = self.inner.clone();
                let mut inner = core::mem::replace(&mut self.inner, clone);
                let shared = Arc::clone(&current);
                ResponseFuture {
                    kind: Kind::Queued {
                        fut: Box::pin(async move {
                            let mut guard = QueueGuard {
                                refund: GlobalRefund {
                                    shared,
                                    key: global_key,
                                    armed: true,
                                },
                                policy,
                            };
                            let c = &guard.refund.shared.policies[policy];
                            let started = std::time::Instant::now();
                            c.metrics.queued.increment(1.0);
                            let result = match c.queue.as_ref() {
                                Some(q) => q.acquire(1).await.map(drop),
                                None => Ok(()),
                            };
                            c.metrics.queued.decrement(1.0);
                            c.metrics
                                .time_in_queue
                                .record(started.elapsed().as_secs_f64());
                            guard.refund.armed = false;
                            match result {
                                Ok(()) => {
                                    c.metrics.acquired.increment(1);
                                    inner.call(req).await
                                }
                                Err(e) if c.policy.dry_run => {
                                    tracing::info!(policy = %c.name, error = %e, "dry run: would refuse");
                                    c.metrics.dry_run.increment(1);
                                    inner.call(req).await
                                }
                                Err(e) => {
                                    guard.refund.refund();
                                    c.metrics.endpoint_limiter.increment(1);
                                    let wait = e.retry_after().map_or(
                                        c.policy.quota.interval_nanos(),
                                        crate::time::duration_to_nanos,
                                    );
                                    Ok(guard.refund.shared.reject(c, Some(c), false, wait.max(1)))
                                }
                            }
                        }),
                    },
                }
            }
        }
    }
}
