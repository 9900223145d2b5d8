//! A limiter that panics inside the queue's admission loop takes down the
//! code that ran the loop (here: the code cancelling a waiter), not the
//! queue: once the limiter behaves again, waiters are admitted as before. (The loop used to leave its "a driver is
//! running" flag set when it unwound, so every later waiter waited forever.)

use crate::support;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tollgate::queue::Queue;
use tollgate::{Bucket, Gcra, Grant, Limiter, Quota, Refusal, Snapshot, Timestamp};

use support::poll_once;

/// A token bucket that panics on every check while `armed` is set.
struct Panicky {
    inner: Bucket<Gcra>,
    armed: Arc<AtomicBool>,
}

impl Limiter for Panicky {
    type Permit = Grant;

    fn capacity(&self, _: &()) -> u32 {
        self.inner.capacity(&())
    }
    fn try_acquire_n(&self, _: &(), n: u32, now: Timestamp) -> Result<Grant, Refusal<'static>> {
        assert!(!self.armed.load(Ordering::SeqCst), "the limiter panics");
        self.inner.try_acquire_n(&(), n, now)
    }
    fn cancel(&self, _: &(), grant: Grant, now: Timestamp) {
        self.inner.cancel(&(), grant, now);
    }
    fn refund(&self, _: &(), n: u32, now: Timestamp) {
        self.inner.refund(n, now);
    }
    fn snapshot(&self, _: &(), now: Timestamp) -> Snapshot {
        self.inner.snapshot(now)
    }
    fn time_until_ready(
        &self,
        _: &(),
        n: u32,
        now: Timestamp,
    ) -> Result<Duration, Refusal<'static>> {
        self.inner.time_until_ready(n, now)
    }
    fn required_resolution(&self) -> Duration {
        self.inner.required_resolution()
    }
}

#[tokio::test(start_paused = true)]
async fn waiters_are_admitted_after_the_limiter_panicked_in_the_loop() {
    let armed = Arc::new(AtomicBool::new(false));
    let limiter = Panicky {
        inner: Bucket::new(Gcra::token_bucket(Quota::per_second(1).unwrap())),
        armed: armed.clone(),
    };
    let queue = Queue::new(limiter);
    let _burst = queue.acquire(&(), 1).await.expect("the burst is free");

    // Two waiters: `first` at the head of the line, `second` behind it.
    let mut first = Box::pin(queue.acquire(&(), 1));
    assert!(
        poll_once(&mut first).await.is_pending(),
        "the bucket is empty"
    );
    let mut second = Box::pin(queue.acquire(&(), 1));
    assert!(
        poll_once(&mut second).await.is_pending(),
        "behind the first"
    );

    // Cancelling the head runs the admission loop for `second`, and the
    // limiter panics in it: the panic reaches the code that cancelled.
    armed.store(true, Ordering::SeqCst);
    let cancelled = catch_unwind(AssertUnwindSafe(move || drop(first)));
    assert!(cancelled.is_err(), "the limiter's panic reaches the caller");

    // The limiter behaves again: `second` is admitted when the bucket
    // refills (1 s), instead of the loop staying marked as running forever.
    armed.store(false, Ordering::SeqCst);
    let admitted = tokio::time::timeout(Duration::from_secs(5), second).await;
    assert!(
        matches!(admitted, Ok(Ok(_))),
        "the waiter behind is admitted within the refill"
    );
}
