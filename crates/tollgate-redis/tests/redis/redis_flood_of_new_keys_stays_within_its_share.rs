//! Issue 28, item 1: a flood of distinct new keys from one client, at full
//! speed for 60 s, against a 64 MB Redis run as documented (`maxmemory
//! 64mb`, `maxmemory-policy volatile-ttl`). Before the new-key budget, the
//! same flood filled that server in about 8 s; now the flooded rule keeps
//! at most its documented share of keys, the server never reaches its
//! `maxmemory`, and legitimate clients are decided exactly as one
//! in-process bucket would decide them, meanwhile:
//!
//! - on the flooded rule (through another replica), a client throttled
//!   before the flood stays refused, and a client with permits left is
//!   admitted;
//! - on another rule of the same server (5 per 5 s, burst 5), a client
//!   sending 6 every 6 s gets 5 and is refused the sixth;
//! - new clients arriving on the flooded replica share the rule's overflow
//!   key with the flood: never admitted without limit (the overflow key
//!   admits at most its burst plus its rate), never the failure policy.
//!
//! Every legitimate decision is replayed through an in-process bucket at
//! the server time its script ran (`StoreReply::server_time_nanos`), so
//! the checks are exact whatever the skew between the test's clock and the
//! server's.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redis::Connection;
use support::RedisServer;
use tollgate::keyed::KeyedPath;
use tollgate::redis::{RedisConfig, RedisStore};
use tollgate::{Bucket, Gcra, Quota, Timestamp};

const FLOOD: Duration = Duration::from_secs(60);
const IN_FLIGHT: usize = 64;
const MAXMEMORY: u64 = 64 * 1024 * 1024;
/// The flooded rule's new-key budget per replica.
const NEW_KEYS_PER_SECOND: u32 = 100;
/// A timeout no loaded machine reaches: a failure-policy answer would not
/// be the decision under test.
const PATIENT: Duration = Duration::from_secs(10);

/// The flooded rule: 60 per hour, burst 10 (T = 60 s; a key lives up to
/// 600 s).
fn hourly() -> Quota {
    Quota::per_hour(60).unwrap().with_burst(10).unwrap()
}

/// The other rule: 5 per 5 s, burst 5 (T = 1 s).
fn paced() -> Quota {
    Quota::new(5, Duration::from_secs(5)).unwrap()
}

fn info_u64(admin: &mut Connection, section: &str, field: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg(section).query(admin).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("INFO {section} has {field}"))
}

/// One sample of the server, once a second.
struct Sample {
    /// Seconds since the flood started, when the sample was read.
    at: f64,
    used_memory: u64,
    keys: u64,
}

/// A legitimate client: its store decisions, replayed through an
/// in-process bucket of the same rule at the server's time.
struct Client {
    name: &'static str,
    key: &'static [u8],
    model: Bucket<Gcra>,
    admitted: u32,
    refused: u32,
}

impl Client {
    fn new(name: &'static str, key: &'static [u8], quota: Quota) -> Self {
        Self {
            name,
            key,
            // what the store runs: T rounded up to whole nanoseconds
            model: Bucket::new(Gcra::token_bucket(quota).rounded()),
            admitted: 0,
            refused: 0,
        }
    }

