//! Helpers shared by the queue tests.
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use tollgate::{CapacityExceeded, Decision, Denied, Limiter, Snapshot};

/// A stand-in for the concurrency limiter that lands in parallel (not in
/// this branch): at most `limit` permits in flight, `check_n` takes,
/// `refund` gives back. Like that limiter, a refusal carries a 1 ms retry
/// *hint* as `retry_after`, although capacity returns only when a holder
/// releases it. Counts its checks, so a test can see it is not polled.
#[derive(Debug)]
pub struct InFlight {
    limit: u32,
    held: AtomicU32,
    checks: AtomicUsize,
}

/// The stand-in's retry hint (the parallel limiter's default).
pub const RETRY_HINT_NANOS: u64 = 1_000_000;

impl InFlight {
    pub fn new(limit: u32) -> Self {
        Self {
            limit,
            held: AtomicU32::new(0),
            checks: AtomicUsize::new(0),
        }
    }

    pub fn held(&self) -> u32 {
        self.held.load(Ordering::SeqCst)
    }

    /// Calls of `check_n` so far.
    pub fn checks(&self) -> usize {
        self.checks.load(Ordering::SeqCst)
    }

    /// Takes `n` behind the queue's back (another user of the limiter).
    pub fn take_directly(&self, n: u32) -> bool {
        self.check_n(n, 0).unwrap().is_allowed()
    }
}

impl Limiter for InFlight {
    fn capacity(&self) -> u32 {
        self.limit
    }

    fn check_n(&self, n: u32, _now: u64) -> Result<Decision, CapacityExceeded> {
        self.checks.fetch_add(1, Ordering::SeqCst);
        if n > self.limit {
            return Err(CapacityExceeded {
                requested: n,
                capacity: self.limit,
            });
        }
        let taken = self
            .held
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |h| {
                (h + n <= self.limit).then_some(h + n)
            });
        Ok(match taken {
            Ok(h) => Decision::Allowed(Snapshot::new(self.limit, self.limit - h - n, 0)),
            Err(h) => Decision::Denied(Denied::new(
                RETRY_HINT_NANOS,
                Snapshot::new(self.limit, self.limit - h, 0),
            )),
        })
    }

    fn refund(&self, n: u32, _now: u64) {
        let _ = self
            .held
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |h| {
                Some(h.saturating_sub(n))
            });
    }

    fn snapshot(&self, _now: u64) -> Snapshot {
        Snapshot::new(self.limit, self.limit - self.held(), 0)
    }

    fn time_until_ready(&self, n: u32, _now: u64) -> Result<u64, CapacityExceeded> {
        if n > self.limit {
            return Err(CapacityExceeded {
                requested: n,
                capacity: self.limit,
            });
        }
        Ok(if self.held() + n <= self.limit {
            0
        } else {
            RETRY_HINT_NANOS
        })
    }

    fn is_idle(&self, _now: u64) -> bool {
        self.held() == 0
    }
}

/// Counts how many times the wrapped future is polled: a task is polled
/// once when spawned and once per wake-up, so this counts wake-ups.
pub struct CountPolls<F> {
    inner: Pin<Box<F>>,
    polls: Arc<AtomicUsize>,
}

impl<F: Future> CountPolls<F> {
    pub fn new(inner: F, polls: Arc<AtomicUsize>) -> Self {
        Self {
            inner: Box::pin(inner),
            polls,
        }
    }
}

impl<F: Future> Future for CountPolls<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.polls.fetch_add(1, Ordering::SeqCst);
        self.inner.as_mut().poll(cx)
    }
}

/// Polls `fut` exactly once with the current task's context.
pub async fn poll_once<F: Future + Unpin>(fut: &mut F) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut *fut).poll(cx))).await
}

/// Yields until `cond` holds (spawned tasks get to run; paused time does
/// not advance while this task is runnable).
pub async fn until(mut cond: impl FnMut() -> bool) {
    for _ in 0..100_000 {
        if cond() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("condition never held");
}
