//! Policies: what a group of requests is limited by, and how.

use core::fmt;
use core::time::Duration;
use std::format;
use std::string::String;
use std::sync::Arc;
use std::vec::Vec;

use http::{Method, Response, StatusCode};

use super::backend::PolicyBackend;
use super::key::KeySource;
use tollgate_core::gcra::{BucketKind, Gcra};
use tollgate_core::quota::Quota;
use tollgate_core::refusal::Refusal;
use tollgate_core::window::{FixedWindow, SlidingWindow};

pub use crate::error::{ConfigError, ConfigErrorKind};
pub use crate::missing_key::{MISSING_KEY_LOG_INTERVAL, MissingKey};

/// A custom rejection response, from the [`Refusal`] and the status the
/// layer would send. The layer adds `Retry-After` and the `RateLimit`
/// headers to it unless the handler set them itself.
pub(crate) type RejectionHandler =
    Arc<dyn Fn(&Refusal<'_>, StatusCode) -> Response<String> + Send + Sync>;

/// Queueing mode: wait up to `max_wait` instead of refusing at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QueueMode {
    /// Longest a request may wait.
    pub(crate) max_wait: Duration,
    /// Most requests waiting at once per key (each counts one permit).
    pub(crate) queue_limit: u64,
}

/// Segments of a [`Policy::sliding_window`]: the window slides in steps
/// of a tenth of its length (a permit counts until the segment it was
/// taken in leaves the window).
pub const SLIDING_WINDOW_SEGMENTS: usize = 10;

/// The sliding window the layer runs.
pub(crate) type Sliding = SlidingWindow<SLIDING_WINDOW_SEGMENTS>;

/// What a policy enforces per key (see the constructors of [`Policy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PolicyAlgorithm {
    /// A token bucket: bursts of `quota.burst()`, refilled at the rate.
    TokenBucket(Quota),
    /// A strict-pacing leaky bucket at the quota's rate.
    LeakyBucket(Quota),
    /// At most `limit` requests per fixed window of `window`.
    FixedWindow {
        /// Requests per window.
        limit: u32,
        /// The window's length.
        window: Duration,
    },
    /// At most `limit` requests in any `window`, sliding by a tenth of it
    /// ([`SLIDING_WINDOW_SEGMENTS`]).
    SlidingWindow {
        /// Requests per window.
        limit: u32,
        /// The window's length.
        window: Duration,
    },
    /// At most `limit` requests in flight (nginx `limit_conn`): a request
    /// holds its permit until its response body has been sent or dropped.
    Concurrency {
        /// Requests in flight at once.
        limit: u32,
    },
}

/// What a policy's in-process store runs: its keyed table's algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) alg: StoreAlg,
}

/// The algorithm of a policy's keyed table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoreAlg {
    Gcra(Gcra),
    Fixed(FixedWindow),
    Sliding(Sliding),
    InFlight(u32),
}

impl StoreAlg {
    /// The most permits the table grants one key at once (its quota's `q`).
    pub(crate) fn limit(&self) -> u32 {
        use tollgate_core::limiter::Algorithm;
        match self {
            Self::Gcra(g) => g.capacity(),
            Self::Fixed(f) => f.capacity(),
            Self::Sliding(s) => s.capacity(),
            Self::InFlight(limit) => *limit,
        }
    }

    /// Same kind of table (the buckets can carry over).
    pub(crate) fn same_family(&self, other: &Self) -> bool {
        core::mem::discriminant(self) == core::mem::discriminant(other)
    }
}

