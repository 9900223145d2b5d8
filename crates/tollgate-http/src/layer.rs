//! The tower [`Layer`] and [`Service`]: global limiter + per-route policies.

pub(crate) mod body;
mod in_line;
mod rejection;

use core::future::Future;
use core::marker::PhantomData;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
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

use super::backend::{BackendKey, StoreUnavailable};
use super::headers::{self, Precomputed, RATELIMIT, RATELIMIT_POLICY};
use super::key::{self, Extracted, IpNet, KeyDigest, PeerAddrFn, RequestHead, TableKey};
use super::metrics::PolicyMetrics;
use super::policy::{MissingKey, Plan, Policy, RejectionHandler};
use super::routing::{PathPrefix, PrefixTree};
use body::{BodyMode, Held, Wrapped};
use tollgate_core::clock::{Clock, QuantaClock};
use tollgate_core::concurrency::DEFAULT_RETRY_HINT;
use tollgate_core::limiter::Limiter;
use tollgate_core::snapshot::Snapshot;
use tollgate_core::time::Timestamp;
use tollgate_partitioned::{Lease, PolicyStore};
use tollgate_queue::{Queue, QueuePermit, WaitError};

/// A policy's store: a limiter over the layer's fixed-size [`TableKey`]s.
pub(crate) type HttpStore = PolicyStore<TableKey>;

/// What a request holds from a policy's store.
pub(crate) type HttpLease = Lease<TableKey>;

/// The queue of a policy that queues, in front of its store.
pub(crate) type HttpQueue = Queue<HttpStore, TableKey>;

/// How a policy is charged: its store directly (over the limit is
/// refused), or through its queue (over the limit waits in its key's
/// line, woken by the release for an in-flight limit and by the line's
/// timer for a rate).
#[derive(Clone)]
pub(crate) enum Gate {
    Direct(HttpStore),
    Queued(HttpQueue),
}

impl Gate {
    /// The policy's store.
    pub(crate) fn store(&self) -> &HttpStore {
        match self {
            Self::Direct(store) => store,
            Self::Queued(queue) => queue.limiter(),
        }
    }

    /// The state of `key` right after an admission, for the headers: read
    /// on the clock that charged it (a queue reads tokio's).
    fn snapshot(&self, key: &TableKey, now: Timestamp) -> Snapshot {
        match self {
            Self::Direct(store) => store.snapshot(key, now),
            Self::Queued(queue) => queue.limiter().snapshot(key, queue.clock().now()),
        }
    }
}

/// What a request holds from one policy: a lease from its store, or the
/// permit of its queue (whose drop wakes the waiters a release admits).
#[derive(Debug)]
pub(crate) enum Permit {
    Lease(HttpLease),
    Queued(QueuePermit<HttpStore, TableKey>),
}

impl Permit {
    /// True if it holds in-flight permits (kept until the response ends).
    pub(crate) fn holds_in_flight(&self) -> bool {
        match self {
            Self::Lease(lease) => lease.holds_in_flight(),
            Self::Queued(p) => p.inner().is_some_and(HttpLease::holds_in_flight),
        }
    }

    /// Gives the permits back to `gate`'s store (the request was refused
    /// by a later policy, or went away): see [`Limiter::cancel`].
    fn give_back(self, gate: Option<&Gate>, key: &TableKey, now: Timestamp) {
        match self {
            Self::Lease(lease) => match gate {
                Some(gate) => gate.store().cancel(key, lease, now),
                None => drop(lease),
            },
            Self::Queued(p) => p.release(),
        }
    }
}

/// The default clock of every layer: one process-wide TSC clock (`quanta`,
/// which falls back to the OS's monotonic clock where the TSC is
/// unusable). Reading it is a `rdtsc` and a scaling, cheaper than
/// `Instant::now`.
pub(crate) fn layer_clock() -> QuantaClock {
    static CLOCK: std::sync::OnceLock<QuantaClock> = std::sync::OnceLock::new();
    CLOCK.get_or_init(QuantaClock::new).clone()
}

/// The clock a layer reads: [`layer_clock`] unless the builder was given
/// another ([`RateLimitLayerBuilder::clock`](super::RateLimitLayerBuilder::clock)).
///
/// An enum rather than a `dyn Clock`: the default clock is the first
/// variant and is read inline (a compare of the variant, then the TSC
/// read), with no indirect call; only a clock given by the user is called
/// through its vtable.
#[derive(Clone)]
pub(crate) enum LayerClock {
    Quanta(QuantaClock),
    Given(Arc<dyn Clock + Send + Sync>),
}

