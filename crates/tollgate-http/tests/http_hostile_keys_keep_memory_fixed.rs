//! A flood of distinct keys costs fixed memory, and a throttled client
//! stays throttled through it (issue 19, item 2).
//!
//! A real axum server on loopback runs one layer with two rules: `/api`
//! keyed by a 4 KiB `X-Api-Key` header, `/v6` keyed by the client's IPv6
//! address behind a trusted proxy (127.0.0.1, `X-Forwarded-For`). Real TCP
//! clients (8 keep-alive connections, 16 requests pipelined on each) send
//! [`flood_keys`] distinct 4 KiB header keys, then as many distinct IPv6
//! addresses within one /64. Every rule allows one request per hour per
//! key, so no bucket is ever idle enough to be evicted: the worst case for
//! a table (10,000 slots, the default `max_keys`).
//!
//! Memory: the process's resident set (`VmRSS`, `/proc/self/status`; the
//! clients live in the same process, with fixed buffers) may grow by at
//! most [`RSS_GROWTH_BOUND`] over the flood, and by at most
//! [`RSS_FLAT_BOUND`] from the first tenth of the flood to its end (the
//! table is full by then: more keys must cost nothing). A table stores a
//! 128-bit keyed digest per header key and one key per IPv6 /64, never the
//! client's bytes. Before keys were hashed, the table kept each key's
//! 4 KiB: 10,000 slots × 4 KiB ≈ 40 MiB (60 KiB keys: 600 MiB).
//!
//! Count: 1,000,000 keys of each kind in an optimised build
//! (`cargo test --release --all-features -p tollgate-http --test
//! http_hostile_keys_keep_memory_fixed`); 50,000 (five times the table) in
//! a debug build, where a million 4 KiB requests take several minutes.
//! `TOLLGATE_FLOOD_KEYS` overrides either.

use tollgate_test_support as support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Instant;

use axum::serve::ListenerExt;
use support::http::{Req, Server, hello, send};
use tollgate::Quota;
use tollgate::http::{KeySource, Policy, RateLimitLayer};

/// The most the resident set may grow over the whole flood.
const RSS_GROWTH_BOUND: u64 = 8 << 20;
/// The most it may grow from the first tenth of the flood to its end.
const RSS_FLAT_BOUND: u64 = 4 << 20;
/// Client connections, each on its own thread.
const CONNECTIONS: u64 = 8;
/// Requests written on a connection before its responses are read.
const PIPELINE: u64 = 16;
/// Length of each header key.
const KEY_LEN: usize = 4096;

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS line");
    kb * 1024
}