    /// One check through `store`: the store's own decision (no cache, no
    /// failure policy, no overflow), the model's at the same server time.
    async fn check(&mut self, store: &RedisStore) -> bool {
        let reply = store
            .try_check_n(self.key, 1)
            .await
            .unwrap_or_else(|e| panic!("{}: the store did not decide: {e:?}", self.name));
        assert_eq!(reply.path, KeyedPath::Own, "{}", self.name);
        let now = Timestamp::from_nanos(reply.server_time_nanos);
        let expected = self.model.check(now).is_ok();
        assert_eq!(
            reply.result.is_ok(),
            expected,
            "{}: the store and one in-process bucket disagree: {reply:?}",
            self.name
        );
        if expected {
            self.admitted += 1;
        } else {
            self.refused += 1;
        }
        expected
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_new_keys_stays_within_its_share_and_legitimate_clients_stay_exact() {
    let server = RedisServer::start();
    let mut admin = server.admin();
    for (name, value) in [
        ("maxmemory", MAXMEMORY.to_string()),
        ("maxmemory-policy", "volatile-ttl".to_string()),
    ] {
        let () = redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .query(&mut admin)
            .unwrap();
    }
    let rule = |quota| {
        RedisConfig::token_bucket(quota)
            .timeout(PATIENT)
            .refusal_cache(0)
    };
    let flooded = rule(hourly())
        .prefix(b"api:")
        .new_keys_per_second(NEW_KEYS_PER_SECOND);
    // the documented bound: burst + rate × L, L = 10 × 60 s
    let bound = flooded.max_live_keys_per_replica();
    assert_eq!(bound, 100 + 100 * 600);
    // two replicas of the flooded rule, and another rule
    let flood = Arc::new(
        RedisStore::connect(server.url(), flooded.clone())
            .await
            .unwrap(),
    );
    let replica = RedisStore::connect(server.url(), flooded).await.unwrap();
    let other = RedisStore::connect(server.url(), rule(paced()).prefix(b"other:"))
        .await
        .unwrap();

    let mut abuser = Client::new("throttled client", b"abuser", hourly());
    let mut steady = Client::new("client with permits left", b"steady", hourly());
    let mut paced_client = Client::new("client of the other rule", b"paced", paced());
    for _ in 0..10 {
        assert!(
            abuser.check(&replica).await,
            "a fresh bucket admits its burst"
        );
    }
    assert!(!abuser.check(&replica).await, "then refuses");
    let abuser_throttled_at = Instant::now();
    assert!(steady.check(&replica).await);

    // the server, once a second, from its own thread
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let sampler = {
        let stop = stop.clone();
        let mut admin = server.admin();
        std::thread::spawn(move || {
            let mut samples = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let used_memory = info_u64(&mut admin, "memory", "used_memory");
                let keys: u64 = redis::cmd("DBSIZE").query(&mut admin).unwrap();
                let at = start.elapsed().as_secs_f64();
                samples.push(Sample {
                    at,
                    used_memory,
                    keys,
                });
                // a fixed pace: one sample a second
                std::thread::sleep(Duration::from_secs(1));
            }
            samples
        })
    };

    // the flood: distinct keys, IN_FLIGHT checks at a time, on one store
    let checks = Arc::new(AtomicU64::new(0));
    let overflow_admitted = Arc::new(AtomicU64::new(0));
    let overflow_refused = Arc::new(AtomicU64::new(0));
    let own = Arc::new(AtomicU64::new(0));
    let mut flooders = tokio::task::JoinSet::new();
    for task in 0..IN_FLIGHT {
        let (flood, checks, own) = (flood.clone(), checks.clone(), own.clone());
        let (admitted, refused) = (overflow_admitted.clone(), overflow_refused.clone());
        flooders.spawn(async move {
            let mut i = 0u64;
            while start.elapsed() < FLOOD {
                let d = flood.check(format!("flood-{task}-{i}").as_bytes()).await;
                i += 1;
                checks.fetch_add(1, Ordering::Relaxed);
                match (
                    d.as_ref().map_or_else(|r| r.path(), |p| p.path()),
                    d.is_ok(),
                ) {
                    (KeyedPath::Own, _) => own.fetch_add(1, Ordering::Relaxed),
                    (KeyedPath::SharedOverflow, true) => admitted.fetch_add(1, Ordering::Relaxed),
                    (KeyedPath::SharedOverflow, false) => refused.fetch_add(1, Ordering::Relaxed),
                    (path, _) => panic!("a flood check answered by {path:?}: {d:?}"),
                };
            }
        });
    }

    // the legitimate clients, on a schedule
    let mut newcomers = 0;
    let (mut last_round, mut full_rounds) = (None, 0);
    for second in 0..60u64 {
        tokio::time::sleep_until((start + Duration::from_secs(second)).into()).await;
        // refused until 60 s after its burst: checked for 50 s
        if abuser_throttled_at.elapsed() < Duration::from_secs(50) {
            assert!(
                !abuser.check(&replica).await,
                "the throttled client stays refused"
            );
        }
        // 6 more over the minute: 7 of a burst of 10
        if second % 10 == 5 {
            assert!(
                steady.check(&replica).await,
                "the client with permits left is admitted"
            );
        }
        // 6 every 6 s: 5 admitted (the bucket is full again 5 s after the
        // last round), the sixth refused if it reaches the server within
        // T = 1 s of the first. (A round the schedule delayed so much that
        // the next one follows it within 5 s is still checked against the
        // model, not against the count.)
        if second % 6 == 0 {
            let round = Instant::now();
            let admitted_before = paced_client.admitted;
            for _ in 0..6 {
                paced_client.check(&other).await;
            }
            if last_round.is_none_or(|at: Instant| round - at >= Duration::from_millis(5_200)) {
                assert!(paced_client.admitted - admitted_before >= 5);
                full_rounds += 1;
            }
            last_round = Some(round);
        }
        // a new client on the flooded replica: the overflow key (or, if the
        // budget had a token left, its own bucket), never the failure policy
        if second % 5 == 2 {
            let d = flood.check(format!("newcomer-{second}").as_bytes()).await;
            let path = d.as_ref().map_or_else(|r| r.path(), |p| p.path());
            match (path, d.is_ok()) {
                (KeyedPath::SharedOverflow, true) => {
                    overflow_admitted.fetch_add(1, Ordering::Relaxed);
                }
                (KeyedPath::SharedOverflow, false) | (KeyedPath::Own, _) => {}
                _ => panic!("a newcomer answered by {path:?}: {d:?}"),
            }
            newcomers += 1;
        }
    }
    while let Some(done) = flooders.join_next().await {
        done.unwrap();
    }
    let flood_took = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    let samples = sampler.join().unwrap();

    let checks = checks.load(Ordering::Relaxed);
    let peak_memory = samples.iter().map(|s| s.used_memory).max().unwrap();
    let peak_keys = samples.iter().map(|s| s.keys).max().unwrap();
    let evicted = info_u64(&mut admin, "stats", "evicted_keys");
    eprintln!(
        "flood: {checks} checks in {flood_took:?} ({:.0}/s, {IN_FLIGHT} in flight): {} own keys, overflow {} admitted / {} refused; {newcomers} newcomers; peak used_memory {peak_memory} B of {MAXMEMORY}, peak keys {peak_keys} (bound {bound} + overflow), evicted {evicted}",
        checks as f64 / flood_took.as_secs_f64(),
        own.load(Ordering::Relaxed),
        overflow_admitted.load(Ordering::Relaxed),
        overflow_refused.load(Ordering::Relaxed),
    );
    eprintln!(
        "legitimate: throttled {}/{} refused, steady {} admitted, other rule {} admitted / {} refused ({full_rounds} of 10 rounds on time)",
        abuser.refused,
        abuser.admitted + abuser.refused,
        steady.admitted,
        paced_client.admitted,
        paced_client.refused
    );

    // the legitimate clients' decisions were exact (checked above)
    assert_eq!(abuser.admitted, 10, "only its burst, before the flood");
    assert!(abuser.refused >= 45, "checked every second for 50 s");
    assert_eq!(steady.admitted, 7);
    // the server never filled, nothing was evicted, nothing refused for
    // memory
    assert!(samples.len() >= 55, "{} samples", samples.len());
    for s in &samples {
        assert!(
            s.used_memory < MAXMEMORY,
            "{} B at {:.1} s",
            s.used_memory,
            s.at
        );
        // keys the budget let the flood create by then (burst + rate × t),
        // the overflow key, the legitimate clients' 3
        let budget = u64::from(NEW_KEYS_PER_SECOND) * (1 + s.at.ceil() as u64);
        assert!(s.keys <= budget + 1 + 3, "{} keys at {:.1} s", s.keys, s.at);
        assert!(s.keys <= bound + 1 + 3);
    }
    assert_eq!(evicted, 0);
    for store in [&*flood, &replica, &other] {
        assert_eq!(store.memory_pressure(), 0);
        assert_eq!(store.store_failures(), 0);
    }
    // the flood did not get through the overflow key beyond its quota:
    // burst 10, one more per 60 s
    let through = overflow_admitted.load(Ordering::Relaxed);
    assert!(
        through <= 10 + 2,
        "{through} admitted through the overflow key"
    );
    assert!(checks > 10 * bound / 100, "the flood ran: {checks} checks");
}