impl Default for LayerClock {
    fn default() -> Self {
        Self::Quanta(layer_clock())
    }
}

impl Clock for LayerClock {
    #[inline]
    fn now(&self) -> Timestamp {
        match self {
            Self::Quanta(c) => c.now(),
            Self::Given(c) => c.now(),
        }
    }

    fn resolution(&self) -> Duration {
        match self {
            Self::Quanta(c) => c.resolution(),
            Self::Given(c) => c.resolution(),
        }
    }
}

/// One policy, ready to check.
pub(crate) struct Compiled {
    pub(crate) name: String,
    pub(crate) policy: Policy,
    /// What its store runs (compared by a reload).
    pub(crate) plan: Plan,
    /// How it is charged; `None` for a remote backend.
    pub(crate) gate: Option<Gate>,
    missing_key: MissingKey,
    /// `None` for an in-flight limit (no rate to report).
    pub(crate) policy_item: Option<HeaderValue>,
    /// Its refusals' `RateLimit` values for waits of up to a minute.
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
    /// The secret keyed digest of header and custom keys (carried across
    /// reloads: a kept store's keys stay the same).
    pub(crate) digest: KeyDigest,
    /// The clock of every store: [`layer_clock`] (one TSC read a request)
    /// unless the builder was given another; kept by a reload. Delays are
    /// slept on tokio's timer.
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
    pub(crate) digest: KeyDigest,
    pub(crate) clock: LayerClock,
}

impl Shared {
    pub(crate) fn build(s: LayerSettings) -> Self {
        let compile = |r: Rule| Compiled::new(r.policy, r.plan, r.gate, s.missing_key);
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

/// Seconds of refusal `RateLimit` values precomputed per policy.
const REFUSAL_STATE_PRECOMPUTED: u64 = 60;

impl Compiled {
    pub(crate) fn new(
        policy: Policy,
        plan: Plan,
        gate: Option<Gate>,
        default_missing: MissingKey,
    ) -> Self {
        Self {
            name: policy.name.clone(),
            missing_key: policy.missing_key.unwrap_or(default_missing),
            metrics: PolicyMetrics::new(&policy.name),
            policy_item: headers::policy_item(&policy),
            refusal_state: Precomputed::build(REFUSAL_STATE_PRECOMPUTED, |t, secs| {
                headers::write_state_item(t, &policy.name, 0, secs.saturating_mul(1_000_000_000))
            }),
            plan,
            gate,
            policy,
        }
    }

    /// True if the policy queues.
    fn queues(&self) -> bool {
        matches!(self.gate, Some(Gate::Queued(_)))
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

impl<S, M> Layer<S> for RateLimitLayer<M> {
    type Service = RateLimitService<S, M>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimitService {
            inner,
            cell: Arc::clone(&self.cell),
            only: self.only.clone(),
            mode: PhantomData,
        }
    }
}

/// The service made by [`RateLimitLayer`]; `M` is the layer's
/// [`BodyMode`].
pub struct RateLimitService<S, M = Wrapped> {
    inner: S,
    cell: Arc<ArcSwap<Shared>>,
    only: Option<Arc<str>>,
    mode: PhantomData<fn() -> M>,
}

impl<S: Clone, M> Clone for RateLimitService<S, M> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            cell: Arc::clone(&self.cell),
            only: self.only.clone(),
            mode: PhantomData,
        }
    }
}

