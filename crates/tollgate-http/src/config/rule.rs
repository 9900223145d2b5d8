//! One rule of a rules file, checked field by field and turned into a
//! [`Policy`].

use super::redis_rule::redis_backend;
use super::*;

/// The methods a rule may filter on: the nine of RFC 9110 and PATCH.
const METHODS: [&str; 9] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
];

/// The rule's `algorithm` with its parameters, checked.
fn algorithm(loc: &str, r: &RuleConfig) -> Result<PolicyAlgorithm, ConfigError> {
    let at = |field: &str| format!("{loc}.{field}");
    let name = r.algorithm.as_deref().unwrap_or("token_bucket");
    if !matches!(
        name,
        "token_bucket" | "leaky_bucket" | "fixed_window" | "sliding_window" | "concurrency"
    ) {
        return Err(ConfigError::invalid(
            at("algorithm"),
            "must be one of \"token_bucket\", \"leaky_bucket\", \"fixed_window\", \"sliding_window\", \"concurrency\"",
        ));
    }
    let u32_field = |field: &str, v: u64| {
        if v == 0 {
            return Err(ConfigError::invalid(at(field), "must be at least 1"));
        }
        u32::try_from(v).map_err(|_| ConfigError::invalid(at(field), "must be at most 4294967295"))
    };
    if name == "concurrency" {
        for (field, set) in [
            ("rate", r.rate.is_some()),
            ("period", r.period.is_some()),
            ("burst", r.burst.is_some()),
        ] {
            if set {
                return Err(ConfigError::invalid(
                    at(field),
                    "does not apply to algorithm = \"concurrency\" (it limits requests in flight: set limit)",
                ));
            }
        }
        let limit = r.limit.ok_or_else(|| {
            ConfigError::invalid(at("limit"), "is required with algorithm = \"concurrency\"")
        })?;
        return Ok(PolicyAlgorithm::Concurrency {
            limit: u32_field("limit", limit)?,
        });
    }
    if r.limit.is_some() {
        return Err(ConfigError::invalid(
            at("limit"),
            "only applies with algorithm = \"concurrency\" (rate limits use rate, period and burst)",
        ));
    }
    let rate = r
        .rate
        .ok_or_else(|| ConfigError::invalid(at("rate"), "is required"))?;
    let rate = u32_field("rate", rate)?;
    let period = match r.period.as_deref() {
        None => Duration::from_secs(1),
        Some(p) => duration_field(&at("period"), p)?,
    };
    match name {
        "fixed_window" | "sliding_window" => {
            if r.burst.is_some() {
                return Err(ConfigError::invalid(
                    at("burst"),
                    "windows have no burst: they admit rate requests per period",
                ));
            }
            if name == "fixed_window" {
                FixedWindow::new(rate, period)
                    .map_err(|e| window_error(loc, "rate", "period", e))?;
                Ok(PolicyAlgorithm::FixedWindow {
                    limit: rate,
                    window: period,
                })
            } else {
                Sliding::new(rate, period).map_err(|e| window_error(loc, "rate", "period", e))?;
                Ok(PolicyAlgorithm::SlidingWindow {
                    limit: rate,
                    window: period,
                })
            }
        }
        _ => {
            let mut quota = Quota::new(rate, period).map_err(|e| quota_error(loc, e))?;
            if let Some(burst) = r.burst {
                let burst = u32_field("burst", burst)?;
                quota = quota.with_burst(burst).map_err(|e| quota_error(loc, e))?;
            }
            Ok(if name == "leaky_bucket" {
                PolicyAlgorithm::LeakyBucket(quota)
            } else {
                PolicyAlgorithm::TokenBucket(quota)
            })
        }
    }
}

