//! The soak driver of `scripts/soak.sh`: HTTP load over loopback against
//! the demo server (`examples/server.rs`) for a while, with key churn and a
//! Redis restart in the middle, then a verdict.
//!
//! It owns the `redis-server` the server's Redis-backed rule talks to
//! (started before the load, killed at half time as a crash would, started
//! again empty on the same port after the outage), opens `--connections`
//! keep-alive connections that send as fast as the server answers, and
//! checks:
//!
//! - **memory**: the server's RSS (`/proc/<pid>/status`) after the warm-up
//!   and at the end; the end (and the peak of the second half) may exceed
//!   the warm-up figure by at most 25 % + 8 MiB (at ~30,000 requests/s a
//!   leak of one byte per request fails a 10-minute run);
//! - **limits, per key**: every client key (one of tens of thousands, a new
//!   generation of keys every few seconds, sent as `X-Forwarded-For` from a
//!   trusted loopback proxy) is admitted at most `burst + rate·t` by each
//!   rule, `t` from the key's first request sent to its last answer, read
//!   on this process's monotonic clock and stretched by
//!   [`CLOCK_RATE_TOLERANCE`] (the server decides on its own TSC clock; a
//!   key over the exact bound but within the stretch is counted and shown,
//!   not failed); on the Redis rule, fail-open admissions (flagged) do not
//!   count and a key active across the restart may get one more burst
//!   (Redis kept nothing);
//! - **the outage**: requests sent to the Redis rule while Redis is down
//!   (after a grace of the store timeout plus the longest cached refusal)
//!   are answered by the configured failure policy and flagged (the demo
//!   server's `x-tollgate-store-unavailable` header): 200 when it fails
//!   open, 429 with `Retry-After: 1` when it fails closed; none are
//!   flagged before;
//! - **recovery**: after the restart the Redis rule answers from Redis again
//!   (unflagged) within `--recovery` seconds, and nothing is flagged after
//!   that.
//!
//! Prints `SOAK name value` figures and exits 1 if a check fails. See
//! `scripts/soak.sh` for the rules and the server.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The two rules of the soak's rules file (kept in step with
/// `scripts/soak.sh`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Rule {
    /// `GET /api/hello`: in-process buckets, `rate` per second, `burst`.
    Churn,
    /// `POST /api/login`: buckets in Redis.
    Redis,
}

const CHURN_RATE: f64 = 5.0;
const CHURN_BURST: u64 = 5;
const REDIS_RATE: f64 = 2.0;
const REDIS_BURST: u64 = 3;
/// How much faster than this process's monotonic clock the server's clock
/// may run. The in-process rule decides on the HTTP layer's clock: the TSC
/// through `quanta`, scaled by a ratio that `quanta` calibrates once, at
/// start-up, against the OS monotonic clock over about a millisecond. The
/// two clocks then run at slightly different rates: measured on the CI
/// machine (2 cores, 16 processes calibrating at once beside two busy
/// loops, 96 processes), the TSC clock ran between 1.7e-5 slower and
/// 3.9e-5 faster. A key pinned to its limit for 4.4 s at 5 per second can
/// thus see its 22nd refill on the server's clock up to 0.2 ms before this
/// clock says it is due. 1e-4 is 2.5 times the largest rate error
/// measured; over a 4.4 s key life it stretches `t` by 0.44 ms, a 450th
/// of one refill interval at 5 per second. It assumes `quanta` is
/// optimised: in a debug build of it the calibration came out up to
/// 1.95e-4 fast (Cargo.toml optimises it in the dev profile, the one CI's
/// soak uses).
const CLOCK_RATE_TOLERANCE: f64 = 1e-4;
/// Client keys active at once, and how long a generation of keys lives.
const ACTIVE_KEYS: u64 = 1_000;
const GENERATION: Duration = Duration::from_secs(5);

struct Args {
    addr: SocketAddr,
    server_pid: u32,
    redis_port: u16,
    run: Duration,
    connections: usize,
    fail_open: bool,
    store_timeout: Duration,
    recovery: Duration,
}