/// The error of a window's parameters, naming `limit_field` or
/// `window_field` of `loc`.
pub(crate) fn window_error(
    loc: &str,
    limit_field: &str,
    window_field: &str,
    e: tollgate_core::error::ConfigError,
) -> ConfigError {
    use tollgate_core::error::ConfigError as E;
    let error = match e {
        E::ZeroLimit => ConfigError::invalid(format!("{loc}.{limit_field}"), "must be at least 1"),
        E::ZeroWindow => ConfigError::invalid(format!("{loc}.{window_field}"), "must be positive"),
        E::WindowNotDivisible { .. } => ConfigError::invalid(
            format!("{loc}.{window_field}"),
            "must be a whole number of nanoseconds per segment (10 segments)",
        ),
        E::WindowTooShort { .. } => ConfigError::invalid(
            format!("{loc}.{window_field}"),
            "too short for the limit (more than about one request per nanosecond)",
        ),
        _ => ConfigError::invalid(loc, "invalid window"),
    };
    error.caused_by(e)
}

/// A rate-limiting policy: a quota, a partition key and the requests it
/// applies to.
///
/// ```
/// use tollgate::http::{KeySource, Policy};
/// use tollgate::Quota;
///
/// let login = Policy::token_bucket("login", Quota::per_minute(5)?)
///     .prefix("/api/login")
///     .methods([http::Method::POST])
///     .key(KeySource::PeerIp)
///     .max_keys(10_000);
/// # let _ = login;
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Policy {
    pub(crate) name: String,
    pub(crate) algorithm: PolicyAlgorithm,
    pub(crate) prefixes: Vec<String>,
    pub(crate) methods: Option<Vec<Method>>,
    pub(crate) key: KeySource,
    pub(crate) max_keys: usize,
    /// Networks tracked by the overflow table (`None`: `max_keys`).
    pub(crate) overflow_networks: Option<usize>,
    pub(crate) ipv6_prefix: u8,
    pub(crate) queue: Option<QueueMode>,
    pub(crate) dry_run: bool,
    pub(crate) missing_key: Option<MissingKey>,
    pub(crate) on_rejected: Option<RejectionHandler>,
    pub(crate) backend: Option<Arc<dyn PolicyBackend>>,
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("name", &self.name)
            .field("algorithm", &self.algorithm)
            .field("prefixes", &self.prefixes)
            .field("methods", &self.methods)
            .field("key", &self.key)
            .field("max_keys", &self.max_keys)
            .field("overflow_networks", &self.overflow_networks)
            .field("ipv6_prefix", &self.ipv6_prefix)
            .field("queue", &self.queue)
            .field("dry_run", &self.dry_run)
            .field("missing_key", &self.missing_key)
            .field("on_rejected", &self.on_rejected.is_some())
            .field("backend", &self.backend.is_some())
            .finish()
    }
}

/// Default number of keys a keyed policy tracks.
pub const DEFAULT_MAX_KEYS: usize = 10_000;

impl Policy {
    /// A policy named `name` running a bucket of `kind` with `quota`: no
    /// prefix (attach one with [`prefix`](Self::prefix)), one shared bucket
    /// ([`KeySource::Global`]).
    pub fn new(name: impl Into<String>, kind: BucketKind, quota: Quota) -> Self {
        Self::from_algorithm(
            name,
            match kind {
                BucketKind::TokenBucket => PolicyAlgorithm::TokenBucket(quota),
                BucketKind::LeakyBucket => PolicyAlgorithm::LeakyBucket(quota),
            },
        )
    }

    /// A policy named `name` enforcing `algorithm`: no prefix, one shared
    /// limiter ([`KeySource::Global`]). Its parameters are checked when the
    /// layer is built (errors name `policies[i].limit`, `.window`, …).
    pub(crate) fn from_algorithm(name: impl Into<String>, algorithm: PolicyAlgorithm) -> Self {
        Self {
            name: name.into(),
            algorithm,
            prefixes: Vec::new(),
            methods: None,
            key: KeySource::Global,
            max_keys: DEFAULT_MAX_KEYS,
            overflow_networks: None,
            ipv6_prefix: super::key::DEFAULT_IPV6_PREFIX,
            queue: None,
            dry_run: false,
            missing_key: None,
            on_rejected: None,
            backend: None,
        }
    }

    /// A token-bucket policy (bursts of `quota.burst()`).
    pub fn token_bucket(name: impl Into<String>, quota: Quota) -> Self {
        Self::new(name, BucketKind::TokenBucket, quota)
    }

