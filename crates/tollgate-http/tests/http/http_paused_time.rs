//! The layer reads the clock it is given: with a `TokioClock` under tokio's
//! paused time, a real axum server on loopback refills its buckets and
//! serves its queue when the test advances tokio's time, and a minute of
//! the layer's time passes in no real time at all. The given clock's
//! resolution bounds the quotas the layer accepts.

use crate::support;

use std::time::{Duration, Instant};

use support::http::{Req, connect_info, hello, hello_marked, paused_clock, send_paused, serve};
use support::recorder::MemoryRecorder;
use tollgate::Quota;
use tollgate::http::{Policy, RateLimitLayer};

/// The point of an injectable clock: a 1-per-minute policy refuses, says
/// when to retry, and admits once tokio's time has moved a minute, in a
/// test that takes milliseconds.
#[tokio::test(start_paused = true)]
async fn a_per_minute_policy_admits_again_after_tokio_advances_a_minute() {
    let real = Instant::now();
    let layer = RateLimitLayer::builder()
        .clock(paused_clock())
        .peer_addr(connect_info)
        .policy(Policy::token_bucket("api", Quota::per_minute(1).unwrap()).prefix("/"))
        .build()
        .unwrap();
    let s = serve(hello(layer)).await;
    assert_eq!(send_paused(s.addr, Req::get("/")).await.status, 200);
    let r = send_paused(s.addr, Req::get("/")).await;
    assert_eq!(r.status, 429);
    // no time has passed on the layer's clock: exactly a minute to wait
    assert_eq!(r.header("retry-after"), Some("60"));
    tokio::time::advance(Duration::from_secs(59)).await;
    let r = send_paused(s.addr, Req::get("/")).await;
    assert_eq!(r.status, 429, "a second early");
    assert_eq!(r.header("retry-after"), Some("1"));
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(send_paused(s.addr, Req::get("/")).await.status, 200);
    // a minute of the layer's time, not of the machine's (bounded far
    // below the minute a real clock would have needed, for a loaded
    // machine)
    assert!(
        real.elapsed() < Duration::from_secs(30),
        "{:?}",
        real.elapsed()
    );
}

/// A queued request sleeps on tokio's timer consistently with the layer's
/// clock: it waits while tokio's time stands before its turn and goes on
/// exactly when tokio's time reaches it.
#[tokio::test(start_paused = true)]
async fn a_queued_request_goes_when_tokio_time_reaches_its_turn() {
    let real = Instant::now();
    let rec = MemoryRecorder::default();
    let layer = metrics::with_local_recorder(&rec, || {
        RateLimitLayer::builder()
            .clock(paused_clock())
            .peer_addr(connect_info)
            .policy(
                Policy::token_bucket("slow", Quota::per_minute(1).unwrap())
                    .prefix("/")
                    .queue(Duration::from_secs(120), 1),
            )
            .build()
            .unwrap()
    });
    let s = serve(hello_marked(layer)).await;
    let first = send_paused(s.addr, Req::get("/")).await;
    assert_eq!(first.status, 200);
    let addr = s.addr;
    let queued = tokio::spawn(async move { send_paused(addr, Req::get("/")).await });
    // an explicit signal: the gauge shows it waiting (yields only, so
    // tokio's time does not move meanwhile)
    support::until(|| rec.queued("slow") == 1.0).await;
    tokio::time::advance(Duration::from_secs(59)).await;
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert!(!queued.is_finished(), "served before its turn");
    assert_eq!(rec.queued("slow"), 1.0);
    tokio::time::advance(Duration::from_secs(1)).await;
    let r = queued.await.unwrap();
    assert_eq!(r.status, 200);
    assert!(!r.at_once());
    // its turn, one interval after the first, on tokio's clock (its timer
    // fires on tokio's 1 ms grid)
    let waited = r.ready_at() - first.ready_at();
    assert!(
        waited >= Duration::from_secs(60) && waited <= Duration::from_millis(60_001),
        "{waited:?}"
    );
    // the time in the queue is measured on the layer's clock
    let hist = format!("{}{{policy=slow}}", tollgate::http::metrics::TIME_IN_QUEUE);
    let samples = rec.histograms.lock().unwrap()[&hist]
        .0
        .lock()
        .unwrap()
        .clone();
    // the first, admitted at once, recorded 0; the queued one its minute
    assert_eq!(samples.len(), 2, "{samples:?}");
    assert_eq!(samples[0], 0.0);
    assert!((60.0..=60.001).contains(&samples[1]), "{samples:?}");
    assert!(
        real.elapsed() < Duration::from_secs(30),
        "{:?}",
        real.elapsed()
    );
}

/// The given clock's resolution bounds the quotas the layer accepts, when
/// it is built and when it is reloaded (checked against the layer's clock,
/// which a reload keeps).
#[test]
fn a_quota_finer_than_the_given_clock_is_refused() {
    use tollgate::{Inheritance, ManualClock, Timestamp};
    let ten_ms = || ManualClock::with_resolution(Timestamp::ZERO, Duration::from_millis(10));
    let per_second = |n: u32| {
        Policy::token_bucket("api", Quota::per_second(n).unwrap())
            .prefix("/")
            .key(tollgate::http::KeySource::PeerIp)
    };
    // 1000 a second is a 1 ms interval: a 10 ms clock cannot show it
    let err = RateLimitLayer::builder()
        .clock(ten_ms())
        .policy(per_second(1000))
        .build()
        .unwrap_err();
    assert_eq!(err.location(), "policies[0].rate");
    assert!(
        err.to_string()
            .contains("finer than the layer clock's resolution"),
        "{err}"
    );
    // 100 a second (10 ms) it can
    let layer = RateLimitLayer::builder()
        .clock(ten_ms())
        .policy(per_second(100))
        .build()
        .unwrap();
    // a reload's rules are checked against the layer's clock, not the
    // reload builder's (here the default, which resolves 1 ns)
    let err = layer
        .reload(
            RateLimitLayer::builder().policy(per_second(1000)),
            Inheritance::UsedAmount,
        )
        .unwrap_err();
    assert_eq!(err.location(), "policies[0].rate");
    // and the default clock takes any quota
    assert!(
        RateLimitLayer::builder()
            .policy(per_second(1000))
            .build()
            .is_ok()
    );
}