impl<S: core::fmt::Debug, M> core::fmt::Debug for RateLimitService<S, M> {
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

impl SuccessHeaders {
    fn add_to<B>(self, res: &mut Response<B>) {
        let map = res.headers_mut();
        map.insert(RATELIMIT_POLICY, self.policy);
        map.insert(RATELIMIT, self.state);
    }
}

/// What the inner service's future resolves to, boxed (a request that
/// waits its turn or asks a remote backend).
type BoxedResponse<O, E> = Pin<Box<dyn Future<Output = Result<Response<O>, E>> + Send>>;

pin_project! {
    /// The future of [`RateLimitService`]: the inner service's future `F`
    /// (answering with bodies of type `R`), answering with the
    /// [`BodyMode`] `M`'s bodies.
    pub struct ResponseFuture<F, R, M, E>
    where
        M: BodyMode<R>,
    {
        #[pin]
        kind: Kind<F, R, M, E>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F, R, M, E>
    where
        M: BodyMode<R>,
    {
        // Admitted: the inner service's future, then headers to add and
        // in-flight permits to hand to the body.
        // (Headers are boxed: they are rare, and the future stays small.)
        Inner { #[pin] fut: F, headers: Option<Box<SuccessHeaders>>, held: Option<Held> },
        // Refused (or no key): the response is ready (boxed: a response
        // is large, and every request's future would be as large).
        Ready { response: Option<Box<Response<M::Body>>> },
        // Waiting its turn (a queueing policy) or a remote backend's
        // decision, then the inner service.
        Boxed { fut: BoxedResponse<M::Body, E> },
    }
}

impl<F, R, M: BodyMode<R>, E> core::fmt::Debug for ResponseFuture<F, R, M, E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("ResponseFuture")
    }
}

impl<F, R, M, E> Future for ResponseFuture<F, R, M, E>
where
    F: Future<Output = Result<Response<R>, E>>,
    M: BodyMode<R>,
{
    type Output = Result<Response<M::Body>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Inner { fut, headers, held } => {
                let mut res = core::task::ready!(fut.poll(cx))?;
                if let Some(h) = headers.take() {
                    h.add_to(&mut res);
                }
                let held = held.take().unwrap_or_default();
                Poll::Ready(Ok(res.map(|b| M::admitted(b, held))))
            }
            KindProj::Ready { response } => match response.take() {
                Some(r) => Poll::Ready(Ok(*r)),
                None => Poll::Pending,
            },
            KindProj::Boxed { fut } => fut.as_mut().poll(cx),
        }
    }
}

/// What the checks decided: three words, whatever the variant (the rare
/// ones are boxed), so that the admitted path moves nothing large.
enum Verdict<O> {
    /// Admitted now: headers to add, in-flight permits to hold.
    Pass(Option<Box<SuccessHeaders>>, Held),
    Respond(Box<Response<O>>),
    /// Ask a route policy's remote backend for this key.
    Remote(Box<Remote>),
    /// Wait in a key's line of a policy that queues.
    Line(Box<InLine>),
}

/// A request over a policy that queues: it waits in `key`'s line of the
/// global limiter's queue (`route` is charged after it) or of route policy
/// `route`'s (holding the global admission meanwhile).
struct InLine {
    global_line: bool,
    key: TableKey,
    route: Option<usize>,
    global: Option<Admitted>,
}

/// A request for a route policy's remote backend: policy `policy`, for
/// `key`; the global admission (if any) is given back if the backend
/// refuses.
struct Remote {
    policy: usize,
    key: BackendKey,
    global: Option<Admitted>,
}

/// A policy's admission of a request: its permit, the key it was charged
/// to and, only when the layer sends headers on success, the policy's
/// state right after it (computed when asked).
pub(crate) struct Admitted {
    pub(crate) permit: Permit,
    pub(crate) key: TableKey,
    pub(crate) snapshot: Option<Snapshot>,
}

/// Outcome of charging one in-process policy.
enum Charge {
    /// Admitted; `None` when the policy took nothing (its key was missing
    /// and allowed, or a dry run that would have refused or waited).
    Admitted(Option<Admitted>),
    Refused(Duration),
    NoKey(StatusCode),
    /// Over a policy that queues: wait in this key's line.
    Line(TableKey),
}

/// A policy's key could not be extracted.
enum NoKey {
    Allow,
    Reject(StatusCode),
}

