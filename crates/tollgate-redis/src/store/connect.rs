//! Making a [`RedisStore`]: connecting to one server or a cluster, and
//! turning the configuration into the script and its arguments.

use std::string::ToString;

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use ::redis::cluster::{ClusterClient, ClusterConfig};
use ::redis::{Client, IntoConnectionInfo, Script};

use super::{Connection, RedisStore};
use crate::cache::RefusalCache;
use crate::config::{ConfigError, FailurePolicy, RedisConfig, RemoteAlgorithm, gcra_max_lead};
use crate::pressure::MemoryPressure;
use crate::script::{FIXED_WINDOW_LUA, GCRA_LUA};
use tollgate_core::clock::StdClock;
use tollgate_core::gcra::BucketKind;
use tollgate_core::limiter::{Algorithm, Bucket};

/// The fixed window's heal threshold (as the in-process window's default):
/// a stored window starting more than this after the server's `now` is
/// re-dated to the current window.
const FIXED_WINDOW_HEAL_THRESHOLD_NANOS: u64 = 1_000_000_000;

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
        let new_keys = Bucket::token_bucket(config.validate()?);
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
            new_keys,
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
        let new_keys = Bucket::token_bucket(config.validate()?);
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
            new_keys,
        ))
    }

    /// The store on `connection`, with `new_keys` the budget of new keys
    /// (from [`RedisConfig::validate`]).
    fn with_connection(
        connection: Connection,
        config: RedisConfig,
        new_keys: Bucket<tollgate_core::gcra::Gcra>,
    ) -> Self {
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
        let overflow_key = config.overflow_key();
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
            new_keys,
            overflow_key,
            pressure: MemoryPressure::default(),
            clock: StdClock::new(),
            breaker: std::sync::Arc::default(),
        }
    }
}
