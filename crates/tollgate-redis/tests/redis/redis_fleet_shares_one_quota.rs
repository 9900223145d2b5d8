//! A fleet shares one limit: 4 separate store instances (separate
//! connections, as 4 replicas would have) hammer one key for 3 s, and they
//! behave exactly as ONE bucket would.
//!
//! Every reply carries the server `TIME` its script used, and Redis runs
//! scripts one at a time; so the fleet's decisions, put in execution order,
//! are replayed through one in-process bucket: each must be the very
//! decision (allowed or not, `remaining`, `reset_after`, `retry_after`)
//! that bucket gives at that time. That proves both halves of "shares one
//! quota" whatever the machine's load: nothing is admitted that one bucket
//! would refuse (the total stays within `capacity + rate·t`, also checked
//! directly), and nothing is refused that one bucket would admit (a replica
//! working from a stale or lost state would be caught by its first wrong
//! answer). How many the fleet gets in 3 s on top of that depends only on
//! how often the tasks manage to ask: time the bucket sat full because
//! nobody asked (a loaded machine) is lost for good, most of all by a
//! leaky bucket, which has no tolerance. That figure is printed, not
//! asserted: the old "at least 80 %" check of the leaky bucket (and the
//! token bucket's "no fewer than burst + rate·t − 1") measured the
//! machine's load, and failed on a busy one.

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use support::RedisServer;
use tollgate::keyed::KeyedPath;
use tollgate::redis::{RedisConfig, RedisStore};
use tollgate::{Bucket, BucketKind, Gcra, Quota, Refusal, Snapshot, Timestamp};

const REPLICAS: usize = 4;
const TASKS_PER_REPLICA: usize = 8;
const RUN: Duration = Duration::from_secs(3);

fn server_time_nanos(server: &RedisServer) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(&mut server.admin()).unwrap();
    s * 1_000_000_000 + us * 1_000
}

/// A store's verdict: the snapshot after an admission, or the refusal.
type Verdict = Result<Snapshot, Refusal<'static>>;

/// The limiter's state a verdict reports: after the admission, or at the
/// refusal.
fn snapshot_of(d: &Verdict) -> &Snapshot {
    match d {
        Ok(s) => s,
        Err(r) => r.snapshot(),
    }
}

struct Fleet {
    /// Every decision, with the server time its script ran at.
    decisions: Vec<(u64, Verdict)>,
    /// Server time before the first task started and after the last one
    /// stopped.
    start: u64,
    end: u64,
}

async fn hammer(server: &RedisServer, kind: BucketKind, quota: Quota) -> Fleet {
    let prefix = match kind {
        BucketKind::TokenBucket => &b"fleet-token:"[..],
        BucketKind::LeakyBucket => &b"fleet-leaky:"[..],
    };
    let mut stores = Vec::new();
    for _ in 0..REPLICAS {
        let config = match kind {
            BucketKind::TokenBucket => RedisConfig::token_bucket(quota),
            BucketKind::LeakyBucket => RedisConfig::leaky_bucket(quota),
        }
        .prefix(prefix)
        // generous: a loaded machine delays replies, it must not turn them
        // into failure-policy answers
        .timeout(Duration::from_secs(10));
        // a separate connection per replica
        stores.push(Arc::new(
            RedisStore::connect(server.url(), config).await.unwrap(),
        ));
    }
    for s in &stores {
        let peek = s.check_n(b"other", 0).await;
        assert_eq!(
            peek.as_ref().map_or_else(|e| e.path(), |p| p.path()),
            KeyedPath::Own
        );
    }
    let start = server_time_nanos(server);
    let deadline = Instant::now() + RUN;
    let mut tasks = Vec::new();
    for store in &stores {
        for _ in 0..TASKS_PER_REPLICA {
            let store = Arc::clone(store);
            tasks.push(tokio::spawn(async move {
                let mut seen = Vec::new();
                while Instant::now() < deadline {
                    // the raw store call: the decision and the server time
                    // it was made at (no refusal cache in between)
                    let reply = store
                        .try_check_n(b"shared", 1)
                        .await
                        .expect("the store answers within its timeout");
                    let allowed = reply.result.is_ok();
                    seen.push((reply.server_time_nanos, reply.result));
                    if !allowed {
                        tokio::task::yield_now().await;
                    }
                }
                seen
            }));
        }
    }
    let mut decisions = Vec::new();
    for t in tasks {
        decisions.extend(t.await.unwrap());
    }
    let end = server_time_nanos(server);
    Fleet {
        decisions,
        start,
        end,
    }
}