fn flood_keys() -> u64 {
    let default = if cfg!(debug_assertions) {
        50_000
    } else {
        1_000_000
    };
    std::env::var("TOLLGATE_FLOOD_KEYS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn layer() -> RateLimitLayer {
    let quota = Quota::per_hour(1).unwrap();
    RateLimitLayer::builder()
        .trusted_proxies(["127.0.0.1/32".parse().unwrap()])
        .peer_addr(support::http::connect_info)
        .policy(
            Policy::token_bucket("api", quota)
                .prefix("/api")
                .key(KeySource::Header("x-api-key".parse().unwrap())),
        )
        .policy(
            Policy::token_bucket("v6", quota)
                .prefix("/v6")
                .key(KeySource::ClientIp),
        )
        .build()
        .unwrap()
}

/// Which requests a flood sends.
#[derive(Clone, Copy)]
enum Kind {
    /// `GET /api` with a distinct 4 KiB `X-Api-Key` per request.
    HeaderKey,
    /// `GET /v6` from a distinct address of `2001:db8:1:2::/64`.
    Ipv6,
}

/// Appends request `i` of `kind` to `out`.
fn request(kind: Kind, i: u64, out: &mut Vec<u8>) {
    match kind {
        Kind::HeaderKey => {
            out.extend_from_slice(b"GET /api HTTP/1.1\r\nhost: t\r\nx-api-key: ");
            let start = out.len();
            write!(out, "{i:016x}").unwrap();
            out.resize(start + KEY_LEN, b'k');
        }
        Kind::Ipv6 => {
            out.extend_from_slice(b"GET /v6 HTTP/1.1\r\nhost: t\r\nx-forwarded-for: ");
            write!(
                out,
                "2001:db8:1:2:{:x}:{:x}:{:x}:{:x}",
                (i >> 48) & 0xffff,
                (i >> 32) & 0xffff,
                (i >> 16) & 0xffff,
                i & 0xffff
            )
            .unwrap();
        }
    }
    out.extend_from_slice(b"\r\n\r\n");
}

/// One keep-alive client connection with its fixed buffers.
struct Client {
    stream: TcpStream,
    out: Vec<u8>,
    buf: Vec<u8>,
}

impl Client {
    fn open(addr: SocketAddr) -> Self {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_nodelay(true).unwrap();
        Self {
            stream,
            out: Vec::with_capacity(PIPELINE as usize * (KEY_LEN + 128)),
            buf: Vec::with_capacity(64 << 10),
        }
    }

    /// Sends requests `ids` of `kind`, `PIPELINE` at a time; returns how
    /// many were answered 200 (the others must be 429).
    fn send_all(&mut self, kind: Kind, ids: impl Iterator<Item = u64>) -> u64 {
        let mut ids = ids.peekable();
        let mut admitted = 0;
        while ids.peek().is_some() {
            self.out.clear();
            let mut batch = 0;
            for i in ids.by_ref().take(PIPELINE as usize) {
                request(kind, i, &mut self.out);
                batch += 1;
            }
            self.stream.write_all(&self.out).expect("write");
            for _ in 0..batch {
                match self.read_status() {
                    200 => admitted += 1,
                    429 => {}
                    other => panic!("unexpected status {other}"),
                }
            }
        }
        admitted
    }

    /// Reads one response (with `content-length`) and returns its status.
    fn read_status(&mut self) -> u16 {
        loop {
            if let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = &self.buf[..end];
                let status: u16 = std::str::from_utf8(&head[9..12])
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .expect("status code");
                let len: usize = std::str::from_utf8(head)
                    .expect("ASCII head")
                    .split("\r\n")
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse().ok())?
                    })
                    .expect("content-length");
                let total = end + 4 + len;
                if self.buf.len() >= total {
                    self.buf.drain(..total);
                    return status;
                }
            }
            let mut chunk = [0u8; 16 << 10];
            let n = self.stream.read(&mut chunk).expect("read");
            assert!(n > 0, "connection closed mid-response");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// Sends `ids` of `kind` over `clients` (each on its own thread, the ids
