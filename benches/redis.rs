//! Decisions per second against one local redis-server, 64 concurrent
//! tasks: tollgate's store vs a textbook Lua GCRA (the go-redis/redis_rate
//! design: TAT as float seconds since 2017, `SET .. EX`), written here from
//! its description as a baseline in the same run; and round trips per
//! decision, counted by the server (`INFO commandstats`).
//!
//! Starts its own `redis-server` (same harness as the tests). Extra figures
//! are printed as `FIGURE name value unit note` lines.

// Only the redis-server harness of the tests' support (the rest of it is
// test instrumentation this bench does not use).
#[allow(dead_code)]
#[path = "../crates/tollgate-test-support/src/redis_server.rs"]
mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use redis::Script;
use redis::aio::ConnectionManager;
use support::RedisServer;
use tokio::runtime::Runtime;
use tollgate::keyed::KeyedPath;
use tollgate::redis::{RedisConfig, RedisStore, StorePermit};
use tollgate::{Quota, Refusal};

const TASKS: u64 = 64;
const KEYS: u64 = 1024;

/// The textbook GCRA in Lua, after the go-redis/redis_rate design: times
/// are float seconds since 2017-01-01 from `TIME`, the TAT is stored as a
/// float with `SET .. EX ceil(reset_after)`.
const TEXTBOOK_GCRA: &str = r#"
local key = KEYS[1]
local burst = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local epoch = 1483228800
local emission_interval = period / rate
local increment = emission_interval * cost
local burst_offset = emission_interval * burst
local t = redis.call("TIME")
local now = (t[1] - epoch) + (t[2] / 1000000)
local tat = redis.call("GET", key)
if not tat then tat = now else tat = tonumber(tat) end
tat = math.max(tat, now)
local new_tat = tat + increment
local allow_at = new_tat - burst_offset
local diff = now - allow_at
local remaining = math.floor(diff / emission_interval)
if remaining < 0 then
  return {0, 0, tostring(diff * -1), tostring(tat - now)}
end
local reset_after = new_tat - now
if reset_after > 0 then
  redis.call("SET", key, new_tat, "EX", math.ceil(reset_after))
end
return {cost, remaining, tostring(-1), tostring(reset_after)}
"#;

struct Textbook {
    connection: ConnectionManager,
    script: Script,
}

impl Textbook {
    async fn check(&self, key: &[u8]) -> bool {
        let mut c = self.connection.clone();
        let reply: (i64, i64, String, String) = self
            .script
            .key([b"rr:".as_slice(), key].concat())
            .arg(1_000_000)
            .arg(1_000_000)
            .arg(1)
            .arg(1)
            .invoke_async(&mut c)
            .await
            .expect("textbook script");
        reply.0 > 0
    }
}

/// Which state answered a store check: the store (`Own`), the refusal
/// cache (`Cached`) or the failure policy (`Fallback`).
fn path_of(d: &Result<StorePermit, Refusal<'static>>) -> KeyedPath {
    d.as_ref().map_or_else(|e| e.path(), |p| p.path())
}

fn key(i: u64) -> [u8; 8] {
    (i % KEYS).to_be_bytes()
}

