//! A shaped token-bucket policy decides exactly as nginx's `limit_req`:
//! the same accept/reject and the same delay, for `burst` with `nodelay`,
//! without it, and with `delay=N`, on the same arrival times.
//!
//! The reference is nginx's own arithmetic (ngx_http_limit_req_module.c,
//! `ngx_http_limit_req_lookup` and `_account`), restated: `excess` in
//! milli-requests, time in milliseconds, the rate in milli-requests per
//! second; excess drains at the rate, each request adds 1000, a request
//! whose excess would pass `burst·1000` is refused (state unchanged), and an
//! accepted one waits `(excess − delay·1000) / rate` seconds if its excess
//! is above `delay·1000` (nginx truncates that wait to whole milliseconds).
#![cfg(feature = "std")]

use core::time::Duration;

use proptest::prelude::*;
use tollgate::keyed::ShardedKeyedTable;
use tollgate::partitioned::{Partitioned, Shaping};
use tollgate::{Gcra, Limiter, Quota, Timestamp};

/// nginx's limit_req state for one key.
struct Nginx {
    /// requests per second × 1000
    rate: i64,
    /// burst × 1000
    burst: i64,
    /// delay × 1000 (`nodelay` is delay = burst)
    delay: i64,
    excess: i64,
    last_ms: i64,
    seen: bool,
}

impl Nginx {
    fn new(rate: u32, burst: u32, delay: u32) -> Self {
        Self {
            rate: i64::from(rate) * 1000,
            burst: i64::from(burst) * 1000,
            delay: i64::from(delay) * 1000,
            excess: 0,
            last_ms: 0,
            seen: false,
        }
    }

    /// `None` for a refusal, else the delay in milliseconds.
    fn request(&mut self, now_ms: i64) -> Option<i64> {
        let excess = if self.seen {
            let ms = (now_ms - self.last_ms).abs();
            (self.excess - self.rate * ms / 1000 + 1000).max(0)
        } else {
            0 // a new node: ngx_http_limit_req_lookup stores excess 0
        };
        if excess > self.burst {
            return None;
        }
        self.excess = excess;
        self.last_ms = now_ms;
        self.seen = true;
        if excess <= self.delay {
            Some(0)
        } else {
            Some((excess - self.delay) * 1000 / self.rate)
        }
    }
}

fn shaped(rate: u32, burst: u32, shaping: Option<Shaping>) -> Partitioned<u8, u8> {
    let bucket = Gcra::token_bucket(
        Quota::per_second(rate)
            .unwrap()
            .with_burst(burst + 1)
            .unwrap(),
    );
    let table = ShardedKeyedTable::<u8, _>::builder(bucket).build().unwrap();
    let builder = Partitioned::<u8, u8>::builder("nginx");
    match shaping {
        Some(s) => builder.shaped("zone", |k: &u8| Some(*k), table, s),
        None => builder.policy("zone", |k: &u8| Some(*k), table),
    }
    .build()
}

/// Runs the same arrivals through both; compares every answer.
fn compare(rate: u32, burst: u32, mode: &str, arrivals_ms: &[u64]) {
    let (delay, shaping) = match mode {
        "nodelay" => (burst, None),
        "delay_all" => (0, Some(Shaping::delay_all())),
        n => {
            let d: u32 = n.parse().unwrap();
            (d, Some(Shaping::delay_after(d)))
        }
    };
    let mut nginx = Nginx::new(rate, burst, delay);
    let ours = shaped(rate, burst, shaping);
    for (i, &ms) in arrivals_ms.iter().enumerate() {
        let want = nginx.request(ms as i64);
        let got = match ours.try_acquire(&1, Timestamp::from_millis(ms)) {
            Ok(a) => Some(a.delay().as_nanos() as i64 / 1_000_000),
            Err(_) => None,
        };
        assert_eq!(
            got, want,
            "rate {rate}/s burst {burst} {mode}: request {i} at {ms} ms"
        );
    }
}

#[test]
fn burst_with_nodelay_admits_the_burst_at_once() {
    // limit_req zone=z burst=5 nodelay, rate=2r/s; 10 requests at t=0
    compare(2, 5, "nodelay", &[0; 10]);
    let ours = shaped(2, 5, None);
    let now = Timestamp::ZERO;
    let admitted = (0..10)
        .filter(|_| ours.try_acquire(&1, now).is_ok())
        .count();
    assert_eq!(admitted, 6); // 1 + burst
}

#[test]
fn burst_without_nodelay_paces_the_excess() {
    // limit_req zone=z burst=5 (no nodelay), rate=2r/s: 0, 500, 1000, ... ms
    compare(2, 5, "delay_all", &[0; 10]);
    let ours = shaped(2, 5, Some(Shaping::delay_all()));
    let delays: Vec<Duration> = (0..6)
        .map(|_| ours.try_acquire(&1, Timestamp::ZERO).unwrap().delay())
        .collect();
    let want: Vec<Duration> = (0..6).map(|i| Duration::from_millis(500 * i)).collect();
    assert_eq!(delays, want);
}

#[test]
fn delay_n_passes_the_first_n_excess_requests_at_once() {
    // limit_req zone=z burst=12 delay=8, rate=5r/s (nginx's documentation
    // example: 8 excess at once, 4 more delayed, the rest refused)
    compare(5, 12, "8", &[0; 20]);
    let ours = shaped(5, 12, Some(Shaping::delay_after(8)));
    let delays: Vec<u128> = (0..13)
        .map(|_| {
            ours.try_acquire(&1, Timestamp::ZERO)
                .unwrap()
                .delay()
                .as_millis()
        })
        .collect();
    assert_eq!(delays, [0, 0, 0, 0, 0, 0, 0, 0, 0, 200, 400, 600, 800]);
    assert!(ours.try_acquire(&1, Timestamp::ZERO).is_err());
}

#[test]
fn max_wait_refuses_what_would_wait_too_long_and_gives_the_place_back() {
    let ours = shaped(
        2,
        5,
        Some(Shaping::delay_all().max_wait(Duration::from_millis(1_000))),
    );
    let now = Timestamp::ZERO;
    for want in [0, 500, 1_000] {
        assert_eq!(ours.try_acquire(&1, now).unwrap().delay().as_millis(), want);
    }
    let r = ours.try_acquire(&1, now).unwrap_err();
    assert_eq!(r.retry_after(), Duration::from_millis(500));
    // the refused request reserved nothing: at 500 ms its turn is 1 s away
    assert_eq!(
        ours.try_acquire(&1, Timestamp::from_millis(500))
            .unwrap()
            .delay()
            .as_millis(),
        1_000
    );
}

fn any_rate() -> impl Strategy<Value = u32> {
    // rates whose interval and per-millisecond drain are whole numbers in
    // both arithmetics
    prop_oneof![
        Just(1u32),
        Just(2),
        Just(4),
        Just(5),
        Just(10),
        Just(20),
        Just(50),
        Just(100)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn random_arrivals_match_nginx(
        rate in any_rate(),
        burst in 0u32..20,
        delay_pick in 0u32..3,
        gaps in prop::collection::vec(prop_oneof![Just(0u64), 0u64..50, 0u64..2_000], 1..80),
    ) {
        let mode = match delay_pick {
            0 => "nodelay".to_string(),
            1 => "delay_all".to_string(),
            _ => (burst / 2).to_string(),
        };
        let mut t = 0;
        let arrivals: Vec<u64> = gaps.iter().map(|g| { t += g; t }).collect();
        compare(rate, burst, &mode, &arrivals);
    }
}