fn parse_args() -> Args {
    let mut args = std::env::args().skip(1);
    let mut get = HashMap::new();
    while let Some(name) = args.next() {
        let value = args
            .next()
            .unwrap_or_else(|| panic!("{name} needs a value"));
        get.insert(name.trim_start_matches("--").to_string(), value);
    }
    let need = |name: &str| {
        get.get(name)
            .cloned()
            .unwrap_or_else(|| panic!("--{name} is required"))
    };
    let secs = |name: &str, default: f64| {
        Duration::from_secs_f64(get.get(name).map_or(default, |v| v.parse().expect(name)))
    };
    Args {
        addr: need("addr").parse().expect("--addr host:port"),
        server_pid: need("server-pid").parse().expect("--server-pid"),
        redis_port: need("redis-port").parse().expect("--redis-port"),
        run: secs("seconds", 600.0),
        connections: get
            .get("connections")
            .map_or(50, |v| v.parse().expect("--connections")),
        fail_open: match get.get("failure").map_or("open", String::as_str) {
            "open" => true,
            "closed" => false,
            other => panic!("--failure open|closed, not {other}"),
        },
        store_timeout: secs("store-timeout", 0.5),
        recovery: secs("recovery", 15.0),
    }
}

/// A `redis-server` on `port` beside a shell watchdog that kills it if this
/// process dies (as in the tests' harness).
struct Redis {
    port: u16,
    server: Option<(Child, Child)>,
}

impl Redis {
    fn start(port: u16) -> Self {
        let mut r = Self { port, server: None };
        r.spawn();
        r
    }

