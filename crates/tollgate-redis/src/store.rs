//! [`RedisStore`]: the keyed limiter whose state lives in Redis.

use core::fmt;
use core::time::Duration;
use std::string::{String, ToString};
use std::vec::Vec;

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use ::redis::cluster::{ClusterClient, ClusterConfig};
use ::redis::cluster_async::ClusterConnection;
use ::redis::{Client, ErrorKind, FromRedisValue, IntoConnectionInfo, RedisError, Script, Value};

use super::breaker::BreakerState;
use super::cache::RefusalCache;
use super::config::{
    CircuitBreaker, ConfigError, FailurePolicy, RedisConfig, RemoteAlgorithm, gcra_max_lead,
};
use super::script::{FIXED_WINDOW_LUA, GCRA_LUA};
use tollgate_core::clock::{Clock, StdClock};
use tollgate_core::gcra::{BucketKind, Gcra};
use tollgate_core::keyed::KeyedPath;
use tollgate_core::limiter::{Algorithm, Bucket, Limiter};
use tollgate_core::refusal::Refusal;
use tollgate_core::snapshot::Snapshot;
use tollgate_core::sync::{AtomicU64, Ordering};

/// The fixed window's heal threshold (as the in-process window's default):
/// a stored window starting more than this after the server's `now` is
/// re-dated to the current window.
const FIXED_WINDOW_HEAL_THRESHOLD_NANOS: u64 = 1_000_000_000;

/// Why one call to the store produced no decision.
#[non_exhaustive]
#[derive(Debug)]
pub enum StoreError {
    /// The request can never succeed (more permits than the capacity; the
    /// refusal [`is_never`](Refusal::is_never)); the store was not asked.
    Capacity(Refusal<'static>),
    /// The store did not answer within the configured timeout.
    Timeout(Duration),
    /// Redis returned an error or the connection failed.
    Redis(RedisError),
    /// The script's reply did not have the expected shape.
    UnexpectedReply,
    /// The circuit breaker is open (the server failed the last calls and
    /// has not answered a probe since): the server was not asked.
    CircuitOpen,
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Capacity(_) => f.write_str("the request can never be granted"),
            Self::Timeout(d) => write!(f, "rate-limit store did not answer within {d:?}"),
            Self::Redis(_) => f.write_str("rate-limit store error"),
            Self::UnexpectedReply => f.write_str("rate-limit store sent an unexpected reply"),
            Self::CircuitOpen => {
                f.write_str("rate-limit store unreachable (circuit breaker open): not asked")
            }
        }
    }
}

impl core::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Self::Capacity(e) => Some(e),
            Self::Redis(e) => Some(e),
            _ => None,
        }
    }
}

/// The store's raw answer to one call: the decision and the server time it
/// was taken at.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreReply {
    /// The verdict, with the same fields an in-process limiter gives: the
    /// snapshot after an admission, or the refusal.
    pub result: Result<Snapshot, Refusal<'static>>,
    /// The server's `TIME` the script used, in nanoseconds since the Unix
    /// epoch: drive an in-process limiter with it to compare.
    pub server_time_nanos: u64,
}

/// Permits taken from a [`RedisStore`]: the bucket's state right after
/// the admission, and which state answered — the store
/// ([`KeyedPath::Own`]) or, when it could not be asked, the failure policy
/// ([`KeyedPath::Fallback`]: fail-open admits without the shared limit, or
/// under its local ceiling). A refusal says the same through
/// [`Refusal::path`] (and [`KeyedPath::Cached`] for the refusal cache).
///
/// A rate's permits are spent: dropping it does nothing;
/// [`RedisStore::refund`] gives back what went unused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[must_use = "a permit that is not looked at limits nothing"]
pub struct StorePermit {
    snapshot: Snapshot,
    path: KeyedPath,
}

impl StorePermit {
    /// The bucket's state right after the admission (what `RateLimit`
    /// headers report).
    pub const fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// Which state answered: [`KeyedPath::Own`] (the store) or
    /// [`KeyedPath::Fallback`] (the failure policy).
    pub const fn path(&self) -> KeyedPath {
        self.path
    }

    /// True if the store could not be asked and the failure policy
    /// admitted (count it: the shared limit was not consulted).
    pub const fn store_unavailable(&self) -> bool {
        matches!(self.path, KeyedPath::Fallback)
    }
}