pub(super) fn rule(loc: &str, mut r: RuleConfig, global: bool) -> Result<Policy, ConfigError> {
    let at = |field: &str| format!("{loc}.{field}");
    for (field, value) in [
        ("name", &r.name),
        ("prefix", &r.prefix),
        ("algorithm", &r.algorithm),
        ("period", &r.period),
        ("key", &r.key),
        ("header", &r.header),
        ("backend", &r.backend),
        ("redis_url", &r.redis_url),
        ("redis_prefix", &r.redis_prefix),
        ("redis_timeout", &r.redis_timeout),
        ("redis_failure", &r.redis_failure),
    ] {
        if let Some(v) = value {
            trimmed(&at(field), v)?;
        }
    }
    let name = match (r.name.take(), global) {
        (Some(n), _) => n,
        (None, true) => "global".to_string(),
        (None, false) => return Err(ConfigError::invalid(at("name"), "is required")),
    };
    let algorithm = algorithm(loc, &r)?;
    let mut p = Policy::from_algorithm(name, algorithm).dry_run(r.dry_run);
    match (r.prefix.take(), global) {
        (Some(prefix), false) => p = p.prefix(prefix),
        (None, false) => return Err(ConfigError::invalid(at("prefix"), "is required")),
        (Some(_), true) => {
            return Err(ConfigError::invalid(
                at("prefix"),
                "the global limiter applies to every path",
            ));
        }
        (None, true) => {}
    }
    if let Some(methods) = r.methods.take() {
        if global {
            return Err(ConfigError::invalid(
                at("methods"),
                "the global limiter applies to every method",
            ));
        }
        let mut list: Vec<Method> = Vec::new();
        for (i, m) in methods.iter().enumerate() {
            let loc = format!("{loc}.methods[{i}]");
            let upper = trimmed(&loc, m)?.to_ascii_uppercase();
            if !METHODS.contains(&upper.as_str()) {
                return Err(ConfigError::invalid(
                    loc,
                    "must be an HTTP method: GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS, TRACE or CONNECT",
                ));
            }
            let method = Method::from_bytes(upper.as_bytes())
                .map_err(|_| ConfigError::invalid(&loc, "must be an HTTP method"))?;
            if list.contains(&method) {
                return Err(ConfigError::invalid(loc, "is listed twice"));
            }
            list.push(method);
        }
        p = p.methods(list);
    }
    let key = match r.key.as_deref() {
        None | Some("global") => KeySource::Global,
        Some("peer_ip") => KeySource::PeerIp,
        Some("client_ip") => KeySource::ClientIp,
        Some("forwarded_client_ip") => KeySource::ForwardedClientIp,
        Some("header") => {
            let h = r.header.as_deref().ok_or_else(|| {
                ConfigError::invalid(at("header"), "is required with key = \"header\"")
            })?;
            let name = HeaderName::from_bytes(trimmed(&at("header"), h)?.as_bytes())
                .map_err(|_| ConfigError::invalid(at("header"), "must be a header name"))?;
            KeySource::Header(name)
        }
        Some(_) => {
            return Err(ConfigError::invalid(
                at("key"),
                "must be one of \"global\", \"peer_ip\", \"client_ip\", \"forwarded_client_ip\", \"header\"",
            ));
        }
    };
    if r.header.is_some() && !matches!(key, KeySource::Header(_)) {
        return Err(ConfigError::invalid(
            at("header"),
            "only applies with key = \"header\" (without it, every request shares one key)",
        ));
    }
    let ip_key = matches!(
        key,
        KeySource::PeerIp | KeySource::ClientIp | KeySource::ForwardedClientIp
    );
    if let Some(bits) = r.ipv6_prefix {
        if !ip_key {
            return Err(ConfigError::invalid(
                at("ipv6_prefix"),
                "only applies with key = \"peer_ip\", \"client_ip\" or \"forwarded_client_ip\"",
            ));
        }
        let bits = u8::try_from(bits)
            .ok()
            .filter(|b| (1..=128).contains(b))
            .ok_or_else(|| {
                ConfigError::invalid(
                    at("ipv6_prefix"),
                    "must be from 1 to 128 (bits of an IPv6 address that make a key)",
                )
            })?;
        p = p.ipv6_prefix(bits);
    }
    if let Some(n) = r.max_keys {
        if matches!(key, KeySource::Global) {
            return Err(ConfigError::invalid(
                at("max_keys"),
                "does nothing with key = \"global\" (one bucket for every request)",
            ));
        }
        if r.backend.as_deref() == Some("redis") {
            return Err(ConfigError::invalid(
                at("max_keys"),
                "does nothing with backend = \"redis\" (the keys live in Redis)",
            ));
        }
        p = p.max_keys(n);
    }
    if let Some(n) = r.overflow_networks {
        if matches!(key, KeySource::Global) || r.backend.as_deref() == Some("redis") {
            return Err(ConfigError::invalid(
                at("overflow_networks"),
                "does nothing without keys in process (key = \"global\" or backend = \"redis\")",
            ));
        }
        p = p.overflow_networks(n);
    }
    p = p.key(key);
    if let Some(q) = r.queue.take() {
        let max_wait = duration_field(&at("queue.max_wait"), &q.max_wait)?;
        let limit = q.limit.unwrap_or(100);
        if limit == 0 {
            return Err(ConfigError::invalid(
                at("queue.limit"),
                "must be at least 1",
            ));
        }
        p = p.queue(max_wait, limit);
    }
    match r.backend.as_deref() {
        None | Some("local") => {
            for (field, set) in [
                ("redis_url", r.redis_url.is_some()),
                ("redis_prefix", r.redis_prefix.is_some()),
                ("redis_timeout", r.redis_timeout.is_some()),
                ("redis_failure", r.redis_failure.is_some()),
                (
                    "redis_new_keys_per_second",
                    r.redis_new_keys_per_second.is_some(),
                ),
            ] {
                if set {
                    return Err(ConfigError::invalid(
                        at(field),
                        "only applies with backend = \"redis\"",
                    ));
                }
            }
        }
        Some("redis") if global => {
            return Err(ConfigError::invalid(
                at("backend"),
                "the global limiter runs in process; give a rule the backend",
            ));
        }
        Some("redis") => p = redis_backend(loc, p, &r)?,
        Some(_) => {
            return Err(ConfigError::invalid(
                at("backend"),
                "must be \"local\" or \"redis\"",
            ));
        }
    }
    Ok(p)
}
