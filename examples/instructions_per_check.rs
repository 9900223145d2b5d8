//! One direct check in a loop, for counting instructions per call under
//! callgrind (a count, not a time: the same on a busy machine).
//! `scripts/instructions-per-check.sh` runs each case at two loop lengths
//! and prints the difference per call, for tollgate and governor alike:
//!
//! ```text
//! instructions_per_check CASE CALLS allow|deny
//! CASE: try_acquire | check | governor
//! ```
//!
//! `try_acquire` is `RateLimiter::try_acquire().is_ok()` and `check` is
//! `bucket.check(clock.now()).is_ok()` (what README.md shows);
//! `governor` is governor's `check().is_ok()`. All three read a fake clock
//! (one atomic load) and do the work of `benches/direct.rs`: on `allow`,
//! 10⁹ per second with a burst of 10⁶ and the clock advanced by 1,024 ns
//! every 1,024 calls; on `deny`, 1 per second with a burst of 1 on a
//! frozen clock.

use std::hint::black_box;
use std::num::NonZeroU32;
use std::process::ExitCode;
use std::time::Duration;

use governor::clock::FakeRelativeClock;
use governor::{Quota as GovQuota, RateLimiter as GovLimiter};
use tollgate::{Bucket, Clock, ManualClock, Quota, RateLimiter};

/// Calls between two advances of the fake clocks, and the advance.
const TICK_EVERY: u64 = 1_024;
const TICK: Duration = Duration::from_nanos(1_024);

const USAGE: &str = "usage: instructions_per_check try_acquire|check|governor CALLS allow|deny";

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
    let clock = ManualClock::new();
    let fake = FakeRelativeClock::default();
    let mut allowed = 0u64;
    match case.as_str() {
        "try_acquire" => {
            let Ok(limiter) = RateLimiter::token_bucket(quota, &clock) else {
                return ExitCode::FAILURE;
            };
            for i in 0..calls {
                if i % TICK_EVERY == 0 {
                    clock.advance(tick);
                }
                allowed += u64::from(black_box(&limiter).try_acquire().is_ok());
            }
        }
        "check" => {
            let bucket = Bucket::token_bucket(quota);
            for i in 0..calls {
                if i % TICK_EVERY == 0 {
                    clock.advance(tick);
                }
                allowed += u64::from(black_box(&bucket).check(clock.now()).is_ok());
            }
        }
        "governor" => {
            let limiter = GovLimiter::direct_with_clock(gov_quota, fake.clone());
            for i in 0..calls {
                if i % TICK_EVERY == 0 {
                    fake.advance(tick);
                }
                allowed += u64::from(black_box(&limiter).check().is_ok());
            }
        }
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    }
    println!("{allowed} of {calls} allowed");
    ExitCode::SUCCESS
}
