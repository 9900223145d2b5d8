//! The README demo: a token bucket and a leaky bucket on the same quota,
//! side by side, admitting and refusing with retry hints.
//!
//! Run with `cargo run --example quickstart`. Time is simulated with a
//! `ManualClock`, so the output is the same on every run.

use std::time::Duration;

use tollgate::{ManualClock, Quota, RateLimiter};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 5 per second: one every 200 ms; the token bucket may burst 3 at once.
    let quota = Quota::per_second(5)?.with_burst(3)?;
    let clock = ManualClock::new();
    let token = RateLimiter::token_bucket(quota, &clock)?;
    let leaky = RateLimiter::leaky_bucket(quota, &clock)?;

    println!("quota: 5 per second (interval 200 ms), token-bucket burst 3");
    println!("{:>8}  {:<32}  {:<32}", "t", "token bucket", "leaky bucket");
    // Requests arrive every 50 ms for 1.2 s.
    let (mut token_ok, mut leaky_ok) = (0, 0);
    for step in 0..=24u64 {
        let t = Duration::from_millis(step * 50);
        let a = token.try_acquire();
        let b = leaky.try_acquire();
        token_ok += u32::from(a.is_ok());
        leaky_ok += u32::from(b.is_ok());
        println!(
            "{:>6}ms  {:<32}  {:<32}",
            t.as_millis(),
            describe(a, &token),
            describe(b, &leaky)
        );
        clock.advance(Duration::from_millis(50));
    }
    println!("admitted in 1.25 s: token bucket {token_ok}, leaky bucket {leaky_ok}");

    // A request that can never succeed is an error, not a wait.
    match token.try_acquire_n(10) {
        Err(e) => println!("try_acquire_n(10): {e}"),
        Ok(_) => println!("try_acquire_n(10): unexpectedly admitted"),
    }
    // Retry-After for HTTP is rounded up to whole seconds, never 0.
    if let Err(denied) = token.try_acquire() {
        println!(
            "Retry-After for a {:?} wait: {}",
            denied.retry_after(),
            denied.retry_after_secs_ceil()
        );
    }
    Ok(())
}

/// The answer, with the permits left after an admission (asked of the
/// limiter right after it: the clock has not moved).
fn describe<C: tollgate::Clock, L: tollgate::Limiter>(
    d: Result<L::Permit, tollgate::Refusal<'_>>,
    limiter: &RateLimiter<C, L>,
) -> String {
    match d {
        Ok(_) => format!("allowed ({} left)", limiter.snapshot().remaining()),
        Err(r) => format!("refused (retry in {:?})", r.retry_after()),
    }
}
