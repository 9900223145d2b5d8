//! The schema of a rules file, read by name only.
//!
//! serde's derived `Deserialize` also reads a struct from a sequence, by
//! position: `[429, true]` would be a document, `queue = ["2s", 10]` a
//! queue. A rules file read that way is a silent mistake (a JSON array is
//! not a rules file), so each struct here is read from a map alone (a TOML
//! table, a JSON object); anything else is an error saying what was
//! expected.

use core::fmt;
use core::marker::PhantomData;
use std::string::String;
use std::vec::Vec;

use serde::Deserialize;
use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserializer, MapAccess, Visitor};

use super::LayerConfig;
use crate::policy::ConfigError;

/// Why a document that sets no limit is refused.
const NO_LIMIT: &str = "the file sets no limit (no [global] and no [[rules]]; in JSON no \"global\" and no \"rules\"): an empty or cut-short file would let every request through; to run without limits on purpose, set allow_no_limits = true";

/// Why `allow_no_limits` beside limits is refused.
const LIMITS_ALLOWED_AWAY: &str = "must not be set in a file that sets limits: a copy of the file cut short before its limits would then load with none";

/// The whole document: what [`LayerConfig`] holds.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, remote = "Self")]
pub(crate) struct Document {
    /// Refusal status (default 429).
    #[serde(default)]
    pub(crate) status: Option<u16>,
    /// Send RateLimit headers on admitted responses too.
    #[serde(default)]
    pub(crate) headers_on_success: bool,
    /// Refusal bodies as RFC 9457 problem details.
    #[serde(default)]
    pub(crate) problem_details: bool,
    /// Networks of trusted reverse proxies.
    #[serde(default)]
    pub(crate) trusted_proxies: Vec<String>,
    /// Exempt path prefixes.
    #[serde(default)]
    pub(crate) exempt: Vec<String>,
    /// `"client_ip"` (default), `"shared_bucket"`, `"reject"` or `"allow"`.
    #[serde(default)]
    pub(crate) missing_key: Option<String>,
    /// Status of a refusal of a request without a key (default 429; 500
    /// for `"reject"`).
    #[serde(default)]
    pub(crate) missing_key_status: Option<u16>,
    /// The global limiter.
    #[serde(default)]
    pub(crate) global: Option<RuleConfig>,
    /// Route policies.
    #[serde(default)]
    pub(crate) rules: Vec<RuleConfig>,
    /// A document with no global limiter and no rule is refused unless
    /// this says it is meant.
    #[serde(default)]
    pub(crate) allow_no_limits: bool,
}

