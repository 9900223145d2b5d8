//! Helpers shared by the test binaries (each uses a different subset).
#![allow(dead_code)]

pub mod http;
mod redis_server;
#[allow(unused_imports)] // only the redis_* binaries use it
pub use redis_server::*;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use tollgate::{CapacityExceeded, ConcurrencyLimiter, Decision, Limiter, Snapshot};

/// tollgate's real `ConcurrencyLimiter` (at most `limit` permits in flight,
/// `check_n` takes, `refund` gives back; a refusal carries its 1 ms retry
/// *hint*, although capacity returns only when a holder releases it),
/// instrumented to count its checks so a test can see it is not polled.
#[derive(Debug)]
pub struct InFlight {
    inner: ConcurrencyLimiter,
    checks: AtomicUsize,
}

/// The concurrency limiter's default retry hint.
pub const RETRY_HINT_NANOS: u64 = tollgate::concurrency::DEFAULT_RETRY_HINT_NANOS;

impl InFlight {
    pub fn new(limit: u32) -> Self {
        Self {
            inner: ConcurrencyLimiter::new(limit).expect("limit is at least 1"),
            checks: AtomicUsize::new(0),
        }
    }

    pub fn held(&self) -> u32 {
        self.inner.in_flight()
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
        self.inner.capacity()
    }

    fn check_n(&self, n: u32, now: u64) -> Result<Decision, CapacityExceeded> {
        self.checks.fetch_add(1, Ordering::SeqCst);
        self.inner.check_n(n, now)
    }

    fn refund(&self, n: u32, now: u64) {
        self.inner.refund(n, now);
    }

    fn snapshot(&self, now: u64) -> Snapshot {
        self.inner.snapshot(now)
    }

    fn time_until_ready(&self, n: u32, now: u64) -> Result<u64, CapacityExceeded> {
        self.inner.time_until_ready(n, now)
    }

    fn is_idle(&self, now: u64) -> bool {
        self.inner.is_idle(now)
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
