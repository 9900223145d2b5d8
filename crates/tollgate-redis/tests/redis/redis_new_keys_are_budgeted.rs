//! The new-key budget: a check may create a Redis key only while the
//! store's local budget (`new_keys_per_second`) has a token; past it, an
//! absent key is not created and the rule's one overflow key answers
//! (`KeyedPath::SharedOverflow`), for a bucket and for a fixed window, on
//! a single server and on a cluster. A key that exists is decided by its
//! own state whatever the budget, and gives its token back.

use crate::support;

use std::time::{Duration, Instant};

use redis::Connection;
use support::{RedisCluster, RedisServer};
use tollgate::keyed::KeyedPath;
use tollgate::redis::{RedisConfig, RedisStore, StorePermit};
use tollgate::{Quota, Refusal};

/// A timeout no loaded machine reaches: these tests are about keys.
const PATIENT: Duration = Duration::from_secs(10);

type Answer = Result<StorePermit, Refusal<'static>>;

fn path_of(d: &Answer) -> KeyedPath {
    d.as_ref().map_or_else(|e| e.path(), |p| p.path())
}

fn exists(admin: &mut Connection, key: &[u8]) -> bool {
    redis::cmd("EXISTS").arg(key).query::<i64>(admin).unwrap() == 1
}

/// Runs `scenario` until one run fits in `within` (the budget refills one
/// token per `within` at the rate the scenarios use): a machine stalled
/// longer would see a refilled token, which proves nothing either way.
async fn within<F, Fut>(within: Duration, mut scenario: F)
where
    F: FnMut(u32) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for attempt in 0..10 {
        let start = Instant::now();
        scenario(attempt).await;
        if start.elapsed() < within {
            return;
        }
        eprintln!("attempt {attempt} took {:?}: again", start.elapsed());
    }
    panic!("no attempt ran within {within:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_key_past_the_budget_is_answered_by_the_overflow_key() {
    let server = RedisServer::start();
    // token bucket burst 2, T = 1 s; the overflow key runs the same
    let quota = Quota::per_minute(60).unwrap().with_burst(2).unwrap();
    for (name, config) in [
        ("token bucket", RedisConfig::token_bucket(quota)),
        (
            "fixed window",
            RedisConfig::fixed_window(Quota::per_minute(2).unwrap()),
        ),
    ] {
        within(Duration::from_millis(900), |attempt| {
            let config = config.clone();
            let url = server.url();
            let mut admin = server.admin();
            async move {
                let prefix = format!("{name}:{attempt}:");
                // one new key per second, burst 1
                let store = RedisStore::connect(
                    url,
                    config
                        .prefix(prefix.as_bytes())
                        .new_keys_per_second(1)
                        .timeout(PATIENT),
                )
                .await
                .unwrap();
                let overflow = store.config().overflow_key();
                assert_eq!(overflow, format!("{prefix}overflow").into_bytes());

                let first = store.check(b"first").await;
                assert!(first.is_ok() && path_of(&first) == KeyedPath::Own, "{name}");
                assert!(exists(&mut admin, &store.redis_key(b"first")));

                // the budget is spent: newcomers share the overflow key
                for newcomer in [&b"second"[..], b"third"] {
                    let d = store.check(newcomer).await;
                    assert!(d.is_ok(), "{name}: the overflow key admits its burst");
                    assert_eq!(path_of(&d), KeyedPath::SharedOverflow, "{name}");
                    assert!(!exists(&mut admin, &store.redis_key(newcomer)));
                }
                assert!(exists(&mut admin, &overflow), "{name}");
                let refused = store.check(b"fourth").await.unwrap_err();
                assert_eq!(refused.path(), KeyedPath::SharedOverflow, "{name}");
                assert!(!refused.retry_after().is_zero());
                assert!(refused.path().is_overflow());
                let raw = store.try_check_n(b"fifth", 1).await.unwrap();
                assert_eq!(raw.path, KeyedPath::SharedOverflow);
                assert!(raw.result.is_err());

                // a key that exists is decided by its own state
                let again = store.check(b"first").await;
                assert!(again.is_ok() && path_of(&again) == KeyedPath::Own, "{name}");
                let refused = store.check(b"first").await.unwrap_err();
                assert_eq!(refused.path(), KeyedPath::Own, "{name}");
                assert_eq!(store.store_failures(), 0);
            }
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_that_exists_gives_its_token_back() {
    let server = RedisServer::start();
    let quota = Quota::per_minute(600).unwrap().with_burst(50).unwrap();
    within(Duration::from_millis(450), |attempt| {
        let url = server.url();
        async move {
            // two new keys per second, burst 2
            let store = RedisStore::connect(
                url,
                RedisConfig::token_bucket(quota)
                    .prefix(format!("refund:{attempt}:").as_bytes())
                    .new_keys_per_second(2)
                    .timeout(PATIENT),
            )
            .await
            .unwrap();
            let created = store.check(b"regular").await;
            assert_eq!(path_of(&created), KeyedPath::Own);
            // each of these takes a token and gives it back: the key exists
            for _ in 0..20 {
                let d = store.check(b"regular").await;
                assert!(d.is_ok() && path_of(&d) == KeyedPath::Own);
            }
            // so one token is left for one more new key, and no more
            let d = store.check(b"newcomer").await;
            assert!(d.is_ok() && path_of(&d) == KeyedPath::Own);
            let d = store.check(b"another").await;
            assert_eq!(path_of(&d), KeyedPath::SharedOverflow);
            // a peek never needs the budget nor creates a key
            let peek = store.check_n(b"never-seen", 0).await;
            assert_eq!(path_of(&peek), KeyedPath::Own);
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overflow_refusal_is_not_cached_for_the_key() {
    let server = RedisServer::start();
    // burst 1: the overflow key admits one, then refuses for 60 s
    let quota = Quota::per_minute(1).unwrap();
    let store = RedisStore::connect(
        server.url(),
        RedisConfig::token_bucket(quota)
            .prefix(b"uncached:")
            .new_keys_per_second(1)
            .timeout(PATIENT),
    )
    .await
    .unwrap();
    // new keys until the overflow key refuses one (it admits one a
    // minute; the budget, one a second, may give some their own bucket)
    let mut refused = None;
    for i in 0..100 {
        let key = format!("newcomer-{i}");
        let d = store.check(key.as_bytes()).await;
        if d.as_ref()
            .is_err_and(|r| r.path() == KeyedPath::SharedOverflow)
        {
            refused = Some(key);
            break;
        }
        assert!(d.is_ok(), "only the overflow key refuses here: {d:?}");
    }
    let key = refused.expect("the overflow key refuses within 100 new keys");
    // once the budget has refilled (1 s), the key gets its own bucket: the
    // refusal cache (on by default) did not keep the overflow's refusal
    // (60 s) as the key's
    let start = Instant::now();
    loop {
        let d = store.check(key.as_bytes()).await;
        match path_of(&d) {
            KeyedPath::Own => {
                assert!(d.is_ok(), "a new key's own bucket is full");
                break;
            }
            KeyedPath::SharedOverflow => assert!(d.is_err()),
            other => panic!("answered by {other:?}: {d:?}"),
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "never its own bucket"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overflow_key_is_one_more_key_on_a_cluster() {
    let cluster = RedisCluster::start();
    let quota = Quota::per_minute(60).unwrap().with_burst(2).unwrap();
    within(Duration::from_millis(900), |attempt| {
        let urls = cluster.urls();
        async move {
            let store = RedisStore::connect_cluster(
                urls,
                RedisConfig::token_bucket(quota)
                    .prefix(format!("cluster:{attempt}:").as_bytes())
                    .new_keys_per_second(1)
                    .timeout(PATIENT),
            )
            .await
            .unwrap();
            assert_eq!(path_of(&store.check(b"first").await), KeyedPath::Own);
            let d = store.check(b"second").await;
            assert!(d.is_ok() && path_of(&d) == KeyedPath::SharedOverflow);
            let d = store.check(b"third").await;
            assert!(d.is_ok() && path_of(&d) == KeyedPath::SharedOverflow);
            let d = store.check(b"fourth").await;
            assert!(d.is_err() && path_of(&d) == KeyedPath::SharedOverflow);
            assert_eq!(store.store_failures(), 0);
        }
    })
    .await;
    // keys on the shards: "first" and the overflow key of the one attempt
    // that fitted, plus those of attempts that did not
    assert!(cluster.key_counts().iter().sum::<u64>() >= 2);
}

/// Every check in flight holds a token of the budget until its reply: a
/// check of an existing key holds the only token while the server is
/// frozen, and a new key checked meanwhile is refused one. When the replies
/// come back (in order: the existing key's first, which gives its token
/// back), the new key is asked again with the token and gets its own
/// bucket, not the overflow key. (Current-thread runtime: the replies'
/// tasks run in the order they were woken.)
#[tokio::test]
async fn a_token_held_by_a_check_in_flight_does_not_send_a_new_key_to_the_overflow() {
    let server = RedisServer::start();
    let quota = Quota::per_minute(60).unwrap().with_burst(10).unwrap();
    let config = RedisConfig::token_bucket(quota)
        .prefix(b"held:")
        .new_keys_per_second(1)
        .timeout(PATIENT);
    // another replica makes the existing key: this store's token stays
    let other = RedisStore::connect(server.url(), config.clone())
        .await
        .unwrap();
    assert_eq!(path_of(&other.check(b"existing").await), KeyedPath::Own);
    let store = std::sync::Arc::new(RedisStore::connect(server.url(), config).await.unwrap());
    // connected, the script loaded; an existing key gives its token back
    assert_eq!(path_of(&store.check(b"existing").await), KeyedPath::Own);

    server.freeze();
    let existing = tokio::spawn({
        let store = store.clone();
        async move { store.check(b"existing").await }
    });
    // the existing key's check takes the token and waits for the server
    tokio::time::sleep(Duration::from_millis(50)).await;
    let newcomer = tokio::spawn({
        let store = store.clone();
        async move { store.check(b"newcomer").await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    server.thaw();
    let existing = existing.await.unwrap();
    let newcomer = newcomer.await.unwrap();
    assert!(existing.is_ok() && path_of(&existing) == KeyedPath::Own);
    assert!(newcomer.is_ok(), "{newcomer:?}");
    assert_eq!(path_of(&newcomer), KeyedPath::Own, "not the overflow key");
    let mut admin = server.admin();
    assert!(exists(&mut admin, &store.redis_key(b"newcomer")));
    assert!(!exists(&mut admin, &store.config().overflow_key()));
}
