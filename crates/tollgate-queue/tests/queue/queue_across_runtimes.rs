//! The queue keeps no timer while idle, so one queue (say a `static` or a
//! long-lived value in a test harness) can serve one runtime after another.

use std::sync::Arc;
use std::time::Duration;

use tollgate::queue::Queue;
use tollgate::{Bucket, Gcra, Quota};

fn paced_round(queue: &Arc<Queue<Bucket<Gcra>>>) -> Vec<Duration> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        let start = tokio::time::Instant::now();
        let tasks: Vec<_> = (0..3)
            .map(|_| {
                let q = queue.clone();
                tokio::spawn(async move {
                    q.acquire(&(), 1).await.unwrap().forget();
                    start.elapsed()
                })
            })
            .collect();
        let mut times = Vec::new();
        for t in tasks {
            times.push(t.await.unwrap());
        }
        times
    })
    // the runtime (and its timer driver) is dropped here
}

#[test]
fn one_queue_serves_successive_runtimes() {
    // 10/s burst 1. The queue (and its clock) outlive both runtimes.
    let bucket = Bucket::token_bucket(Quota::per_second(10).unwrap().with_burst(1).unwrap());
    let queue = Arc::new(Queue::new(bucket));
    let first = paced_round(&queue);
    assert_eq!(first.len(), 3);
    assert_eq!(queue.stats().queued_requests, 0);
    // A second runtime: the first one's timer is gone with its busy period,
    // so the queue arms a new one here instead of polling a dead driver.
    let second = paced_round(&queue);
    assert_eq!(second.len(), 3);
    assert_eq!(queue.stats().admitted_requests, 6);
    // Each round paces its 3 requests 100 ms apart, whatever the bucket
    // held when the round began.
    for times in [&first, &second] {
        assert_eq!(times[2] - times[1], Duration::from_millis(100));
    }
}
