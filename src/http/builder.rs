//! [`RateLimitLayerBuilder`]: policies and layer-wide settings, validated.

use core::time::Duration;
use std::format;
use std::string::{String, ToString};
use std::vec::Vec;

use http::{Response, StatusCode};

use super::headers::valid_policy_name;
use super::key::{socket_addr_extension, IpNet, KeySource, PartitionKey, PeerAddrFn};
use super::layer::{layer_clock, HttpStore, LayerSettings, RateLimitLayer, Routed, Rule, Shared};
use super::policy::{
    ConfigError, ConfigErrorKind, MissingKey, Plan, Policy, Rejection, RejectionHandler, StoreAlg,
};
use super::reload::{Carrier, ReloadReport};
use super::routing::PathPrefix;
use crate::clock::Clock;
use crate::error::check_clock;
use crate::keyed::ShardedKeyedTable;
use crate::limiter::Algorithm;
use crate::live::{Inheritance, LiveBucket};
use crate::partitioned::{Partitioned, PolicyStore};

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

    pub(crate) fn located_global(mut self, location: String, policy: Policy) -> Self {
        self.global = Some((location, policy));
        self
    }

    pub(crate) fn located_policy(mut self, location: String, policy: Policy) -> Self {
        self.policies.push((location, policy));
        self
    }

    /// Exempts paths under `prefix` from every limiter, global included
    /// (ASP.NET's `DisableRateLimiting`).
    #[must_use]
    pub fn exempt(mut self, prefix: impl Into<String>) -> Self {
        let loc = format!("exempt[{}]", self.exempt.len());
        self.exempt.push((loc, prefix.into()));
        self
    }

    pub(crate) fn located_exempt(mut self, location: String, prefix: String) -> Self {
        self.exempt.push((location, prefix));
        self
    }

    /// Networks of reverse proxies whose forwarding headers are believed
    /// ([`KeySource::ClientIp`]). Default: none (forwarding headers are
    /// never believed).
    #[must_use]
    pub fn trusted_proxies(mut self, nets: impl IntoIterator<Item = IpNet>) -> Self {
        self.trusted.extend(nets);
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

    /// Status of a refusal (default 429; 503 for older clients).
    #[must_use]
    pub fn status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    /// What to do when a key cannot be extracted (default: answer 500).
    #[must_use]
    pub fn missing_key(mut self, outcome: MissingKey) -> Self {
        self.missing_key = outcome;
        self
    }

    /// The layer's rejection handler: it answers every refusal except
    /// those of a policy with its own [`Policy::on_rejected`] (see the
    /// precedence table in the [module docs](super)).
    #[must_use]
    pub fn on_rejected<F>(mut self, handler: F) -> Self
    where
        F: Fn(&Rejection<'_>) -> Response<String> + Send + Sync + 'static,
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
        let mut names: Vec<&str> = Vec::new();
        if let Some((loc, p)) = &self.global {
            if p.backend.is_some() {
                return Err(ConfigError::invalid(
                    format!("{loc}.backend"),
                    "the global limiter runs in process; give a route policy the backend",
                ));
            }
        }
        let mut plans = Vec::new();
        for (loc, p) in self.global.iter().chain(self.policies.iter()) {
            plans.push(validate(loc, p)?);
            if names.contains(&p.name.as_str()) {
                return Err(ConfigError::new(
                    format!("{loc}.name"),
                    ConfigErrorKind::DuplicateName,
                ));
            }
            names.push(&p.name);
        }
        let mut exempt = Vec::new();
        for (loc, raw) in self.exempt {
            let p = PathPrefix::parse(&raw)
                .map_err(|_| ConfigError::invalid(&loc, "must start with '/'"))?;
            exempt.push((loc, p));
        }
        // every rule is validated before any old bucket is touched
        for (loc, p) in self.global.iter().chain(self.policies.iter()) {
            crate::keyed::shard_layout(max_keys(p), None).map_err(|_| too_many(loc))?;
        }
        let names: Vec<String> = names.iter().map(|n| (*n).to_string()).collect();
        let mut carrier = Carrier {
            previous: previous.map(|(s, _)| s),
            how: previous.map_or(Inheritance::UsedAmount, |(_, how)| how),
            report: ReloadReport::default(),
        };
        let mut plans = plans.into_iter();
        let mut rule = |loc: &str, policy: Policy, plan: Plan| -> Result<Rule, ConfigError> {
            let store = if policy.backend.is_some() {
                carrier.remote(&policy);
                None
            } else {
                Some(carrier.store(&policy, &plan, || fresh_store(loc, &policy, &plan))?)
            };
            Ok(Rule {
                policy,
                plan,
                store,
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
        });
        Ok((shared, report))
    }
}

/// Keys a policy's table tracks: one for a policy without partition (or
/// whose buckets live in a backend).
fn max_keys(p: &Policy) -> usize {
    if matches!(p.key, KeySource::Global) || p.backend.is_some() {
        1
    } else {
        p.max_keys
    }
}

fn too_many(loc: &str) -> ConfigError {
    ConfigError::invalid(format!("{loc}.max_keys"), "too many keys")
}

/// A new store for `policy` running `plan`.
fn fresh_store(loc: &str, policy: &Policy, plan: &Plan) -> Result<HttpStore, ConfigError> {
    let keys = max_keys(policy);
    let store = match plan.alg {
        // one key: one bucket, no table to hash into
        StoreAlg::Gcra(g) if matches!(policy.key, KeySource::Global) => {
            let bucket = PolicyStore::single(LiveBucket::new(g));
            match plan.shaping {
                Some(s) => bucket.with_shaping(s).map_err(|_| {
                    ConfigError::invalid(format!("{loc}.queue"), "queueing needs a bucket")
                })?,
                None => bucket,
            }
        }
        StoreAlg::Gcra(g) => {
            let table = ShardedKeyedTable::builder(g)
                .max_keys(keys)
                .build()
                .map_err(|_| too_many(loc))?;
            match plan.shaping {
                Some(s) => PolicyStore::shaped(table, s),
                None => PolicyStore::keyed(table),
            }
        }
        StoreAlg::Fixed(w) => PolicyStore::keyed(
            ShardedKeyedTable::builder(w)
                .max_keys(keys)
                .build()
                .map_err(|_| too_many(loc))?,
        ),
        StoreAlg::Sliding(w) => PolicyStore::keyed(
            ShardedKeyedTable::builder(w)
                .max_keys(keys)
                .build()
                .map_err(|_| too_many(loc))?,
        ),
        StoreAlg::InFlight(limit) => PolicyStore::in_flight(
            Partitioned::<Routed, PartitionKey>::in_flight_table(limit, keys)
                .map_err(|_| too_many(loc))?,
        ),
    };
    Ok(store)
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
    check_clock(step, resolution).map_err(|_| {
        ConfigError::invalid(
            format!("{loc}.{field}"),
            "finer than the layer clock's resolution can enforce",
        )
    })
}

/// Checks `p`; the store it will run.
fn validate(loc: &str, p: &Policy) -> Result<Plan, ConfigError> {
    if !valid_policy_name(&p.name) {
        return Err(ConfigError::invalid(
            format!("{loc}.name"),
            "must be 1 to 64 characters from A-Z a-z 0-9 - _ . : /",
        ));
    }
    for (i, raw) in p.prefixes.iter().enumerate() {
        if PathPrefix::parse(raw).is_err() {
            let at = if p.prefixes.len() == 1 {
                format!("{loc}.prefix")
            } else {
                format!("{loc}.prefix[{i}]")
            };
            return Err(ConfigError::invalid(at, "must start with '/'"));
        }
    }
    if p.max_keys == 0 {
        return Err(ConfigError::invalid(
            format!("{loc}.max_keys"),
            "must be at least 1",
        ));
    }
    let plan = p.plan(loc)?;
    check_resolution(loc, &plan, layer_clock().resolution())?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gcra::Gcra;
    use crate::quota::Quota;

    fn plan(alg: StoreAlg) -> Plan {
        Plan {
            alg,
            shaping: None,
            queue_slots: 0,
        }
    }

    #[test]
    fn a_quota_finer_than_the_clock_is_refused() {
        let ms = Duration::from_millis(1);
        // 1000 per second: one permit per millisecond, as fine as the clock
        let ok = plan(StoreAlg::Gcra(Gcra::token_bucket(
            Quota::per_second(1000).unwrap(),
        )));
        assert_eq!(check_resolution("global", &ok, ms), Ok(()));
        // 2000 per second: a 500 µs interval a 1 ms clock cannot see
        let fine = plan(StoreAlg::Gcra(Gcra::token_bucket(
            Quota::per_second(2000).unwrap(),
        )));
        let e = check_resolution("policies[0]", &fine, ms).unwrap_err();
        assert_eq!(e.location(), "policies[0].rate");
        // in-flight limits have no time step
        assert_eq!(
            check_resolution("x", &plan(StoreAlg::InFlight(3)), ms),
            Ok(())
        );
        // the layer's clock resolves a nanosecond: any quota fits
        assert_eq!(layer_clock().resolution(), Duration::from_nanos(1));
    }
}