/// Replays the fleet's decisions in the order Redis made them through one
/// in-process bucket and checks each is that bucket's decision. Returns
/// (admitted, ns the bucket sat full with nobody asking).
fn replay(kind: BucketKind, quota: Quota, fleet: &mut Fleet) -> (u64, u64) {
    // Execution order: server time and, within one microsecond (several
    // scripts can share a `TIME` reading), admissions before refusals and
    // the fuller bucket first: the only order one bucket produces at one
    // instant.
    fleet.decisions.sort_by_key(|(at, d)| {
        (
            *at,
            d.is_err(),
            std::cmp::Reverse(snapshot_of(d).remaining()),
        )
    });
    let bucket = Bucket::new(Gcra::new(kind, quota));
    let start = Timestamp::from_nanos(fleet.start);
    let (mut admitted, mut idle) = (0, 0);
    for (i, (at, decision)) in fleet.decisions.iter().enumerate() {
        let now = Timestamp::from_nanos(*at);
        // a TAT at or before `now` is a full bucket: since then, nobody
        // asked
        let full_since = bucket.state().tat(bucket.algorithm()).max(start);
        if decision.is_ok() && full_since < now {
            idle += (now - full_since).as_nanos() as u64;
        }
        // one bucket's verdict: on an admission, its state right after
        let expected = bucket.check_n(1, now).map(|()| bucket.snapshot(now));
        assert!(
            !expected.is_err_and(|r| r.is_never()),
            "one permit always fits the bucket"
        );
        assert_eq!(
            *decision,
            expected,
            "decision {i} of {} (at {at} ns) differs from one bucket's",
            fleet.decisions.len()
        );
        admitted += u64::from(decision.is_ok());
    }
    (admitted, idle)
}

fn check(kind: BucketKind, quota: Quota, mut fleet: Fleet) {
    let (admitted, idle) = replay(kind, quota, &mut fleet);
    let interval = Gcra::new(kind, quota).interval_nanos();
    let capacity = match kind {
        BucketKind::TokenBucket => u64::from(quota.burst()),
        BucketKind::LeakyBucket => 1,
    };
    let span = fleet.end - fleet.start;
    let bound = capacity + span / interval;
    eprintln!(
        "{kind:?}: {} decisions, admitted {admitted}, capacity + rate·t = {bound} \
         (t = {span} ns), bucket full with nobody asking for {idle} ns",
        fleet.decisions.len()
    );
    // never more than one bucket allows over the run (implied by the
    // replay; checked directly as the headline property)
    assert!(admitted <= bound, "admitted {admitted}, at most {bound}");
    // the fleet did contend: the limit was hit and the bucket refilled
    assert!(
        fleet.decisions.iter().any(|(_, d)| d.is_err()),
        "never refused: the test did not reach the limit"
    );
    assert!(admitted > capacity, "admitted {admitted}: no refill seen");
}

// One test runs both buckets in turn: each run burns CPU on purpose.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_replicas_share_one_limit() {
    let server = RedisServer::start();
    // 50 per second (T = 20 ms), burst 10
    let quota = Quota::per_second(50).unwrap().with_burst(10).unwrap();
    for kind in [BucketKind::TokenBucket, BucketKind::LeakyBucket] {
        let fleet = hammer(&server, kind, quota).await;
        check(kind, quota, fleet);
    }
}
