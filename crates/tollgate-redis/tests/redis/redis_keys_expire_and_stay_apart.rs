//! Redis keys: a bucket's key vanishes once the bucket has refilled, window
//! counters always carry an expiry and vanish with their window, and hostile or binary keys neither
//! break the script nor collide with each other or other namespaces.

use crate::support;

use std::time::Duration;

use redis::Connection;
use support::RedisServer;
use tollgate::keyed::KeyedPath;
use tollgate::redis::{RedisConfig, RedisStore, StorePermit, StoreReply};
use tollgate::{Quota, Refusal, Snapshot};

/// Which state answered a store check: the store (`Own`), the refusal
/// cache (`Cached`) or the failure policy (`Fallback`).
fn path_of(d: &Result<StorePermit, Refusal<'static>>) -> KeyedPath {
    d.as_ref().map_or_else(|e| e.path(), |p| p.path())
}

fn exists(admin: &mut Connection, key: &[u8]) -> bool {
    redis::cmd("EXISTS").arg(key).query::<i64>(admin).unwrap() == 1
}

fn pttl(admin: &mut Connection, key: &[u8]) -> i64 {
    redis::cmd("PTTL").arg(key).query(admin).unwrap()
}

/// The state a store reply reports: after the admission, or at the refusal.
fn snapshot_of(reply: &StoreReply) -> Snapshot {
    match reply.result {
        Ok(s) => s,
        Err(r) => *r.snapshot(),
    }
}

fn server_time_nanos(admin: &mut Connection) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(admin).unwrap();
    s * 1_000_000_000 + us * 1_000
}