    /// A leaky-bucket policy (strict pacing).
    pub fn leaky_bucket(name: impl Into<String>, quota: Quota) -> Self {
        Self::new(name, BucketKind::LeakyBucket, quota)
    }

    /// A fixed-window policy: at most `limit` requests per `window`
    /// (windows start at multiples of `window` on the layer's clock).
    /// `RateLimit-Policy` reports `q=limit;w=<window in seconds>`.
    pub fn fixed_window(name: impl Into<String>, limit: u32, window: Duration) -> Self {
        Self::from_algorithm(name, PolicyAlgorithm::FixedWindow { limit, window })
    }

    /// A sliding-window policy: at most `limit` requests in any `window`,
    /// counted in [`SLIDING_WINDOW_SEGMENTS`] (10) segments, so the window
    /// slides in steps of a tenth of its length; `window` must be a whole
    /// number of nanoseconds per segment. `RateLimit-Policy` reports
    /// `q=limit;w=<window in seconds>`.
    pub fn sliding_window(name: impl Into<String>, limit: u32, window: Duration) -> Self {
        Self::from_algorithm(name, PolicyAlgorithm::SlidingWindow { limit, window })
    }

    /// An in-flight limit (nginx `limit_conn`, ASP.NET's concurrency
    /// limiter): at most `limit` requests per key at once; a request holds
    /// its permit until its response body has been sent or dropped (a
    /// client that disconnects frees it). A refusal says `Retry-After: 1`.
    /// It has no rate: its `RateLimit-Policy` item is
    /// `"name";q=<limit>;qu="concurrent-requests"` (no window) and its
    /// `RateLimit` item gives the permits free, with no `t`. With
    /// [`queue`](Self::queue), a request over the limit waits in its key's
    /// line and is served when a running request's response body ends.
    pub fn concurrency(name: impl Into<String>, limit: u32) -> Self {
        Self::from_algorithm(name, PolicyAlgorithm::Concurrency { limit })
    }

