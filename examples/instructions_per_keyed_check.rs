//! Instructions per keyed check, counted by callgrind
//! (`scripts/instructions-per-check.sh`): tollgate's sharded table, the
//! partitioned limiter over it, and governor's keyed limiter, on the same
//! work. A binary of its own, so that these cases do not change how the
//! direct cases of `instructions_per_check` are compiled.
//!
//! ```text
//! instructions_per_keyed_check CASE CALLS allow|deny
//! CASE: sharded | partitioned | governor_keyed
//! ```
//!
//! On `allow`, 10⁹ per second with a burst of 10⁶ and the clock advanced by
//! 1,024 ns every 1,024 calls; on `deny`, 1 per second with a burst of 1 on
//! a frozen clock. 10,000 `u64` keys visited in a fixed shuffled order,
//! every key inserted before the loop (as in `benches/keyed.rs`): `sharded`
//! is a `ShardedKeyedTable`'s `try_acquire(&key, clock.now()).is_ok()`,
//! `partitioned` a partitioned limiter with one per-key policy over such a
//! table, `try_acquire(&key, clock.now()).is_ok()` (its lease dropped at
//! once), and `governor_keyed` governor's `dashmap_with_clock` limiter's
//! `check_key(&key).is_ok()`.

use std::hint::black_box;
use std::num::NonZeroU32;
use std::process::ExitCode;
use std::time::Duration;

use governor::clock::FakeRelativeClock;
use governor::{Quota as GovQuota, RateLimiter as GovLimiter};
use tollgate::keyed::ShardedKeyedTable;
use tollgate::partitioned::Partitioned;
use tollgate::{Clock, Gcra, Limiter, ManualClock, Quota};

/// Calls between two advances of the fake clocks, and the advance.
const TICK_EVERY: u64 = 1_024;
const TICK: Duration = Duration::from_nanos(1_024);

/// Keys of the keyed cases.
const KEYS: u64 = 10_000;

const USAGE: &str =
    "usage: instructions_per_keyed_check sharded|partitioned|governor_keyed CALLS allow|deny";

/// The keys in a fixed shuffle (`benches/keyed.rs`'s order).
fn visit_order(keys: u64) -> Vec<u64> {
    let mut order: Vec<u64> = (0..keys).collect();
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    for i in (1..order.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    order
}

/// `calls` keyed checks cycling through `order` (each key checked once
/// before), `tick` every `TICK_EVERY`; the number admitted.
fn keyed_loop(calls: u64, order: &[u64], tick: impl Fn(), check: impl Fn(&u64) -> bool) -> u64 {
    for k in order {
        check(k);
    }
    let mut allowed = 0u64;
    let mut at = 0;
    for i in 0..calls {
        if i % TICK_EVERY == 0 {
            tick();
        }
        allowed += u64::from(check(black_box(&order[at])));
        at += 1;
        if at == order.len() {
            at = 0;
        }
    }
    allowed
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [case, calls, path] = args.as_slice() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let (Ok(calls), true) = (calls.parse::<u64>(), path == "allow" || path == "deny") else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let one = NonZeroU32::MIN;
    let allow = path == "allow";
    let (quota, gov_quota) = if allow {
        // admits every call while time moves 1 ns a call: 1 ns interval
        let Ok(q) = Quota::per_second(1_000_000_000).and_then(|q| q.with_burst(1_000_000)) else {
            return ExitCode::FAILURE;
        };
        let per_ns = NonZeroU32::new(1_000_000_000).unwrap_or(one);
        let burst = NonZeroU32::new(1_000_000).unwrap_or(one);
        (q, GovQuota::per_second(per_ns).allow_burst(burst))
    } else {
        let Ok(q) = Quota::per_second(1) else {
            return ExitCode::FAILURE;
        };
        (q, GovQuota::per_second(one))
    };
    // on allow, both fake clocks move 1,024 ns every 1,024 calls
    let tick = if allow { TICK } else { Duration::ZERO };
    // each case in a function of its own, so that no case's code changes
    // how another is compiled (inlining budgets are per function)
    let allowed = match case.as_str() {
        "sharded" => keyed(calls, quota, tick, false),
        "partitioned" => keyed(calls, quota, tick, true),
        "governor_keyed" => governor_keyed(calls, gov_quota, tick),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let Some(allowed) = allowed else {
        return ExitCode::FAILURE;
    };
    println!("{allowed} of {calls} allowed");
    ExitCode::SUCCESS
}

#[inline(never)]
fn keyed(calls: u64, quota: Quota, tick: Duration, partitioned: bool) -> Option<u64> {
    let clock = ManualClock::new();
    // capacity for 85 % occupancy, as benches/keyed.rs
    let max_keys = (KEYS as usize * 100).div_ceil(85);
    let table = ShardedKeyedTable::builder(Gcra::token_bucket(quota))
        .max_keys(max_keys)
        .build()
        .ok()?;
    let order = visit_order(KEYS);
    let advance = || clock.advance(tick);
    Some(if partitioned {
        let limiter = Partitioned::<u64, u64>::builder("bench")
            .policy("per_key", |k: &u64| Some(*k), table)
            .build();
        keyed_loop(calls, &order, advance, |k| {
            black_box(&limiter).try_acquire(k, clock.now()).is_ok()
        })
    } else {
        keyed_loop(calls, &order, advance, |k| {
            black_box(&table).try_acquire(k, clock.now()).is_ok()
        })
    })
}

#[inline(never)]
fn governor_keyed(calls: u64, gov_quota: GovQuota, tick: Duration) -> Option<u64> {
    let fake = FakeRelativeClock::default();
    let limiter = GovLimiter::dashmap_with_clock(gov_quota, fake.clone());
    let order = visit_order(KEYS);
    Some(keyed_loop(
        calls,
        &order,
        || fake.advance(tick),
        |k| black_box(&limiter).check_key(k).is_ok(),
    ))
}
