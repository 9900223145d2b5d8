//! On a real 3-shard Redis Cluster, each call is routed to the shard that
//! owns its key, limits hold per key, a hash tag puts one limiter's keys on
//! one shard, and a SCRIPT FLUSH on every shard is survived.

use crate::support;

use std::time::Duration;

use support::RedisCluster;
use tollgate::keyed::KeyedPath;
use tollgate::redis::{RedisConfig, RedisStore, StorePermit};
use tollgate::{Quota, Refusal};

/// Which state answered a store check: the store (`Own`), the refusal
/// cache (`Cached`) or the failure policy (`Fallback`).
fn path_of(d: &Result<StorePermit, Refusal<'static>>) -> KeyedPath {
    d.as_ref().map_or_else(|e| e.path(), |p| p.path())
}

fn config() -> RedisConfig {
    // burst 2, then one a minute: the third check of a key is refused
    RedisConfig::token_bucket(Quota::per_minute(1).unwrap().with_burst(2).unwrap())
        // generous: a loaded machine delays replies; this is not a test of
        // the failure policy
        .timeout(Duration::from_secs(10))
        .refusal_cache(0)
}

async fn each_key_gets_its_own_limit(store: &RedisStore, keys: u32) {
    for k in 0..keys {
        let key = format!("client-{k}");
        for expect_allowed in [true, true, false] {
            let d = store.check(key.as_bytes()).await;
            assert_eq!(path_of(&d), KeyedPath::Own, "{key}");
            assert_eq!(d.is_ok(), expect_allowed, "{key}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_spread_over_shards_and_each_keeps_its_limit() {
    let cluster = RedisCluster::start();
    let store = RedisStore::connect_cluster(cluster.urls(), config().prefix(b"c:"))
        .await
        .unwrap();
    each_key_gets_its_own_limit(&store, 30).await;
    let counts = cluster.key_counts();
    assert_eq!(counts.iter().sum::<u64>(), 30, "{counts:?}");
    assert!(
        counts.iter().all(|&c| c > 0),
        "every shard holds keys: {counts:?}"
    );

    // scripts flushed everywhere: the next calls reload them on each shard
    for i in 0..3 {
        let () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query(&mut cluster.admin(i))
            .unwrap();
    }
    for k in 0..30 {
        let d = store.check(format!("client-{k}").as_bytes()).await;
        assert_eq!(path_of(&d), KeyedPath::Own);
        assert!(d.is_err(), "state survived the flush");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hash_tag_keeps_one_limiters_keys_on_one_shard() {
    let cluster = RedisCluster::start();
    let store =
        RedisStore::connect_cluster(cluster.urls(), config().prefix(b"t:").hash_tag(b"tenant-9"))
            .await
            .unwrap();
    each_key_gets_its_own_limit(&store, 30).await;
    let counts = cluster.key_counts();
    assert_eq!(counts.iter().sum::<u64>(), 30, "{counts:?}");
    assert_eq!(
        counts.iter().filter(|&&c| c > 0).count(),
        1,
        "one shard: {counts:?}"
    );
}
