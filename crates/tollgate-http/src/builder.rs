//! [`RateLimitLayerBuilder`]: policies and layer-wide settings, validated;
//! built fresh, or over a running layer (a reload).

mod reload;
mod stores;

use core::time::Duration;
use std::format;
use std::string::{String, ToString};
use std::vec::Vec;

use http::{Response, StatusCode};

use super::headers::valid_policy_name;
use super::key::{IpNet, KeyDigest, PeerAddrFn, canonical_net, socket_addr_extension};
use super::layer::{LayerClock, LayerSettings, RateLimitLayer, Rule, Shared};
use super::policy::{
    ConfigError, ConfigErrorKind, MissingKey, Plan, Policy, RejectionHandler, StoreAlg,
};
use super::routing::PathPrefix;
use reload::Carrier;
pub use reload::ReloadReport;
pub(crate) use stores::overflow_networks;
use stores::{fresh_store, fresh_table, max_keys, too_many};
use tollgate_core::clock::Clock;
use tollgate_core::error::check_clock;
use tollgate_core::limiter::{Algorithm, Inheritance};

/// Builds a [`RateLimitLayer`]; see the [module docs](super).
pub struct RateLimitLayerBuilder {
    global: Option<(String, Policy)>,
    policies: Vec<(String, Policy)>,
    exempt: Vec<(String, String)>,
    trusted: Vec<IpNet>,
    peer: PeerAddrFn,
    status: StatusCode,
    missing_key: MissingKey,
    on_rejected: Option<RejectionHandler>,
    headers_on_success: bool,
    problem_details: bool,
    /// `None`: the default clock (or, on a reload, the layer's).
    clock: Option<LayerClock>,
}

impl core::fmt::Debug for RateLimitLayerBuilder {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RateLimitLayerBuilder")
            .field("global", &self.global)
            .field("policies", &self.policies)
            .field("exempt", &self.exempt)
            .finish_non_exhaustive()
    }
}

impl Default for RateLimitLayerBuilder {
    fn default() -> Self {
        Self {
            global: None,
            policies: Vec::new(),
            exempt: Vec::new(),
            trusted: Vec::new(),
            peer: socket_addr_extension,
            status: StatusCode::TOO_MANY_REQUESTS,
            missing_key: MissingKey::default(),
            on_rejected: None,
            headers_on_success: false,
            problem_details: false,
            clock: None,
        }
    }
}

impl RateLimitLayer {
    /// A builder with no limiter: add a [`global`](RateLimitLayerBuilder::global)
    /// limiter and/or [`policy`](RateLimitLayerBuilder::policy) rules.
    pub fn builder() -> RateLimitLayerBuilder {
        RateLimitLayerBuilder::default()
    }
}

impl RateLimitLayerBuilder {
    /// The global limiter: every non-exempt request is charged to it, in
    /// addition to its route policy. Its prefixes and method filter are
    /// ignored; its key may partition (e.g. per client IP).
    #[must_use]
    pub fn global(mut self, policy: Policy) -> Self {
        self.global = Some(("global".to_string(), policy));
        self
    }

    /// Adds a route policy.
    #[must_use]
    pub fn policy(mut self, policy: Policy) -> Self {
        let loc = format!("policies[{}]", self.policies.len());
        self.policies.push((loc, policy));
        self
    }

    /// Adds route policies.
    #[must_use]
    pub fn policies(mut self, policies: impl IntoIterator<Item = Policy>) -> Self {
        for p in policies {
            self = self.policy(p);
        }
        self
    }

    #[cfg(feature = "config")]
    pub(crate) fn located_global(mut self, location: String, policy: Policy) -> Self {
        self.global = Some((location, policy));
        self
    }

    #[cfg(feature = "config")]
    pub(crate) fn located_policy(mut self, location: String, policy: Policy) -> Self {
        self.policies.push((location, policy));
        self
    }

    /// Exempts paths under `prefix` from every limiter, global included
    /// (ASP.NET's `DisableRateLimiting`), and from policies attached to
    /// routes by name ([`RateLimitLayer::policy`](super::RateLimitLayer::policy)) too.
    /// `prefix` is checked when the layer is built, as
    /// [`Policy::prefix`]'s are.
    #[must_use]
    pub fn exempt(mut self, prefix: impl Into<String>) -> Self {
        let loc = format!("exempt[{}]", self.exempt.len());
        self.exempt.push((loc, prefix.into()));
        self
    }

