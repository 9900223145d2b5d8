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
//! `try_acquire` is `RateLimiter::try_acquire().is_allowed()` and `check` is
//! `bucket.check(clock.now()).is_allowed()` (what README.md shows);
//! `governor` is governor's `check().is_ok()`. All three read a fake clock
//! (one atomic load) and use the quotas of `benches/direct.rs`.

use std::hint::black_box;
use std::num::NonZeroU32;
use std::process::ExitCode;

use governor::clock::FakeRelativeClock;
use governor::{Quota as GovQuota, RateLimiter as GovLimiter};
use tollgate::{Bucket, Clock, Limiter, ManualClock, Quota, RateLimiter};

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
    let (quota, gov_quota) = if path == "allow" {
        // never refuses within the loop: 1 ns interval, burst u32::MAX
        let Ok(q) = Quota::per_second(1_000_000_000).and_then(|q| q.with_burst(u32::MAX)) else {
            return ExitCode::FAILURE;
        };
        let per_ns = NonZeroU32::new(1_000_000_000).unwrap_or(one);
        (q, GovQuota::per_second(per_ns).allow_burst(NonZeroU32::MAX))
    } else {
        let Ok(q) = Quota::per_hour(1) else {
            return ExitCode::FAILURE;
        };
        (q, GovQuota::per_hour(one))
    };
    let clock = ManualClock::new();
    let mut allowed = 0u64;
    match case.as_str() {
        "try_acquire" => {
            let Ok(limiter) = RateLimiter::token_bucket(quota, &clock) else {
                return ExitCode::FAILURE;
            };
            for _ in 0..calls {
                allowed += u64::from(black_box(&limiter).try_acquire().is_allowed());
            }
        }
        "check" => {
            let bucket = Bucket::token_bucket(quota);
            for _ in 0..calls {
                allowed += u64::from(black_box(&bucket).check(clock.now()).is_allowed());
            }
        }
        "governor" => {
            let limiter = GovLimiter::direct_with_clock(gov_quota, FakeRelativeClock::default());
            for _ in 0..calls {
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
