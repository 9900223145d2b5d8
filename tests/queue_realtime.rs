//! Real time, multi-thread runtime: many tasks hammer a queued token bucket
//! for 2 s. The admissions (recorded at the instant the bucket granted them)
//! never exceed what the quota allows over any window, and the total is
//! within one permit of burst + rate·t.
#![cfg(feature = "tokio")]

use std::sync::{Arc, Mutex};

use tollgate::queue::{AcquireError, Queue};
use tollgate::{Bucket, CapacityExceeded, Clock, Decision, Gcra, Limiter, Quota, Snapshot};

/// The real bucket, recording the `now` of every admission it makes.
struct Recorded {
    bucket: Bucket<Gcra>,
    grants: Mutex<Vec<u64>>,
}

impl Limiter for Recorded {
    fn capacity(&self) -> u32 {
        self.bucket.capacity()
    }
    fn check_n(&self, n: u32, now: u64) -> Result<Decision, CapacityExceeded> {
        let d = self.bucket.check_n(n, now)?;
        if d.is_allowed() && n > 0 {
            self.grants.lock().unwrap().push(now);
        }
        Ok(d)
    }
    fn refund(&self, n: u32, now: u64) {
        self.bucket.refund(n, now);
    }
    fn snapshot(&self, now: u64) -> Snapshot {
        self.bucket.snapshot(now)
    }
    fn time_until_ready(&self, n: u32, now: u64) -> Result<u64, CapacityExceeded> {
        self.bucket.time_until_ready(n, now)
    }
    fn is_idle(&self, now: u64) -> bool {
        self.bucket.is_idle(now)
    }
    fn time_until_ready_after(&self, ahead: u64, n: u32, now: u64) -> Option<u64> {
        self.bucket.time_until_ready_after(ahead, n, now)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_tasks_for_two_seconds_get_exactly_what_the_quota_allows() {
    const TASKS: usize = 16;
    const BURST: u64 = 5;
    const T: u64 = 20_000_000; // 50 per second
    let limiter = Recorded {
        bucket: Bucket::token_bucket(Quota::per_second(50).unwrap().allow_burst(5).unwrap()),
        grants: Mutex::new(Vec::new()),
    };
    let queue = Arc::new(Queue::new(limiter));
    let start = queue.clock().now();
    let end = queue.clock().instant_at(start + 2_000_000_000);
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let q = queue.clone();
        tasks.push(tokio::spawn(async move {
            let mut mine = 0u64;
            loop {
                match q.acquire_until(1, end).await {
                    Ok(permit) => {
                        permit.forget();
                        mine += 1;
                    }
                    Err(AcquireError::DeadlineExceeded) => return mine,
                    Err(e) => panic!("unexpected refusal: {e}"),
                }
            }
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    let grants = queue.limiter().grants.lock().unwrap().clone();
    assert_eq!(grants.len() as u64, total);
    assert!(
        grants.windows(2).all(|w| w[0] <= w[1]),
        "granted under the queue's lock, in time order"
    );
    // No admission earlier than the quota allows: over every window
    // [g_i, g_j], at most burst + ⌊(g_j − g_i)/T⌋ permits.
    for i in 0..grants.len() {
        for j in i..grants.len() {
            let admitted = (j - i + 1) as u64;
            assert!(
                admitted <= BURST + (grants[j] - grants[i]) / T,
                "{admitted} admissions within {} ns",
                grants[j] - grants[i]
            );
        }
    }
    // And no fewer than it allows: within one permit of burst + rate·t
    // over the 2 s.
    let t = 2_000_000_000u64;
    let allowed = BURST + t / T;
    assert!(
        total.abs_diff(allowed) <= 1,
        "admitted {total}, quota allows {allowed} in 2 s"
    );
    assert!(grants.iter().all(|&g| g >= start && g <= start + t + T));
    let stats = queue.stats();
    assert_eq!(stats.admitted_requests, total);
    assert_eq!(stats.queued_requests, 0);
}