/// A keyed rate limiter whose state lives in Redis or Valkey, shared by every
/// process that uses the same server and prefix. See the
/// [module docs](super) for the guarantees.
///
/// Cheap to share behind an `Arc`; every method takes `&self` and may be
/// called from many tasks at once (one multiplexed connection).
///
/// Runnable without a server: nothing listens on port 1, so every call
/// meets the failure policy within the timeout.
///
/// ```
/// use std::time::{Duration, Instant};
/// use tollgate::redis::{FailurePolicy, RedisConfig, RedisStore};
/// use tollgate::keyed::KeyedPath;
/// use tollgate::Quota;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let quota = Quota::per_minute(60)?.with_burst(10)?;
/// let closed = RedisStore::connect(
///     "redis://127.0.0.1:1/",
///     RedisConfig::token_bucket(quota)
///         .timeout(Duration::from_millis(20))
///         .failure_policy(FailurePolicy::fail_closed(Duration::from_secs(2))),
/// )
/// .await?;
/// let start = Instant::now();
/// let refused = closed.check_n(b"api-key-123", 1).await.unwrap_err();
/// assert_eq!(refused.path(), KeyedPath::Fallback); // the failure policy answered
/// assert_eq!(refused.retry_after(), Duration::from_secs(2));
/// assert!(start.elapsed() < Duration::from_secs(1));
///
/// // n above the burst can never succeed: refused at once, the store not asked
/// let never = closed.check_n(b"api-key-123", 11).await.unwrap_err();
/// assert!(never.is_never() && never.limit() == 10);
/// # Ok(()) }
/// ```
pub struct RedisStore {
    connection: Connection,
    config: RedisConfig,
    script: Script,
    /// Algorithm arguments after op and n, as decimal strings.
    args: Vec<String>,
    capacity: u32,
    /// The bucket the script runs: the configured one,
    /// [`rounded`](Gcra::rounded) to whole nanoseconds.
    gcra: Option<Gcra>,
    cache: Option<RefusalCache>,
    ceiling: Option<Bucket<Gcra>>,
    clock: StdClock,
    /// Calls answered by the failure policy (for metrics).
    failures: AtomicU64,
    /// The circuit breaker's state (shared with its probe task).
    breaker: std::sync::Arc<BreakerState>,
}

/// True when `e` means the server could not be reached (connection
/// refused, dropped, not ready, I/O), as opposed to an error the server
/// itself answered (which proves it reachable) or a reply of the wrong
/// type.
fn unreachable(e: &RedisError) -> bool {
    !matches!(
        e.kind(),
        ErrorKind::Server(_)
            | ErrorKind::Extension
            | ErrorKind::Parse
            | ErrorKind::UnexpectedReturnType
            | ErrorKind::AuthenticationFailed
    )
}

