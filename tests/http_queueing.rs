//! Queueing mode (nginx `burst` without `nodelay`): requests over the limit
//! wait in tollgate's queue up to `max_wait` and are served paced; a client
//! that disconnects while queued frees its slot.
#![cfg(feature = "http")]

mod support;

use std::time::{Duration, Instant};

use support::http::{connect, connect_info, hello, request_bytes, send, serve, Req};
use tokio::io::AsyncWriteExt;
use tollgate::http::{Policy, RateLimitLayer};
use tollgate::Quota;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_is_served_paced_instead_of_refused() {
    // 10 per second, no burst beyond 1: 6 simultaneous requests are spaced
    // 100 ms apart; a 7th that would wait past max_wait is refused at once.
    let quota = Quota::per_second(10).unwrap().with_burst(1).unwrap();
    let layer = RateLimitLayer::builder()
        .peer_addr(connect_info)
        .policy(
            Policy::token_bucket("paced", quota)
                .prefix("/")
                .queue(Duration::from_millis(550), 100),
        )
        .build()
        .unwrap();
    let s = serve(hello(layer)).await;
    let start = Instant::now();
    let tasks: Vec<_> = (0..6)
        .map(|_| {
            let addr = s.addr;
            tokio::spawn(async move {
                let r = send(addr, Req::get("/")).await;
                (r.status, start.elapsed())
            })
        })
        .collect();
    let mut done = Vec::new();
    for t in tasks {
        done.push(t.await.unwrap());
    }
    assert!(done.iter().all(|(st, _)| *st == 200), "{done:?}");
    let mut times: Vec<Duration> = done.iter().map(|(_, t)| *t).collect();
    times.sort();
    // the last one waited about 500 ms: paced, not all at once
    assert!(times[5] >= Duration::from_millis(450), "{times:?}");
    assert!(times[5] < Duration::from_millis(2000), "{times:?}");
    // spread over at least four intervals (admissions are 100 ms apart; a
    // stall of the machine may bunch two responses, never compress the span)
    assert!(
        times[5] - times[0] >= Duration::from_millis(350),
        "paced: {times:?}"
    );
    // 8 more at once on a spent bucket: those whose estimated wait is
    // within max_wait queue and are served; the others are refused at
    // once (not after waiting max_wait), with Retry-After.
    let start = Instant::now();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let addr = s.addr;
            tokio::spawn(async move {
                let r = send(addr, Req::get("/")).await;
                (r.status, r.header("retry-after").is_some(), start.elapsed())
            })
        })
        .collect();
    let mut second = Vec::new();
    for t in tasks {
        second.push(t.await.unwrap());
    }
    let refused: Vec<_> = second.iter().filter(|(st, _, _)| *st == 429).collect();
    let served = second.iter().filter(|(st, _, _)| *st == 200).count();
    assert_eq!(refused.len() + served, 8, "{second:?}");
    // at most 1 now + 5.5 intervals of 100 ms within max_wait
    assert!((4..=7).contains(&served), "{second:?}");
    assert!(!refused.is_empty(), "{second:?}");
    for (_, has_retry_after, t) in &refused {
        assert!(*has_retry_after);
        assert!(
            *t < Duration::from_millis(300),
            "refused at once, not after {t:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_disconnects_while_queued_frees_its_slot() {
    // 1 per second, at most one request waiting.
    let quota = Quota::per_second(1).unwrap();
    let layer = RateLimitLayer::builder()
        .peer_addr(connect_info)
        .policy(
            Policy::token_bucket("slow", quota)
                .prefix("/")
                .queue(Duration::from_secs(5), 1),
        )
        .build()
        .unwrap();
    let s = serve(hello(layer)).await;
    assert_eq!(send(s.addr, Req::get("/")).await.status, 200);

    // B queues, then hangs up.
    let mut b = connect(s.addr, "127.0.0.1".parse().unwrap()).await;
    b.write_all(&request_bytes(s.addr, &Req::get("/")))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    // While B waits, the queue is full: C is refused at once.
    let r = send(s.addr, Req::get("/")).await;
    assert_eq!(r.status, 429, "queue of one is full while B waits");
    drop(b);
    tokio::time::sleep(Duration::from_millis(150)).await;

    // B's slot is free: D queues and is served when the bucket refills
    // (about 1 s after the first request), not refused.
    let t0 = Instant::now();
    let r = send(s.addr, Req::get("/")).await;
    assert_eq!(r.status, 200, "B's slot was freed");
    assert!(
        t0.elapsed() >= Duration::from_millis(300),
        "D waited its turn: {:?}",
        t0.elapsed()
    );
}
