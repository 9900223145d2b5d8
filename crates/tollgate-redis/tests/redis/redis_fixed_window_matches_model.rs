//! The Redis fixed window follows the aligned-window rule, checked against a
//! plain model driven by the server's `TIME`: at most `limit` per window
//! `[k·w, (k+1)·w)`, a refusal takes nothing and waits until the window
//! ends, `remaining` and `reset_after` as in-process, refunds never below 0.

use crate::support;

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use support::RedisServer;
use tollgate::redis::{RedisConfig, RedisStore, StoreError};
use tollgate::{Quota, Refusal, Snapshot};

fn server() -> &'static RedisServer {
    static SERVER: OnceLock<RedisServer> = OnceLock::new();
    SERVER.get_or_init(RedisServer::start)
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime")
    })
}

fn unique_prefix() -> Vec<u8> {
    static CASE: AtomicU64 = AtomicU64::new(0);
    format!("fw{}:", CASE.fetch_add(1, Ordering::Relaxed)).into_bytes()
}

/// The reference: one counter for the window it belongs to.
struct Model {
    limit: u32,
    window: u64,
    index: u64,
    count: u32,
}

impl Model {
    fn effective(&self, now: u64) -> (u64, u32) {
        let cur = now / self.window;
        if self.index == cur {
            (cur, self.count)
        } else {
            (cur, 0) // an older window (time only moves forward here)
        }
    }

    fn snapshot(&self, index: u64, count: u32, now: u64) -> Snapshot {
        let until_end = (index + 1) * self.window - now;
        let reset = if count == 0 { 0 } else { until_end };
        Snapshot::new(self.limit, self.limit - count, Duration::from_nanos(reset))
    }

    fn check(&mut self, n: u32, now: u64) -> Option<Result<Snapshot, Refusal<'static>>> {
        if n > self.limit {
            return None;
        }
        let (index, count) = self.effective(now);
        if count + n > self.limit {
            let until_end = (index + 1) * self.window - now;
            return Some(Err(Refusal::new(
                Duration::from_nanos(until_end),
                self.snapshot(index, count, now),
            )));
        }
        (self.index, self.count) = (index, count + n);
        Some(Ok(self.snapshot(index, count + n, now)))
    }

    fn refund(&mut self, n: u32, now: u64) -> Snapshot {
        let (index, count) = self.effective(now);
        (self.index, self.count) = (index, count - n.min(count));
        self.snapshot(index, self.count, now)
    }
}

#[derive(Debug, Clone)]
enum Op {
    Check(u32),
    Refund(u32),
    Pause(u64),
}

async fn run_case(limit: u32, window_us: u64, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let quota = Quota::new(limit, Duration::from_micros(window_us)).expect("valid quota");
    let store = RedisStore::connect(
        server().url(),
        RedisConfig::fixed_window(quota)
            .prefix(&unique_prefix())
            .timeout(Duration::from_secs(2))
            .refusal_cache(0),
    )
    .await
    .expect("valid config");
    let mut model = Model {
        limit,
        window: window_us * 1_000,
        index: 0,
        count: 0,
    };
    for op in ops {
        match op {
            Op::Check(n) => match store.try_check_n(b"k", n).await {
                Ok(reply) => {
                    let expected = model.check(n, reply.server_time_nanos);
                    prop_assert_eq!(Some(reply.result), expected, "check {}", n);
                }
                Err(StoreError::Capacity(_)) => prop_assert!(n > limit),
                Err(e) => panic!("store failed: {e}"),
            },
            Op::Refund(n) => {
                let reply = store.refund(b"k", n).await.expect("refund");
                let expected = model.refund(n, reply.server_time_nanos);
                let snapshot = match reply.result {
                    Ok(s) => s,
                    Err(r) => *r.snapshot(),
                };
                prop_assert_eq!(snapshot, expected, "refund {}", n);
            }
            // Kept real sleep: a pause lets the server's clock run; every
            // reply is compared at the server time it reports, so how long
            // the pause really lasts (longer under load) changes nothing.
            Op::Pause(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn store_fixed_window_equals_the_aligned_window_model(
        limit in 1u32..=6,
        window_us in 2_000u64..=60_000,
        ops in prop::collection::vec(
            prop_oneof![
                5 => (0u32..=7).prop_map(Op::Check),
                1 => (0u32..=7).prop_map(Op::Refund),
                2 => (0u64..=30).prop_map(Op::Pause),
            ],
            1..24,
        ),
    ) {
        runtime().block_on(run_case(limit, window_us, ops))?;
    }
}