/// A single server (or a primary behind a stable address) or a cluster.
#[derive(Clone)]
enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("config", &self.config)
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// A store on the server at `info` (a `redis://` URL, a
    /// [`redis::ConnectionInfo`](::redis::ConnectionInfo), …).
    ///
    /// The connection is made lazily and re-made in the background with
    /// exponential backoff whenever it breaks, so this succeeds even while
    /// the server is down (calls then follow the failure policy until it is
    /// back). Must be called within a tokio runtime with its timer enabled
    /// (`#[tokio::main]`, or a runtime built with `enable_all()`).
    ///
    /// # Errors
    /// [`ConfigError`] for an invalid configuration or connection info,
    /// or [`ConfigError::NoTokioRuntime`] outside a tokio runtime.
    pub async fn connect<T: IntoConnectionInfo>(
        info: T,
        config: RedisConfig,
    ) -> Result<Self, ConfigError> {
        Self::connect_lazy(info, config)
    }

    /// [`connect`](Self::connect) for synchronous callers (such as
    /// building an HTTP layer from a configuration file): it never waits
    /// for the server either, the connection is made on first use. Must be
    /// called within a tokio runtime.
    ///
    /// # Errors
    /// As [`connect`](Self::connect).
    pub fn connect_lazy<T: IntoConnectionInfo>(
        info: T,
        config: RedisConfig,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(ConfigError::NoTokioRuntime);
        }
        let client = Client::open(info).map_err(ConfigError::Connection)?;
        let manager_config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(config.timeout))
            .set_response_timeout(None)
            .set_min_delay(config.reconnect_min_delay)
            .set_max_delay(config.reconnect_max_delay)
            .set_number_of_retries(3);
        let connection = ConnectionManager::new_lazy_with_config(client, manager_config)
            .map_err(ConfigError::Connection)?;
        Ok(Self::with_connection(
            Connection::Single(connection),
            config,
        ))
    }

    /// A store on a Redis (or Valkey) Cluster reached through any of
    /// `nodes`. Each call is routed to the shard owning its key (the
    /// scripts touch exactly one key); `MOVED`/`ASK` redirections and
    /// topology changes are followed by the cluster client. Use
    /// [`RedisConfig::hash_tag`] to keep one limiter's keys in one slot.
    ///
    /// Like [`connect`](Self::connect), the connections are made in the
    /// background: this succeeds while the cluster is unreachable. Must be
    /// called within a tokio runtime.
    ///
    /// # Errors
    /// [`ConfigError`] for an invalid configuration or node list.
    pub async fn connect_cluster<T: IntoConnectionInfo>(
        nodes: impl IntoIterator<Item = T>,
        config: RedisConfig,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(ConfigError::NoTokioRuntime);
        }
        let client = ClusterClient::builder(nodes)
            .connection_timeout(config.timeout)
            .build()
            .map_err(ConfigError::Connection)?;
        let cluster_config = ClusterConfig::new().set_connection_timeout(config.timeout);
        let connection = client.get_pending_async_connection_with_config(cluster_config);
        Ok(Self::with_connection(
            Connection::Cluster(connection),
            config,
        ))
    }

    fn with_connection(connection: Connection, config: RedisConfig) -> Self {
        let (script, args, capacity, gcra) = match config.algorithm {
            RemoteAlgorithm::Gcra(gcra) => {
                // the script keeps TATs in nanoseconds: the rounded regime
                let gcra = gcra.rounded();
                let max_lead = gcra_max_lead(&gcra);
                let empty_lead = match gcra.kind() {
                    BucketKind::TokenBucket => max_lead,
                    BucketKind::LeakyBucket => gcra.interval_nanos(),
                };
                let heal_limit = max_lead.saturating_add(tollgate_core::time::duration_to_nanos(
                    gcra.heal_threshold(),
                ));
                let leaky = u8::from(gcra.kind() == BucketKind::LeakyBucket);
                let args = [
                    gcra.interval_nanos(),
                    max_lead,
                    empty_lead,
                    heal_limit,
                    u64::from(leaky),
                ]
                .iter()
                .map(u64::to_string)
                .collect();
                (Script::new(GCRA_LUA), args, gcra.capacity(), Some(gcra))
            }
            RemoteAlgorithm::FixedWindow(quota) => {
                let args = [
                    u64::from(quota.permits()),
                    quota.period_nanos() / 1_000,
                    FIXED_WINDOW_HEAL_THRESHOLD_NANOS / 1_000,
                ]
                .iter()
                .map(u64::to_string)
                .collect();
                (Script::new(FIXED_WINDOW_LUA), args, quota.permits(), None)
            }
        };
        let cache = (config.refusal_cache > 0).then(|| RefusalCache::new(config.refusal_cache));
        let ceiling = match config.policy {
            FailurePolicy::FailOpen {
                ceiling: Some(quota),
            } => Some(Bucket::token_bucket(quota)),
            _ => None,
        };
        Self {
            connection,
            config,
            script,
            args,
            capacity,
            gcra,
            cache,
            ceiling,
            clock: StdClock::new(),
            failures: AtomicU64::new(0),
            breaker: std::sync::Arc::default(),
        }
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &RedisConfig {
        &self.config
    }

    /// The most permits one request can ever take.
    #[must_use]
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// The Redis key holding `key`'s state.
    #[must_use]
    pub fn redis_key(&self, key: &[u8]) -> Vec<u8> {
        self.config.redis_key(key)
    }

    /// The SHA1 of the script this store runs (as `EVALSHA` sends it).
    #[must_use]
    pub fn script_sha1(&self) -> &str {
        self.script.get_hash()
    }

    /// Tries to take one permit for `key` (see [`check_n`](Self::check_n)).
    ///
    /// # Errors
    /// The [`Refusal`].
    pub async fn check(&self, key: &[u8]) -> Result<StorePermit, Refusal<'static>> {
        self.check_n(key, 1).await
    }

    /// Tries to take `n` permits for `key` (`n = 0` peeks), through the
    /// refusal cache and the failure policy: never waits longer than the
    /// timeout and never returns a store error. A request of more permits
    /// than the capacity is refused [`never`](Refusal::is_never) without
    /// asking the store.
    ///
    /// # Errors
    /// The [`Refusal`]: the store's, the refusal cache's
    /// ([`KeyedPath::Cached`]) or the failure policy's
    /// ([`KeyedPath::Fallback`]).
    pub async fn check_n(&self, key: &[u8], n: u32) -> Result<StorePermit, Refusal<'static>> {
        if n > self.capacity {
            return Err(self.exceeded(n));
        }
        if n > 0
            && let Some(cache) = &self.cache
            && let Some(denied) = cache.lookup(key, n, self.clock.now().as_nanos())
        {
            return Err(denied.on_path(KeyedPath::Cached));
        }
        match self.try_check_n(key, n).await {
            Ok(reply) => {
                if let (Some(cache), Err(denied)) = (&self.cache, reply.result) {
                    cache.insert(key, n, denied, self.clock.now().as_nanos());
                }
                reply.result.map(|snapshot| StorePermit {
                    snapshot,
                    path: KeyedPath::Own,
                })
            }
            Err(StoreError::Capacity(e)) => Err(e),
            Err(_) => self.unavailable(n),
        }
    }

    /// The refusal of `n` permits, more than the capacity.
    fn exceeded(&self, n: u32) -> Refusal<'static> {
        Refusal::above(n, self.capacity)
    }

    /// How many calls so far the store failed to answer (error or timeout)
    /// and the failure policy answered instead: a counter for metrics and
    /// alerts. [`try_check_n`](Self::try_check_n) gives the errors
    /// themselves.
    #[must_use]
    pub fn store_failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// True while the circuit breaker is open: calls are answered by the
    /// failure policy at once (see [`RedisConfig::circuit_breaker`]).
    #[must_use]
    pub fn circuit_open(&self) -> bool {
        self.breaker.is_open()
    }

    /// How many times the circuit breaker has opened.
    #[must_use]
    pub fn circuit_openings(&self) -> u64 {
        self.breaker.opened.load(Ordering::Relaxed)
    }

    /// Records the outcome of one call in the breaker; opens it (and starts
    /// its probe) after enough consecutive failures.
    fn record(&self, result: &Result<Value, StoreError>) {
        let Some(config) = self.config.breaker else {
            return;
        };
        let failed = match result {
            Err(StoreError::Timeout(_)) => true,
            Err(StoreError::Redis(e)) => unreachable(e),
            _ => false,
        };
        if !failed {
            self.breaker.consecutive.store(0, Ordering::Relaxed);
        } else if self.breaker.fail(config.failures) {
            tracing_breaker_opened();
            self.spawn_probe(config);
        }
    }

    /// A task that `PING`s the server every `probe_interval` while the
    /// breaker is open, and closes it at the first answer. It ends then, or
    /// when the store is dropped. Without a tokio runtime (cannot happen:
    /// the store needs one), the breaker closes after one interval and the
    /// next call probes.
    fn spawn_probe(&self, config: CircuitBreaker) {
        let weak = std::sync::Arc::downgrade(&self.breaker);
        let connection = self.connection.clone();
        let timeout = self.config.timeout;
        let probe = async move {
            loop {
                tokio::time::sleep(config.probe_interval).await;
                let Some(state) = weak.upgrade() else {
                    return; // the store is gone
                };
                if !state.is_open() {
                    return;
                }
                let ping = async {
                    let mut cmd = ::redis::cmd("PING");
                    let cmd = &mut cmd;
                    match connection.clone() {
                        Connection::Single(mut c) => cmd.query_async::<Value>(&mut c).await,
                        Connection::Cluster(mut c) => cmd.query_async::<Value>(&mut c).await,
                    }
                };
                if let Ok(Ok(_)) = tokio::time::timeout(timeout, ping).await {
                    state.close();
                    return;
                }
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => drop(handle.spawn(probe)),
            Err(_) => self.breaker.close(),
        }
    }

    /// The failure policy's answer.
    fn unavailable(&self, n: u32) -> Result<StorePermit, Refusal<'static>> {
        self.failures.fetch_add(1, Ordering::Relaxed);
        let decision = match self.config.policy {
            FailurePolicy::FailClosed { retry_after } => {
                let retry = u64::try_from(retry_after.as_nanos()).unwrap_or(u64::MAX);
                Err(Refusal::from_nanos(
                    retry,
                    Snapshot::from_nanos(self.capacity, 0, retry),
                ))
            }
            FailurePolicy::FailOpen { .. } => match &self.ceiling {
                Some(bucket) => {
                    let n = n.min(bucket.capacity(&()));
                    let now = self.clock.now();
                    bucket.check_n(n, now).map(|()| bucket.snapshot(now))
                }
                None => Ok(Snapshot::from_nanos(self.capacity, self.capacity, 0)),
            },
        };
        decision
            .map(|snapshot| StorePermit {
                snapshot,
                path: KeyedPath::Fallback,
            })
            .map_err(|refusal| refusal.on_path(KeyedPath::Fallback))
    }

    /// One store call for `n` permits of `key`, without cache or failure
    /// policy: the raw answer or why there is none. Still bounded by the
    /// timeout.
    ///
    /// # Errors
    /// [`StoreError`].
    pub async fn try_check_n(&self, key: &[u8], n: u32) -> Result<StoreReply, StoreError> {
        if n > self.capacity {
            return Err(StoreError::Capacity(self.exceeded(n)));
        }
        let reply = self.call("c", key, n).await?;
        self.reply_to_decision(reply)
    }

    /// Gives back `n` permits of an earlier admission for `key` (never above
    /// the capacity), and forgets any cached refusal of `key`. The reply
    /// carries the bucket's snapshot after the refund (as an `Allowed`).
    ///
    /// # Errors
    /// [`StoreError`] if the store could not be reached in time.
    pub async fn refund(&self, key: &[u8], n: u32) -> Result<StoreReply, StoreError> {
        if let Some(cache) = &self.cache {
            cache.forget(key);
        }
        let reply = self.call("r", key, n.min(self.capacity)).await?;
        self.reply_to_decision(reply)
    }

    /// The state of `key`'s bucket now, taking nothing.
    ///
    /// # Errors
    /// [`StoreError`] if the store could not be reached in time.
    pub async fn snapshot(&self, key: &[u8]) -> Result<Snapshot, StoreError> {
        self.try_check_n(key, 0).await.map(|r| match r.result {
            Ok(s) => s,
            Err(refusal) => *refusal.snapshot(),
        })
    }

    /// How long until `n` permits of `key` would be granted, taking nothing.
    ///
    /// # Errors
    /// [`StoreError`] if `n` can never be granted or the store could not be
    /// reached in time.
    pub async fn time_until_ready(&self, key: &[u8], n: u32) -> Result<Duration, StoreError> {
        if n > self.capacity {
            return Err(StoreError::Capacity(self.exceeded(n)));
        }
        if n == 0 {
            return Ok(Duration::ZERO);
        }
        let reply = self.call("c", key, 0).await?;
        wait_from_peek(self.gcra, self.capacity, n, reply)
    }

    /// Runs the script once for `op` on `key`, within the timeout; at once
    /// [`StoreError::CircuitOpen`] while the breaker is open.
    async fn call(&self, op: &str, key: &[u8], n: u32) -> Result<[i64; 5], StoreError> {
        if self.breaker.is_open() {
            return Err(StoreError::CircuitOpen);
        }
        let redis_key = self.config.redis_key(key);
        let mut invocation = self.script.key(redis_key);
        invocation.arg(op).arg(n);
        for a in &self.args {
            invocation.arg(a.as_str());
        }
        let call = async {
            match self.connection.clone() {
                Connection::Single(mut c) => invocation.invoke_async::<Value>(&mut c).await,
                Connection::Cluster(mut c) => invocation.invoke_async::<Value>(&mut c).await,
            }
        };
        let result = match tokio::time::timeout(self.config.timeout, call).await {
            Err(_) => Err(StoreError::Timeout(self.config.timeout)),
            Ok(Err(e)) => Err(StoreError::Redis(e)),
            Ok(Ok(value)) => Ok(value),
        };
        self.record(&result);
        decode_reply(result?)
    }

    fn reply_to_decision(&self, reply: [i64; 5]) -> Result<StoreReply, StoreError> {
        reply_to_decision(self.gcra, self.capacity, reply)
    }
}