/// A store timeout no loaded machine reaches: these tests are about keys,
/// not about the failure policy (the default 50 ms turned slow replies into
/// failure-policy answers).
const PATIENT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bucket_key_expires_when_the_bucket_has_refilled() {
    let server = RedisServer::start();
    let mut admin = server.admin();
    // T = 100 ms, burst 3: taking 2 leaves a lead of 200 ms
    let quota = Quota::per_second(10).unwrap().with_burst(3).unwrap();
    for config in [
        RedisConfig::token_bucket(quota),
        RedisConfig::leaky_bucket(quota),
    ] {
        let store = RedisStore::connect(server.url(), config.timeout(PATIENT))
            .await
            .unwrap();
        let key = store.redis_key(b"idle");
        // The expiry is read after the check: a machine stalled past the
        // whole lead in between finds the key already gone, which proves
        // nothing either way. Such an attempt is checked for what it can
        // show (the lead had passed on the server's clock) and repeated.
        let mut attempts = 0;
        let ttl = loop {
            attempts += 1;
            assert!(attempts <= 20, "never read the expiry before it passed");
            let _ = redis::cmd("DEL")
                .arg(&key)
                .query::<i64>(&mut admin)
                .unwrap();
            let reply = store.try_check_n(b"idle", 2).await.unwrap();
            assert!(reply.result.is_ok());
            // the lead at the check, in ms rounded up
            let lead_ms = snapshot_of(&reply)
                .reset_after()
                .as_nanos()
                .div_ceil(1_000_000) as i64;
            let ttl = pttl(&mut admin, &key);
            if ttl == -2 {
                let elapsed_ms =
                    (server_time_nanos(&mut admin) - reply.server_time_nanos) / 1_000_000;
                assert!(
                    elapsed_ms as i64 >= lead_ms - 1,
                    "key gone {elapsed_ms} ms after the check, before its lead of {lead_ms} ms"
                );
                continue;
            }
            assert!(ttl > 0, "every bucket key has an expiry, got {ttl}");
            assert!(
                ttl <= lead_ms + 1,
                "expires when refilled: ttl {ttl} ms, lead {lead_ms} ms"
            );
            break ttl;
        };
        // Kept real sleep: the expiry under test runs on the server's
        // clock. Sleeping at least the TTL (plus 20 ms for the two clocks'
        // rates) is sound however late the sleep ends; a loaded machine
        // only sleeps longer.
        tokio::time::sleep(Duration::from_millis(ttl as u64 + 20)).await;
        assert!(
            !exists(&mut admin, &key),
            "the refilled bucket's key is gone"
        );
        // and a missing key is a full bucket
        let snap = store.snapshot(b"idle").await.unwrap();
        assert_eq!(snap.remaining(), snap.limit());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refunding_everything_deletes_the_key() {
    let server = RedisServer::start();
    let mut admin = server.admin();
    let store = RedisStore::connect(
        server.url(),
        RedisConfig::token_bucket(Quota::per_minute(1).unwrap().with_burst(4).unwrap())
            .timeout(PATIENT),
    )
    .await
    .unwrap();
    assert!(store.check_n(b"k", 3).await.is_ok());
    assert!(exists(&mut admin, &store.redis_key(b"k")));
    let after = store.refund(b"k", 2).await.unwrap();
    assert_eq!(snapshot_of(&after).remaining(), 3);
    let after = store.refund(b"k", 10).await.unwrap(); // never above the burst
    assert_eq!(snapshot_of(&after).remaining(), 4);
    assert!(!exists(&mut admin, &store.redis_key(b"k")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn window_counter_always_expires_with_its_window() {
    let server = RedisServer::start();
    let mut admin = server.admin();
    let quota = Quota::new(3, Duration::from_millis(300)).unwrap();
    let store = RedisStore::connect(
        server.url(),
        RedisConfig::fixed_window(quota)
            .refusal_cache(0)
            .timeout(PATIENT),
    )
    .await
    .unwrap();
    let key = store.redis_key(b"w");
    let mut last_ttl = -2;
    for _ in 0..5 {
        let reply = store.try_check_n(b"w", 1).await.unwrap();
        let until_end = snapshot_of(&reply).reset_after();
        assert!(until_end <= Duration::from_millis(300));
        // every write leaves an expiry no later than the window's end
        let ttl = pttl(&mut admin, &key);
        if ttl == -2 {
            // gone already: only because the window ended (a stall between
            // the check and this look), on the server's clock
            let elapsed = server_time_nanos(&mut admin) - reply.server_time_nanos;
            assert!(
                elapsed + 1_000_000 >= until_end.as_nanos() as u64,
                "counter gone {elapsed} ns after the check, {until_end:?} before its window ended"
            );
        } else {
            let until_end_ms = until_end.as_nanos().div_ceil(1_000_000) as i64;
            assert!(
                ttl > 0 && ttl <= until_end_ms + 1,
                "counter always expires with its window: ttl {ttl} ms, window ends in {until_end:?}"
            );
        }
        last_ttl = ttl;
    }
    // Kept real sleep: the expiry under test runs on the server's clock;
    // sleeping at least the TTL (plus 20 ms for the clocks' rates) is sound
    // however late the sleep ends.
    if last_ttl > 0 {
        tokio::time::sleep(Duration::from_millis(last_ttl as u64 + 20)).await;
    }
    assert!(!exists(&mut admin, &key), "gone once its window ended");
    let d = store.check(b"w").await;
    assert!(d.is_ok(), "a new window");
    // refunding everything deletes the counter
    let _ = store.refund(b"w", 3).await.unwrap();
    assert!(!exists(&mut admin, &key));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_and_binary_keys_neither_break_the_script_nor_collide() {
    let server = RedisServer::start();
    let mut admin = server.admin();
    let quota = Quota::per_minute(1).unwrap(); // burst 1: second check refused
    let store = RedisStore::connect(
        server.url(),
        RedisConfig::token_bucket(quota)
            .prefix(b"ns1:")
            .refusal_cache(0)
            .timeout(PATIENT),
    )
    .await
    .unwrap();
    let other_namespace = RedisStore::connect(
        server.url(),
        RedisConfig::token_bucket(quota)
            .prefix(b"ns2:")
            .hash_tag(b"t")
            .timeout(PATIENT),
    )
    .await
    .unwrap();
    let mut long = vec![b'x'; 10 * 1024];
    long[5000] = b'\n';
    let keys: Vec<Vec<u8>> = vec![
        b"plain".to_vec(),
        b"line\r\nbreak".to_vec(),
        b"\r\n".to_vec(),
        b"*".to_vec(),
        b"*3\r\n$3\r\nDEL\r\n".to_vec(), // a RESP command as a key
        b"') redis.call('FLUSHALL') --".to_vec(),
        b"]]..redis.call('FLUSHALL')..[[".to_vec(),
        b"\xff\xfe\x00\x80".to_vec(), // not UTF-8, with a NUL
        b"\x00".to_vec(),
        b"".to_vec(),
        b"{ns1:}plain".to_vec(),
        b"}{".to_vec(),
        long.clone(),
        {
            let mut l = long.clone();
            l[10 * 1024 - 1] = b'y'; // differs only in the last byte
            l
        },
    ];
    for key in &keys {
        let first = store.check(key).await;
        assert_eq!(
            path_of(&first),
            KeyedPath::Own,
            "key {:?}",
            String::from_utf8_lossy(key)
        );
        assert!(first.is_ok(), "each key has its own fresh bucket");
        assert!(store.check(key).await.is_err());
        assert!(exists(&mut admin, &store.redis_key(key)));
    }
    // exactly one Redis key per caller key, all under the namespace
    let stored: Vec<Vec<u8>> = redis::cmd("KEYS").arg("ns1:*").query(&mut admin).unwrap();
    assert_eq!(stored.len(), keys.len());
    for key in &keys {
        assert!(stored.contains(&store.redis_key(key)));
    }
    // another namespace sees fresh buckets for the very same keys
    for key in &keys {
        assert!(other_namespace.check(key).await.is_ok());
    }
    let tagged: Vec<Vec<u8>> = redis::cmd("KEYS")
        .arg("ns2:{t}*")
        .query(&mut admin)
        .unwrap();
    assert_eq!(tagged.len(), keys.len());
    assert!(
        exists(&mut admin, &store.redis_key(b"plain")),
        "nothing was flushed"
    );
}
