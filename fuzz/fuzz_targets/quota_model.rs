//! Quota construction, then check/refund sequences on a token or leaky
//! bucket, against a reference model: never a panic, never a hang (each
//! step is O(1); libFuzzer's timeout catches loops), and never
//! over-admission: over any span [t_i, t_j] between two admissions,
//! `admitted − refunded ≤ burst + ⌊(t_j − t_i) · permits / period⌋`
//! (with no refund in the span: admitted ≤ burst + ⌊span/T⌋ at the exact
//! rate T = period/permits). Refunds give back only permits the model
//! holds as admitted. A refusal always says to wait a positive time, and
//! `remaining` never exceeds the limit.
#![no_main]

use arbitrary::Arbitrary;
use core::time::Duration;
use libfuzzer_sys::fuzz_target;
use tollgate::{Bucket, Quota, Timestamp};

#[derive(Debug, Arbitrary)]
struct Input {
    permits: u32,
    period_nanos: u64,
    burst: Option<u32>,
    leaky: bool,
    start: u64,
    ops: Vec<Op>,
}

#[derive(Debug, Arbitrary)]
struct Op {
    /// time advance: `mantissa << (shift % 48)` nanoseconds
    mantissa: u16,
    shift: u8,
    refund: bool,
    n: u16,
}

struct Event {
    at: u64,
    admitted: u64,
    refunded: u64,
}

fuzz_target!(|input: Input| {
    let Ok(mut quota) = Quota::new(input.permits, Duration::from_nanos(input.period_nanos)) else {
        return;
    };
    if let Some(b) = input.burst {
        match quota.with_burst(b) {
            Ok(q) => quota = q,
            Err(_) => return,
        }
    }
    let bucket = if input.leaky {
        Bucket::leaky_bucket(quota)
    } else {
        Bucket::token_bucket(quota)
    };
    let burst = u128::from(quota.burst());
    let (permits, period) = (
        u128::from(quota.permits()),
        u128::from(quota.period_nanos()),
    );
    let mut now = input.start;
    let mut held: u64 = 0;
    let mut events: Vec<Event> = Vec::new();
    for op in input.ops.iter().take(128) {
        let dt = u64::from(op.mantissa) << (op.shift % 48);
        now = now.saturating_add(dt);
        let t = Timestamp::from_nanos(now);
        let n = u32::from(op.n % 8);
        if op.refund {
            let give = u64::from(n).min(held);
            bucket.refund(give as u32, t);
            held -= give;
            events.push(Event {
                at: now,
                admitted: 0,
                refunded: give,
            });
            continue;
        }
        match bucket.check_n(n, t) {
            Err(e) if e.is_never() => {
                assert!(n > quota.burst() || e.limit() < n, "{e:?} for n={n}");
            }
            Ok(()) => {
                // the snapshot after the admission, asked for
                let s = bucket.snapshot(t);
                assert!(s.remaining() <= s.limit(), "{s:?}");
                held += u64::from(n);
                events.push(Event {
                    at: now,
                    admitted: u64::from(n),
                    refunded: 0,
                });
                // the bound over every span ending here
                let (mut admitted, mut refunded) = (0u128, 0u128);
                for e in events.iter().rev() {
                    admitted += u128::from(e.admitted);
                    refunded += u128::from(e.refunded);
                    if e.admitted == 0 {
                        continue; // spans start at an admission
                    }
                    let span = u128::from(now - e.at);
                    let bound = burst + span * permits / period;
                    assert!(
                        admitted <= bound + refunded,
                        "over-admission: {admitted} admitted, {refunded} refunded in {span} ns, bound {bound} ({quota:?}, leaky {})",
                        input.leaky
                    );
                }
            }
            Err(d) => {
                assert!(n > 0, "a peek is never refused");
                assert!(d.retry_after() > Duration::ZERO, "{d:?}");
                assert!(d.snapshot().remaining() <= d.snapshot().limit(), "{d:?}");
            }
        }
    }
});
