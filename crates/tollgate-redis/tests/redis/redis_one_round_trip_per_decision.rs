//! Round trips, counted by the server (`INFO commandstats`): exactly one
//! `EVALSHA` per decision, and none while the refusal cache holds a key.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use support::RedisServer;
use tollgate::keyed::KeyedPath;
use tollgate::redis::{RedisConfig, RedisStore, StorePermit};
use tollgate::{Quota, Refusal};

/// A store timeout no loaded machine reaches: these tests count round
/// trips, and the default 50 ms turned slow replies into failure-policy
/// answers.
const PATIENT: Duration = Duration::from_secs(10);

/// Which state answered a store check: the store (`Own`), the refusal
/// cache (`Cached`) or the failure policy (`Fallback`).
fn path_of(d: &Result<StorePermit, Refusal<'static>>) -> KeyedPath {
    d.as_ref().map_or_else(|e| e.path(), |p| p.path())
}

/// Commands executed between two `INFO commandstats` readings, without the
/// INFO calls themselves.
fn delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter(|(name, _)| name.as_str() != "info")
        .filter_map(|(name, &calls)| {
            let d = calls - before.get(name).copied().unwrap_or(0);
            (d > 0).then(|| (name.clone(), d))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_decision_is_one_evalsha() {
    let server = RedisServer::start();
    let store = RedisStore::connect(
        server.url(),
        RedisConfig::token_bucket(Quota::per_second(1000).unwrap()).timeout(PATIENT),
    )
    .await
    .unwrap();
    let _ = store.check(b"warm-up").await; // loads the script (NOSCRIPT, LOAD, EVALSHA)
    let before = server.command_calls();
    for i in 0..200u32 {
        let d = store.check(&i.to_be_bytes()).await;
        assert_eq!(path_of(&d), KeyedPath::Own);
    }
    let after = server.command_calls();
    let d = delta(&before, &after);
    // the script's own TIME/GET/SET count as commands too; the client sent one
    // EVALSHA per decision and nothing else
    assert_eq!(d.get("evalsha"), Some(&200), "{d:?}");
    assert!(
        d.keys()
            .all(|c| ["evalsha", "time", "get", "set"].contains(&c.as_str())),
        "{d:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_key_costs_no_round_trip_until_retry_after() {
    let server = RedisServer::start();
    // one per 300 ms, burst 1
    let quota = Quota::new(1, Duration::from_millis(300)).unwrap();
    let store = RedisStore::connect(
        server.url(),
        RedisConfig::token_bucket(quota).timeout(PATIENT),
    )
    .await
    .unwrap();
    assert!(store.check(b"attacker").await.is_ok());
    let refused = store.check(b"attacker").await;
    assert!(refused.is_err());
    assert_eq!(path_of(&refused), KeyedPath::Own);

    let before = server.command_calls();
    let mut last_retry = refused.unwrap_err().retry_after();
    for _ in 0..1000 {
        let d = store.check(b"attacker").await;
        assert!(d.is_err());
        assert_eq!(path_of(&d), KeyedPath::Cached);
        let retry = d.unwrap_err().retry_after();
        assert!(retry <= last_retry, "the cached wait counts down");
        last_retry = retry;
    }
    // other keys and lighter peeks still go to the store
    assert_eq!(path_of(&store.check(b"someone-else").await), KeyedPath::Own);
    assert_eq!(
        path_of(&store.check_n(b"attacker", 0).await),
        KeyedPath::Own
    );
    let after = server.command_calls();
    assert_eq!(
        delta(&before, &after).get("evalsha"),
        Some(&2),
        "only the two store calls"
    );

    // once retry_after has passed, the key goes back to the store and is
    // admitted. Kept real sleep: the cache's expiry and the server's refill
    // under test run on real clocks; sleeping at least `retry_after` (+5 ms
    // for the two clocks' rates) is sound however late it ends.
    tokio::time::sleep(last_retry + Duration::from_millis(5)).await;
    let d = store.check(b"attacker").await;
    assert_eq!(path_of(&d), KeyedPath::Own);
    assert!(d.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_cache_every_refusal_asks_the_store() {
    let server = RedisServer::start();
    let quota = Quota::per_minute(1).unwrap();
    let store = RedisStore::connect(
        server.url(),
        RedisConfig::token_bucket(quota)
            .refusal_cache(0)
            .timeout(PATIENT),
    )
    .await
    .unwrap();
    let _ = store.check(b"k").await;
    let before = server.command_calls();
    for _ in 0..50 {
        let d = store.check(b"k").await;
        assert!(d.is_err());
        assert_eq!(path_of(&d), KeyedPath::Own);
    }
    assert_eq!(
        delta(&before, &server.command_calls()).get("evalsha"),
        Some(&50)
    );
}
