//! What one key costs the server, measured as the crate docs quote it
//! (guide, Memory): 100,000 keys made by the store with the default prefix
//! (`tollgate:`, so 41-byte names), the `used_memory` delta divided by the
//! keys, and `MEMORY USAGE` of a sample. The docs' figures must stay
//! upper bounds: about 150 B for a bucket (its TAT, a 19-digit integer,
//! is stored as an integer), about 180 B for a window counter (`k:count`
//! is a string).

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use redis::Connection;
use support::RedisServer;
use tollgate::Quota;
use tollgate::redis::{RedisConfig, RedisStore};

const KEYS: u64 = 100_000;

fn used_memory(admin: &mut Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("memory").query(admin).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("INFO memory has used_memory")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_costs_the_server_what_the_docs_say() {
    // keys that outlive the measurement: T = 60 s
    let quota = Quota::per_hour(60).unwrap();
    // what the guide quotes per key (bytes), with 100,000 keys
    for (name, config, documented) in [
        ("token bucket", RedisConfig::token_bucket(quota), 160.0),
        ("fixed window", RedisConfig::fixed_window(quota), 190.0),
    ] {
        let server = RedisServer::start();
        let mut admin = server.admin();
        let store = Arc::new(
            RedisStore::connect(
                server.url(),
                config
                    .new_keys_per_second(10_000_000)
                    .timeout(Duration::from_secs(10)),
            )
            .await
            .unwrap(),
        );
        // a first key loads the script: not part of the figure
        store.try_check_n(b"warm-up", 1).await.unwrap();
        let before = used_memory(&mut admin);
        let keys_before: u64 = redis::cmd("DBSIZE").query(&mut admin).unwrap();
        let mut tasks = tokio::task::JoinSet::new();
        for task in 0..32 {
            let store = store.clone();
            tasks.spawn(async move {
                for i in (task..KEYS).step_by(32) {
                    let reply = store.try_check_n(format!("client-{i}").as_bytes(), 1).await;
                    assert!(reply.unwrap().result.is_ok());
                }
            });
        }
        while let Some(done) = tasks.join_next().await {
            done.unwrap();
        }
        let keys: u64 = redis::cmd("DBSIZE").query(&mut admin).unwrap();
        assert_eq!(keys - keys_before, KEYS);
        let per_key = (used_memory(&mut admin) - before) as f64 / KEYS as f64;
        let mut sample = 0u64;
        for i in 0..100 {
            let key = store.redis_key(format!("client-{i}").as_bytes());
            let usage: u64 = redis::cmd("MEMORY")
                .arg("USAGE")
                .arg(key)
                .query(&mut admin)
                .unwrap();
            sample += usage;
        }
        eprintln!(
            "{name}: {KEYS} keys of {} B names: used_memory delta {per_key:.1} B per key, MEMORY USAGE {:.1} B",
            store.redis_key(b"x").len(),
            sample as f64 / 100.0
        );
        assert!(
            per_key <= documented,
            "{name}: {per_key:.1} B per key, the docs say at most {documented}"
        );
    }
}
