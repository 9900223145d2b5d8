//! Rules from a TOML or JSON document.
//!
//! ```toml
//! status = 429                      # refusal status (default 429)
//! headers_on_success = true         # RateLimit headers on admitted responses
//! problem_details = true            # refusal bodies as application/problem+json
//! trusted_proxies = ["10.0.0.0/8"]  # peers whose X-Forwarded-For is believed
//! exempt = ["/health"]              # neither global nor rules apply
//! missing_key = "client_ip"         # no key: charged to the client's address (default),
//!                                   # or "shared_bucket", "reject", "allow"
//! missing_key_status = 429          # its refusals' status (429; 500 for "reject")
//!
//! [global]                          # optional; any algorithm
//! rate = 1000                       # permits…
//! period = "1s"                     # …per period: "250ms", "1s", "1m", "1h"
//!
//! [[rules]]
//! name = "api"
//! prefix = "/api"
//! algorithm = "token_bucket"        # leaky_bucket | fixed_window | sliding_window | concurrency
//! rate = 100                        # buckets and windows: permits per period
//! period = "1m"
//! burst = 20                        # buckets only (default: rate)
//! key = "client_ip"                 # global | peer_ip | client_ip | forwarded_client_ip | header
//! max_keys = 10000
//! # overflow_networks = 10000      # /24s and /48s a flood of new keys is charged to (0: off)
//! # header = "x-api-key"            # with key = "header"
//! # methods = ["POST"]
//! # dry_run = true
//! # queue = { max_wait = "2s", limit = 10 }   # any algorithm; per key
//! # backend = "redis"               # buckets shared in Redis (feature `redis`)
//! # redis_url = "redis://127.0.0.1:6379/"
//! # redis_prefix = "myapp:api:"     # default "tollgate:<name>:"
//! # redis_timeout = "50ms"          # per call (default 50ms)
//! # redis_new_keys_per_second = 100 # Redis keys this replica may create a second
//!                                   # (default 1000; see the Redis guide's "Memory")
//! # redis_failure = "open"          # or "closed": while Redis is unavailable
//!
//! [[rules]]                         # nginx limit_conn: 2 requests in flight per client
//! name = "downloads"
//! prefix = "/downloads"
//! algorithm = "concurrency"
//! limit = 2                         # instead of rate, period and burst
//! key = "client_ip"
//! # queue = { max_wait = "30s", limit = 10 }  # wait for a running download to end
//! ```
//!
//! **Algorithms.** `token_bucket` (the default) and `leaky_bucket` take
//! `rate`, `period` and (token bucket) `burst`; `fixed_window` and
//! `sliding_window` admit `rate` requests per window of `period` and have
//! no burst (a sliding window counts in 10 segments, so `period` must be a
//! whole number of nanoseconds per tenth); `concurrency` takes `limit`
//! (requests in flight per key, held until the response body is sent) and
//! none of `rate`, `period`, `burst`. A field that does not apply to the
//! rule's algorithm is an error naming it (`rules[1].rate: does not apply
//! to algorithm = "concurrency"`), as is a missing one (`rules[1].limit:
//! is required with algorithm = "concurrency"`). `queue` works with every
//! algorithm: a request over the limit waits in its key's line.
//!
//! **nginx `limit_req`, one to one.** `queue` makes a bucket's excess wait
//! for its turn instead of being refused, in each key's own line, as nginx
//! delays it (same acceptances, same delays). For a zone of `rate=R` keyed like
//! the rule:
//!
//! | nginx | tollgate rule (`rate = R`) |
//! |---|---|
//! | `limit_req zone=z burst=B nodelay` | `burst = B + 1` |
//! | `limit_req zone=z burst=B` | `burst = 1`, `queue = { limit = B, max_wait = "…" }` |
//! | `limit_req zone=z burst=B delay=D` | `burst = D + 1`, `queue = { limit = B - D, max_wait = "…" }` |
//!
//! The first `burst` requests pass at once, the next `queue.limit` each
//! wait for their turn, one per interval (`period / rate`), and the rest
//! are refused at once with `Retry-After`. nginx has no `max_wait`: set it
//! at least `queue.limit` intervals to keep nginx's behaviour, or lower to
//! refuse what would wait longer. For example, nginx's documented
//! `limit_req zone=one burst=12 delay=8;` at `rate=5r/s`:
//!
//! ```toml
//! [[rules]]
//! name = "one"
//! prefix = "/"
//! rate = 5
//! burst = 9                          # delay + 1: 9 at once
//! queue = { limit = 4, max_wait = "1s" }  # burst - delay: 4 more, 200 ms apart
//! key = "client_ip"
//! ```
//!
//! **In-flight limits that queue (ASP.NET Core's concurrency limiter).**
//! nginx's `limit_conn` refuses at once; ASP.NET Core's
//! `AddConcurrencyLimiter` queues a request behind the running ones and
//! serves it when one of them ends. `queue` on `algorithm = "concurrency"`
//! does the latter, per key:
//!
//! | ASP.NET Core `ConcurrencyLimiterOptions` / nginx | tollgate rule |
//! |---|---|
//! | `PermitLimit = N`, `QueueLimit = 0` (nginx `limit_conn zone N`) | `algorithm = "concurrency"`, `limit = N` |
//! | `PermitLimit = N`, `QueueLimit = Q`, `OldestFirst` | `limit = N`, `queue = { limit = Q, max_wait = "…" }` |
//! | a queued request's cancellation token (timeout) | `queue.max_wait` |
//!
//! A request over `limit` waits in its key's line (FIFO) and is served
//! when a running request of that key ends its response body; one that
//! finds `queue.limit` requests already waiting is refused at once, and one
//! still waiting after `queue.max_wait` is refused then (both with
//! `Retry-After: 1`).
//!
//! A rule with `backend = "redis"` keeps its buckets in a
//! [`RedisStore`](tollgate_redis::RedisStore) (same algorithm and quota as
//! the rule: token bucket, leaky bucket or fixed window), so every replica
//! reading this file shares one limit per key. Building does not wait for
//! the server (the connection is made on first use) but must happen within
//! a tokio runtime; without feature `redis` the rule is refused with
//! `rules[i].backend: "redis" needs tollgate built with feature "redis"`.
//! The global limiter, queueing and in-flight rules stay in process.
//!
//! Errors name the rule and the field: `rules[2].burst: must be at least 1`.
//! A mistake that would load a looser limit than the one written is an
//! error too; the sections below say what is refused.
//!
//! # Durations
//!
//! `period`, `queue.max_wait` and `redis_timeout` are whole numbers with a
//! unit: `ms`, `s`, `m` (minutes), `h` or `d`, in lower case, alone or
//! combined largest first (`"250ms"`, `"1s"`, `"1m30s"`, `"1d"`). Anything
//! else is refused rather than guessed: a bare number (`"50"`: seconds or
//! milliseconds?), a fraction (`"1.5s"`: write `"1500ms"`), a space, and
//! every other unit, upper case included — `"1M"` would be a month to
//! some parsers (43,830 minutes), and months, weeks, years, `us` and `ns`
//! are no rate limit's period. The error names the field and the units:
//! `rules[0].period: must be a positive duration with its unit: a whole
//! number of d, h, m (minutes), s or ms, …`.
//!
//! # Path prefixes
//!
//! The router compares a request's path as the client sent it (nothing
//! decoded or resolved), segment by segment, ignoring ASCII case, and a
//! prefix covers every path below it: `"/api"` is `/api`, `/API/x`,
//! `/api/`, not `/apix`. A `prefix` (or an `exempt` entry) is refused
//! unless the router can match it as written; it must:
//!
//! - start with `/`;
//! - have no wildcard or route parameter: `*`, `{`, `}` (`"/api/login"`
//!   already covers `/api/login/x`), and no `?` or `#` (a query or a
//!   fragment, which the router never sees);
//! - hold only characters a request path holds as they are: visible ASCII
//!   without `<`, `>` or `` ` ``; spaces and non-ASCII characters are
//!   percent-encoded, as clients send them (`"/caf%C3%A9"`);
//! - percent-encode nothing clients send as itself: `"/api/log%69n"` is
//!   refused (write `"/api/login"`), as is a `%` without two hex digits;
//!   escapes of other bytes (`%20`, `%2F`, `%C3`) are kept and matched as
//!   escapes;
//! - have no `.` or `..` segment (clients resolve them before sending:
//!   `"/api/../api/login"` is refused) and no empty segment (`"//api"`,
//!   `"/api//login"`); one trailing `/` is allowed and dropped.
//!
//! The error names the field and shows a valid form:
//! `rules[2].prefix: must not hold an empty segment: one '/' between
//! segments ("/api/login", not "//api/login"); …`. The same rules apply to
//! prefixes given in code ([`Policy::prefix`],
//! [`RateLimitLayerBuilder::exempt`]).
//!
//! # A file must set a limit
//!
//! A file with no `[global]` and no `[[rules]]` (an empty file, comments
//! only, JSON `{}`) would let every request through, and is what a file
//! cut short before its first limit reads as; it is refused
//! (`rules: the file sets no limit …`). A file that means to set none
//! says so:
//!
//! ```toml
//! allow_no_limits = true            # and no [global], no [[rules]]
//! ```
//!
//! `allow_no_limits = true` beside a limit is refused too: a copy of that
//! file cut short before its limits would load with none.
//!
//! A JSON rules file is an object; a top-level array (or any other value)
//! is refused (`expected a JSON object: a rules file is an object of named
//! settings …`), and so is a rule or a queue written as an array: serde
//! would otherwise read its fields by position.
//!
//! # Replacing a rules file
//!
//! [`RateLimitLayer::reload`] applies a new file all at once or not at
//! all: a file that is refused changes nothing, and every bucket carries
//! on. A file read while it is being written may still parse (a file cut
//! after a whole rule is a valid, shorter file, and `rate = 10` cut short
//! reads `rate = 1`), so replace a rules file by **renaming a complete
//! file over it** (write `rules.toml.new`, then `mv rules.toml.new
//! rules.toml`): a reader sees the old file or the new one, never a part.
//! For files edited in place, [`SettledText`] hands a polling reloader a
//! text only once two reads an interval apart were identical;
//! `examples/server.rs` reloads its file that way.