/// `total` decisions from 64 tasks; returns the elapsed time.
async fn run_tollgate(store: &Arc<RedisStore>, total: u64) -> Duration {
    let per_task = total.div_ceil(TASKS);
    let start = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let store = Arc::clone(store);
            tokio::spawn(async move {
                for i in 0..per_task {
                    let d = store.check(&key(t * per_task + i)).await;
                    assert_eq!(path_of(&d), KeyedPath::Own);
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    start.elapsed()
}

async fn run_textbook(tb: &Arc<Textbook>, total: u64) -> Duration {
    let per_task = total.div_ceil(TASKS);
    let start = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let tb = Arc::clone(tb);
            tokio::spawn(async move {
                for i in 0..per_task {
                    let _ = tb.check(&key(t * per_task + i)).await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    start.elapsed()
}

fn evalsha_calls(calls: &BTreeMap<String, u64>) -> u64 {
    calls.get("evalsha").copied().unwrap_or(0)
}

/// Client → server commands between two readings (the script's own
/// TIME/GET/SET run inside the server and are not round trips).
fn round_trips(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> u64 {
    let inner = ["time", "get", "set", "info", "del"];
    after
        .iter()
        .filter(|(name, _)| !inner.contains(&name.as_str()))
        .map(|(name, &c)| c - before.get(name).copied().unwrap_or(0))
        .sum()
}

fn bench(c: &mut Criterion) {
    let server = RedisServer::start();
    let rt = Runtime::new().unwrap();
    let quota = Quota::per_second(1_000_000).unwrap(); // mostly admitted: the full write path
    let store = Arc::new(
        rt.block_on(RedisStore::connect(
            server.url(),
            RedisConfig::token_bucket(quota)
                .prefix(b"tg:")
                .timeout(Duration::from_secs(2)),
        ))
        .unwrap(),
    );
    let textbook = Arc::new(Textbook {
        connection: rt
            .block_on(ConnectionManager::new(
                redis::Client::open(server.url()).unwrap(),
            ))
            .unwrap(),
        script: Script::new(TEXTBOOK_GCRA),
    });
    // warm up: load both scripts
    rt.block_on(run_tollgate(&store, TASKS));
    rt.block_on(run_textbook(&textbook, TASKS));

    // Round trips per decision.
    let n = 160 * TASKS; // a multiple of the task count
    let before = server.command_calls();
    rt.block_on(run_tollgate(&store, n));
    let after = server.command_calls();
    let rt_tollgate = round_trips(&before, &after) as f64 / n as f64;
    println!(
        "FIGURE redis_round_trips_per_decision {rt_tollgate:.3} trips tollgate, 64 tasks, admitted"
    );
    assert_eq!(evalsha_calls(&after) - evalsha_calls(&before), n);

    let cached = rt.block_on(async {
        let strict = RedisStore::connect(
            server.url(),
            RedisConfig::token_bucket(Quota::per_minute(1).unwrap()).prefix(b"tgc:"),
        )
        .await
        .unwrap();
        let _ = strict.check(b"hot").await; // admitted
        let _ = strict.check(b"hot").await; // refused by the store, cached
        let before = server.command_calls();
        let m = 10_000;
        let start = Instant::now();
        for _ in 0..m {
            let d = strict.check(b"hot").await;
            assert_eq!(path_of(&d), KeyedPath::Cached);
        }
        let took = start.elapsed();
        let after = server.command_calls();
        (round_trips(&before, &after) as f64 / f64::from(m), took / m)
    });
    println!(
        "FIGURE redis_round_trips_per_cached_refusal {:.3} trips refused key within retry_after",
        cached.0
    );
    println!(
        "FIGURE redis_cached_refusal_latency {} ns one task, no store call",
        cached.1.as_nanos()
    );

    // Throughput, the same work in alternation, 5 rounds; medians.
    let n = 320 * TASKS;
    let mut tg = Vec::new();
    let mut tb = Vec::new();
    let (mut tg_usec, mut tb_usec) = (0, 0);
    let evalsha_usec = || server.command_usec().get("evalsha").copied().unwrap_or(0);
    for _ in 0..5 {
        let u0 = evalsha_usec();
        tg.push(n as f64 / rt.block_on(run_tollgate(&store, n)).as_secs_f64());
        let u1 = evalsha_usec();
        tb.push(n as f64 / rt.block_on(run_textbook(&textbook, n)).as_secs_f64());
        let u2 = evalsha_usec();
        tg_usec += u1 - u0;
        tb_usec += u2 - u1;
    }
    // server CPU per script call (INFO commandstats usec): the script's own
    // cost, without the loopback and client noise
    let per_call = |usec: u64| usec as f64 * 1000.0 / (5 * n) as f64;
    println!(
        "FIGURE redis_server_ns_per_call_tollgate {:.0} ns EVALSHA of the tollgate GCRA script, server CPU",
        per_call(tg_usec)
    );
    println!(
        "FIGURE redis_server_ns_per_call_textbook {:.0} ns EVALSHA of the textbook script, server CPU",
        per_call(tb_usec)
    );
    tg.sort_by(f64::total_cmp);
    tb.sort_by(f64::total_cmp);
    println!(
        "FIGURE redis_decisions_per_sec_tollgate {:.0} decisions/s 64 tasks, one redis-server, loopback",
        tg[2]
    );
    println!(
        "FIGURE redis_decisions_per_sec_textbook {:.0} decisions/s redis_rate-style Lua baseline, same run",
        tb[2]
    );
    println!(
        "FIGURE redis_tollgate_vs_textbook {:.3} ratio >1 means tollgate faster",
        tg[2] / tb[2]
    );

    let mut group = c.benchmark_group("redis_64_tasks");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(3));
    group.warm_up_time(Duration::from_millis(500));
    group.throughput(Throughput::Elements(1));
    group.bench_function("tollgate_store", |b| {
        b.iter_custom(|iters| rt.block_on(run_tollgate(&store, iters.max(TASKS))))
    });
    group.bench_function("textbook_lua_gcra", |b| {
        b.iter_custom(|iters| rt.block_on(run_textbook(&textbook, iters.max(TASKS))))
    });
    group.finish();
    drop(server);
}

criterion_group!(benches, bench);
criterion_main!(benches);