    #[cfg(feature = "config")]
    pub(crate) fn located_exempt(mut self, location: String, prefix: String) -> Self {
        self.exempt.push((location, prefix));
        self
    }

    /// Networks of reverse proxies whose forwarding headers are believed
    /// ([`KeySource::ClientIp`](crate::KeySource::ClientIp)): [`IpNet`]s of the `ipnet` crate, such as
    /// `"10.0.0.0/8".parse()?` or `"127.0.0.1/32".parse()?`. Default: none
    /// (forwarding headers are never believed).
    #[must_use]
    pub fn trusted_proxies(mut self, nets: impl IntoIterator<Item = IpNet>) -> Self {
        self.trusted.extend(nets.into_iter().map(canonical_net));
        self
    }

    /// Where the peer address is read from (default: a `SocketAddr`
    /// extension). For axum's `ConnectInfo`:
    /// `.peer_addr(|ext| ext.get::<ConnectInfo<SocketAddr>>().map(|c| c.0))`.
    #[must_use]
    pub fn peer_addr(mut self, read: PeerAddrFn) -> Self {
        self.peer = read;
        self
    }

    /// Status of a refusal (default 429; 503 for older clients). It must be
    /// a client or server error (400 to 599): [`build`](Self::build)
    /// refuses any other.
    #[must_use]
    pub fn status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    /// What to do when a policy cannot extract a request's key (default:
    /// [`MissingKey::ClientIp`] with 429, the client's address as its
    /// key). Its status must be 400 to 599.
    #[must_use]
    pub fn missing_key(mut self, outcome: MissingKey) -> Self {
        self.missing_key = outcome;
        self
    }

    /// The layer's rejection handler: it answers every refusal except
    /// those of a policy with its own [`Policy::on_rejected`] (see the
    /// precedence table in the [module docs](super)). It is given the
    /// [`Refusal`](tollgate_core::Refusal) — [`policy()`](tollgate_core::Refusal::policy)
    /// names the refusing policy, [`stage()`](tollgate_core::Refusal::stage) is 0
    /// when the global limiter refused and 1 for a route policy (as in a
    /// [`Chain`](tollgate_core::Chain) of the two), [`retry_after()`](tollgate_core::Refusal::retry_after)
    /// says when to come back and its [`snapshot()`](tollgate_core::Refusal::snapshot)
    /// the policy's limit — and the status the layer would send.
    ///
    /// ```
    /// use http::Response;
    /// use tollgate::http::RateLimitLayer;
    ///
    /// let layer = RateLimitLayer::builder()
    ///     .on_rejected(|refusal, status| {
    ///         let mut res = Response::new(format!(
    ///             "{} is busy: retry in {} s",
    ///             refusal.policy(),
    ///             refusal.retry_after_secs_ceil()
    ///         ));
    ///         *res.status_mut() = status;
    ///         res
    ///     })
    ///     .build();
    /// # let _ = layer;
    /// ```
    #[must_use]
    pub fn on_rejected<F>(mut self, handler: F) -> Self
    where
        F: Fn(&tollgate_core::Refusal<'_>, http::StatusCode) -> Response<String>
            + Send
            + Sync
            + 'static,
    {
        self.on_rejected = Some(std::sync::Arc::new(handler));
        self
    }

    /// Also send `RateLimit-Policy` / `RateLimit` on admitted responses
    /// (default: only on refusals).
    #[must_use]
    pub fn headers_on_success(mut self, on: bool) -> Self {
        self.headers_on_success = on;
        self
    }

    /// Answer refusals with an RFC 9457 problem-details body (default:
    /// off, an empty body): `content-type: application/problem+json` and
    /// the draft's `quota-exceeded` problem type, naming the refusing
    /// policy in `violated-policies`, with `retry-after` in seconds (see
    /// the [guide](crate::guide#problem-details)). Status and headers
    /// are the same either way; a rejection handler, when one answers,
    /// still writes the body.
    #[must_use]
    pub fn problem_details(mut self, on: bool) -> Self {
        self.problem_details = on;
        self
    }

    /// The clock the layer reads (default: one TSC clock shared by every
    /// layer of the process, a [`QuantaClock`](tollgate_core::QuantaClock); its
    /// read is inline and costs no indirect call). Any [`Clock`] that is
    /// `Send + Sync + 'static` will do, an `Arc` of one too; a given clock
    /// is read through a vtable (a few instructions a request more).
    ///
    /// The usual one is a [`TokioClock`](tollgate_queue::TokioClock), so that the
    /// layer's limits follow tokio's time: under tokio's paused time
    /// (`#[tokio::test(start_paused = true)]`) a test of refills, retry
    /// hints and queueing delays then runs in no real time, with
    /// `tokio::time::advance` moving the buckets and the timers together.
    /// A request that waits its turn under a queueing policy sleeps its
    /// delay on tokio's timer, so with a clock that moves with tokio's time
    /// it goes on exactly when the clock says its turn has come; with a
    /// clock that does not (a [`ManualClock`](tollgate_core::ManualClock)) it still
    /// sleeps the delay on tokio's timer.
    ///
    /// Every policy's quota, window or window segment is checked against
    /// the clock's [`resolution`](Clock::resolution): one finer than the
    /// clock can show is refused by [`build`](Self::build).
    ///
    /// A [`reload`](RateLimitLayer::reload) keeps the layer's clock (the
    /// buckets it keeps were filled on that clock's time line): a clock
    /// set on the builder given to `reload` is ignored, and the new rules
    /// are checked against the layer's clock.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::http::{Policy, RateLimitLayer};
    /// use tollgate::{CoarseClock, Quota, TokioClock};
    ///
    /// let layer = RateLimitLayer::builder()
    ///     .clock(TokioClock::new())
    ///     .global(Policy::token_bucket("global", Quota::per_minute(1)?))
    ///     .build()?;
    /// # let _ = layer;
    ///
    /// // 1000 a second needs a clock that resolves a millisecond
    /// let coarse = CoarseClock::start(Duration::from_millis(10))?;
    /// let refused = RateLimitLayer::builder()
    ///     .clock(coarse)
    ///     .global(Policy::token_bucket("global", Quota::per_second(1000)?))
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(refused.location(), "global.rate");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn clock<C: Clock + Send + Sync + 'static>(mut self, clock: C) -> Self {
        self.clock = Some(LayerClock::Given(std::sync::Arc::new(clock)));
        self
    }

