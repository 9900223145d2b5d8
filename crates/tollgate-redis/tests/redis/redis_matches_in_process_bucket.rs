//! The Redis store and the in-process bucket give the same decisions.
//!
//! For random quotas (token and leaky, burst) and random sequences
//! of checks (including peeks and impossible requests), refunds and pauses,
//! every store reply is compared with an in-process `Bucket<Gcra>` driven by
//! the server `TIME` the script used: same allow/deny, same `retry_after`,
//! `remaining` and `reset_after`, to the nanosecond.
//!
//! The store keeps TATs in whole nanoseconds, so it runs every quota in the
//! rounded regime (`Gcra::rounded`): a quota such as 3 per 10 ms, whose
//! interval an in-process bucket keeps exact, is compared with the rounded
//! in-process bucket, the one the store documents it enforces.

use crate::support;

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use support::RedisServer;
use tollgate::redis::{RedisConfig, RedisStore, StoreError, StoreReply};
use tollgate::{Bucket, BucketKind, Gcra, Quota, Refusal, Snapshot, Timestamp};

/// The in-process bucket's verdict on `n` permits at `now`, as a store
/// reports it: the snapshot right after an admission, or the refusal.
fn verdict(local: &Bucket<Gcra>, n: u32, now: Timestamp) -> Result<Snapshot, Refusal<'static>> {
    local.check_n(n, now).map(|()| local.snapshot(now))
}

/// The state a store reply reports: after the admission, or at the refusal.
fn snapshot_of(reply: &StoreReply) -> Snapshot {
    match reply.result {
        Ok(s) => s,
        Err(r) => *r.snapshot(),
    }
}

fn server() -> &'static RedisServer {
    static SERVER: OnceLock<RedisServer> = OnceLock::new();
    SERVER.get_or_init(RedisServer::start)
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime")
    })
}

/// A fresh namespace per case, so every case starts from full buckets.
fn unique_prefix() -> Vec<u8> {
    static CASE: AtomicU64 = AtomicU64::new(0);
    format!("sem{}:", CASE.fetch_add(1, Ordering::Relaxed)).into_bytes()
}

#[derive(Debug, Clone)]
enum Op {
    Check(u32),
    Refund(u32),
    Pause(u64),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![
            5 => (0u32..=6).prop_map(Op::Check),
            1 => (0u32..=6).prop_map(Op::Refund),
            2 => (0u64..=25).prop_map(Op::Pause),
        ],
        1..24,
    )
}

fn quota() -> impl Strategy<Value = (BucketKind, u32, u64, u32, u32)> {
    (
        prop_oneof![Just(BucketKind::TokenBucket), Just(BucketKind::LeakyBucket)],
        1u32..=8,          // permits
        3_000u64..=90_000, // period in µs, so T spans µs to tens of ms
        1u32..=5,          // burst (token)
        1u32..=4,          // largest weight (leaky: its burst)
    )
}