/// The wait a refusal by `c`'s queue reports (`Retry-After`): the
/// queue's estimate where it has one, past the policy's `max_wait` for a
/// wait refused for being too long; a short hint otherwise (a full line
/// of an in-flight limit, a wait that reached `max_wait`).
fn wait_of(e: &WaitError) -> Duration {
    match *e {
        WaitError::CapacityExceeded(refusal) => refusal.retry_after(),
        WaitError::MaxWaitExceeded {
            estimated_wait: Some(wait),
            max_wait,
        } => wait.saturating_sub(max_wait).max(Duration::from_nanos(1)),
        _ => e
            .retry_after()
            .filter(|w| !w.is_zero())
            .unwrap_or(DEFAULT_RETRY_HINT),
    }
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

    /// The policy's key, or what to do without one.
    fn key_of<'a>(&self, c: &Compiled, head: &RequestHead<'a>) -> Result<Extracted<'a>, NoKey> {
        key::extract(&c.policy.key, head, self.peer, &self.trusted).map_err(|e| {
            #[cfg(feature = "tracing")]
            tracing::warn!(policy = %c.name, reason = e.as_str(), "rate limit key missing");
            #[cfg(not(feature = "tracing"))]
            let _ = e;
            match c.missing_key {
                MissingKey::Allow => NoKey::Allow,
                MissingKey::Reject(status) => NoKey::Reject(status),
            }
        })
    }

    /// Charges in-process policy `c`. A dry-run policy never refuses nor
    /// queues: it logs and counts what it would do and admits.
    fn charge(&self, c: &Compiled, head: &RequestHead<'_>, now: Timestamp) -> Charge {
        let key = match self.key_of(c, head) {
            Ok(k) => k.table_key(&self.digest, c.policy.ipv6_prefix),
            Err(NoKey::Allow) => return Charge::Admitted(None),
            Err(NoKey::Reject(status)) => return Charge::NoKey(status),
        };
        let Some(gate) = c.gate.as_ref() else {
            return Charge::Admitted(None); // never: a remote policy is asked apart
        };
        let admitted = |permit| {
            Charge::Admitted(Some(Admitted {
                permit,
                key,
                snapshot: self.headers_on_success.then(|| gate.snapshot(&key, now)),
            }))
        };
        // the one public path of each: a limiter's acquire, or its queue's
        let (wait, queues) = match gate {
            Gate::Direct(store) => match store.try_acquire_n(&key, 1, now) {
                Ok(lease) => return admitted(Permit::Lease(lease)),
                Err(refusal) => (refusal.retry_after(), false),
            },
            Gate::Queued(queue) => match queue.try_acquire(&key, 1) {
                Ok(permit) => return admitted(Permit::Queued(permit)),
                Err(WaitError::WouldWait { retry_after }) => {
                    match (retry_after, queue.max_wait()) {
                        // too long a wait is refused now, as the queue would
                        (Some(wait), Some(max)) if wait > max => (
                            wait_of(&WaitError::MaxWaitExceeded {
                                estimated_wait: Some(wait),
                                max_wait: max,
                            }),
                            false,
                        ),
                        _ if c.policy.dry_run => (retry_after.unwrap_or_default(), true),
                        _ => return Charge::Line(key),
                    }
                }
                Err(e) => (wait_of(&e), false),
            },
        };
        if c.policy.dry_run {
            #[cfg(feature = "tracing")]
            if queues {
                tracing::info!(policy = %c.name, delay_ms = wait.as_millis() as u64, "dry run: would delay");
            } else {
                tracing::info!(policy = %c.name, retry_after_ms = wait.as_millis() as u64, "dry run: would refuse");
            }
            #[cfg(not(feature = "tracing"))]
            let _ = queues;
            c.metrics.dry_run.increment(1);
            Charge::Admitted(None)
        } else {
            Charge::Refused(wait)
        }
    }

    /// The route policy of `req` (`only`: a route layer's policy).
    pub(crate) fn route_of<B>(
        &self,
        req: &Request<B>,
        only: Option<&str>,
    ) -> Result<Option<usize>, ()> {
        let path = req.uri().path();
        // exempt wins over every policy, however it is attached
        if self.exempt.matches(path) {
            return Err(());
        }
        if let Some(name) = only {
            // a route layer whose policy a reload removed lets requests through
            return self
                .policies
                .iter()
                .position(|c| c.name == name)
                .map(Some)
                .ok_or(());
        }
        Ok(self
            .routes
            .longest(path, |&i| {
                self.policies[i]
                    .policy
                    .methods
                    .as_ref()
                    .is_none_or(|m| m.contains(req.method()))
            })
            .copied())
    }

    fn decide<B, R, M: BodyMode<R>>(
        &self,
        req: &Request<B>,
        only: Option<&str>,
    ) -> Verdict<M::Body> {
        let Ok(route) = self.route_of(req, only) else {
            return Verdict::Pass(None, Held::default());
        };
        let global = if only.is_some() {
            None
        } else {
            self.global.as_ref()
        };
        let route_c = route.map(|i| &self.policies[i]);
        if global.is_none() && route_c.is_none() {
            return Verdict::Pass(None, Held::default());
        }
        let metrics = self.metrics_of(route);
        let head = Self::head_of(req);
        let now = self.clock.now();
        let mut global_adm = None;
        if let Some(g) = global {
            match self.charge(g, &head, now) {
                Charge::Admitted(a) => global_adm = a,
                Charge::Refused(wait) => {
                    metrics.global_limiter.increment(1);
                    return Verdict::Respond(Box::new(self.reject::<M, R>(g, true, wait)));
                }
                Charge::NoKey(status) => {
                    return Verdict::Respond(Box::new(rejection::status_only::<M, R>(status)));
                }
                Charge::Line(key) => {
                    return Verdict::Line(Box::new(InLine {
                        global_line: true,
                        key,
                        route,
                        global: None,
                    }));
                }
            }
        }
        self.decide_route::<R, M>(&head, route, global, global_adm, now)
    }

    /// Gives the global limiter's admission back (a later policy refused).
    pub(crate) fn give_back_global(&self, a: Option<Admitted>, now: Timestamp) {
        if let Some(a) = a {
            let gate = self.global.as_ref().and_then(|g| g.gate.as_ref());
            a.permit.give_back(gate, &a.key, now);
        }
    }

    /// The route policy's part of [`Shared::decide`], after the global
    /// limiter admitted (`global_adm`, if it charged anything).
    fn decide_route<R, M: BodyMode<R>>(
        &self,
        head: &RequestHead<'_>,
        route: Option<usize>,
        global: Option<&Compiled>,
        global_adm: Option<Admitted>,
        now: Timestamp,
    ) -> Verdict<M::Body> {
        let route_c = route.map(|i| &self.policies[i]);
        let metrics = self.metrics_of(route);
        let mut route_adm = None;
        if let (Some(i), Some(c)) = (route, route_c) {
            let charge = if c.policy.backend.is_some() {
                match self.key_of(c, head) {
                    Ok(k) => {
                        return Verdict::Remote(Box::new(Remote {
                            policy: i,
                            key: k.backend_key(c.policy.ipv6_prefix),
                            global: global_adm,
                        }));
                    }
                    Err(NoKey::Allow) => Charge::Admitted(None),
                    Err(NoKey::Reject(status)) => Charge::NoKey(status),
                }
            } else {
                self.charge(c, head, now)
            };
            match charge {
                Charge::Admitted(a) => route_adm = a,
                Charge::Line(key) => {
                    return Verdict::Line(Box::new(InLine {
                        global_line: false,
                        key,
                        route,
                        global: global_adm,
                    }));
                }
                Charge::Refused(wait) => {
                    self.give_back_global(global_adm, now);
                    metrics.endpoint_limiter.increment(1);
                    return Verdict::Respond(Box::new(self.reject::<M, R>(c, false, wait)));
                }
                Charge::NoKey(status) => {
                    self.give_back_global(global_adm, now);
                    return Verdict::Respond(Box::new(rejection::status_only::<M, R>(status)));
                }
            }
        }
        let headers = if self.headers_on_success {
            self.success_headers(
                global.zip(global_adm.as_ref().and_then(|a| a.snapshot.as_ref())),
                route_c.zip(route_adm.as_ref().and_then(|a| a.snapshot.as_ref())),
            )
        } else {
            None
        };
        if global.is_some_and(Compiled::queues) || route_c.is_some_and(Compiled::queues) {
            // admitted at once under a queueing policy: no time in its queue
            metrics.time_in_queue.record(0.0);
        }
        metrics.acquired.increment(1);
        Verdict::Pass(
            headers.map(Box::new),
            Held::new(global_adm.map(|a| a.permit), route_adm.map(|a| a.permit)),
        )
    }
}

