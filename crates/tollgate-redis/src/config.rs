//! Configuration of a [`RedisStore`](super::RedisStore): algorithm, keys,
//! new-key budget, timeout, failure policy, refusal cache; and its
//! validation errors.

use core::time::Duration;
use std::vec::Vec;

use tollgate_core::gcra::{BucketKind, Gcra};
use tollgate_core::quota::Quota;

mod error;

pub use error::ConfigError;

/// Redis `TIME` resolves microseconds: intervals must be at least this long.
pub(crate) const SERVER_RESOLUTION_NANOS: u64 = 1_000;

/// Leads (`TAT − now`) the script computes must stay exact in a Lua double.
pub(crate) const MAX_LEAD_NANOS: u64 = 1 << 53;

/// What the store enforces per key.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteAlgorithm {
    /// A GCRA token or leaky bucket, with exactly the rules of [`Gcra`]
    /// (including its heal threshold, which here protects against a server
    /// clock that goes back, e.g. after a failover), in the rounded regime:
    /// the store runs [`Gcra::rounded`], the emission interval rounded up
    /// to whole nanoseconds, for every quota. (An in-process bucket keeps
    /// a fractional interval such as `per_second(3)`'s exactly; the store
    /// keeps the TAT format every replica of a fleet already shares, each
    /// interval under a nanosecond longer for such quotas.)
    Gcra(Gcra),
    /// A fixed window: at most `quota.permits()` per window of
    /// `quota.period()`, windows aligned on multiples of the period on the
    /// server's clock (as tollgate's in-process fixed window aligns on its
    /// clock). The period must be a whole number of microseconds (the
    /// server's resolution).
    FixedWindow(Quota),
}

/// What the store does when Redis errs or does not answer within the
/// timeout.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Admit the request; the permit's path is
    /// [`KeyedPath::Fallback`](tollgate_core::keyed::KeyedPath::Fallback).
    /// With a `ceiling`, admit only what a local token bucket enforcing that
    /// quota admits (one bucket per store instance, shared by all keys; use
    /// the per-replica share of the global quota).
    FailOpen {
        /// Optional local limit while the store is unavailable.
        ceiling: Option<Quota>,
    },
    /// Refuse the request with this `retry_after` (flagged as
    /// `StoreUnavailable`).
    FailClosed {
        /// The wait reported to the refused caller.
        retry_after: Duration,
    },
}

impl FailurePolicy {
    /// Fail-open without a ceiling: every request is admitted while the
    /// store is unavailable.
    #[must_use]
    pub const fn fail_open() -> Self {
        Self::FailOpen { ceiling: None }
    }

    /// Fail-open under a local ceiling (e.g. `global quota / replicas`).
    #[must_use]
    pub const fn fail_open_with_ceiling(ceiling: Quota) -> Self {
        Self::FailOpen {
            ceiling: Some(ceiling),
        }
    }

    /// Fail-closed: refuse with `retry_after` while the store is unavailable.
    #[must_use]
    pub const fn fail_closed(retry_after: Duration) -> Self {
        Self::FailClosed { retry_after }
    }
}

impl Default for FailurePolicy {
    /// Fail-open without a ceiling: a rate limiter should not take a
    /// service down with its cache. Choose fail-closed where abuse costs
    /// more than an outage.
    fn default() -> Self {
        Self::fail_open()
    }
}

/// The store's circuit breaker: after `failures` consecutive calls that
/// could not reach the server (connection errors or timeouts), the breaker
/// **opens**: every call is answered by the [`FailurePolicy`] at once,
/// without waiting for the server, and a background task probes it (a
/// `PING`) every `probe_interval`; the first answer closes the breaker and
/// calls go to the server again. Errors the server itself sends (a script
/// error, out of memory) prove it reachable: they do not count.
///
/// Without a breaker, a server that refuses connections costs every call
/// the whole timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CircuitBreaker {
    /// Consecutive failed calls that open the breaker (at least 1).
    pub(crate) failures: u32,
    /// Time between two probes while the breaker is open (positive): the
    /// longest the store stays open after the server is back.
    pub(crate) probe_interval: Duration,
}