    /// Validates everything and builds the layer.
    pub fn build(self) -> Result<RateLimitLayer, ConfigError> {
        let (shared, _) = self.compile(None)?;
        Ok(RateLimitLayer::from_shared(shared))
    }

    /// Validates everything and compiles the policies, carrying the buckets
    /// of `previous`'s rules that stay (a reload).
    pub(crate) fn compile(
        self,
        previous: Option<(&Shared, Inheritance)>,
    ) -> Result<(Shared, ReloadReport), ConfigError> {
        // a reload keeps the layer's clock: its kept buckets are on it
        let clock = match (previous, self.clock) {
            (Some((s, _)), _) => s.clock.clone(),
            (None, Some(clock)) => clock,
            (None, None) => LayerClock::default(),
        };
        let resolution = clock.resolution();
        let mut names: Vec<&str> = Vec::new();
        error_status("status", self.status)?;
        if let Some(status) = self.missing_key.status() {
            error_status("missing_key", status)?;
        }
        if let Some((loc, p)) = &self.global
            && p.backend.is_some()
        {
            return Err(ConfigError::invalid(
                format!("{loc}.backend"),
                "the global limiter runs in process; give a route policy the backend",
            ));
        }
        let mut plans = Vec::new();
        for (loc, p) in self.global.iter().chain(self.policies.iter()) {
            plans.push(validate(loc, p, resolution)?);
            if names.contains(&p.name.as_str()) {
                return Err(ConfigError::new(
                    format!("{loc}.name"),
                    ConfigErrorKind::DuplicateName,
                ));
            }
            names.push(&p.name);
        }
        let mut exempt: Vec<(String, PathPrefix)> = Vec::new();
        for (loc, raw) in self.exempt {
            let p = PathPrefix::parse(&raw).map_err(|e| ConfigError::invalid(&loc, e.as_str()))?;
            if let Some((other, _)) = exempt.iter().find(|(_, q)| *q == p) {
                return Err(ConfigError::new(
                    &loc,
                    ConfigErrorKind::Conflict(format!(
                        "the same path as {other} (case and a trailing '/' do not count)"
                    )),
                ));
            }
            exempt.push((loc, p));
        }
        check_routes(&self.policies, &exempt)?;
        // every rule is validated before any old bucket is touched
        for (loc, p) in self.global.iter().chain(self.policies.iter()) {
            let keys = max_keys(p);
            if keys == 0 {
                return Err(too_many(loc).caused_by(tollgate_core::ConfigError::ZeroKeys));
            }
            if keys > tollgate_core::keyed::MAX_KEYS {
                return Err(
                    too_many(loc).caused_by(tollgate_core::ConfigError::TooManyKeys {
                        requested: keys,
                        max: tollgate_core::keyed::MAX_KEYS,
                    }),
                );
            }
            if let Some(n) = p.overflow_networks
                && n > tollgate_core::keyed::MAX_KEYS
            {
                return Err(ConfigError::invalid(
                    format!("{loc}.overflow_networks"),
                    "too many networks",
                )
                .caused_by(tollgate_core::ConfigError::TooManyKeys {
                    requested: n,
                    max: tollgate_core::keyed::MAX_KEYS,
                }));
            }
        }
        let names: Vec<String> = names.iter().map(|n| (*n).to_string()).collect();
        let mut carrier = Carrier {
            previous: previous.map(|(s, _)| s),
            how: previous.map_or(Inheritance::UsedAmount, |(_, how)| how),
            report: ReloadReport::default(),
        };
        let mut plans = plans.into_iter();
        let mut rule = |loc: &str, policy: Policy, plan: Plan| -> Result<Rule, ConfigError> {
            let (gate, networks) = if policy.backend.is_some() {
                carrier.remote(&policy);
                (None, None)
            } else {
                let gate = carrier.gate(&policy, &plan, || fresh_store(loc, &policy, &plan))?;
                let networks = match overflow_networks(&policy, &plan) {
                    Some(n) => Some(carrier.networks(&policy, &plan, || {
                        fresh_table(loc, "overflow_networks", plan.alg, n)
                    })?),
                    None => None,
                };
                (Some(gate), networks)
            };
            Ok(Rule {
                policy,
                plan,
                gate,
                networks,
            })
        };
        let global = match self.global {
            Some((loc, p)) => match plans.next() {
                Some(plan) => Some(rule(&loc, p, plan)?),
                None => None,
            },
            None => None,
        };
        let mut policies = Vec::new();
        for (loc, p) in self.policies {
            if let Some(plan) = plans.next() {
                policies.push(rule(&loc, p, plan)?);
            }
        }
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let report = carrier.finish(&names);
        // a reload keeps the digest's secret: kept stores keep their keys
        let digest = previous.map_or_else(KeyDigest::random, |(s, _)| s.digest.clone());
        let shared = Shared::build(LayerSettings {
            global,
            policies,
            exempt,
            trusted: self.trusted,
            peer: self.peer,
            status: self.status,
            missing_key: self.missing_key,
            on_rejected: self.on_rejected,
            headers_on_success: self.headers_on_success,
            problem_details: self.problem_details,
            digest,
            clock,
        });
        Ok((shared, report))
    }
}