/// What a request that waits (in a line, or for a remote backend) holds:
/// its permits are given back unless it is admitted, for a client that
/// goes away meanwhile (its future dropped).
struct Pending {
    shared: Arc<Shared>,
    global: Option<Admitted>,
    /// The route policy's index and admission.
    route: Option<(usize, Admitted)>,
    /// Counted in the queue gauge of this route policy's metrics.
    waiting: Option<Option<usize>>,
}

impl Pending {
    fn new(shared: Arc<Shared>, global: Option<Admitted>) -> Self {
        Self {
            shared,
            global,
            route: None,
            waiting: None,
        }
    }

    /// Gives every permit back (the request was refused or went away).
    fn cancel(&mut self) {
        let now = self.shared.clock.now();
        self.shared.give_back_global(self.global.take(), now);
        if let Some((i, a)) = self.route.take() {
            let gate = self.shared.policies.get(i).and_then(|c| c.gate.as_ref());
            a.permit.give_back(gate, &a.key, now);
        }
    }

    /// The request goes on: the in-flight permits to hold.
    fn admit(&mut self) -> Held {
        Held::new(
            self.global.take().map(|a| a.permit),
            self.route.take().map(|(_, a)| a.permit),
        )
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        // permits first, metrics after: once the gauge shows the request
        // gone, its permits are back (an observer can rely on it)
        self.cancel();
        if let Some(route) = self.waiting.take() {
            let m = self.shared.metrics_of(route);
            m.request_canceled.increment(1);
            m.queued.decrement(1.0);
        }
    }
}

