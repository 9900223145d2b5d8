//! [`RedisStore`]: the keyed limiter whose state lives in Redis.
//!
//! This file holds the store's types (its errors, replies and permits, the
//! store and its connection) and its accessors; the methods live by concept
//! in the submodules: making the store (`connect`), the check path
//! (`check`), the failure policy and circuit breaker (`outage`), and
//! decoding the script's replies (`reply`).

use core::fmt;
use core::time::Duration;
use std::string::String;
use std::vec::Vec;

use ::redis::aio::ConnectionManager;
use ::redis::cluster_async::ClusterConnection;
use ::redis::{RedisError, Script};

use super::breaker::BreakerState;
use super::cache::RefusalCache;
use super::config::RedisConfig;
use super::pressure::MemoryPressure;
use tollgate_core::clock::StdClock;
use tollgate_core::gcra::Gcra;
use tollgate_core::keyed::KeyedPath;
use tollgate_core::limiter::Bucket;
use tollgate_core::refusal::Refusal;
use tollgate_core::snapshot::Snapshot;

mod check;
mod connect;
mod outage;
mod reply;

pub(crate) use reply::{KeyWas, Reply, decode_reply, reply_to_decision, wait_from_peek};

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

impl StoreError {
    /// True when the server refused the call because it is at its
    /// `maxmemory` (its error code is `OOM`): the server is reachable, but
    /// full (see [Memory](crate::guide#memory)).
    #[must_use]
    pub fn is_out_of_memory(&self) -> bool {
        matches!(self, Self::Redis(e) if crate::pressure::is_out_of_memory(e))
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
    /// Which state decided: the key's own ([`KeyedPath::Own`]) or, for an
    /// absent key when the [new-key budget](RedisConfig::new_keys_per_second)
    /// was spent, the rule's overflow key ([`KeyedPath::SharedOverflow`];
    /// a refusal says the same through [`Refusal::path`]).
    pub path: KeyedPath,
}

/// Permits taken from a [`RedisStore`]: the bucket's state right after
/// the admission, and which state answered — the key's own state in the
/// store ([`KeyedPath::Own`]), the rule's overflow key when the key was new
/// and the [new-key budget](RedisConfig::new_keys_per_second) spent
/// ([`KeyedPath::SharedOverflow`]), or, when the store could not be asked
/// or was out of memory, the failure policy ([`KeyedPath::Fallback`]:
/// fail-open admits without the shared limit, or under its local
/// ceiling). A refusal says the same through [`Refusal::path`] (and
/// [`KeyedPath::Cached`] for the refusal cache).
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

    /// Which state answered: [`KeyedPath::Own`] (the key's state in the
    /// store), [`KeyedPath::SharedOverflow`] (the rule's overflow key) or
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
    /// The budget of new keys (one token per check that may create a key).
    new_keys: Bucket<Gcra>,
    /// The rule's overflow key ([`RedisConfig::overflow_key`]).
    overflow_key: Vec<u8>,
    /// Calls the server refused for memory, and their log line.
    pressure: MemoryPressure,
    clock: StdClock,
    /// The circuit breaker's state and the count of calls answered by the
    /// failure policy (shared with the breaker's probe task).
    breaker: std::sync::Arc<BreakerState>,
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
}