use core::time::Duration;
use std::format;
use std::string::ToString;
use std::vec::Vec;

use http::{HeaderName, Method, StatusCode};

use super::RateLimitLayerBuilder;
use super::key::{KeySource, parse_net};
use super::layer::RateLimitLayer;
use super::policy::{
    ConfigError, ConfigErrorKind, MissingKey, Policy, PolicyAlgorithm, Sliding, window_error,
};
use super::routing::PathPrefix;
use tollgate_core::error::ConfigError as QuotaError;
use tollgate_core::quota::Quota;
use tollgate_core::window::FixedWindow;

mod document;
mod duration;
mod redis_rule;
mod rule;
mod settle;
use document::{Document, RuleConfig};
use duration::DURATION_RULE;
pub(crate) use duration::parse_duration;
#[cfg(feature = "redis")]
use redis_rule::redis_prefix_of;
use rule::rule;
pub use settle::SettledText;

/// A parsed configuration document (see the [module docs](self) for its
/// fields). It is read, then built: to build rules in code, use
/// [`Policy`] and [`RateLimitLayer::builder`], the API this document is
/// turned into.
///
/// ```
/// use tollgate::http::LayerConfig;
///
/// let layer = LayerConfig::from_toml(r#"
///     exempt = ["/health"]
///     [global]
///     rate = 100
///     [[rules]]
///     name = "api"
///     prefix = "/api"
///     rate = 10
///     period = "1m"
///     key = "peer_ip"
/// "#)?.build()?;
/// # let _ = layer;
///
/// let err = LayerConfig::from_json(r#"{"rules": [{"name": "a", "prefix": "/a", "rate": 1, "burst": 0}]}"#)?
///     .build()
///     .unwrap_err();
/// assert_eq!(err.to_string(), "rules[0].burst: must be at least 1");
/// # Ok::<(), tollgate::http::ConfigError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct LayerConfig(Document);