/// The script's reply as its five integers: an array of exactly five
/// integers (or integer strings), as both scripts return. Anything else
/// (a shorter or longer array, nil, a status, text) is
/// [`StoreError::UnexpectedReply`]; never panics.
pub(crate) fn decode_reply(value: Value) -> Result<[i64; 5], StoreError> {
    let values = Vec::<i64>::from_redis_value(value).map_err(|_| StoreError::UnexpectedReply)?;
    values.try_into().map_err(|_| StoreError::UnexpectedReply)
}

/// The decision in a script's reply, for a store running `gcra` (a
/// bucket) or, for `None`, a fixed window of `capacity`. A pure function
/// of the reply: negative fields are [`StoreError::UnexpectedReply`],
/// out-of-range ones saturate; never panics.
pub(crate) fn reply_to_decision(
    gcra: Option<Gcra>,
    capacity: u32,
    reply: [i64; 5],
) -> Result<StoreReply, StoreError> {
    // GCRA: {allowed, lead, retry_after, now_s, now_us}
    // fixed window: {allowed, count, until_end_us, now_s, now_us}
    let [allowed, level, wait, now_s, now_us] = reply;
    let server_time = non_negative(now_s)?
        .saturating_mul(1_000_000_000)
        .saturating_add(non_negative(now_us)?.saturating_mul(1_000));
    let decision = match gcra {
        Some(gcra) => {
            let snapshot = gcra.snapshot_for_lead(Duration::from_nanos(non_negative(level)?));
            if allowed == 1 {
                Ok(snapshot)
            } else {
                Err(Refusal::from_nanos(non_negative(wait)?, snapshot))
            }
        }
        None => {
            let count = u32::try_from(non_negative(level)?).unwrap_or(u32::MAX);
            let until_end = non_negative(wait)?.saturating_mul(1_000);
            // as in-process: a window with nothing taken is already full
            let reset = if count == 0 { 0 } else { until_end };
            let remaining = capacity.saturating_sub(count);
            let snapshot = Snapshot::from_nanos(capacity, remaining, reset);
            if allowed == 1 {
                Ok(snapshot)
            } else {
                Err(Refusal::from_nanos(until_end, snapshot))
            }
        }
    };
    Ok(StoreReply {
        result: decision,
        server_time_nanos: server_time,
    })
}

