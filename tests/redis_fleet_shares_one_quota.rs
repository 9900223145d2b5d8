//! A fleet shares one limit: 4 separate store instances (separate
//! connections, as 4 replicas would have) hammer one key for 3 s; the total
//! admitted by a token bucket is within one permit of `burst + rate·t`, t
//! measured on the server's clock (a leaky bucket: never above `1 + rate·t`).
#![cfg(feature = "redis")]

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::RedisServer;
use tollgate::redis::{RedisConfig, RedisStore};
use tollgate::remote::DecisionSource;
use tollgate::Quota;

const REPLICAS: usize = 4;
const TASKS_PER_REPLICA: usize = 8;
const RUN: Duration = Duration::from_secs(3);

fn server_time_nanos(server: &RedisServer) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(&mut server.admin()).unwrap();
    s * 1_000_000_000 + us * 1_000
}

async fn hammer(server: &RedisServer, kind_leaky: bool) -> (u64, u64, u64) {
    let rate = 50u32; // T = 20 ms
    let burst = 10u32;
    let quota = Quota::per_second(rate).unwrap().with_burst(burst).unwrap();
    let prefix = if kind_leaky {
        &b"fleet-leaky:"[..]
    } else {
        &b"fleet-token:"[..]
    };
    let mut stores = Vec::new();
    for _ in 0..REPLICAS {
        let config = if kind_leaky {
            RedisConfig::leaky_bucket(quota)
        } else {
            RedisConfig::token_bucket(quota)
        }
        .prefix(prefix)
        .timeout(Duration::from_secs(1));
        // a separate connection per replica
        stores.push(Arc::new(
            RedisStore::connect(server.url(), config).await.unwrap(),
        ));
    }
    for s in &stores {
        assert_eq!(
            s.check_n(b"other", 0).await.unwrap().source(),
            DecisionSource::Store
        );
    }
    let admitted = Arc::new(AtomicU64::new(0));
    let unavailable = Arc::new(AtomicU64::new(0));
    let start = server_time_nanos(server);
    let deadline = Instant::now() + RUN;
    let mut tasks = Vec::new();
    for store in &stores {
        for _ in 0..TASKS_PER_REPLICA {
            let store = Arc::clone(store);
            let admitted = Arc::clone(&admitted);
            let unavailable = Arc::clone(&unavailable);
            tasks.push(tokio::spawn(async move {
                while Instant::now() < deadline {
                    let d = store.check(b"shared").await;
                    if d.store_unavailable() {
                        unavailable.fetch_add(1, Ordering::Relaxed);
                    } else if d.is_allowed() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    } else {
                        tokio::task::yield_now().await;
                    }
                }
            }));
        }
    }
    tokio::time::sleep_until(deadline.into()).await;
    let end = server_time_nanos(server);
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(unavailable.load(Ordering::Relaxed), 0);
    let interval = 1_000_000_000 / u64::from(rate);
    let capacity = if kind_leaky { 1 } else { u64::from(burst) };
    let expected = capacity + (end - start) / interval;
    (admitted.load(Ordering::Relaxed), expected, end - start)
}

// One test runs both buckets in turn: each run burns CPU on purpose.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_replicas_share_one_limit() {
    let server = RedisServer::start();

    let (admitted, expected, span) = hammer(&server, false).await;
    eprintln!("token bucket: admitted {admitted}, burst + rate·t = {expected}, t = {span} ns");
    assert!(
        admitted.abs_diff(expected) <= 1,
        "admitted {admitted}, expected {expected} ± 1"
    );

    let (admitted, expected, span) = hammer(&server, true).await;
    eprintln!("leaky bucket: admitted {admitted}, 1 + rate·t = {expected}, t = {span} ns");
    // Never more than the pacing allows. A strict-pacing bucket has no
    // tolerance, so every round trip of latency after a slot opens is lost
    // for good (TAT = max(TAT, now) + T): the count falls short by the
    // accumulated latency, which depends on the machine's load.
    assert!(
        admitted <= expected + 1,
        "admitted {admitted}, at most {expected} + 1"
    );
    assert!(
        admitted * 10 >= expected * 8,
        "admitted {admitted}, at least 80% of {expected}"
    );
}
