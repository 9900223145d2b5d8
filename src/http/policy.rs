//! Policies: what a group of requests is limited by, and how.

use core::fmt;
use core::time::Duration;
use std::string::{String, ToString};
use std::sync::Arc;
use std::vec::Vec;

use http::{Method, Response, StatusCode};

use super::backend::PolicyBackend;
use super::key::KeySource;
use crate::gcra::BucketKind;
use crate::quota::Quota;

/// What the layer does with a request whose partition key cannot be
/// extracted (no peer address, no key header, a custom function returning
/// `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MissingKey {
    /// Answer with this status (default: 500, a server misconfiguration
    /// such as a server that does not record peer addresses).
    Reject(StatusCode),
    /// Let the request through without charging this policy.
    Allow,
}

impl Default for MissingKey {
    fn default() -> Self {
        Self::Reject(StatusCode::INTERNAL_SERVER_ERROR)
    }
}

/// What a rejection handler is told.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Rejection<'a> {
    /// The name of the refusing policy (`"global"` for the global limiter
    /// unless renamed).
    pub policy: &'a str,
    /// True when the global limiter refused.
    pub global: bool,
    /// How long until the request could succeed.
    pub retry_after: Duration,
    /// The status the layer would send.
    pub status: StatusCode,
}

/// A custom rejection response. The layer adds `Retry-After` and the
/// `RateLimit` headers to it unless the handler set them itself.
pub type RejectionHandler = Arc<dyn Fn(&Rejection<'_>) -> Response<String> + Send + Sync>;

/// Queueing mode: wait up to `max_wait` instead of refusing at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueMode {
    /// Longest a request may wait.
    pub max_wait: Duration,
    /// Most requests waiting at once (each counts one permit).
    pub queue_limit: u64,
}

/// A rate-limiting policy: a quota, a partition key and the requests it
/// applies to.
///
/// ```
/// use core::time::Duration;
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
    pub(crate) kind: BucketKind,
    pub(crate) quota: Quota,
    pub(crate) prefixes: Vec<String>,
    pub(crate) methods: Option<Vec<Method>>,
    pub(crate) key: KeySource,
    pub(crate) max_keys: usize,
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
            .field("kind", &self.kind)
            .field("quota", &self.quota)
            .field("prefixes", &self.prefixes)
            .field("methods", &self.methods)
            .field("key", &self.key)
            .field("max_keys", &self.max_keys)
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
    /// A policy named `name` running `kind` with `quota`: no prefix (attach
    /// one with [`prefix`](Self::prefix)), one shared bucket
    /// ([`KeySource::Global`]).
    pub fn new(name: impl Into<String>, kind: BucketKind, quota: Quota) -> Self {
        Self {
            name: name.into(),
            kind,
            quota,
            prefixes: Vec::new(),
            methods: None,
            key: KeySource::Global,
            max_keys: DEFAULT_MAX_KEYS,
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

    /// Applies the policy to paths under `prefix` (segment-bounded, ASCII
    /// case-insensitive). May be called more than once.
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
    /// throttled, new keys share one overflow bucket.
    #[must_use]
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// Queueing mode: a request over the limit waits up to `max_wait` (with
    /// at most `queue_limit` waiting) instead of being refused at once.
    /// Only for policies with [`KeySource::Global`].
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

    /// A rejection handler for this policy; it overrides the layer's.
    #[must_use]
    pub fn on_rejected<F>(mut self, handler: F) -> Self
    where
        F: Fn(&Rejection<'_>) -> Response<String> + Send + Sync + 'static,
    {
        self.on_rejected = Some(Arc::new(handler));
        self
    }

    /// Keeps this policy's buckets in a remote backend (such as a
    /// [`RedisStore`](crate::redis::RedisStore), feature `redis`) instead
    /// of the layer's in-process table: the layer awaits the backend's
    /// decision for the request's partition key, so every replica pointing
    /// at the same store shares one limit. The policy's own quota still
    /// names the `RateLimit-Policy` header; give the backend the same
    /// quota. Not combinable with [`queue`](Self::queue) nor usable on the
    /// global limiter. When the backend reports that its store was
    /// unavailable, the response carries a
    /// [`StoreUnavailable`](super::StoreUnavailable) extension.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::http::{KeySource, Policy, RateLimitLayer};
    /// use tollgate::{ManualClock, Quota, RateLimiter};
    ///
    /// // Any `AsyncKeyedLimiter` works; in production a `RedisStore`.
    /// let backend = RateLimiter::token_bucket(Quota::per_second(5)?, ManualClock::new())?;
    /// let layer = RateLimitLayer::builder()
    ///     .policy(
    ///         Policy::token_bucket("api", Quota::per_second(5)?)
    ///             .prefix("/api")
    ///             .key(KeySource::PeerIp)
    ///             .backend(Arc::new(backend)),
    ///     )
    ///     .build()?;
    /// # let _ = layer;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn backend<B: PolicyBackend + 'static>(mut self, backend: Arc<B>) -> Self {
        self.backend = Some(backend);
        self
    }

    /// The policy's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The policy's quota.
    pub fn quota(&self) -> &Quota {
        &self.quota
    }
}

/// A layer that cannot be built, naming where the problem is
/// (`rules[2].burst: must be at least 1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    location: String,
    kind: ConfigErrorKind,
}

/// What is wrong in a [`ConfigError`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigErrorKind {
    /// A value outside what the field accepts; the text says what it must be.
    Invalid(&'static str),
    /// Two policies with the same name.
    DuplicateName,
    /// A document that does not parse (TOML or JSON syntax, unknown field,
    /// wrong type).
    Syntax(String),
}

impl ConfigError {
    pub(crate) fn invalid(location: impl ToString, what: &'static str) -> Self {
        Self {
            location: location.to_string(),
            kind: ConfigErrorKind::Invalid(what),
        }
    }

    pub(crate) fn new(location: impl ToString, kind: ConfigErrorKind) -> Self {
        Self {
            location: location.to_string(),
            kind,
        }
    }

    /// Where: `rules[2].burst`, `global.rate`, `policy "api".name`, ….
    pub fn location(&self) -> &str {
        &self.location
    }

    /// What.
    pub fn kind(&self) -> &ConfigErrorKind {
        &self.kind
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ConfigErrorKind::Invalid(what) => write!(f, "{}: {what}", self.location),
            ConfigErrorKind::DuplicateName => {
                write!(f, "{}: another rule has the same name", self.location)
            }
            ConfigErrorKind::Syntax(msg) if self.location.is_empty() => f.write_str(msg),
            ConfigErrorKind::Syntax(msg) => write!(f, "{}: {msg}", self.location),
        }
    }
}

impl core::error::Error for ConfigError {}