/// The wait until `n` permits would be granted, from a peek's reply (see
/// [`RedisStore::time_until_ready`]). Pure; never panics.
pub(crate) fn wait_from_peek(
    gcra: Option<Gcra>,
    capacity: u32,
    n: u32,
    reply: [i64; 5],
) -> Result<Duration, StoreError> {
    let [_, level, until_end_us, _, _] = reply;
    let wait = match gcra {
        Some(gcra) => {
            let lead = non_negative(level)?;
            let admit_lead = match gcra.kind() {
                BucketKind::TokenBucket => gcra_max_lead(&gcra)
                    .saturating_sub(u64::from(n).saturating_mul(gcra.interval_nanos())),
                BucketKind::LeakyBucket => 0,
            };
            lead.saturating_sub(admit_lead)
        }
        None => {
            let count = non_negative(level)?;
            if count.saturating_add(u64::from(n)) > u64::from(capacity) {
                non_negative(until_end_us)?.saturating_mul(1_000)
            } else {
                0
            }
        }
    };
    Ok(Duration::from_nanos(wait))
}

fn tracing_breaker_opened() {
    #[cfg(feature = "tracing")]
    tracing::warn!(
        "rate-limit store unreachable: circuit breaker open, the failure policy answers until a probe succeeds"
    );
}

fn non_negative(v: i64) -> Result<u64, StoreError> {
    u64::try_from(v).map_err(|_| StoreError::UnexpectedReply)
}
