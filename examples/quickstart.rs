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
        token_ok += u32::from(a.is_allowed());
        leaky_ok += u32::from(b.is_allowed());
        println!(
            "{:>6}ms  {:<32}  {:<32}",
            t.as_millis(),
            describe(a),
            describe(b)
        );
        clock.advance(Duration::from_millis(50));
    }
    println!("admitted in 1.25 s: token bucket {token_ok}, leaky bucket {leaky_ok}");

    // A request that can never succeed is an error, not a wait.
    match token.try_acquire_n(10) {
        Err(e) => println!("try_acquire_n(10): {e}"),
        Ok(d) => println!("try_acquire_n(10): unexpected {d:?}"),
    }
    // Retry-After for HTTP is rounded up to whole seconds, never 0.
    if let Some(denied) = token.try_acquire().denied() {
        println!(
            "Retry-After for a {:?} wait: {}",
            denied.retry_after(),
            denied.retry_after_secs_ceil()
        );
    }
    Ok(())
}

fn describe(d: tollgate::Decision) -> String {
    match d.into_result() {
        Ok(s) => format!("allowed ({} left)", s.remaining()),
        Err(d) => format!("refused (retry in {:?})", d.retry_after()),
    }
}