impl LayerConfig {
    /// Parses a TOML document.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| {
            let text = e.to_string().trim_end().to_string();
            ConfigError::new("", ConfigErrorKind::Syntax(text)).caused_by(e)
        })
    }

    /// Parses a JSON document.
    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        serde_json::from_str(text)
            .map_err(|e| ConfigError::new("", ConfigErrorKind::Syntax(e.to_string())).caused_by(e))
    }

    /// A builder holding every setting of the document; add code-only
    /// settings (peer address reader, handlers) and build.
    pub fn into_builder(self) -> Result<RateLimitLayerBuilder, ConfigError> {
        let doc = self.0;
        // reported after every field's own error
        let limits = doc.check_limits();
        let mut b = RateLimitLayer::builder();
        if let Some(s) = doc.status {
            b = b.status(status("status", s)?);
        }
        b = b
            .headers_on_success(doc.headers_on_success)
            .problem_details(doc.problem_details);
        for (i, raw) in doc.trusted_proxies.iter().enumerate() {
            let loc = format!("trusted_proxies[{i}]");
            let net = parse_net(trimmed(&loc, raw)?).ok_or_else(|| {
                ConfigError::invalid(
                    &loc,
                    "must be an IP address or network (10.0.0.0/8, 2001:db8::/32)",
                )
            })?;
            b = b.trusted_proxies([net]);
        }
        if !doc.trusted_proxies.is_empty() {
            let reads_forwarding = |r: &RuleConfig| {
                matches!(r.key.as_deref(), Some("client_ip" | "forwarded_client_ip"))
            };
            if !doc.rules.iter().chain(&doc.global).any(reads_forwarding) {
                return Err(ConfigError::invalid(
                    "trusted_proxies",
                    "does nothing: no rule has key = \"client_ip\" or \"forwarded_client_ip\" (the only keys that read forwarding headers)",
                ));
            }
        }
        for (i, p) in doc.exempt.into_iter().enumerate() {
            // checked by the builder too; here, before a file's lack of limits
            let loc = format!("exempt[{i}]");
            PathPrefix::parse(&p).map_err(|e| ConfigError::invalid(&loc, e.as_str()))?;
            b = b.located_exempt(loc, p);
        }
        let missing_status = |default| match doc.missing_key_status {
            Some(s) => status("missing_key_status", s),
            None => Ok(default),
        };
        b = b.missing_key(match doc.missing_key.as_deref() {
            None | Some("client_ip") => {
                MissingKey::ClientIp(missing_status(StatusCode::TOO_MANY_REQUESTS)?)
            }
            Some("shared_bucket") => {
                MissingKey::SharedBucket(missing_status(StatusCode::TOO_MANY_REQUESTS)?)
            }
            Some("reject") => MissingKey::Reject(missing_status(StatusCode::INTERNAL_SERVER_ERROR)?),
            Some("allow") if doc.missing_key_status.is_some() => {
                return Err(ConfigError::invalid(
                    "missing_key_status",
                    "does nothing with missing_key = \"allow\" (nothing is refused)",
                ));
            }
            Some("allow") => MissingKey::Allow,
            Some(_) => {
                return Err(ConfigError::invalid(
                    "missing_key",
                    "must be \"client_ip\" (the default), \"shared_bucket\", \"reject\" or \"allow\"",
                ));
            }
        });
        if let Some(g) = doc.global {
            let p = rule("global", g, true)?;
            b = b.located_global("global".to_string(), p);
        }
        #[cfg(feature = "redis")]
        let mut redis_prefixes: Vec<(String, Vec<u8>)> = Vec::new();
        for (i, r) in doc.rules.into_iter().enumerate() {
            let loc = format!("rules[{i}]");
            #[cfg(feature = "redis")]
            if let Some(prefix) = redis_prefix_of(&r) {
                if let Some((other, _)) = redis_prefixes.iter().find(|(_, p)| *p == prefix) {
                    let field = if r.redis_prefix.is_some() {
                        "redis_prefix"
                    } else {
                        "name"
                    };
                    return Err(ConfigError::new(
                        format!("{loc}.{field}"),
                        ConfigErrorKind::Conflict(format!(
                            "the same Redis key prefix as {other}: the two rules would share their buckets; give each rule its own redis_prefix"
                        )),
                    ));
                }
                redis_prefixes.push((loc.clone(), prefix));
            }
            let p = rule(&loc, r, false)?;
            b = b.located_policy(loc, p);
        }
        limits?;
        Ok(b)
    }

    /// Parses and builds in one step (peer address from a `SocketAddr`
    /// extension; use [`into_builder`](Self::into_builder) to set more).
    pub fn build(self) -> Result<RateLimitLayer, ConfigError> {
        self.into_builder()?.build()
    }
}