/// Checks that a clock of `resolution` can enforce `plan`: a quota's
/// interval, a fixed window or a sliding window's segment finer than the
/// clock's step is a construction error, never a silent clamp.
fn check_resolution(loc: &str, plan: &Plan, resolution: Duration) -> Result<(), ConfigError> {
    let (step, field) = match plan.alg {
        StoreAlg::Gcra(g) => (g.required_resolution(), "rate"),
        StoreAlg::Fixed(w) => (w.required_resolution(), "window"),
        StoreAlg::Sliding(w) => (w.required_resolution(), "window"),
        StoreAlg::InFlight(_) => return Ok(()),
    };
    check_clock(step, resolution).map_err(|e| {
        ConfigError::invalid(
            format!("{loc}.{field}"),
            "finer than the layer clock's resolution can enforce",
        )
        .caused_by(e)
    })
}

/// Checks `p`; the store it will run.
fn validate(loc: &str, p: &Policy, resolution: Duration) -> Result<Plan, ConfigError> {
    if !valid_policy_name(&p.name) {
        return Err(ConfigError::invalid(
            format!("{loc}.name"),
            "must be 1 to 64 characters from A-Z a-z 0-9 - _ . : /",
        ));
    }
    for (i, raw) in p.prefixes.iter().enumerate() {
        if let Err(e) = PathPrefix::parse(raw) {
            return Err(ConfigError::invalid(prefix_at(loc, p, i), e.as_str()));
        }
    }
    if !(1..=128).contains(&p.ipv6_prefix) {
        return Err(ConfigError::invalid(
            format!("{loc}.ipv6_prefix"),
            "must be from 1 to 128 (bits of an IPv6 address that make a key)",
        ));
    }
    if let Some(status) = p.missing_key.and_then(MissingKey::status) {
        error_status(&format!("{loc}.missing_key"), status)?;
    }
    if p.max_keys == 0 {
        return Err(ConfigError::invalid(
            format!("{loc}.max_keys"),
            "must be at least 1",
        ));
    }
    let plan = p.plan(loc)?;
    check_resolution(loc, &plan, resolution)?;
    if p.backend.is_some() && p.queue.is_some() {
        return Err(ConfigError::invalid(
            format!("{loc}.queue"),
            "queueing is in process only; a policy with a remote backend cannot queue",
        ));
    }
    if p.backend.is_some() && p.is_concurrency() {
        return Err(ConfigError::invalid(
            format!("{loc}.backend"),
            "an in-flight limit is held in process; it cannot use a remote backend",
        ));
    }
    if matches!(&p.methods, Some(m) if m.is_empty()) {
        return Err(ConfigError::invalid(
            format!("{loc}.methods"),
            "must name at least one method",
        ));
    }
    Ok(plan)
}