/// dealt round-robin); returns how many were admitted.
fn flood(clients: &mut [Client], kind: Kind, ids: std::ops::Range<u64>) -> u64 {
    let n = clients.len() as u64;
    std::thread::scope(|s| {
        let handles: Vec<_> = clients
            .iter_mut()
            .enumerate()
            .map(|(c, client)| {
                let ids = ids.clone().filter(move |i| i % n == c as u64);
                s.spawn(move || client.send_all(kind, ids))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    })
}

/// `support::http::serve` with `TCP_NODELAY` on each accepted connection:
/// without it, pipelined responses wait for delayed ACKs (Nagle).
async fn serve_nodelay(router: axum::Router) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("local addr");
    let listener = listener.tap_io(|tcp| {
        tcp.set_nodelay(true).expect("TCP_NODELAY");
    });
    let task = tokio::spawn(async move {
        axum::serve(
            listener,
            router.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .expect("serve");
    });
    Server::new(addr, task)
}

#[test]
fn a_million_hostile_keys_keep_memory_fixed_and_the_throttled_client_throttled() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(serve_nodelay(hello(layer())));
    let victim: &'static str = Box::leak("victim-".repeat(KEY_LEN / 7).into_boxed_str());
    let api = |k: &'static str| Req::get("/api").header("x-api-key", k);
    let v6 = |ip: &'static str| Req::get("/v6").header("x-forwarded-for", ip);
    rt.block_on(async {
        assert_eq!(send(server.addr, api(victim)).await.status, 200);
        assert_eq!(send(server.addr, api(victim)).await.status, 429);
        assert_eq!(send(server.addr, v6("2001:db8:1:2::1")).await.status, 200);
        let again = send(server.addr, v6("2001:db8:1:2:ffff::9")).await;
        assert_eq!(again.status, 429, "the same /64 is the same client");
    });

    let n = flood_keys();
    let mut clients: Vec<Client> = (0..CONNECTIONS)
        .map(|_| Client::open(server.addr))
        .collect();
    // warm the connections, buffers and allocator with keys outside the
    // flood's range (far fewer than the table's 10,000 slots: filling
    // them is part of what is measured)
    let warm = flood(&mut clients, Kind::HeaderKey, u64::MAX - 256..u64::MAX);
    assert_eq!(warm, 256, "fresh keys are admitted");
    let before = rss_bytes();

    let started = Instant::now();
    let tenth = n / 10;
    let mut admitted = flood(&mut clients, Kind::HeaderKey, 0..tenth);
    let at_tenth = rss_bytes();
    admitted += flood(&mut clients, Kind::HeaderKey, tenth..n);
    let header_secs = started.elapsed().as_secs_f64();
    let after_headers = rss_bytes();

    let started = Instant::now();
    let admitted_v6 = flood(&mut clients, Kind::Ipv6, 0..n);
    let v6_secs = started.elapsed().as_secs_f64();
    let after = rss_bytes();
    drop(clients);

    eprintln!(
        "{n} header keys of {KEY_LEN} B over {CONNECTIONS} keep-alive connections: \
         {admitted} admitted in {header_secs:.1} s ({:.0} req/s); \
         {n} IPv6 addresses in one /64: {admitted_v6} admitted in {v6_secs:.1} s ({:.0} req/s); \
         VmRSS {} KiB before, {} KiB after {tenth} keys, {} KiB after the header keys, \
         {} KiB after the IPv6 addresses (bounds: +{} KiB overall, +{} KiB after the first tenth)",
        n as f64 / header_secs,
        n as f64 / v6_secs,
        before / 1024,
        at_tenth / 1024,
        after_headers / 1024,
        after / 1024,
        RSS_GROWTH_BOUND / 1024,
        RSS_FLAT_BOUND / 1024,
    );
    assert!(
        after.saturating_sub(before) <= RSS_GROWTH_BOUND,
        "VmRSS grew by {} KiB over the flood (bound {} KiB)",
        after.saturating_sub(before) / 1024,
        RSS_GROWTH_BOUND / 1024
    );
    assert!(
        after.saturating_sub(at_tenth) <= RSS_FLAT_BOUND,
        "VmRSS grew by {} KiB after the table was full (bound {} KiB)",
        after.saturating_sub(at_tenth) / 1024,
        RSS_FLAT_BOUND / 1024
    );
    // a full table of throttled keys sends the rest to its shared overflow
    // bucket: far fewer admissions than keys
    assert!(
        admitted < n / 2,
        "{admitted} of {n} flood keys admitted: the table must not grow past its slots"
    );
    assert_eq!(admitted_v6, 0, "one /64 is one key, already throttled");

    rt.block_on(async {
        assert_eq!(
            send(server.addr, api(victim)).await.status,
            429,
            "the throttled client is still throttled"
        );
        let r = send(server.addr, v6("2001:db8:1:2::7")).await;
        assert_eq!(r.status, 429, "the flooding /64 is still throttled");
        let other = send(server.addr, v6("2001:db8:1:3::1")).await;
        assert_eq!(other.status, 200, "another /64 is another client");
    });
}