impl CircuitBreaker {
    /// A breaker opening after `failures` consecutive failed calls and
    /// probing every `probe_interval`.
    pub(crate) const fn new(failures: u32, probe_interval: Duration) -> Self {
        Self {
            failures,
            probe_interval,
        }
    }
}

impl Default for CircuitBreaker {
    /// Opens after 3 consecutive failures (one slow answer does not open
    /// it), probes every 200 ms.
    fn default() -> Self {
        Self::new(3, Duration::from_millis(200))
    }
}

/// Everything a [`RedisStore`](super::RedisStore) needs besides the
/// connection. Built with chained setters; validated by
/// [`RedisStore::connect`](super::RedisStore::connect).
///
/// ```
/// use tollgate::redis::{FailurePolicy, RedisConfig};
/// use tollgate::Quota;
/// use std::time::Duration;
///
/// let config = RedisConfig::leaky_bucket(Quota::per_second(50)?)
///     .prefix(b"svc:uploads:")
///     .hash_tag(b"uploads") // all keys in one cluster slot
///     .timeout(Duration::from_millis(20))
///     .failure_policy(FailurePolicy::fail_closed(Duration::from_secs(1)))
///     .refusal_cache(16_384);
/// // the key's bytes are never sent: 32 hex digits of their SHA-256
/// assert_eq!(
///     config.redis_key(b"alice"),
///     b"svc:uploads:{uploads}2bd806c97f0e00af1a1fc3328fa763a9"
/// );
/// assert_eq!(config.redis_key(&[b'x'; 65_536]).len(), 12 + 9 + 32);
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisConfig {
    pub(crate) algorithm: RemoteAlgorithm,
    pub(crate) prefix: Vec<u8>,
    pub(crate) hash_tag: Option<Vec<u8>>,
    pub(crate) timeout: Duration,
    pub(crate) policy: FailurePolicy,
    pub(crate) refusal_cache: usize,
    pub(crate) reconnect_min_delay: Duration,
    pub(crate) reconnect_max_delay: Duration,
    pub(crate) breaker: Option<CircuitBreaker>,
    pub(crate) new_keys_per_second: u32,
}

/// Default per-call timeout: 50 ms.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(50);
/// Default refusal-cache capacity, in keys.
pub const DEFAULT_REFUSAL_CACHE: usize = 4096;
/// Length of the digest that ends every Redis key (hex digits).
pub const KEY_DIGEST_LEN: usize = 32;
/// Default key prefix.
pub const DEFAULT_PREFIX: &[u8] = b"tollgate:";
/// Default budget of new Redis keys per second and store instance
/// ([`RedisConfig::new_keys_per_second`]).
pub const DEFAULT_NEW_KEYS_PER_SECOND: u32 = 1_000;
/// What ends the name of a rule's overflow key
/// ([`RedisConfig::overflow_key`]): not 32 hex digits, so it is never a
/// client's key.
pub const OVERFLOW_KEY_SUFFIX: &[u8] = b"overflow";

impl RedisConfig {
    /// A store enforcing `algorithm`, with the defaults: prefix
    /// `"tollgate:"`, no hash tag, at most 1,000 new keys per second (burst
    /// 1,000), 50 ms timeout, fail-open, a refusal cache of 4096 keys,
    /// reconnect backoff from 10 ms to 1 s.
    #[must_use]
    pub fn new(algorithm: RemoteAlgorithm) -> Self {
        Self {
            algorithm,
            prefix: DEFAULT_PREFIX.to_vec(),
            hash_tag: None,
            timeout: DEFAULT_TIMEOUT,
            policy: FailurePolicy::default(),
            refusal_cache: DEFAULT_REFUSAL_CACHE,
            reconnect_min_delay: Duration::from_millis(10),
            reconnect_max_delay: Duration::from_secs(1),
            breaker: Some(CircuitBreaker::default()),
            new_keys_per_second: DEFAULT_NEW_KEYS_PER_SECOND,
        }
    }