    /// Applies the policy to paths under `prefix` (segment-bounded, ASCII
    /// case-insensitive). May be called more than once. Building refuses a
    /// prefix the router could not match as written (no leading `/`, `*`,
    /// `{`, `}`, `?`, `#`, a space, `%69` for `i`, a `.`, `..` or `//`).
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefixes.push(prefix.into());
        self
    }

    /// Applies the policy only to these methods; other methods fall to the
    /// next-longest matching prefix.
    #[must_use]
    pub fn methods(mut self, methods: impl IntoIterator<Item = Method>) -> Self {
        self.methods = Some(methods.into_iter().collect());
        self
    }

    /// How requests are partitioned (default: one shared bucket).
    #[must_use]
    pub fn key(mut self, key: KeySource) -> Self {
        self.key = key;
        self
    }

    /// Most keys tracked at once (default [`DEFAULT_MAX_KEYS`]). Keys whose
    /// bucket has refilled are evicted losslessly; when every slot is
    /// busy, a new key is charged to its network's overflow bucket (see
    /// [`overflow_networks`](Self::overflow_networks)).
    #[must_use]
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// Most networks the overflow tracks at once (default: as many as
    /// [`max_keys`](Self::max_keys)); 0 turns the network overflow off.
    ///
    /// When every slot of the policy's table is busy, a new key is charged
    /// to the table's one overflow bucket, which a flood of distinct keys
    /// soon empties. A new key that bucket refuses is then not refused for
    /// everyone, nor admitted without limit: it is charged to the bucket
    /// of its client's **network**, an IPv4 /24 or an IPv6 /48 (the
    /// client's address as [`KeySource::ClientIp`] finds it, for header
    /// and custom keys too), under the policy's quota, in a second table
    /// of this many networks. So the flood exhausts the buckets of the
    /// networks it comes from, and a client from any other network is
    /// served within its quota. Overflowing traffic as a whole gets at
    /// most one key's quota from the shared bucket plus one per network.
    /// The network table evicts refilled buckets losslessly as the key
    /// table does; if it too is full of busy networks (a flood from more
    /// networks than it holds), the remaining newcomers share one bucket.
    ///
    /// Memory: the network table costs what the key table does per slot
    /// (about 20 bytes per network of capacity: see the guide), so the
    /// default doubles a policy's memory (10,000 keys: about 200 KB more).
    /// Policies that queue, in-flight limits and remote backends keep one
    /// shared overflow bucket (an in-flight table refuses keys it has no
    /// slot for).
    ///
    /// ```
    /// use tollgate::http::{KeySource, Policy};
    /// use tollgate::Quota;
    ///
    /// let api = Policy::token_bucket("api", Quota::per_minute(60)?)
    ///     .prefix("/api")
    ///     .key(KeySource::ClientIp)
    ///     .max_keys(50_000)
    ///     .overflow_networks(5_000);
    /// # let _ = api;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn overflow_networks(mut self, networks: usize) -> Self {
        self.overflow_networks = Some(networks);
        self
    }

    /// How much of a client's IPv6 address is its key (default
    /// [`DEFAULT_IPV6_PREFIX`](super::DEFAULT_IPV6_PREFIX), 64 bits): every
    /// address of one /64 shares a bucket, since a client usually holds a
    /// whole /64 (RFC 6177) and could otherwise take a fresh key per
    /// request. 128 keys each address; IPv4 addresses are always keyed
    /// whole. For IP keys ([`KeySource::PeerIp`], [`KeySource::ClientIp`], [`KeySource::ForwardedClientIp`],
    /// and custom keys returning [`PartitionKey::Ip`](super::PartitionKey::Ip));
    /// checked when the layer is built (1 to 128).
    #[must_use]
    pub fn ipv6_prefix(mut self, bits: u8) -> Self {
        self.ipv6_prefix = bits;
        self
    }

    /// Queueing mode (nginx `limit_req` without `nodelay`): a request over
    /// the limit waits its turn instead of being refused, in its own key's
    /// line (FIFO per key; one client's flood never delays another), with
    /// at most `queue_limit` waiting per key, none longer than `max_wait`.
    ///
    /// On a token bucket of burst `B`, the first `B` requests pass at once
    /// and up to `queue_limit` more wait, one per interval; on a leaky
    /// bucket, the first passes and up to `queue_limit` more wait, one per
    /// interval; on a window, the waiters are served when the next window
    /// opens. A request that would wait past `max_wait`, or finds its
    /// key's line full, is refused at once. A waiter holds nothing while it
    /// waits: a client that disconnects leaves its line and the requests
    /// behind it move up (see the [module docs](super)).
    ///
    /// On an in-flight limit ([`concurrency`](Self::concurrency)), a request
    /// over the limit joins its key's line (at most `queue_limit` waiting)
    /// and is served when a running request of that key ends its response
    /// body — woken by that release, in arrival order — or refused when it
    /// has waited `max_wait`; one that finds the line full is refused at
    /// once.
    #[must_use]
    pub fn queue(mut self, max_wait: Duration, queue_limit: u64) -> Self {
        self.queue = Some(QueueMode {
            max_wait,
            queue_limit,
        });
        self
    }

    /// Shadow mode: count and log what would be refused, refuse nothing.
    #[must_use]
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// What to do when this policy's key cannot be extracted (overrides the
    /// layer's setting).
    #[must_use]
    pub fn missing_key(mut self, outcome: MissingKey) -> Self {
        self.missing_key = Some(outcome);
        self
    }

    /// A rejection handler for this policy; it overrides the layer's. It
    /// is given the [`Refusal`] (see
    /// [`RateLimitLayerBuilder::on_rejected`](super::RateLimitLayerBuilder::on_rejected))
    /// and the status the layer would send.
    #[must_use]
    pub fn on_rejected<F>(mut self, handler: F) -> Self
    where
        F: Fn(&Refusal<'_>, StatusCode) -> Response<String> + Send + Sync + 'static,
    {
        self.on_rejected = Some(Arc::new(handler));
        self
    }

    /// Keeps this policy's buckets in a [`RedisStore`](tollgate_redis::RedisStore)
    /// (feature `redis`) instead of the layer's in-process table: the
    /// layer awaits the store's decision for the request's partition key,
    /// so every replica pointing at the same store shares one limit. The
    /// policy's own quota still names the `RateLimit-Policy` header; give
    /// the store the same quota (or window). Not combinable with
    /// [`queue`](Self::queue) nor with an in-flight limit
    /// ([`concurrency`](Self::concurrency)), and not usable on the global
    /// limiter. When the store could not be asked and its failure policy
    /// answered, the response carries a
    /// [`StoreUnavailable`](super::StoreUnavailable) extension.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use tollgate::http::{KeySource, Policy, RateLimitLayer};
    /// use tollgate::redis::{RedisConfig, RedisStore};
    /// use tollgate::Quota;
    ///
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let quota = Quota::per_second(5)?;
    /// let store = RedisStore::connect("redis://10.0.0.5:6379/", RedisConfig::token_bucket(quota)).await?;
    /// let layer = RateLimitLayer::builder()
    ///     .policy(
    ///         Policy::token_bucket("api", quota)
    ///             .prefix("/api")
    ///             .key(KeySource::PeerIp)
    ///             .backend(Arc::new(store)),
    ///     )
    ///     .build()?;
    /// # let _ = layer;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "redis")]
    #[must_use]
    pub fn backend(mut self, store: Arc<tollgate_redis::RedisStore>) -> Self {
        self.backend = Some(store);
        self
    }

    /// The policy's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The policy's quota (token and leaky buckets; `None` for windows and
    /// in-flight limits).
    pub fn quota(&self) -> Option<&Quota> {
        match &self.algorithm {
            PolicyAlgorithm::TokenBucket(q) | PolicyAlgorithm::LeakyBucket(q) => Some(q),
            _ => None,
        }
    }

    /// What the policy enforces.
    pub(crate) fn algorithm(&self) -> &PolicyAlgorithm {
        &self.algorithm
    }

    /// True for an in-flight limit.
    pub(crate) fn is_concurrency(&self) -> bool {
        matches!(self.algorithm, PolicyAlgorithm::Concurrency { .. })
    }

    /// The in-process store this policy runs, checked; errors name the
    /// field at `loc` (`policies[1].limit`, `rules[0].queue.limit`).
    pub(crate) fn plan(&self, loc: &str) -> Result<Plan, ConfigError> {
        let at = |field: &str| format!("{loc}.{field}");
        if let Some(mode) = self.queue {
            if mode.max_wait.is_zero() {
                return Err(ConfigError::invalid(
                    at("queue.max_wait"),
                    "must be positive",
                ));
            }
            if mode.queue_limit == 0 {
                return Err(ConfigError::invalid(
                    at("queue.limit"),
                    "must be at least 1",
                ));
            }
        }
        let alg = match self.algorithm {
            PolicyAlgorithm::TokenBucket(q) => {
                StoreAlg::Gcra(Gcra::new(BucketKind::TokenBucket, q))
            }
            PolicyAlgorithm::LeakyBucket(q) => {
                StoreAlg::Gcra(Gcra::new(BucketKind::LeakyBucket, q))
            }
            PolicyAlgorithm::FixedWindow { limit, window } => StoreAlg::Fixed(
                FixedWindow::new(limit, window)
                    .map_err(|e| window_error(loc, "limit", "window", e))?,
            ),
            PolicyAlgorithm::SlidingWindow { limit, window } => StoreAlg::Sliding(
                Sliding::new(limit, window).map_err(|e| window_error(loc, "limit", "window", e))?,
            ),
            PolicyAlgorithm::Concurrency { limit } => {
                if limit == 0 {
                    return Err(ConfigError::invalid(at("limit"), "must be at least 1"));
                }
                StoreAlg::InFlight(limit)
            }
        };
        Ok(Plan { alg })
    }
}
