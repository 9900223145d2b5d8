//! Issue 28.4: under a flood of a million distinct keys, a client within
//! its quota from another network is served every time. The flood fills
//! the policy's table with busy keys and empties its one shared overflow
//! bucket; newcomers are then charged to their network's bucket (an IPv4
//! /24, an IPv6 /48), which the flood exhausts only for its own networks.
//! With the network overflow turned off (`overflow_networks(0)`, the
//! behaviour before), the same newcomer is refused.
//!
//! The flood runs over real TCP, pipelined on keep-alive connections from
//! a trusted proxy (127.0.0.1) that names each request's client in
//! `X-Forwarded-For`.

use crate::support;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use support::http::{Req, Server, connect_info, hello, send, serve};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tollgate::Quota;
use tollgate::http::{KeySource, Policy, RateLimitLayer};

/// 10 per minute with a burst of 5: a key used once stays busy for 6 s.
fn quota() -> Quota {
    Quota::per_minute(10).unwrap().with_burst(5).unwrap()
}

async fn server(overflow_networks: Option<usize>) -> Server {
    let mut policy = Policy::token_bucket("api", quota())
        .prefix("/api")
        .key(KeySource::ClientIp);
    if let Some(n) = overflow_networks {
        policy = policy.overflow_networks(n);
    }
    let layer = RateLimitLayer::builder()
        .peer_addr(connect_info)
        .trusted_proxies(["127.0.0.1/32".parse().unwrap()])
        .policy(policy)
        .build()
        .unwrap();
    serve(hello(layer)).await
}