impl<S, B, R, M> Service<Request<B>> for RateLimitService<S, M>
where
    S: Service<Request<B>, Response = Response<R>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
    R: Send + 'static,
    M: BodyMode<R>,
{
    type Response = Response<M::Body>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, R, M, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let current = self.cell.load();
        let kind = match current.decide::<B, R, M>(&req, self.only.as_deref()) {
            // built in the return slot: the admitted path copies no future
            Verdict::Pass(headers, held) => {
                return ResponseFuture {
                    kind: Kind::Inner {
                        fut: self.inner.call(req),
                        headers,
                        held: Some(held),
                    },
                };
            }
            Verdict::Respond(r) => Kind::Ready { response: Some(r) },
            Verdict::Remote(remote) => {
                let clone = self.inner.clone();
                let inner = core::mem::replace(&mut self.inner, clone);
                let shared = Arc::clone(&current);
                Kind::Boxed {
                    fut: Box::pin(serve_remote::<S, B, R, M>(shared, *remote, inner, req)),
                }
            }
            Verdict::Line(line) => {
                let clone = self.inner.clone();
                let inner = core::mem::replace(&mut self.inner, clone);
                let shared = Arc::clone(&current);
                Kind::Boxed {
                    fut: Box::pin(in_line::serve_in_line::<S, B, R, M>(
                        shared, *line, inner, req,
                    )),
                }
            }
        };
        ResponseFuture { kind }
    }
}

/// Asks route policy `remote.policy`'s backend, then serves `req` with
/// `inner` or answers the refusal.
async fn serve_remote<S, B, R, M>(
    shared: Arc<Shared>,
    remote: Remote,
    mut inner: S,
    req: Request<B>,
) -> Result<Response<M::Body>, S::Error>
where
    S: Service<Request<B>, Response = Response<R>>,
    M: BodyMode<R>,
{
    let Remote {
        policy,
        key,
        global,
    } = remote;
    let global_snapshot = global.as_ref().and_then(|a| a.snapshot);
    let mut pending = Pending::new(shared, global);
    let shared = Arc::clone(&pending.shared);
    let c = &shared.policies[policy];
    let result = match c.policy.backend.as_ref() {
        Some(b) => Some(b.check_n(key.as_bytes(), 1).await),
        None => None,
    };
    let unavailable = result.as_ref().is_some_and(|a| a.unavailable);
    let never = || {
        c.policy
            .quota()
            .map_or(Duration::from_secs(1), |q| q.interval())
    };
    let admitted = match result.map(|a| a.result) {
        Some(Ok(s)) => Ok(Some(s)),
        // n = 1 exceeds only a zero capacity: never admissible
        Some(Err(denied)) if denied.is_never() => Err(never()),
        Some(Err(denied)) if c.policy.dry_run => {
            #[cfg(feature = "tracing")]
            tracing::info!(policy = %c.name, retry_after_ms = denied.retry_after().as_millis() as u64, "dry run: would refuse");
            #[cfg(not(feature = "tracing"))]
            let _ = denied;
            c.metrics.dry_run.increment(1);
            Ok(None)
        }
        Some(Err(denied)) => Err(denied.retry_after()),
        None => Err(never()),
    };
    let mut res = match admitted {
        Ok(route_snapshot) => {
            c.metrics.acquired.increment(1);
            let headers = if shared.headers_on_success {
                shared.success_headers(
                    shared.global.as_ref().zip(global_snapshot.as_ref()),
                    Some(c).zip(route_snapshot.as_ref()),
                )
            } else {
                None
            };
            let held = pending.admit();
            drop(pending);
            let mut res = inner.call(req).await?;
            if let Some(h) = headers {
                h.add_to(&mut res);
            }
            res.map(|b| M::admitted(b, held))
        }
        Err(wait) => {
            pending.cancel();
            c.metrics.endpoint_limiter.increment(1);
            shared.reject::<M, R>(c, false, wait.max(Duration::from_nanos(1)))
        }
    };
    if unavailable {
        res.extensions_mut().insert(StoreUnavailable {
            policy: c.name.clone(),
        });
    }
    Ok(res)
}