fn status(loc: &str, code: u16) -> Result<StatusCode, ConfigError> {
    let code = StatusCode::from_u16(code)
        .map_err(|_| ConfigError::invalid(loc, "must be an HTTP status from 400 to 599"))?;
    super::builder::error_status(loc, code)
}

/// `value` if it has no leading or trailing whitespace (which would make a
/// prefix, a header name or a URL silently different), else an error
/// naming `loc`.
fn trimmed<'a>(loc: &str, value: &'a str) -> Result<&'a str, ConfigError> {
    if value.trim() != value {
        return Err(ConfigError::invalid(
            loc,
            "has leading or trailing whitespace",
        ));
    }
    Ok(value)
}

/// A positive duration field (`loc`): see [`duration::DURATION_RULE`].
fn duration_field(loc: &str, s: &str) -> Result<Duration, ConfigError> {
    match parse_duration(s) {
        Some(d) if !d.is_zero() => Ok(d),
        _ => Err(ConfigError::invalid(loc, DURATION_RULE)),
    }
}

/// The rule's field that a quota error is about, with the error as its
/// source.
fn quota_error(loc: &str, e: QuotaError) -> ConfigError {
    let error = match e {
        QuotaError::ZeroPermits => {
            ConfigError::invalid(format!("{loc}.rate"), "must be at least 1")
        }
        QuotaError::ZeroBurst => ConfigError::invalid(format!("{loc}.burst"), "must be at least 1"),
        QuotaError::IntervalTooShort { .. } => {
            ConfigError::invalid(format!("{loc}.rate"), "more than one permit per nanosecond")
        }
        QuotaError::ToleranceOverflow { .. } => ConfigError::invalid(
            format!("{loc}.burst"),
            "burst × interval does not fit in 584 years",
        ),
        _ => ConfigError::invalid(loc, "invalid quota"),
    };
    error.caused_by(e)
}