/// Sends one request for each client of `clients` (pipelined in batches on
/// `connections` keep-alive connections) and counts the answers in `sent`.
async fn flood(
    addr: SocketAddr,
    clients: Arc<dyn Fn(u64) -> IpAddr + Send + Sync>,
    total: u64,
    connections: u64,
    sent: Arc<AtomicU64>,
) {
    const BATCH: u64 = 256;
    let mut tasks = Vec::new();
    for c in 0..connections {
        let clients = Arc::clone(&clients);
        let sent = Arc::clone(&sent);
        tasks.push(tokio::spawn(async move {
            let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            stream.set_nodelay(true).unwrap();
            let (mut rd, mut wr) = stream.into_split();
            let mut i = c;
            let mut tail = Vec::new();
            let mut buf = vec![0u8; 64 * 1024];
            while i < total {
                let mut batch = Vec::with_capacity(BATCH as usize * 64);
                let mut n = 0;
                while n < BATCH && i < total {
                    batch.extend_from_slice(
                        format!(
                            "GET /api HTTP/1.1\r\nhost: x\r\nx-forwarded-for: {}\r\n\r\n",
                            clients(i)
                        )
                        .as_bytes(),
                    );
                    i += connections;
                    n += 1;
                }
                wr.write_all(&batch).await.unwrap();
                // every response head ends with one blank line
                let mut answered = 0;
                while answered < n {
                    let got = rd.read(&mut buf).await.unwrap();
                    assert!(got > 0, "the server closed a flood connection");
                    tail.extend_from_slice(&buf[..got]);
                    let mut start = 0;
                    while let Some(p) = tail[start..].windows(4).position(|w| w == b"\r\n\r\n") {
                        answered += 1;
                        start += p + 4;
                    }
                    tail.drain(..start);
                }
                sent.fetch_add(n, Ordering::Relaxed);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

/// Statuses of 6 requests of a new client `ip` (its quota's burst is 5).
///
/// The first 5 are within its quota and must be served. The 6th is over
/// it and refused by its network's bucket, unless a slot of the table
/// freed meanwhile (a flood key refilled) and the client took it: it then
/// has a fresh bucket of its own as well, as any newcomer that wins a
/// slot does (see `Policy::overflow_networks`).
async fn newcomer(addr: SocketAddr, ip: IpAddr) -> Vec<u16> {
    let xff = ip.to_string();
    let mut statuses = Vec::new();
    for _ in 0..6 {
        let r = send(addr, Req::get("/api").header("x-forwarded-for", &xff)).await;
        statuses.push(r.status);
    }
    statuses
}

/// Floods `total` distinct clients of `flooder` while a new client of
/// `legit(k)`, each from a network of its own, checks its quota every
/// 100 ms from when the table is full until the last 50,000 flood
/// requests (so the table stays full of busy keys while newcomers check);
/// returns every newcomer's statuses.
async fn flood_with_newcomers(
    s: &Server,
    flooder: Arc<dyn Fn(u64) -> IpAddr + Send + Sync>,
    total: u64,
    legit: impl Fn(u64) -> IpAddr,
) -> (Vec<Vec<u16>>, Duration) {
    let sent = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let flood = tokio::spawn(flood(s.addr, flooder, total, 4, Arc::clone(&sent)));
    // the table (10,000 keys) is full of busy keys and the shared
    // overflow bucket empty well before 30,000 distinct clients
    while sent.load(Ordering::Relaxed) < 30_000 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut seen = Vec::new();
    let mut k = 0;
    while sent.load(Ordering::Relaxed) < total - 50_000 {
        seen.push(newcomer(s.addr, legit(k)).await);
        k += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    flood.await.unwrap();
    assert_eq!(sent.load(Ordering::Relaxed), total);
    (seen, started.elapsed())
}

/// Every newcomer was served within its quota; the request over it was
/// refused but where a slot freed meanwhile (rare: at most 1 in 10).
fn check_newcomers(seen: &[Vec<u16>]) {
    assert!(seen.len() >= 3, "the flood ended too soon: {seen:?}");
    for (k, statuses) in seen.iter().enumerate() {
        assert_eq!(statuses[..5], [200; 5], "newcomer {k} within its quota");
    }
    let over = seen.iter().filter(|st| st[5] == 200).count();
    eprintln!(
        "{over} of {} newcomers got a slot of their own mid-check",
        seen.len()
    );
    assert!(
        over * 10 <= seen.len(),
        "{over} of {}: {seen:?}",
        seen.len()
    );
}

fn v4(i: u64) -> IpAddr {
    // 10.0.0.0 onwards: a million addresses in 3,907 /24 networks
    IpAddr::from((0x0a00_0000 + i as u32).to_be_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_million_flooding_ipv4_clients_leave_other_networks_served() {
    let s = server(None).await;
    let (seen, took) = flood_with_newcomers(&s, Arc::new(v4), 1_000_000, |k| {
        // 172.16.0.0/12: a /24 of its own each
        IpAddr::from((0xac10_0001 + ((k as u32) << 8)).to_be_bytes())
    })
    .await;
    eprintln!(
        "1,000,000 IPv4 flood keys in {took:?}; {} newcomers checked",
        seen.len()
    );
    check_newcomers(&seen);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_million_flooding_ipv6_networks_leave_other_networks_served() {
    let s = server(None).await;
    let flooder = |i: u64| {
        // a million /64s of 2001:db8::/44 (16 /48 networks)
        let net = (0x2001_0db8_u128 << 96) | (u128::from(i) << 64) | 1;
        IpAddr::from(net.to_be_bytes())
    };
    let (seen, took) = flood_with_newcomers(&s, Arc::new(flooder), 1_000_000, |k| {
        // 2001:db8:1000+k::1, a /48 of its own each
        let net = (0x2001_0db8_u128 << 96) | (u128::from(0x1000 + k) << 80) | 1;
        IpAddr::from(net.to_be_bytes())
    })
    .await;
    eprintln!(
        "1,000,000 IPv6 flood /64s in {took:?}; {} newcomers checked",
        seen.len()
    );
    check_newcomers(&seen);
}

/// The figure before: one overflow bucket shared by every newcomer, which
/// the flood keeps empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_network_overflow_the_flood_starves_newcomers() {
    let s = server(Some(0)).await;
    let (seen, _) = flood_with_newcomers(&s, Arc::new(v4), 100_000, |k| {
        IpAddr::from((0xac10_0001 + ((k as u32) << 8)).to_be_bytes())
    })
    .await;
    assert!(!seen.is_empty());
    let served: usize = seen
        .iter()
        .map(|st| st.iter().filter(|&&c| c == 200).count())
        .sum();
    eprintln!(
        "without network overflow: {served} of {} newcomer requests within quota served",
        seen.len() * 5
    );
    assert!(
        served < seen.len() * 5,
        "newcomers were all served: {seen:?}"
    );
}

/// `overflow_networks` in rules files: refused where it does nothing,
/// and a size too large is refused naming the field, TOML and JSON alike.
#[test]
fn overflow_networks_in_rules_files_is_checked() {
    use tollgate::http::LayerConfig;
    let rule = |key: &str, networks: &str| {
        format!(
            "[[rules]]\nname = \"api\"\nprefix = \"/api\"\nrate = 1\nperiod = \"1m\"\nkey = \"{key}\"\noverflow_networks = {networks}\n"
        )
    };
    let err = |text: &str| match LayerConfig::from_toml(text).and_then(LayerConfig::build) {
        Ok(_) => panic!("accepted: {text}"),
        Err(e) => e.to_string(),
    };
    assert!(
        LayerConfig::from_toml(&rule("peer_ip", "500"))
            .unwrap()
            .build()
            .is_ok()
    );
    assert!(
        LayerConfig::from_toml(&rule("peer_ip", "0"))
            .unwrap()
            .build()
            .is_ok()
    );
    let global = err(&rule("global", "500"));
    assert!(
        global.starts_with("rules[0].overflow_networks: does nothing"),
        "{global}"
    );
    let huge = err(&rule("peer_ip", "100000000000"));
    assert!(
        huge.starts_with("rules[0].overflow_networks: too many networks"),
        "{huge}"
    );
    let json = r#"{"rules": [{"name": "api", "prefix": "/api", "rate": 1, "period": "1m",
        "key": "global", "overflow_networks": 500}]}"#;
    let e = LayerConfig::from_json(json)
        .and_then(LayerConfig::build)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("rules[0].overflow_networks: does nothing"),
        "{e}"
    );
}