    /// A token bucket per key (burst at once, then the rate).
    #[must_use]
    pub fn token_bucket(quota: Quota) -> Self {
        Self::new(RemoteAlgorithm::Gcra(Gcra::new(
            BucketKind::TokenBucket,
            quota,
        )))
    }

    /// A strict-pacing leaky bucket per key.
    #[must_use]
    pub fn leaky_bucket(quota: Quota) -> Self {
        Self::new(RemoteAlgorithm::Gcra(Gcra::new(
            BucketKind::LeakyBucket,
            quota,
        )))
    }

    /// A fixed window per key: `quota.permits()` per `quota.period()`.
    #[must_use]
    pub fn fixed_window(quota: Quota) -> Self {
        Self::new(RemoteAlgorithm::FixedWindow(quota))
    }

    /// The key prefix (the limiter's namespace), as raw bytes. Limiters with
    /// different quotas must use different prefixes; as every key ends in a
    /// digest of fixed length, two limiters share keys only if their
    /// prefixes (and hash tags) are equal.
    #[must_use]
    pub fn prefix(mut self, prefix: &[u8]) -> Self {
        self.prefix = prefix.to_vec();
        self
    }

    /// A cluster hash tag: keys become `prefix{tag}key`, so all of this
    /// limiter's keys share one slot. The tag must not contain `{` or `}`.
    #[must_use]
    pub fn hash_tag(mut self, tag: &[u8]) -> Self {
        self.hash_tag = Some(tag.to_vec());
        self
    }