    fn spawn(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let mut child = Command::new("redis-server")
                .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server on PATH");
            let watchdog = Command::new("sh")
                .arg("-c")
                .arg(r#"while kill -0 "$1" 2>/dev/null && kill -0 "$2" 2>/dev/null; do sleep 0.2; done; kill -9 "$2" 2>/dev/null; exit 0"#)
                .arg("soak-redis-watchdog")
                .arg(std::process::id().to_string())
                .arg(child.id().to_string())
                .spawn()
                .expect("sh");
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break; // the port is not free yet: try again
                }
                if ping(self.port) {
                    self.server = Some((child, watchdog));
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
            let mut watchdog = watchdog;
            let _ = watchdog.kill();
            let _ = watchdog.wait();
            assert!(
                Instant::now() < deadline,
                "redis-server did not start on {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kills it as a crash would (nothing is saved).
    fn crash(&mut self) {
        if let Some((mut server, mut watchdog)) = self.server.take() {
            let _ = server.kill();
            let _ = server.wait();
            let _ = watchdog.kill();
            let _ = watchdog.wait();
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.crash();
    }
}

fn ping(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    let mut buf = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// What one key got from one rule.
#[derive(Debug, Default, Clone, Copy)]
struct KeyStats {
    first_sent: Option<Duration>,
    last_answered: Duration,
    admitted: u64,
    refused: u64,
}

/// A Redis-rule answer, for the outage checks.
#[derive(Debug, Clone, Copy)]
struct RedisAnswer {
    sent: Duration,
    answered: Duration,
    status: u16,
    /// Answered by the failure policy (`x-tollgate-store-unavailable`).
    flagged: bool,
    retry_after_one: bool,
}

#[derive(Default)]
struct Log {
    keys: HashMap<(Rule, u64), KeyStats>,
    redis: Vec<RedisAnswer>,
    errors: u64,
}

struct Response {
    status: u16,
    flag: Option<String>,
    retry_after: Option<String>,
}

/// One keep-alive connection: sends a request, reads one response
/// (`content-length` bodies, as axum sends).
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    async fn open(addr: SocketAddr) -> std::io::Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream,
            buf: Vec::with_capacity(4096),
        })
    }

    async fn send(&mut self, request: &[u8]) -> std::io::Result<Response> {
        self.stream.write_all(request).await?;
        loop {
            if let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.buf[..end]).to_ascii_lowercase();
                let mut lines = head.split("\r\n");
                let status = lines
                    .next()
                    .and_then(|l| l.split(' ').nth(1))
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| std::io::Error::other("bad status line"))?;
                let mut len = 0;
                let (mut flag, mut retry_after) = (None, None);
                for l in lines {
                    if let Some((k, v)) = l.split_once(':') {
                        match k.trim() {
                            "content-length" => len = v.trim().parse().unwrap_or(0),
                            "x-tollgate-store-unavailable" => flag = Some(v.trim().to_string()),
                            "retry-after" => retry_after = Some(v.trim().to_string()),
                            _ => {}
                        }
                    }
                }
                let total = end + 4 + len;
                if self.buf.len() >= total {
                    self.buf.drain(..total);
                    return Ok(Response {
                        status,
                        flag,
                        retry_after,
                    });
                }
            }
            let mut chunk = [0u8; 4096];
            let n = self.stream.read(&mut chunk).await?;
            if n == 0 {
                return Err(std::io::Error::other("connection closed"));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// The client key for request `k` of connection `c` at `elapsed`: one of
/// the current generation's [`ACTIVE_KEYS`] keys.
fn key_for(elapsed: Duration, c: u64, k: u64) -> u64 {
    let generation = elapsed.as_nanos() as u64 / GENERATION.as_nanos() as u64;
    let mixed = (c.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ k.wrapping_mul(0xC2B2_AE3D_27D4_EB4F))
        .rotate_left(29)
        .wrapping_mul(0x1656_67B1_9E37_79F9);
    generation * ACTIVE_KEYS + (mixed >> 33) % ACTIVE_KEYS
}

fn ip(key: u64) -> String {
    format!(
        "10.{}.{}.{}",
        (key >> 16) & 255,
        (key >> 8) & 255,
        key & 255
    )
}

async fn client(
    c: u64,
    addr: SocketAddr,
    start: Instant,
    run: Duration,
    log: Arc<Mutex<Log>>,
    requests: Arc<AtomicU64>,
) {
    let mut conn: Option<Conn> = None;
    let mut k = 0u64;
    let mut keys: HashMap<(Rule, u64), KeyStats> = HashMap::new();
    let mut redis = Vec::new();
    let mut errors = 0;
    while start.elapsed() < run {
        k += 1;
        let rule = if k.is_multiple_of(2) {
            Rule::Churn
        } else {
            Rule::Redis
        };
        let sent = start.elapsed();
        let key = key_for(sent, c, k);
        let request = match rule {
            Rule::Churn => format!(
                "GET /api/hello HTTP/1.1\r\nhost: {addr}\r\nx-forwarded-for: {}\r\n\r\n",
                ip(key)
            ),
            Rule::Redis => format!(
                "POST /api/login HTTP/1.1\r\nhost: {addr}\r\nx-forwarded-for: {}\r\ncontent-length: 0\r\n\r\n",
                ip(key)
            ),
        };
        if conn.is_none() {
            match Conn::open(addr).await {
                Ok(c) => conn = Some(c),
                Err(_) => {
                    errors += 1;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            }
        }
        let Some(open) = conn.as_mut() else { continue };
        let response = match open.send(request.as_bytes()).await {
            Ok(r) => r,
            Err(_) => {
                errors += 1;
                conn = None;
                continue;
            }
        };
        let answered = start.elapsed();
        requests.fetch_add(1, Ordering::Relaxed);
        let flagged = response.flag.is_some();
        let stats = keys.entry((rule, key)).or_default();
        stats.first_sent.get_or_insert(sent);
        stats.last_answered = answered;
        // fail-open admissions are the store's absence, not its decision
        if response.status == 200 && !flagged {
            stats.admitted += 1;
        } else {
            stats.refused += 1;
        }
        if rule == Rule::Redis {
            redis.push(RedisAnswer {
                sent,
                answered,
                status: response.status,
                flagged,
                retry_after_one: response.retry_after.as_deref() == Some("1"),
            });
        }
    }
    let mut log = log.lock().unwrap();
    for (key, s) in keys {
        let merged = log.keys.entry(key).or_default();
        merged.first_sent = match (merged.first_sent, s.first_sent) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        merged.last_answered = merged.last_answered.max(s.last_answered);
        merged.admitted += s.admitted;
        merged.refused += s.refused;
    }
    log.redis.extend(redis);
    log.errors += errors;
}

fn main() {
    let args = parse_args();
    let failures = Arc::new(AtomicU64::new(0));
    let fail = {
        let failures = Arc::clone(&failures);
        move |msg: String| {
            failures.fetch_add(1, Ordering::Relaxed);
            println!("SOAK FAIL {msg}");
        }
    };
    let mut redis = Redis::start(args.redis_port);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let log = Arc::new(Mutex::new(Log::default()));
    let requests = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let (outage_at, outage) = {
        let outage = (args.run / 20).clamp(Duration::from_secs(4), Duration::from_secs(30));
        (args.run / 2, outage)
    };
    let warm_up = (args.run / 10).max(Duration::from_secs(3));

    // RSS sampler: once a second, on its own thread
    let samples: Arc<Mutex<Vec<(Duration, u64)>>> = Arc::default();
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (samples, sampling, pid) =
            (Arc::clone(&samples), Arc::clone(&sampling), args.server_pid);
        std::thread::spawn(move || {
            while sampling.load(Ordering::Relaxed) {
                match rss_kib(pid) {
                    Some(kib) => samples.lock().unwrap().push((start.elapsed(), kib)),
                    None => return,
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        })
    };

    let clients: Vec<_> = (0..args.connections as u64)
        .map(|c| {
            runtime.spawn(client(
                c,
                args.addr,
                start,
                args.run,
                Arc::clone(&log),
                Arc::clone(&requests),
            ))
        })
        .collect();

    // the outage, from this thread
    let sleep_until = |t: Duration| {
        if let Some(d) = t.checked_sub(start.elapsed()) {
            std::thread::sleep(d);
        }
    };
    sleep_until(outage_at);
    // taken before the kill: an answer after this may already see it
    let stopped = start.elapsed();
    redis.crash();
    println!("SOAK redis_killed_at_s {:.1}", stopped.as_secs_f64());
    sleep_until(outage_at + outage);
    redis.spawn();
    let restarted = start.elapsed();
    println!("SOAK redis_restarted_at_s {:.1}", restarted.as_secs_f64());

    runtime.block_on(async {
        for c in clients {
            c.await.expect("client task");
        }
    });
    let elapsed = start.elapsed();
    sampling.store(false, Ordering::Relaxed);
    let _ = sampler.join();
    let server_alive = rss_kib(args.server_pid).is_some();
    let log = log.lock().unwrap();

    // ---- figures
    let total = requests.load(Ordering::Relaxed);
    println!("SOAK seconds {:.1}", elapsed.as_secs_f64());
    println!("SOAK connections {}", args.connections);
    println!("SOAK requests {total}");
    println!(
        "SOAK requests_per_second {:.0}",
        total as f64 / elapsed.as_secs_f64()
    );
    println!("SOAK connection_errors {}", log.errors);
    for rule in [Rule::Churn, Rule::Redis] {
        let (mut keys, mut admitted, mut refused) = (0, 0, 0);
        for ((r, _), s) in &log.keys {
            if *r == rule {
                keys += 1;
                admitted += s.admitted;
                refused += s.refused;
            }
        }
        println!("SOAK {rule:?}_keys {keys}");
        println!("SOAK {rule:?}_admitted {admitted}");
        println!("SOAK {rule:?}_refused_or_flagged {refused}");
    }
    if !server_alive {
        fail("the server died".into());
    }

    // ---- memory
    let samples = samples.lock().unwrap().clone();
    let after_warm_up = samples.iter().find(|(t, _)| *t >= warm_up).map(|s| s.1);
    let first = samples.first().map(|s| s.1);
    let last = samples.last().map(|s| s.1);
    let peak_second_half = samples
        .iter()
        .filter(|(t, _)| *t >= args.run / 2)
        .map(|s| s.1)
        .max();
    println!("SOAK rss_first_kib {}", first.unwrap_or(0));
    println!("SOAK rss_after_warm_up_kib {}", after_warm_up.unwrap_or(0));
    println!("SOAK rss_end_kib {}", last.unwrap_or(0));
    println!(
        "SOAK rss_peak_second_half_kib {}",
        peak_second_half.unwrap_or(0)
    );
    match (after_warm_up, last, peak_second_half) {
        (Some(warm), Some(end), Some(peak)) => {
            let allowed = warm + warm / 4 + 8 * 1024;
            if end > allowed || peak > allowed {
                fail(format!(
                    "RSS grew: {warm} KiB after the warm-up, {end} KiB at the end, {peak} KiB peak (allowed {allowed})"
                ));
            }
        }
        _ => fail("no RSS samples".into()),
    }

    // ---- per-key bounds
    let mut worst: (f64, String) = (0.0, String::new());
    let (mut violations, mut within_tolerance) = (0, 0);
    // the largest clock-rate error that a key over the exact bound needs
    let mut rate_error_needed: f64 = 0.0;
    for (&(rule, key), s) in &log.keys {
        let Some(first_sent) = s.first_sent else {
            continue;
        };
        let t = (s.last_answered - first_sent).as_secs_f64();
        let (rate, burst) = match rule {
            Rule::Churn => (CHURN_RATE, CHURN_BURST),
            Rule::Redis => (REDIS_RATE, REDIS_BURST),
        };
        // Redis kept nothing across the restart: a key active on both
        // sides may get a fresh burst
        let restarts =
            u64::from(rule == Rule::Redis && first_sent < restarted && s.last_answered > stopped);
        let bursts = burst * (1 + restarts);
        let exact = bursts + (rate * t).floor() as u64;
        let bound = bursts + (rate * t * (1.0 + CLOCK_RATE_TOLERANCE)).floor() as u64;
        let ratio = s.admitted as f64 / exact as f64;
        if ratio > worst.0 {
            worst = (
                ratio,
                format!("{rule:?} key {key}: {} of {exact} in {t:.6} s", s.admitted),
            );
        }
        if s.admitted > exact && t > 0.0 {
            // the refills it got take this long at `rate`
            let needed = (s.admitted - bursts) as f64 / rate / t - 1.0;
            rate_error_needed = rate_error_needed.max(needed);
            if s.admitted <= bound {
                within_tolerance += 1;
                println!(
                    "SOAK over_exact_bound {rule:?} key {key}: admitted {} > {exact} in t = {t:.6} s (a server clock {needed:.1e} fast explains it)",
                    s.admitted
                );
            }
        }
        if s.admitted > bound {
            violations += 1;
            if violations <= 5 {
                fail(format!(
                    "{rule:?} key {key}: admitted {} > burst + rate·t·(1 + {CLOCK_RATE_TOLERANCE:e}) = {bound} (t = {t:.6} s)",
                    s.admitted
                ));
            }
        }
    }
    println!("SOAK keys_over_bound {violations}");
    println!("SOAK keys_over_exact_bound_within_clock_tolerance {within_tolerance}");
    println!("SOAK largest_clock_rate_error_needed {rate_error_needed:.1e}");
    println!(
        "SOAK worst_key_admitted_over_bound {:.3} ({})",
        worst.0, worst.1
    );

    // ---- outage and recovery on the Redis rule
    // cached refusals last at most one interval past the kill
    let grace =
        args.store_timeout + Duration::from_secs_f64(1.0 / REDIS_RATE) + Duration::from_millis(500);
    let (mut before, mut during, mut during_ok, mut after) = (0, 0, 0, 0);
    let mut flagged_before = 0;
    let mut last_flagged_after: Option<Duration> = None;
    let mut first_store_after: Option<Duration> = None;
    for a in &log.redis {
        if a.sent > warm_up && a.answered < stopped {
            before += 1;
            if a.flagged {
                flagged_before += 1;
                if flagged_before <= 5 {
                    fail(format!(
                        "flagged before the outage at {:.3} s",
                        a.answered.as_secs_f64()
                    ));
                }
            }
        } else if a.sent > stopped + grace && a.answered < restarted {
            during += 1;
            let as_configured = a.flagged
                && if args.fail_open {
                    a.status == 200
                } else {
                    a.status == 429 && a.retry_after_one
                };
            if as_configured {
                during_ok += 1;
            }
        } else if a.sent > restarted {
            after += 1;
            if a.flagged {
                last_flagged_after =
                    Some(last_flagged_after.map_or(a.answered, |t| t.max(a.answered)));
            } else if first_store_after.is_none_or(|t| a.answered < t) {
                first_store_after = Some(a.answered);
            }
        }
    }
    println!("SOAK redis_rule_answers_before_outage {before} (flagged: {flagged_before})");
    println!(
        "SOAK redis_rule_answers_during_outage {during} (as configured, fail-{}: {during_ok})",
        if args.fail_open { "open" } else { "closed" }
    );
    println!("SOAK redis_rule_answers_after_restart {after}");
    if during == 0 {
        fail("no request reached the Redis rule during the outage".into());
    } else if during_ok != during {
        fail(format!(
            "{} of {during} answers during the outage not as configured",
            during - during_ok
        ));
    }
    let recovered_in = first_store_after.map(|t| t.saturating_sub(restarted));
    let flagged_until = last_flagged_after.map(|t| t.saturating_sub(restarted));
    println!(
        "SOAK recovered_after_restart_s {}",
        recovered_in.map_or("never".into(), |d| format!("{:.2}", d.as_secs_f64()))
    );
    println!(
        "SOAK last_flagged_after_restart_s {}",
        flagged_until.map_or("none".into(), |d| format!("{:.2}", d.as_secs_f64()))
    );
    match recovered_in {
        None => fail("the Redis rule never answered from Redis after the restart".into()),
        Some(d) if d > args.recovery => fail(format!("recovered only {d:?} after the restart")),
        Some(_) => {}
    }
    if let Some(d) = flagged_until
        && d > args.recovery
    {
        fail(format!("still flagged {d:?} after the restart"));
    }

    let failed = failures.load(Ordering::Relaxed);
    println!("SOAK result {}", if failed == 0 { "ok" } else { "FAILED" });
    drop(redis);
    std::process::exit(i32::from(failed != 0));
}
