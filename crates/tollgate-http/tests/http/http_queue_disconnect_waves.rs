//! Waves of queued requests that mostly disconnect, on a real server: a
//! queueing policy (10 per second, burst 1, up to 100 waiting) receives
//! waves of requests of which all but one hang up while they wait. The
//! handler never sees more than `burst + t / T` requests in a window of
//! length `t`, and the requests that stay are served in the order they
//! arrived — for one client in its own line (per-IP key) and for many
//! clients sharing one line (a global key). On tokio's paused time, with
//! the layer reading a `TokioClock`: the turns are exact.

use crate::support;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::HeaderMap;
use axum::routing::any;
use support::http::{Req, connect, connect_info, paused_clock, request_bytes, send_paused, serve};
use support::recorder::MemoryRecorder;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;
use tollgate::Quota;
use tollgate::http::{KeySource, Policy, RateLimitLayer};

/// The policy's interval (10 per second) and burst.
const T: Duration = Duration::from_millis(100);
const BURST: usize = 1;
/// How late the handler may see an admission and still count as on its
/// turn: tokio's timers fire on a 1 ms grid. A shared turn is two
/// admissions at one instant.
const LATENESS: Duration = Duration::from_millis(1);

/// Requests per wave.
const WAVE: usize = 10;
/// The one request of each wave that stays connected; the others hang up,
/// latest first. Chosen so that giving a turn back from the end of the
/// bucket puts later arrivals on the turns of earlier waiters (three on
/// one turn) and one of them before an earlier waiter.
const STAYS: [usize; 4] = [5, 4, 3, 1];

/// (arrival number, when the handler ran).
type Seen = Arc<Mutex<Vec<(usize, Instant)>>>;

fn app(layer: RateLimitLayer, seen: Seen) -> Router {
    let handler = move |headers: HeaderMap| {
        let seen = Arc::clone(&seen);
        async move {
            let arrival = headers
                .get("x-arrival")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse().ok())
                .expect("x-arrival");
            seen.lock().unwrap().push((arrival, Instant::now()));
            "ok"
        }
    };
    Router::new().route("/", any(handler)).layer(layer)
}

fn layer(rec: &MemoryRecorder, key: KeySource) -> RateLimitLayer {
    metrics::with_local_recorder(rec, || {
        RateLimitLayer::builder()
            .peer_addr(connect_info)
            .clock(paused_clock())
            .policy(
                Policy::token_bucket(
                    "line",
                    Quota::per_second(10).unwrap().with_burst(1).unwrap(),
                )
                .prefix("/")
                .key(key)
                .queue(Duration::from_secs(30), 100),
            )
            .build()
            .unwrap()
    })
}

/// Runs the waves against `addr`, request `i` from `from(i)`: one request
/// admitted at once, then each wave's requests one after the other (each
/// sent once the previous one is queued: the queue gauge is the signal),
/// then all of the wave but `STAYS[w]` hang up, latest first (each once
/// the previous one's cancellation is counted). Returns when every request
/// that stayed has its answer.
async fn waves(addr: SocketAddr, rec: &MemoryRecorder, from: fn(usize) -> [u8; 4]) {
    let ok = send_paused(addr, Req::get("/").from(from(0)).header("x-arrival", "0")).await;
    assert_eq!(ok.status, 200);
    let (mut arrival, mut waiting, mut gone) = (1, 0.0, 0);
    let mut stayed = Vec::new();
    for stays in STAYS {
        let mut wave = Vec::new();
        for _ in 0..WAVE {
            let id = arrival.to_string();
            let req = Req::get("/").from(from(arrival)).header("x-arrival", &id);
            let mut c = connect(addr, req.from).await;
            c.write_all(&request_bytes(addr, &req)).await.unwrap();
            waiting += 1.0;
            support::until(|| rec.queued("line") == waiting).await;
            wave.push(c);
            arrival += 1;
        }
        stayed.push(wave.remove(stays));
        for c in wave.into_iter().rev() {
            drop(c);
            gone += 1;
            waiting -= 1.0;
            support::until(|| {
                rec.counter("line", "request_canceled") == gone && rec.queued("line") == waiting
            })
            .await;
        }
    }
    for mut c in stayed {
        let mut raw = Vec::new();
        // no client timeout: on paused time it would be a timer that tokio
        // could jump to while the server's turns are pending
        c.read_to_end(&mut raw).await.unwrap();
        assert!(
            raw.starts_with(b"HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&raw)
        );
    }
}

/// The handler's admissions (in the order it ran them): every window of
/// length `t` holds at most `BURST + ⌊(t + LATENESS) / T⌋`, and the
/// requests ran in arrival order.
fn assert_paced_in_order(seen: &Seen) {
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1 + STAYS.len(), "every request that stayed");
    let start = seen[0].1;
    let at: Vec<(usize, Duration)> = seen.iter().map(|(id, t)| (*id, *t - start)).collect();
    let mut times: Vec<Duration> = at.iter().map(|a| a.1).collect();
    times.sort();
    for i in 0..times.len() {
        for j in i..times.len() {
            let window = times[j] - times[i];
            let allowed = BURST + ((window + LATENESS).as_nanos() / T.as_nanos()) as usize;
            assert!(
                j - i < allowed,
                "{} admissions within {window:?} (at most {allowed}): {at:?}",
                j - i + 1
            );
        }
    }
    for pair in at.windows(2) {
        assert!(
            pair[0].0 < pair[1].0,
            "request {} served after request {}, which arrived later: {at:?}",
            pair[0].0,
            pair[1].0
        );
    }
}

#[tokio::test(start_paused = true)]
async fn one_clients_disconnecting_waiters_never_let_two_requests_share_a_turn() {
    let rec = MemoryRecorder::default();
    let seen = Seen::default();
    let s = serve(app(layer(&rec, KeySource::PeerIp), Arc::clone(&seen))).await;
    // one client: its own line (per-IP key)
    waves(s.addr, &rec, |_| [127, 0, 0, 1]).await;
    assert_paced_in_order(&seen);
}

#[tokio::test(start_paused = true)]
async fn many_clients_disconnecting_waiters_never_let_two_requests_share_a_turn() {
    let rec = MemoryRecorder::default();
    let seen = Seen::default();
    let s = serve(app(layer(&rec, KeySource::Global), Arc::clone(&seen))).await;
    // every request from its own address, all in one shared line
    waves(s.addr, &rec, |i| [127, 0, 1, i as u8 + 1]).await;
    assert_paced_in_order(&seen);
}