    /// The budget of new keys: at most `rate` checks per second (with a
    /// burst of one second's worth, `rate`) may create a Redis key, per
    /// store instance (per replica). Default 1,000.
    ///
    /// A check of a key that exists never needs the budget. A check of an
    /// absent key takes one from a local token bucket; when it is empty,
    /// the key is not created and the check is answered by the rule's one
    /// [overflow key](Self::overflow_key), running the same algorithm and
    /// shared by every key refused a slot (the answer's path is
    /// [`KeyedPath::SharedOverflow`](tollgate_core::keyed::KeyedPath::SharedOverflow)),
    /// as an in-process table's
    /// [`OverflowPolicy::SharedBucket`](tollgate_core::keyed::OverflowPolicy::SharedBucket).
    /// This bounds the rule's live keys, so Redis memory: see
    /// [Memory](crate::guide#memory) for the arithmetic. Set it above the
    /// rate at which legitimate clients arrive (or come back after their
    /// bucket has refilled, or, for a fixed window, start a new window);
    /// 0 is [`ConfigError::ZeroNewKeyRate`].
    ///
    /// ```
    /// use tollgate::redis::RedisConfig;
    /// use tollgate::Quota;
    ///
    /// let hourly = Quota::per_hour(60)?.with_burst(10)?; // keys live up to 600 s
    /// let config = RedisConfig::token_bucket(hourly).new_keys_per_second(100);
    /// assert_eq!(config.new_key_rate(), 100);
    /// // at most 100 + 100 × 600 = 60,100 live keys per replica (about 9 MB)
    /// assert_eq!(config.max_live_keys_per_replica(), 60_100);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn new_keys_per_second(mut self, rate: u32) -> Self {
        self.new_keys_per_second = rate;
        self
    }

    /// The most one call may wait for the store (default 50 ms); after it,
    /// the failure policy answers.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// What to do when the store errs or times out (default fail-open).
    #[must_use]
    pub fn failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The refusal cache's capacity in keys (rounded up to a power of two;
    /// 0 disables the cache).
    #[must_use]
    pub fn refusal_cache(mut self, capacity: usize) -> Self {
        self.refusal_cache = capacity;
        self
    }

    /// The circuit breaker (see the [module docs](super)): after
    /// `failures` consecutive calls that could not reach the server
    /// (at least 1), every call is answered by the [`FailurePolicy`] at
    /// once while a `PING` probes the server every `probe_interval`
    /// (positive); the first answer closes it. Default: 3 failures (one
    /// slow answer does not open it), a probe every 200 ms. The store
    /// counts the openings and closings
    /// ([`RedisStore::circuit_openings`](crate::RedisStore::circuit_openings),
    /// [`circuit_closings`](crate::RedisStore::circuit_closings)).
    #[must_use]
    pub fn circuit_breaker(mut self, failures: u32, probe_interval: Duration) -> Self {
        self.breaker = Some(CircuitBreaker::new(failures, probe_interval));
        self
    }

    /// No circuit breaker: the server is asked on every call, each failing
    /// call waiting up to the timeout.
    #[must_use]
    pub fn no_circuit_breaker(mut self) -> Self {
        self.breaker = None;
        self
    }

    /// The reconnection backoff: the first retry after `min`, growing
    /// exponentially (with jitter) up to `max`.
    #[must_use]
    pub fn reconnect_backoff(mut self, min: Duration, max: Duration) -> Self {
        self.reconnect_min_delay = min;
        self.reconnect_max_delay = max;
        self
    }

    /// The algorithm enforced per key.
    #[must_use]
    pub fn algorithm(&self) -> RemoteAlgorithm {
        self.algorithm
    }

    /// The budget of new keys per second and store instance
    /// ([`new_keys_per_second`](Self::new_keys_per_second)).
    #[must_use]
    pub fn new_key_rate(&self) -> u32 {
        self.new_keys_per_second
    }

    /// The longest one key of this rule can live, in nanoseconds: the time
    /// a bucket takes to refill after the most a client can take
    /// (`capacity × T` for a token or leaky bucket, as the store runs it),
    /// or the window of a fixed window.
    #[must_use]
    pub fn max_key_lifetime(&self) -> Duration {
        Duration::from_nanos(match self.algorithm {
            RemoteAlgorithm::Gcra(gcra) => gcra_max_lead(&gcra.rounded()),
            RemoteAlgorithm::FixedWindow(quota) => quota.period_nanos(),
        })
    }

    /// The most keys one store instance can make live at once: `burst +
    /// rate × L` with the [new-key budget](Self::new_keys_per_second)'s
    /// rate and burst and `L` the [`max_key_lifetime`](Self::max_key_lifetime)
    /// in seconds (rounded up), saturating. A fleet of `r` replicas keeps
    /// at most `r ×` this, plus the one overflow key (see
    /// [Memory](crate::guide#memory)).
    #[must_use]
    pub fn max_live_keys_per_replica(&self) -> u64 {
        let rate = u64::from(self.new_keys_per_second);
        let lifetime = self.max_key_lifetime();
        let secs = lifetime
            .as_secs()
            .saturating_add(u64::from(lifetime.subsec_nanos() > 0));
        rate.saturating_add(rate.saturating_mul(secs))
    }

    /// The Redis key of the rule's overflow bucket: `prefix ++ {tag}? ++
    /// "overflow"`. It answers the checks of absent keys when the
    /// [new-key budget](Self::new_keys_per_second) is spent; every client
    /// key ends in 32 hex digits, so none is ever this one.
    ///
    /// ```
    /// use tollgate::redis::RedisConfig;
    /// use tollgate::Quota;
    ///
    /// let config = RedisConfig::token_bucket(Quota::per_second(5)?).prefix(b"api:");
    /// assert_eq!(config.overflow_key(), b"api:overflow");
    /// assert_eq!(config.hash_tag(b"t").overflow_key(), b"api:{t}overflow");
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn overflow_key(&self) -> Vec<u8> {
        let mut out = self.key_namespace();
        out.extend_from_slice(OVERFLOW_KEY_SUFFIX);
        out
    }

    /// `prefix ++ {tag}?`: what every key of this rule starts with.
    fn key_namespace(&self) -> Vec<u8> {
        let tag_len = self.hash_tag.as_ref().map_or(0, |t| t.len() + 2);
        let mut out = Vec::with_capacity(self.prefix.len() + tag_len + KEY_DIGEST_LEN);
        out.extend_from_slice(&self.prefix);
        if let Some(tag) = &self.hash_tag {
            out.push(b'{');
            out.extend_from_slice(tag);
            out.push(b'}');
        }
        out
    }

    /// The Redis key for a caller's `key`: `prefix ++ {tag}? ++ digest`,
    /// where `digest` is the first 128 bits of the key's SHA-256 in 32
    /// lower-case hex digits. Fixed size whatever the key's length, so a
    /// client sending huge keys cannot fill the server; the same on every
    /// replica (no secret), and SHA-256 resists a client crafting a key
    /// whose digest is another's. Because the digest has a fixed length,
    /// two keys are equal only when their prefixes (and tags) are equal
    /// and so are their digests.
    #[must_use]
    pub fn redis_key(&self, key: &[u8]) -> Vec<u8> {
        use sha2::Digest;
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = self.key_namespace();
        let hash = sha2::Sha256::digest(key);
        for b in &hash[..KEY_DIGEST_LEN / 2] {
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0xf)]);
        }
        out
    }

    /// Checks the configuration; returns the quota of the new-key budget.
    pub(crate) fn validate(&self) -> Result<Quota, ConfigError> {
        if self.timeout.is_zero() {
            return Err(ConfigError::ZeroTimeout);
        }
        // burst = rate: one second's worth
        let new_keys = match Quota::per_second(self.new_keys_per_second) {
            Ok(quota) => quota,
            Err(tollgate_core::ConfigError::ZeroPermits) => {
                return Err(ConfigError::ZeroNewKeyRate);
            }
            Err(e) => return Err(ConfigError::NewKeyRate(e)),
        };
        if let Some(b) = self.breaker
            && (b.failures == 0 || b.probe_interval.is_zero())
        {
            return Err(ConfigError::InvalidCircuitBreaker);
        }
        if let Some(tag) = &self.hash_tag
            && (tag.is_empty() || tag.iter().any(|&b| b == b'{' || b == b'}'))
        {
            return Err(ConfigError::InvalidHashTag);
        }
        match self.algorithm {
            RemoteAlgorithm::Gcra(gcra) => {
                let gcra = gcra.rounded(); // what the store runs
                if let Err(e) = tollgate_core::error::check_clock(
                    gcra.interval(),
                    core::time::Duration::from_nanos(SERVER_RESOLUTION_NANOS),
                ) {
                    return Err(ConfigError::BelowServerResolution(e));
                }
                let max_lead = gcra_max_lead(&gcra);
                let heal_limit = max_lead.saturating_add(tollgate_core::time::duration_to_nanos(
                    gcra.heal_threshold(),
                ));
                if heal_limit >= MAX_LEAD_NANOS {
                    return Err(ConfigError::LeadTooLong {
                        lead_nanos: heal_limit,
                    });
                }
            }
            RemoteAlgorithm::FixedWindow(quota) => {
                if quota.burst() != quota.permits() {
                    return Err(ConfigError::Quota(
                        tollgate_core::ConfigError::BurstNotSupported {
                            burst: quota.burst(),
                            permits: quota.permits(),
                        },
                    ));
                }
                let period = quota.period_nanos();
                if period % SERVER_RESOLUTION_NANOS != 0 {
                    return Err(ConfigError::WindowNotWholeMicroseconds {
                        period_nanos: period,
                    });
                }
                if period >= MAX_LEAD_NANOS {
                    return Err(ConfigError::LeadTooLong { lead_nanos: period });
                }
            }
        }
        Ok(new_keys)
    }
}

/// `capacity × T`: the largest lead a bucket can have (`gcra` in the
/// rounded regime, as the store runs it).
pub(crate) fn gcra_max_lead(gcra: &Gcra) -> u64 {
    use tollgate_core::limiter::Algorithm;
    gcra.interval_nanos()
        .saturating_mul(u64::from(Algorithm::capacity(gcra)))
}

#[cfg(test)]
mod tests;
