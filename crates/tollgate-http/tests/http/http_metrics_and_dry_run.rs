//! Observability: `metrics` counters named like ASP.NET Core's, labelled
//! with the policy, recorded by a real in-test recorder; dry-run (shadow)
//! policies count what they would refuse and refuse nothing. On tokio's
//! paused time, the layer reading a `TokioClock`: no bucket refills while
//! the test runs, and the time in the queue is exact.

use crate::support;

use std::time::Duration;

use support::http::{
    Req, connect, connect_info, hello, paused_clock, request_bytes, send_paused, serve,
};
use support::recorder::MemoryRecorder;
use tokio::io::AsyncWriteExt;
use tollgate::Quota;
use tollgate::http::metrics::TIME_IN_QUEUE;
use tollgate::http::{Policy, RateLimitLayer};

#[tokio::test(start_paused = true)]
async fn counters_by_result_and_policy_and_a_shadow_policy() {
    let rec = MemoryRecorder::default();
    let layer = metrics::with_local_recorder(&rec, || {
        RateLimitLayer::builder()
            .clock(paused_clock())
            .peer_addr(connect_info)
            .global(Policy::token_bucket(
                "global",
                Quota::per_hour(6).unwrap().with_burst(6).unwrap(),
            ))
            .policy(Policy::token_bucket("api", Quota::per_hour(1).unwrap()).prefix("/api"))
            .policy(
                Policy::token_bucket("shadow", Quota::per_hour(1).unwrap())
                    .prefix("/shadow")
                    .dry_run(true),
            )
            .policy(
                // one a minute: the queued request waits a minute of
                // tokio's time, which stands still until the test is done
                // with it
                Policy::token_bucket("queued", Quota::per_minute(1).unwrap())
                    .prefix("/queued")
                    .queue(Duration::from_secs(120), 5),
            )
            .build()
            .unwrap()
    });
    let s = serve(hello(layer)).await;

    // api: 1 admitted, 2 refused by the policy (global refunded)
    let api: Vec<u16> = [
        send_paused(s.addr, Req::get("/api")).await.status,
        send_paused(s.addr, Req::get("/api")).await.status,
        send_paused(s.addr, Req::get("/api")).await.status,
    ]
    .into();
    assert_eq!(api, [200, 429, 429]);
    // shadow: 3 admitted although 2 are over its limit
    for _ in 0..3 {
        assert_eq!(send_paused(s.addr, Req::get("/shadow")).await.status, 200);
    }
    assert_eq!(rec.counter("api", "acquired"), 1);
    assert_eq!(rec.counter("api", "endpoint_limiter"), 2);
    assert_eq!(rec.counter("shadow", "acquired"), 3);
    assert_eq!(rec.counter("shadow", "dry_run"), 2);
    assert_eq!(rec.counter("shadow", "endpoint_limiter"), 0);

    // queued: one served at once, one queued then cancelled by its client
    assert_eq!(send_paused(s.addr, Req::get("/queued")).await.status, 200);
    let mut gone = connect(s.addr, "127.0.0.1".parse().unwrap()).await;
    gone.write_all(&request_bytes(s.addr, &Req::get("/queued")))
        .await
        .unwrap();
    // explicit signals, not sleeps: the gauge shows it queued, then gone
    // (yields only: tokio's time stands still meanwhile)
    support::until(|| rec.queued("queued") == 1.0).await;
    drop(gone);
    support::until(|| rec.queued("queued") == 0.0).await;
    assert_eq!(rec.counter("queued", "request_canceled"), 1);
    // the global permit of the cancelled request was refunded: 6 per hour,
    // used by api 1 + shadow 3 + queued 1 = 5, so one more gets through
    // and the next is refused by the global limiter
    assert_eq!(send_paused(s.addr, Req::get("/other")).await.status, 200);
    let r = send_paused(s.addr, Req::get("/other")).await;
    assert_eq!(r.status, 429);
    assert_eq!(rec.counter("", "global_limiter"), 1);
    assert_eq!(rec.counter("", "acquired"), 1);

    // the served queued request recorded its time in the queue (none: it
    // was admitted at once); the cancelled one recorded none
    let hist = format!("{TIME_IN_QUEUE}{{policy=queued}}");
    let samples = rec.histograms.lock().unwrap()[&hist]
        .0
        .lock()
        .unwrap()
        .clone();
    assert_eq!(samples.len(), 1, "{samples:?}");
    assert_eq!(samples, [0.0]);
}
