//! Several embassy tasks share one tollgate limiter on a desktop.
//!
//! Run from the repository root:
//!
//! ```sh
//! cargo run --manifest-path examples/embassy-host/Cargo.toml
//! ```
//!
//! Four "sensor" tasks each want to publish three readings through one
//! uplink limited to 5 per second with bursts of 2. Each waits with
//! `acquire(1).await`, which returns the instant of the admission; the
//! program prints every admission at that instant, with who got it and
//! the permits left then: two at once, then one every 200 ms. A fifth
//! task asks for 3 permits at once (more than the burst: refused at once)
//! and a sixth gives up when its 50 ms deadline cannot be met.
//!
//! Waiters are not queued (see `tollgate::embassy`): every admission keeps
//! to the quota, but which of several simultaneous waiters gets the next
//! permit is up to the executor's wake order.

use core::time::Duration;

use embassy_executor::Spawner;
use embassy_time::{Instant, Timer};
use tollgate::embassy::{EmbassyClock, WaitError};
use tollgate::{Quota, RateLimiter};

type Uplink = RateLimiter<EmbassyClock>;

const SENSORS: u8 = 4;
const READINGS: u32 = 3;

fn ms_since(start: Instant, at: Instant) -> f64 {
    at.duration_since(start).as_micros() as f64 / 1000.0
}

fn elapsed_ms(start: Instant) -> f64 {
    ms_since(start, Instant::now())
}

#[embassy_executor::task(pool_size = 4)]
async fn sensor(id: u8, uplink: &'static Uplink, start: Instant) {
    for reading in 1..=READINGS {
        match uplink.acquire(1).await {
            // `at` is the admission itself; the task may resume later
            Ok(at) => println!(
                "{:>8.1} ms  sensor {id} reading {reading} admitted ({} left)",
                ms_since(start, EmbassyClock::instant_at(at)),
                uplink.limiter().snapshot(at).remaining()
            ),
            Err(e) => println!("{:>8.1} ms  sensor {id}: {e}", elapsed_ms(start)),
        }
    }
}

#[embassy_executor::task]
async fn greedy(uplink: &'static Uplink, start: Instant) {
    match uplink.acquire(3).await {
        Err(WaitError::CapacityExceeded(e)) => {
            println!("{:>8.1} ms  greedy: {e}", elapsed_ms(start))
        }
        other => println!(
            "{:>8.1} ms  greedy: unexpected {other:?}",
            elapsed_ms(start)
        ),
    }
}

#[embassy_executor::task]
async fn impatient(uplink: &'static Uplink, start: Instant) {
    // Let the sensors drain the burst first.
    Timer::after_millis(10).await;
    match uplink
        .acquire(1)
        .with_timeout(Duration::from_millis(50))
        .await
    {
        Err(WaitError::Timeout { ready_at, .. }) => println!(
            "{:>8.1} ms  impatient: gave up at once, next permit only at {:.1} ms",
            elapsed_ms(start),
            ms_since(start, EmbassyClock::instant_at(ready_at))
        ),
        other => println!("{:>8.1} ms  impatient: {other:?}", elapsed_ms(start)),
    }
}

#[embassy_executor::main]
async fn main(spawner: Spawner) {
    let quota = Quota::per_second(5)
        .and_then(|q| q.with_burst(2))
        .expect("valid quota");
    let uplink: &'static Uplink = Box::leak(Box::new(
        RateLimiter::token_bucket(quota, EmbassyClock::new()).expect("quota fits the clock"),
    ));
    let start = Instant::now();
    println!("uplink: 5 per second (one per 200 ms), bursts of 2; 4 sensors x 3 readings");

    for id in 0..SENSORS {
        spawner.spawn(sensor(id, uplink, start).expect("sensor pool"));
    }
    spawner.spawn(greedy(uplink, start).expect("greedy task"));
    spawner.spawn(impatient(uplink, start).expect("impatient task"));

    // 12 readings: 2 at once, then 10 more 200 ms apart (about 2 s).
    Timer::after_millis(2_300).await;
    println!("{:>8.1} ms  done", elapsed_ms(start));
    std::process::exit(0);
}