/// `status` if it is a client or server error (400 to 599).
pub(crate) fn error_status(loc: &str, status: StatusCode) -> Result<StatusCode, ConfigError> {
    if status.is_client_error() || status.is_server_error() {
        Ok(status)
    } else {
        Err(ConfigError::invalid(
            loc,
            "must be a client or server error status, 400 to 599 (a refusal must not look like success, a redirect or an interim answer)",
        ))
    }
}

/// Where prefix `i` of `p` is reported: `loc.prefix` for a policy with one
/// prefix, `loc.prefix[i]` for more.
fn prefix_at(loc: &str, p: &Policy, i: usize) -> String {
    if p.prefixes.len() == 1 {
        format!("{loc}.prefix")
    } else {
        format!("{loc}.prefix[{i}]")
    }
}

/// Route policies whose prefixes are the same after normalisation (case,
/// trailing `/`) and whose methods overlap: the later could never apply to
/// those methods (the first registered wins a tie). Also a prefix under an
/// exemption: that policy would never apply.
fn check_routes(
    policies: &[(String, Policy)],
    exempt: &[(String, PathPrefix)],
) -> Result<(), ConfigError> {
    let mut seen: Vec<(String, PathPrefix, Option<&Vec<http::Method>>)> = Vec::new();
    for (loc, p) in policies {
        for (i, raw) in p.prefixes.iter().enumerate() {
            let Ok(prefix) = PathPrefix::parse(raw) else {
                continue; // reported by `validate`
            };
            let at = prefix_at(loc, p, i);
            if let Some((e, _)) = exempt.iter().find(|(_, e)| e.covers(&prefix)) {
                return Err(ConfigError::new(
                    at,
                    ConfigErrorKind::Conflict(format!(
                        "lies under {e}, which is exempt: the policy would never apply"
                    )),
                ));
            }
            let overlap = |m: Option<&Vec<http::Method>>| match (m, p.methods.as_ref()) {
                (Some(a), Some(b)) => a.iter().any(|x| b.contains(x)),
                _ => true,
            };
            if let Some((other, _, _)) = seen.iter().find(|(_, q, m)| *q == prefix && overlap(*m)) {
                return Err(ConfigError::new(
                    at,
                    ConfigErrorKind::Conflict(format!(
                        "the same path as {other} for the same methods (case and a trailing '/' do not count): only one could ever apply; merge them or give them disjoint methods"
                    )),
                ));
            }
            seen.push((at, prefix, p.methods.as_ref()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
