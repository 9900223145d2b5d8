//! A Redis at its `maxmemory` with `noeviction` (filled by unrelated keys):
//! the store reports memory pressure as it reports unavailability. A
//! client already throttled stays throttled (the script's refusal path
//! writes nothing, and Redis 7 runs a script without shebang flags until
//! its first write); a new client gets the failure policy's answer,
//! flagged; the memory-pressure counter counts; the circuit breaker stays
//! closed (the server answers).

use crate::support;

use std::time::Duration;

use redis::Connection;
use support::RedisServer;
use tollgate::Quota;
use tollgate::keyed::KeyedPath;
use tollgate::redis::{FailurePolicy, RedisConfig, RedisStore, StoreError};

/// A timeout no loaded machine reaches: these tests are about what the
/// server answers, not about timeouts.
const PATIENT: Duration = Duration::from_secs(10);

fn config(prefix: &[u8], policy: FailurePolicy) -> RedisConfig {
    // T = 1 s, burst 2: a client that took 2 is refused for about a second
    // at least, and its key lives 2 s
    RedisConfig::token_bucket(Quota::per_minute(60).unwrap().with_burst(2).unwrap())
        .prefix(prefix)
        .timeout(PATIENT)
        .failure_policy(policy)
        // the script's answers, not the local cache's
        .refusal_cache(0)
}

fn used_memory(admin: &mut Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("memory").query(admin).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("INFO memory has used_memory")
}

/// Fills the server with unrelated values (no expiry) until it refuses a
/// write with `OOM`: 10 kB values, then 10-byte ones (Redis counts a
/// command's own arguments in the memory it checks, so a refused 10 kB
/// value leaves room for a small write); returns how many it took.
fn fill_until_oom(admin: &mut Connection) -> u64 {
    let mut written = 0;
    for size in [10_000, 10] {
        let value = vec![b'x'; size];
        loop {
            let result: redis::RedisResult<()> = redis::cmd("SET")
                .arg(format!("filler:{written}"))
                .arg(&value)
                .query(admin);
            match result {
                Ok(()) => written += 1,
                Err(e) => {
                    assert_eq!(e.code(), Some("OOM"), "{e}");
                    break;
                }
            }
            assert!(
                written < 1_000_000,
                "the server never reached its maxmemory"
            );
        }
    }
    written
}

/// Takes `key`'s whole burst and checks that the next check is refused by
/// the store itself.
async fn throttle(store: &RedisStore, key: &[u8]) {
    for _ in 0..2 {
        let p = store
            .check(key)
            .await
            .expect("a fresh bucket admits its burst");
        assert_eq!(p.path(), KeyedPath::Own);
    }
    let refused = store.check(key).await.unwrap_err();
    assert_eq!(refused.path(), KeyedPath::Own);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_noeviction_server_keeps_the_throttled_throttled_and_answers_new_keys_by_the_failure_policy()
 {
    let server = RedisServer::start();
    let mut admin = server.admin();
    let closed = RedisStore::connect(
        server.url(),
        config(
            b"closed:",
            FailurePolicy::fail_closed(Duration::from_secs(1)),
        ),
    )
    .await
    .unwrap();
    let open = RedisStore::connect(server.url(), config(b"open:", FailurePolicy::fail_open()))
        .await
        .unwrap();
    throttle(&closed, b"abuser").await;
    throttle(&open, b"abuser").await;

    let limit = used_memory(&mut admin) + 3 * 1024 * 1024;
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(limit)
        .query(&mut admin)
        .unwrap();
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg("noeviction")
        .query(&mut admin)
        .unwrap();
    let filler = fill_until_oom(&mut admin);
    eprintln!("full after {filler} filler keys, maxmemory {limit} B");

    for store in [&closed, &open] {
        // the throttled client stays throttled, by the store itself
        for _ in 0..3 {
            let refused = store.check(b"abuser").await.unwrap_err();
            assert_eq!(refused.path(), KeyedPath::Own, "{refused:?}");
            assert!(!refused.retry_after().is_zero());
        }
        assert_eq!(store.memory_pressure(), 0, "a refusal writes nothing");
    }

    // a new client: the failure policy's answer, flagged. The breaker
    // opens after 3 unreachable calls (the default): 6 in a row show that
    // memory pressure does not count as unreachable
    for i in 0..6 {
        let key = format!("newcomer-{i}");
        let refused = closed.check(key.as_bytes()).await.unwrap_err();
        assert_eq!(refused.path(), KeyedPath::Fallback);
        assert_eq!(refused.retry_after(), Duration::from_secs(1));
        let admitted = open.check(key.as_bytes()).await.unwrap();
        assert!(admitted.store_unavailable());
        assert_eq!(admitted.path(), KeyedPath::Fallback);
    }
    for store in [&closed, &open] {
        assert_eq!(store.memory_pressure(), 6);
        assert_eq!(store.store_failures(), 6);
        assert!(!store.circuit_open(), "the server answers: breaker closed");
        assert_eq!(store.circuit_openings(), 0);
        // the raw error says why
        let e = store.try_check_n(b"newcomer-x", 1).await.unwrap_err();
        assert!(e.is_out_of_memory(), "{e:?}");
        assert!(matches!(&e, StoreError::Redis(r) if r.code() == Some("OOM")));
        assert_eq!(store.memory_pressure(), 7);
    }
    // nothing was created for the newcomers (the budget's tokens came back)
    for i in 0..6 {
        let key = closed.redis_key(format!("newcomer-{i}").as_bytes());
        let exists: i64 = redis::cmd("EXISTS").arg(key).query(&mut admin).unwrap();
        assert_eq!(exists, 0);
    }

    // memory freed: the store answers for itself again
    let () = redis::cmd("FLUSHDB").query(&mut admin).unwrap();
    let admitted = closed.check(b"newcomer-0").await.unwrap();
    assert_eq!(admitted.path(), KeyedPath::Own);
    assert_eq!(closed.memory_pressure(), 7);
}

/// Memory pressure is logged at WARN (feature `tracing`), at most one line
/// per 10 s, carrying the number of refusals since the previous line: 20
/// refusals in a row make one line, not twenty. (Current-thread runtime:
/// this test's subscriber sees only this test's store.)
#[tokio::test]
async fn memory_pressure_is_logged_once_per_interval_with_a_count() {
    let (log, _guard) = tollgate_test_support::log::capture();

    let server = RedisServer::start();
    let mut admin = server.admin();
    let store = RedisStore::connect(server.url(), config(b"logged:", FailurePolicy::fail_open()))
        .await
        .unwrap();
    let limit = used_memory(&mut admin) + 2 * 1024 * 1024;
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(limit)
        .query(&mut admin)
        .unwrap();
    fill_until_oom(&mut admin);
    for i in 0..20 {
        let p = store.check(format!("k{i}").as_bytes()).await.unwrap();
        assert!(p.store_unavailable());
    }
    assert_eq!(store.memory_pressure(), 20);
    let lines = log.lines_with("maxmemory");
    for line in &lines {
        eprintln!("logged: {line}");
    }
    if cfg!(feature = "tracing") {
        assert_eq!(lines.len(), 1, "{lines:?}");
        let line = &lines[0];
        assert!(line.contains(" WARN "), "{line}");
        assert!(
            line.contains("prefix=logged: refused_for_memory=1 "),
            "{line}"
        );
    } else {
        assert!(lines.is_empty(), "logged without feature tracing");
    }
}
