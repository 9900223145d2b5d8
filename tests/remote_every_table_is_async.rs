//! Every keyed table, paired with its clock in a `KeyedRateLimiter`, is an
//! `AsyncKeyedLimiter<K>` that answers per key (sharded, lock-free and
//! heapless alike), and the Redis store goes through the same generic
//! async function as an in-process table.
//!
//! A table keeps owned keys, so a `KeyedRateLimiter` over
//! `ShardedKeyedTable<String, _>` is an `AsyncKeyedLimiter<String>`, not an
//! `AsyncKeyedLimiter<str>`; the Redis store is both (it takes any
//! `AsRef<[u8]>` key). The function they share is therefore generic over
//! `AsyncKeyedLimiter<String>`.
#![cfg(feature = "redis")]

mod support;

use std::time::Duration;

use support::RedisServer;
use tollgate::keyed::{HeaplessKeyedTable, LockFreeGcraTable, ShardedKeyedTable};
use tollgate::redis::{RedisConfig, RedisStore};
use tollgate::remote::{AsyncKeyedLimiter, DecisionSource};
use tollgate::{ConfigError, Gcra, KeyedRateLimiter, ManualClock, Quota};

/// 2 permits per hour, bursts of 2: a key that took 2 stays refused for
/// the length of a test, on any clock.
fn quota() -> Quota {
    Quota::per_hour(2).unwrap().with_burst(2).unwrap()
}

/// The contract, for any backend and key type: `spent` is exhausted,
/// `fresh` is not, a request above the capacity can never succeed, and a
/// refund gives a permit back.
async fn answers_per_key<K, L>(limiter: &L, spent: &K, fresh: &K, source: DecisionSource)
where
    K: ?Sized,
    L: AsyncKeyedLimiter<K>,
{
    assert_eq!(limiter.capacity(), 2);
    let first = limiter.check_n(spent, 2).await;
    assert!(first.is_ok());
    assert_eq!(first.source(), source);
    assert_eq!(first.result().unwrap().remaining(), 0);
    let refused = limiter.check_n(spent, 1).await;
    assert!(refused.is_err(), "the spent key is refused");
    assert!(!refused.result().unwrap_err().is_never(), "but not forever");
    assert_eq!(refused.source(), source);
    // A peek takes nothing, on either key.
    assert!(limiter.check_n(fresh, 0).await.is_ok());
    let other = limiter.check_n(fresh, 1).await;
    assert!(other.is_ok(), "another key has its own budget");
    assert_eq!(other.result().unwrap().remaining(), 1);
    let never = limiter.check_n(fresh, 3).await.into_result().unwrap_err();
    assert!(never.is_never(), "{never:?}");
    assert_eq!((never.requested(), never.limit()), (3, 2));
    limiter.refund(spent, 1).await;
    assert!(limiter.check_n(spent, 1).await.is_ok());
    assert!(limiter.check_n(spent, 1).await.is_err());
}

#[tokio::test]
async fn every_keyed_table_is_an_async_keyed_limiter_answering_per_key() -> Result<(), ConfigError>
{
    let gcra = Gcra::token_bucket(quota());
    let clock = ManualClock::new();

    let sharded = KeyedRateLimiter::new(
        ShardedKeyedTable::<String, _>::builder(gcra).build()?,
        &clock,
    )?;
    answers_per_key(
        &sharded,
        &"client-a".to_owned(),
        &"client-b".to_owned(),
        DecisionSource::Local,
    )
    .await;

    let lock_free = KeyedRateLimiter::new(
        LockFreeGcraTable::<u64>::builder(gcra)
            .max_keys(64)
            .build()?,
        &clock,
    )?;
    answers_per_key(&lock_free, &7u64, &8u64, DecisionSource::Local).await;

    let heapless = KeyedRateLimiter::new(
        HeaplessKeyedTable::<u32, Gcra, 8>::builder(gcra).build(),
        &clock,
    )?;
    answers_per_key(&heapless, &7u32, &8u32, DecisionSource::Local).await;

    // The tables read the clock they were paired with: half an hour later
    // (one interval) each spent key has one permit back.
    clock.advance(Duration::from_secs(30 * 60));
    let back = |d: tollgate::remote::RemoteDecision| d.is_ok();
    assert!(back(sharded.check_n(&"client-a".to_owned(), 1).await));
    assert!(back(lock_free.check_n(&7, 1).await));
    assert!(back(heapless.check_n(&7, 1).await));
    Ok(())
}

/// The one generic function both backends go through.
async fn admit<L: AsyncKeyedLimiter<String>>(limiter: &L, key: &str) -> bool {
    // refused, or can never succeed: not admitted
    limiter.check_n(&key.to_owned(), 1).await.is_ok()
}

/// Which admissions of `keys`, in order, `admit` grants.
async fn admissions<L: AsyncKeyedLimiter<String>>(limiter: &L, keys: &[&str]) -> Vec<bool> {
    let mut out = Vec::new();
    for key in keys {
        out.push(admit(limiter, key).await);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_store_and_a_keyed_rate_limiter_share_one_generic_async_function() {
    let server = RedisServer::start();
    let store = RedisStore::connect(
        server.url(),
        RedisConfig::token_bucket(quota())
            .prefix(b"every-table:")
            .timeout(Duration::from_secs(2)),
    )
    .await
    .expect("valid config");
    let clock = ManualClock::new();
    let local = KeyedRateLimiter::token_bucket(quota(), &clock).unwrap();

    // a, a, a: the third is refused; b is untouched by a.
    let keys = ["a", "a", "a", "b"];
    let expected = vec![true, true, false, true];
    assert_eq!(admissions(&store, &keys).await, expected);
    assert_eq!(admissions(&local, &keys).await, expected);

    // The same decisions, from where each backend keeps its buckets.
    let key = "b".to_owned();
    let from_store = AsyncKeyedLimiter::<String>::check_n(&store, &key, 1).await;
    assert_eq!(from_store.source(), DecisionSource::Store);
    let from_table = local.check_n(&key, 1).await;
    assert_eq!(from_table.source(), DecisionSource::Local);
    for d in [from_store, from_table] {
        assert!(!d.result().is_err_and(|r| r.is_never()), "{d:?}");
    }
    // Redis really holds the two keys.
    let mut admin = server.admin();
    for key in ["a", "b"] {
        let exists: bool = redis::cmd("EXISTS")
            .arg(store.redis_key(key.as_bytes()))
            .query(&mut admin)
            .unwrap();
        assert!(exists, "{key} is kept in Redis");
    }
}
