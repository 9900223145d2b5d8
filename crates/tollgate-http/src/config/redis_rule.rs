//! A rule with `backend = "redis"`: its key prefix and its Redis store.

#[cfg(feature = "redis")]
use core::time::Duration;
use std::format;

use super::{ConfigError, RuleConfig};
#[cfg(feature = "redis")]
use super::{duration_field, quota_error};
use crate::policy::Policy;
#[cfg(feature = "redis")]
use crate::policy::PolicyAlgorithm;
#[cfg(feature = "redis")]
use tollgate_core::quota::Quota;

/// The Redis key prefix of a rule with `backend = "redis"`: its
/// `redis_prefix`, by default `tollgate:<name>:`. Keys are the prefix and a
/// fixed-length digest (see [`RedisConfig::redis_key`]), so two rules share
/// buckets only if their prefixes are equal, which the config refuses.
///
/// [`RedisConfig::redis_key`]: tollgate_redis::RedisConfig::redis_key
#[cfg(feature = "redis")]
pub(super) fn redis_prefix_of(r: &RuleConfig) -> Option<std::vec::Vec<u8>> {
    if r.backend.as_deref() != Some("redis") {
        return None;
    }
    Some(match (&r.redis_prefix, &r.name) {
        (Some(p), _) => p.as_bytes().to_vec(),
        (None, Some(name)) => format!("tollgate:{name}:").into_bytes(),
        (None, None) => return None,
    })
}

#[cfg(not(feature = "redis"))]
pub(super) fn redis_backend(loc: &str, _p: Policy, _r: &RuleConfig) -> Result<Policy, ConfigError> {
    Err(ConfigError::invalid(
        format!("{loc}.backend"),
        "\"redis\" needs tollgate built with feature \"redis\"",
    ))
}

/// A [`RedisStore`](tollgate_redis::RedisStore) for the rule, connected
/// lazily (building never waits for the server).
#[cfg(feature = "redis")]
pub(super) fn redis_backend(loc: &str, p: Policy, r: &RuleConfig) -> Result<Policy, ConfigError> {
    use std::sync::Arc;
    use tollgate_redis::{FailurePolicy, RedisConfig, RedisStore};

    let at = |field: &str| format!("{loc}.{field}");
    let url = r.redis_url.as_deref().ok_or_else(|| {
        ConfigError::invalid(at("redis_url"), "is required with backend = \"redis\"")
    })?;
    let mut config = match *p.algorithm() {
        PolicyAlgorithm::TokenBucket(q) => RedisConfig::token_bucket(q),
        PolicyAlgorithm::LeakyBucket(q) => RedisConfig::leaky_bucket(q),
        PolicyAlgorithm::FixedWindow { limit, window } => {
            RedisConfig::fixed_window(Quota::new(limit, window).map_err(|e| quota_error(loc, e))?)
        }
        _ => {
            return Err(ConfigError::invalid(
                at("backend"),
                "\"redis\" supports algorithm = \"token_bucket\", \"leaky_bucket\" or \"fixed_window\"",
            ));
        }
    };
    let prefix = match &r.redis_prefix {
        Some(prefix) => prefix.as_bytes().to_vec(),
        None => format!("tollgate:{}:", p.name).into_bytes(),
    };
    if prefix.is_empty() {
        return Err(ConfigError::invalid(
            at("redis_prefix"),
            "must not be empty",
        ));
    }
    config = config.prefix(&prefix);
    if let Some(t) = r.redis_timeout.as_deref() {
        let t = duration_field(&at("redis_timeout"), t)?;
        config = config.timeout(t);
    }
    config = config.failure_policy(match r.redis_failure.as_deref() {
        None | Some("open") => FailurePolicy::fail_open(),
        Some("closed") => FailurePolicy::fail_closed(Duration::from_secs(1)),
        Some(_) => {
            return Err(ConfigError::invalid(
                at("redis_failure"),
                "must be \"open\" or \"closed\"",
            ));
        }
    });
    if let Some(rate) = r.redis_new_keys_per_second {
        let rate = u32::try_from(rate)
            .ok()
            .filter(|&rate| rate > 0)
            .ok_or_else(|| {
                ConfigError::invalid(
                    at("redis_new_keys_per_second"),
                    "must be a whole number from 1 to 1000000000",
                )
            })?;
        config = config.new_keys_per_second(rate);
    }
    let store = RedisStore::connect_lazy(url, config).map_err(|e| redis_error(loc, e))?;
    Ok(p.backend(Arc::new(store)))
}

/// The rule's field that a Redis store's error is about, with the error
/// as its source.
#[cfg(feature = "redis")]
fn redis_error(loc: &str, e: tollgate_redis::ConfigError) -> ConfigError {
    use tollgate_redis::ConfigError as RedisConfigError;

    let at = |field: &str| format!("{loc}.{field}");
    let error = match &e {
        RedisConfigError::Connection(_) => {
            ConfigError::invalid(at("redis_url"), "must be a redis:// URL")
        }
        RedisConfigError::NoTokioRuntime => ConfigError::invalid(
            at("backend"),
            "\"redis\" must be built within a tokio runtime (with its timer enabled)",
        ),
        RedisConfigError::BelowServerResolution(_) => ConfigError::invalid(
            at("rate"),
            "interval finer than the Redis server clock (1 µs)",
        ),
        RedisConfigError::ZeroNewKeyRate | RedisConfigError::NewKeyRate(_) => ConfigError::invalid(
            at("redis_new_keys_per_second"),
            "must be a whole number from 1 to 1000000000",
        ),
        RedisConfigError::LeadTooLong { .. } => ConfigError::invalid(
            at("burst"),
            "burst × interval is longer than Redis computes exactly (about 104 days)",
        ),
        _ => ConfigError::invalid(at("backend"), "the Redis store rejects this rule"),
    };
    error.caused_by(e)
}

#[cfg(all(test, feature = "redis"))]
mod tests {
    use std::string::{String, ToString};

    use super::super::LayerConfig;

    fn rule_with(value: &str) -> String {
        std::format!(
            "[[rules]]\nname = \"a\"\nprefix = \"/a\"\nrate = 1\nbackend = \"redis\"\nredis_url = \"redis://127.0.0.1:1/\"\nredis_new_keys_per_second = {value}\n"
        )
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_bad_new_key_budget_is_refused_naming_the_field() {
        for bad in ["0", "4294967296", "4000000000"] {
            let err = LayerConfig::from_toml(&rule_with(bad))
                .and_then(LayerConfig::build)
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with("rules[0].redis_new_keys_per_second: "),
                "{bad}: {err}"
            );
        }
        let err = LayerConfig::from_toml(&rule_with("-1"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("redis_new_keys_per_second"), "{err}");
        let err = LayerConfig::from_toml(&rule_with("\"many\""))
            .unwrap_err()
            .to_string();
        assert!(err.contains("redis_new_keys_per_second"), "{err}");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_new_key_budget_builds() {
        for good in ["1", "1000", "1000000000"] {
            let layer = LayerConfig::from_toml(&rule_with(good)).and_then(LayerConfig::build);
            assert!(
                layer.is_ok(),
                "{good}: {:?}",
                layer.err().map(|e| e.to_string())
            );
        }
    }
}
