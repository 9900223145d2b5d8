//! Load: 50 concurrent keep-alive clients for 2 s against a 100/s policy.
//! Admitted requests stay within one of `burst + 100·t`; every other
//! request is a well-formed 429.

use crate::support;

use std::time::{Duration, Instant};

use support::http::{Conn, connect_info, hello, serve};
use tollgate::Quota;
use tollgate::http::{Policy, RateLimitLayer};

const BURST: u32 = 50;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_clients_two_seconds_hundred_per_second() {
    let quota = Quota::per_second(100).unwrap().with_burst(BURST).unwrap();
    let layer = RateLimitLayer::builder()
        .peer_addr(connect_info)
        .policy(Policy::token_bucket("api", quota).prefix("/api"))
        .build()
        .unwrap();
    let s = serve(hello(layer)).await;
    let mut conns = Vec::new();
    for _ in 0..50 {
        conns.push(Conn::open(s.addr).await);
    }
    let start = Instant::now();
    let stop = Duration::from_secs(2);
    let tasks: Vec<_> = conns
        .into_iter()
        .map(|mut c| {
            tokio::spawn(async move {
                // (sent, received, status, well-formed refusal?)
                let mut log = Vec::new();
                while start.elapsed() < stop {
                    let sent = start.elapsed();
                    let r = c.get("/api/x").await;
                    let ok_429 = r.status == 429 && well_formed_refusal(&r);
                    log.push((sent, start.elapsed(), r.status, ok_429));
                }
                log
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let admitted: Vec<_> = all.iter().filter(|e| e.2 == 200).collect();
    let others: Vec<_> = all.iter().filter(|e| e.2 != 200).collect();
    assert!(
        others.iter().all(|e| e.3),
        "a non-200 that is not a well-formed 429"
    );
    // Every admission was decided between the first request's sending and
    // the last response; the bucket was fed continuously until `stop`.
    let first_sent = all.iter().map(|e| e.0).min().unwrap();
    let first_done = admitted.iter().map(|e| e.1).min().unwrap();
    let last_done = all.iter().map(|e| e.1).max().unwrap();
    let upper = u64::from(BURST) + (100.0 * (last_done - first_sent).as_secs_f64()) as u64 + 1;
    let lower =
        u64::from(BURST) + (100.0 * (stop.saturating_sub(first_done)).as_secs_f64()) as u64 - 1;
    let n = admitted.len() as u64;
    eprintln!(
        "requests {}, admitted {n}, refused {}, bounds [{lower}, {upper}], last response at {last_done:?}",
        all.len(),
        others.len()
    );
    assert!(n <= upper, "over-admission: {n} > {upper}");
    assert!(n >= lower, "under-admission: {n} < {lower}");
    assert!(others.len() > 100, "the policy was really under pressure");
}

fn well_formed_refusal(r: &support::http::Resp) -> bool {
    let retry: Option<u64> = r.header("retry-after").and_then(|v| v.parse().ok());
    let state = r.sf_list("ratelimit");
    let policy = r.sf_list("ratelimit-policy");
    retry == Some(1)
        && state.len() == 1
        && state[0].0 == "api"
        && state[0].1.first() == Some(&("r".to_string(), 0))
        && state[0].1.get(1) == Some(&("t".to_string(), 1))
        && policy[0].1 == [("q".to_string(), 100), ("w".to_string(), 1)]
}
