//! The stores a policy's rule starts with when none is carried: its keyed
//! table (or single bucket, or in-flight table) and its network overflow
//! table.

use std::format;

use crate::key::{KeySource, TableKey};
use crate::layer::HttpStore;
use crate::policy::{ConfigError, Plan, Policy, StoreAlg};
use tollgate_core::keyed::ShardedKeyedTable;
use tollgate_core::live::LiveBucket;
use tollgate_partitioned::{Partitioned, PolicyStore};

/// Keys a policy's table tracks: one for a policy without partition (or
/// whose buckets live in a backend).
pub(super) fn max_keys(p: &Policy) -> usize {
    if matches!(p.key, KeySource::Global) || p.backend.is_some() {
        1
    } else {
        p.max_keys
    }
}

pub(super) fn too_many(loc: &str) -> ConfigError {
    ConfigError::invalid(format!("{loc}.max_keys"), "too many keys")
}

/// The networks `policy`'s overflow table holds (see
/// [`Policy::overflow_networks`]); `None` where a new key without a slot
/// shares the table's one overflow bucket: a policy without partition,
/// that queues, limits requests in flight or keeps its buckets remotely.
pub(crate) fn overflow_networks(policy: &Policy, plan: &Plan) -> Option<usize> {
    let rate = !matches!(plan.alg, StoreAlg::InFlight(_));
    let networks = policy.overflow_networks.unwrap_or(policy.max_keys);
    (rate
        && networks > 0
        && !matches!(policy.key, KeySource::Global)
        && policy.queue.is_none()
        && policy.backend.is_none())
    .then_some(networks)
}

/// A new store for `policy` running `plan`.
pub(super) fn fresh_store(
    loc: &str,
    policy: &Policy,
    plan: &Plan,
) -> Result<HttpStore, ConfigError> {
    let keys = max_keys(policy);
    Ok(match plan.alg {
        // one key: one bucket, no table to hash into
        StoreAlg::Gcra(g) if matches!(policy.key, KeySource::Global) => {
            PolicyStore::single(LiveBucket::new(g))
        }
        StoreAlg::InFlight(limit) => PolicyStore::in_flight(
            Partitioned::<TableKey, TableKey>::in_flight_table(limit, keys)
                .map_err(|e| too_many(loc).caused_by(e))?,
        ),
        alg => fresh_table(loc, "max_keys", alg, keys)?,
    })
}

/// A new keyed table running `alg` (a rate: bucket or window) for `keys`
/// keys, whose keys without a slot share one overflow bucket; a bad size
/// is reported at `loc.field`.
pub(super) fn fresh_table(
    loc: &str,
    field: &str,
    alg: StoreAlg,
    keys: usize,
) -> Result<HttpStore, ConfigError> {
    let error = |e| ConfigError::invalid(format!("{loc}.{field}"), "too many keys").caused_by(e);
    Ok(match alg {
        StoreAlg::Gcra(g) => PolicyStore::keyed(
            ShardedKeyedTable::builder(g)
                .max_keys(keys)
                .build()
                .map_err(error)?,
        ),
        StoreAlg::Fixed(w) => PolicyStore::keyed(
            ShardedKeyedTable::builder(w)
                .max_keys(keys)
                .build()
                .map_err(error)?,
        ),
        StoreAlg::Sliding(w) => PolicyStore::keyed(
            ShardedKeyedTable::builder(w)
                .max_keys(keys)
                .build()
                .map_err(error)?,
        ),
        StoreAlg::InFlight(_) => {
            return Err(ConfigError::invalid(
                format!("{loc}.{field}"),
                "an in-flight limit has no overflow table",
            ));
        }
    })
}
