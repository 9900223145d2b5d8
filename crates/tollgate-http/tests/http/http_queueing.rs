//! Queueing mode (nginx `burst` without `nodelay`): requests over the limit
//! wait in tollgate's queue up to `max_wait` and are served paced; a client
//! that disconnects while queued frees its slot. On tokio's paused time,
//! the layer reading a `TokioClock`: the pacing is exact, and no test waits
//! for real time.

use crate::support;

use std::time::Duration;

use support::http::{
    Req, connect, connect_info, hello_marked, now, paused_clock, request_bytes, send_paused, serve,
};
use support::recorder::MemoryRecorder;
use tokio::io::AsyncWriteExt;
use tollgate::Quota;
use tollgate::http::{Policy, RateLimitLayer};

#[tokio::test(start_paused = true)]
async fn a_burst_is_served_paced_instead_of_refused() {
    // 10 per second, no burst beyond 1: 6 simultaneous requests are spaced
    // 100 ms apart; a 7th that would wait past max_wait is refused at once.
    let quota = Quota::per_second(10).unwrap().with_burst(1).unwrap();
    let layer = RateLimitLayer::builder()
        .clock(paused_clock())
        .peer_addr(connect_info)
        .policy(
            Policy::token_bucket("paced", quota)
                .prefix("/")
                .queue(Duration::from_millis(550), 100),
        )
        .build()
        .unwrap();
    let s = serve(hello_marked(layer)).await;
    let start = now();
    let tasks: Vec<_> = (0..6)
        .map(|_| {
            let addr = s.addr;
            tokio::spawn(async move { send_paused(addr, Req::get("/")).await })
        })
        .collect();
    let mut done = Vec::new();
    for t in tasks {
        done.push(t.await.unwrap());
    }
    assert!(done.iter().all(|r| r.status == 200), "{done:?}");
    // When the server had each response ready, on tokio's clock.
    let mut times: Vec<Duration> = done.iter().map(|r| r.ready_at() - start).collect();
    times.sort();
    // paced, not all at once: the first at once, and the k-th admission
    // k intervals of 100 ms after the burst began (the timers fire on
    // tokio's 1 ms grid)
    assert_eq!(done.iter().filter(|r| r.at_once()).count(), 1, "{done:?}");
    for (k, t) in times.iter().enumerate() {
        let turn = Duration::from_millis(100) * k as u32;
        assert!(
            *t >= turn && *t <= turn + Duration::from_millis(1),
            "admission {k} after {t:?}: {times:?}"
        );
    }
    // 8 more at once on a spent bucket: those whose estimated wait is
    // within max_wait queue and are served; the others are refused at
    // once (not after waiting max_wait), with Retry-After.
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let addr = s.addr;
            tokio::spawn(async move {
                let r = send_paused(addr, Req::get("/")).await;
                (r.status, r.header("retry-after").is_some(), r.at_once())
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
    // the bucket's last turn is 500 ms after the burst began, and every
    // request of the second burst arrives then: 5 more turns (100 ms to
    // 500 ms) fit within max_wait (550 ms), the 6th (600 ms) does not
    assert_eq!(served, 5, "{second:?}");
    assert!(!refused.is_empty(), "{second:?}");
    for (_, has_retry_after, at_once) in &refused {
        assert!(*has_retry_after);
        assert!(*at_once, "refused at once, not after waiting: {second:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_client_that_disconnects_while_queued_frees_its_slot() {
    // 1 per 2 s, at most one request waiting.
    let refill = Duration::from_secs(2);
    let quota = Quota::new(1, refill).unwrap();
    let rec = MemoryRecorder::default();
    let layer = metrics::with_local_recorder(&rec, || {
        RateLimitLayer::builder()
            .clock(paused_clock())
            .peer_addr(connect_info)
            .policy(
                Policy::token_bucket("slow", quota)
                    .prefix("/")
                    .queue(Duration::from_secs(5), 1),
            )
            .build()
            .unwrap()
    });
    let s = serve(hello_marked(layer)).await;
    let first = now();
    assert_eq!(send_paused(s.addr, Req::get("/")).await.status, 200);

    // B queues (until the refill, 2 s after the first), then hangs up.
    // Explicit signals, not sleeps: the queue gauge shows B in, then out
    // (yields only: tokio's time stands still meanwhile).
    let mut b = connect(s.addr, "127.0.0.1".parse().unwrap()).await;
    b.write_all(&request_bytes(s.addr, &Req::get("/")))
        .await
        .unwrap();
    support::until(|| rec.queued("slow") == 1.0).await;
    // While B waits, the queue is full: C is refused at once.
    let r = send_paused(s.addr, Req::get("/")).await;
    assert_eq!(r.status, 429, "queue of one is full while B waits");
    drop(b);
    support::until(|| rec.queued("slow") == 0.0).await;

    // B's slot is free: D queues and is served when the bucket refills
    // (2 s after the first request), not refused.
    let r = send_paused(s.addr, Req::get("/")).await;
    assert_eq!(r.status, 200, "B's slot was freed");
    assert_eq!(rec.counter("slow", "request_canceled"), 1);
    // at the refill, on tokio's clock (its timer's 1 ms grid aside)
    let served = r.ready_at() - first;
    assert!(
        !r.at_once() && served >= refill && served <= refill + Duration::from_millis(1),
        "D waited its turn: served {served:?} after the first"
    );
}

#[tokio::test(start_paused = true)]
async fn a_window_policy_queues_until_its_next_window() {
    // 2 per 1 s fixed window, up to 3 waiting 2 s: a third and fourth
    // request wait for the next window and are served at its start; a
    // fifth fits in the queue but not in that window, and is served at the
    // window after it, in arrival order.
    let layer = RateLimitLayer::builder()
        .clock(paused_clock())
        .peer_addr(connect_info)
        .policy(
            Policy::fixed_window("windowed", 2, Duration::from_secs(1))
                .prefix("/")
                .queue(Duration::from_secs(2), 3),
        )
        .build()
        .unwrap();
    let s = serve(hello_marked(layer)).await;
    let start = now();
    let mut done = Vec::new();
    for _ in 0..5 {
        let addr = s.addr;
        done.push(tokio::spawn(async move {
            send_paused(addr, Req::get("/")).await
        }));
        // arrival order: each request is in before the next one is sent
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }
    let mut times = Vec::new();
    for t in done {
        let r = t.await.unwrap();
        assert_eq!(r.status, 200, "{r:?}");
        times.push(r.ready_at() - start);
    }
    // windows are aligned to the clock's origin, not to the first request:
    // the next one starts within a second
    let next = times[2];
    assert!(times[0].is_zero() && times[1].is_zero(), "{times:?}");
    assert!(
        next > Duration::ZERO && next <= Duration::from_secs(1),
        "{times:?}"
    );
    assert_eq!(times[3], next, "{times:?}");
    assert_eq!(times[4], next + Duration::from_secs(1), "{times:?}");
}