async fn run_case(kind: BucketKind, quota: Quota, ops: Vec<Op>) -> Result<(), TestCaseError> {
    // what the store runs: the interval rounded up to whole nanoseconds
    let gcra = Gcra::new(kind, quota).rounded();
    let config = match kind {
        BucketKind::TokenBucket => RedisConfig::token_bucket(quota),
        BucketKind::LeakyBucket => RedisConfig::leaky_bucket(quota),
    }
    .prefix(&unique_prefix())
    .timeout(Duration::from_secs(2))
    .refusal_cache(0);
    let store = RedisStore::connect(server().url(), config)
        .await
        .expect("valid config");
    let local = Bucket::new(gcra);
    let key = b"k";
    for op in ops {
        match op {
            Op::Check(n) => match store.try_check_n(key, n).await {
                Ok(reply) => {
                    let now = Timestamp::from_nanos(reply.server_time_nanos);
                    let expected = verdict(&local, n, now);
                    prop_assert_eq!(reply.result, expected, "check {} at {}", n, now);
                }
                Err(StoreError::Capacity(e)) => {
                    // the same request can never succeed in-process either:
                    // the same permits asked, the same limit
                    let local = local.check_n(n, Timestamp::ZERO);
                    prop_assert!(e.is_never(), "{:?}", e);
                    prop_assert!(local.is_err_and(|r| r.is_never()), "{:?}", local);
                    let local = local.unwrap_err();
                    prop_assert_eq!(
                        (e.requested(), e.limit()),
                        (local.requested(), local.limit())
                    );
                }
                Err(e) => panic!("store failed: {e}"),
            },
            Op::Refund(n) => {
                let reply = store.refund(key, n).await.expect("refund");
                let now = Timestamp::from_nanos(reply.server_time_nanos);
                local.refund(n, now);
                prop_assert_eq!(snapshot_of(&reply), local.snapshot(now), "refund {}", n);
            }
            // Kept real sleep: a pause lets the server's clock run; every
            // reply is compared at the server time it reports, so how long
            // the pause really lasts (longer under load) changes nothing.
            Op::Pause(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn store_decisions_equal_in_process_bucket(
        (kind, permits, period_us, burst, weight) in quota(),
        ops in ops(),
    ) {
        // A leaky bucket's largest request is now its quota's burst (it
        // was `max_weight`, and the burst did not apply to it).
        let burst = match kind {
            BucketKind::TokenBucket => burst,
            BucketKind::LeakyBucket => weight,
        };
        let quota = Quota::new(permits, Duration::from_micros(period_us))
            .and_then(|q| q.with_burst(burst));
        let quota = match quota {
            Ok(q) => q,
            Err(_) => return Err(TestCaseError::reject("invalid quota")),
        };
        runtime().block_on(run_case(kind, quota, ops))?;
    }
}

/// Time until ready and the snapshot agree with the in-process bucket too.
#[test]
fn time_until_ready_and_snapshot_match_in_process() {
    runtime().block_on(async {
        let quota = Quota::per_second(20).unwrap().with_burst(4).unwrap(); // T = 50 ms
        let store = RedisStore::connect(
            server().url(),
            RedisConfig::token_bucket(quota)
                .prefix(&unique_prefix())
                .timeout(Duration::from_secs(2)),
        )
        .await
        .unwrap();
        assert_eq!(
            store.time_until_ready(b"k", 4).await.unwrap(),
            Duration::ZERO
        );
        let reply = store.try_check_n(b"k", 3).await.unwrap();
        assert!(reply.result.is_ok());
        assert_eq!(reply.result.unwrap().remaining(), 1);
        // the same check in-process, at the server's time
        let local = Bucket::new(Gcra::token_bucket(quota));
        let taken_at = Timestamp::from_nanos(reply.server_time_nanos);
        assert_eq!(reply.result, verdict(&local, 3, taken_at));
        // 3 taken: 4 permits need the 3 intervals back, minus the time
        // elapsed since on the server's clock (bracketed by a peek after the
        // call, so a stalled machine cannot fail it)
        let wait = store.time_until_ready(b"k", 4).await.unwrap();
        let peek = store.try_check_n(b"k", 0).await.unwrap();
        let elapsed = Timestamp::from_nanos(peek.server_time_nanos) - taken_at;
        assert!(
            wait <= Duration::from_millis(150) && wait + elapsed >= Duration::from_millis(150),
            "{wait:?} with {elapsed:?} elapsed"
        );
        // the snapshot lies between the in-process bucket's just before and
        // just after it was taken
        let before = local.snapshot(Timestamp::from_nanos(peek.server_time_nanos));
        assert_eq!(snapshot_of(&peek), before);
        let snap = store.snapshot(b"k").await.unwrap();
        let peek = store.try_check_n(b"k", 0).await.unwrap();
        let after = local.snapshot(Timestamp::from_nanos(peek.server_time_nanos));
        assert!(
            (before.remaining()..=after.remaining()).contains(&snap.remaining())
                && (after.reset_after()..=before.reset_after()).contains(&snap.reset_after()),
            "{snap:?} outside {before:?} ..= {after:?}"
        );
        assert!(matches!(
            store.time_until_ready(b"k", 5).await,
            Err(StoreError::Capacity(_))
        ));
    });
}

/// A bucket last written under a server clock one hour ahead (a failover to
/// a primary whose clock is behind) heals exactly as in-process: refused
/// once as "empty at now", never granting extra, the shortened TAT
/// persisted, service back after one interval.
#[test]
fn server_clock_going_back_heals_like_in_process() {
    runtime().block_on(async {
        let quota = Quota::per_second(10).unwrap().with_burst(3).unwrap(); // T = 100 ms
        for kind in [BucketKind::TokenBucket, BucketKind::LeakyBucket] {
            let config = match kind {
                BucketKind::TokenBucket => RedisConfig::token_bucket(quota),
                BucketKind::LeakyBucket => RedisConfig::leaky_bucket(quota),
            }
            .prefix(&unique_prefix())
            .timeout(Duration::from_secs(2))
            .refusal_cache(0);
            let store = RedisStore::connect(server().url(), config).await.unwrap();
            let gcra = Gcra::new(kind, quota);
            let interval = gcra.interval();

            let mut admin = server().admin();
            let (s, us): (u64, u64) = redis::cmd("TIME").query(&mut admin).unwrap();
            let ahead = Timestamp::from_nanos((s + 3600) * 1_000_000_000 + us * 1_000);
            let () = redis::cmd("SET")
                .arg(store.redis_key(b"k"))
                .arg(ahead.as_nanos().to_string())
                .arg("PX")
                .arg(3_600_000 + 1_000)
                .query(&mut admin)
                .unwrap();
            // the same TAT in-process: a fresh bucket admitting at `ahead − T`
            let local = Bucket::new(gcra);
            assert!(local.check_n(1, ahead - interval).is_ok());
            assert_eq!(local.state().tat(local.algorithm()), ahead);

            let reply = store.try_check_n(b"k", 1).await.unwrap();
            let now = Timestamp::from_nanos(reply.server_time_nanos);
            let expected = verdict(&local, 1, now);
            assert_eq!(reply.result, expected, "{kind:?}");
            assert!(reply.result.is_err(), "a heal never grants extra");
            let ttl: i64 = redis::cmd("PTTL")
                .arg(store.redis_key(b"k"))
                .query(&mut admin)
                .unwrap();
            assert!(ttl <= 301, "healed TAT persisted: ttl {ttl} ms");

            // Kept real sleep: the refill under test runs on the server's
            // clock; sleeping at least `retry_after` (+2 ms for the two
            // clocks' rates) is sound however late it ends, and the reply
            // is compared at the server time it reports.
            let retry_after = reply.result.unwrap_err().retry_after();
            tokio::time::sleep(retry_after + Duration::from_millis(2)).await;
            let reply = store.try_check_n(b"k", 1).await.unwrap();
            let now = Timestamp::from_nanos(reply.server_time_nanos);
            let expected = verdict(&local, 1, now);
            assert_eq!(reply.result, expected);
            assert!(reply.result.is_ok(), "service resumes one interval later");
        }
    });
}
