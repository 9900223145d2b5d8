//! The Redis store's handling of its Lua script's reply, without a
//! server: any RESP bytes (parsed by the redis crate as the connection
//! would), and any six integers, for any algorithm the store accepts.
//! Never panics; a reply of five non-negative integers and a sixth of 0,
//! 1 or 2 always decodes,
//! `allowed == 1` is an admission and anything else a refusal, and
//! `remaining` never exceeds the limit.
#![no_main]

use arbitrary::Arbitrary;
use core::time::Duration;
use libfuzzer_sys::fuzz_target;
use redis::Value;
use tollgate::redis::RemoteAlgorithm;
use tollgate::{Gcra, Quota, Refusal, Snapshot};
use tollgate_redis::fuzzing;

/// The snapshot a reply carries: after an admission, or the refusal's.
/// A reply's refusal always has a finite wait (the store waits for it):
/// never one that says the request can never succeed.
fn snapshot_of(result: &Result<Snapshot, Refusal<'static>>) -> Snapshot {
    match result {
        Ok(s) => *s,
        Err(r) => {
            assert!(!r.is_never(), "{r:?}");
            *r.snapshot()
        }
    }
}

#[derive(Debug, Arbitrary)]
struct Input {
    kind: u8,
    permits: u32,
    period_nanos: u64,
    burst: Option<u32>,
    resp: Vec<u8>,
    ints: [i64; 6],
    n: u32,
}

fuzz_target!(|input: Input| {
    let Ok(mut quota) = Quota::new(input.permits, Duration::from_nanos(input.period_nanos)) else {
        return;
    };
    let algorithm = match input.kind % 3 {
        0 | 1 => {
            if let Some(b) = input.burst {
                match quota.with_burst(b) {
                    Ok(q) => quota = q,
                    Err(_) => return,
                }
            }
            RemoteAlgorithm::Gcra(if input.kind % 3 == 0 {
                Gcra::token_bucket(quota)
            } else {
                Gcra::leaky_bucket(quota)
            })
        }
        _ => RemoteAlgorithm::FixedWindow(quota),
    };
    if let Ok(value) = redis::parse_redis_value(&input.resp) {
        if let Ok(reply) = fuzzing::redis_reply(algorithm, value) {
            let s = snapshot_of(&reply.result);
            assert!(s.remaining() <= s.limit(), "{reply:?}");
        }
    }
    let value = Value::Array(input.ints.iter().map(|&i| Value::Int(i)).collect());
    let got = fuzzing::redis_reply(algorithm, value);
    let fields = [input.ints[1], input.ints[2], input.ints[3], input.ints[4]];
    if fields.iter().all(|&i| i >= 0) && (0..=2).contains(&input.ints[5]) {
        let reply = got.expect("five non-negative integers and a key state decode");
        assert_eq!(reply.result.is_ok(), input.ints[0] == 1, "{reply:?}");
        let s = snapshot_of(&reply.result);
        assert!(s.remaining() <= s.limit(), "{reply:?}");
    }
    let decision = [input.ints[0], input.ints[1], input.ints[2], input.ints[3], input.ints[4]];
    let _ = fuzzing::redis_wait(algorithm, input.n, decision);
    // a reply of another length is refused, not indexed
    let short = Value::Array(input.ints[..5].iter().map(|&i| Value::Int(i)).collect());
    assert!(fuzzing::redis_reply(algorithm, short).is_err());
});