/// One rule (or the global limiter): the document's schema, read only
/// by [`LayerConfig`].
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, remote = "Self")]
pub(crate) struct RuleConfig {
    /// Policy name (default `"global"` for the global limiter).
    pub(crate) name: Option<String>,
    /// Path prefix (required for rules).
    pub(crate) prefix: Option<String>,
    /// Only these methods.
    pub(crate) methods: Option<Vec<String>>,
    /// `"token_bucket"` (default), `"leaky_bucket"`, `"fixed_window"`,
    /// `"sliding_window"` or `"concurrency"`.
    pub(crate) algorithm: Option<String>,
    /// Permits per period (buckets and windows).
    pub(crate) rate: Option<u64>,
    /// Period (`"1s"` default).
    pub(crate) period: Option<String>,
    /// Burst (default: `rate`; buckets only).
    pub(crate) burst: Option<u64>,
    /// Requests in flight at once per key (`algorithm = "concurrency"`
    /// only).
    pub(crate) limit: Option<u64>,
    /// Partition key.
    pub(crate) key: Option<String>,
    /// Header name for `key = "header"`.
    pub(crate) header: Option<String>,
    /// Most keys tracked (keyed rules only).
    pub(crate) max_keys: Option<usize>,
    /// Most networks the overflow tracks (keyed rules only; 0: off).
    pub(crate) overflow_networks: Option<usize>,
    /// Bits of a client's IPv6 address that make its key (default 64; IP
    /// keys only).
    pub(crate) ipv6_prefix: Option<u64>,
    /// Shadow mode.
    #[serde(default)]
    pub(crate) dry_run: bool,
    /// Queueing mode.
    pub(crate) queue: Option<QueueConfig>,
    /// Where the buckets live: `"local"` (default, in this process) or
    /// `"redis"` (shared by every replica; needs feature `redis`).
    pub(crate) backend: Option<String>,
    /// With `backend = "redis"`: the server, `"redis://host:6379/"`.
    pub(crate) redis_url: Option<String>,
    /// With `backend = "redis"`: key prefix (default
    /// `"tollgate:<rule name>:"`).
    pub(crate) redis_prefix: Option<String>,
    /// With `backend = "redis"`: per-call timeout (default `"50ms"`).
    pub(crate) redis_timeout: Option<String>,
    /// With `backend = "redis"`: `"open"` (default: admit while Redis is
    /// unavailable) or `"closed"` (refuse with `Retry-After: 1`).
    pub(crate) redis_failure: Option<String>,
    /// With `backend = "redis"`: the most new Redis keys the rule creates
    /// per second and replica (default 1000; see tollgate-redis's
    /// `RedisConfig::new_keys_per_second`).
    pub(crate) redis_new_keys_per_second: Option<u64>,
}

/// `queue = { max_wait = "2s", limit = 10 }`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub(crate) struct QueueConfig {
    /// Longest wait.
    pub(crate) max_wait: String,
    /// Most requests waiting per key (default 100).
    pub(crate) limit: Option<u64>,
}

impl Document {
    /// A document sets a limit, or says with `allow_no_limits = true`
    /// (and nothing else) that it means to set none.
    pub(crate) fn check_limits(&self) -> Result<(), ConfigError> {
        let limits = self.global.is_some() || !self.rules.is_empty();
        match (limits, self.allow_no_limits) {
            (true, false) | (false, true) => Ok(()),
            (false, false) => Err(ConfigError::invalid("rules", NO_LIMIT)),
            (true, true) => Err(ConfigError::invalid("allow_no_limits", LIMITS_ALLOWED_AWAY)),
        }
    }
}

/// A struct read from a map only (see the [module docs](self)).
trait ByName: Sized {
    /// What the error says was expected instead.
    const EXPECTED: &'static str;
    /// The struct, from the fields of `map` (serde's derived reading).
    fn from_map<'de, A: MapAccess<'de>>(map: A) -> Result<Self, A::Error>;
}

/// Reads a [`ByName`] struct: a map is read field by field; a sequence,
/// or any other value, is an error naming [`ByName::EXPECTED`].
struct Named<T>(PhantomData<T>);

impl<'de, T: ByName> Visitor<'de> for Named<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(T::EXPECTED)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::from_map(map)
    }
}

/// Implements `Deserialize` for `$t` by name only, through its derived
/// (`remote = "Self"`) reading.
macro_rules! by_name {
    ($t:ty, $expected:expr, $wrap:expr) => {
        impl ByName for $t {
            const EXPECTED: &'static str = $expected;
            fn from_map<'de, A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
                $wrap(MapAccessDeserializer::new(map))
            }
        }

        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_map(Named::<$t>(PhantomData))
            }
        }
    };
}

by_name!(
    LayerConfig,
    "a JSON object: a rules file is an object of named settings ({\"rules\": [...]}), never an array read by position",
    |d| Document::deserialize(d).map(LayerConfig)
);
by_name!(
    RuleConfig,
    "a rule: a table of named fields (an object in JSON), never an array read by position",
    RuleConfig::deserialize
);
by_name!(
    QueueConfig,
    "a queue: a table of named fields, { max_wait = \"2s\", limit = 10 } (an object in JSON), never an array read by position",
    QueueConfig::deserialize
);
