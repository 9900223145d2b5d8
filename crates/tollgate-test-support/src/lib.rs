//! Helpers shared by the integration tests of tollgate's crates (each test
//! binary uses a different subset): a binary names it as
//! `use tollgate_test_support as support;`. Unpublished; the crates that
//! use it name it as a path-only dev-dependency, which `cargo publish`
//! leaves out. Features: `http` (the HTTP helpers), `metrics` (with `http`:
//! an in-memory recorder), `redis` (a real `redis-server` per test).

#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "log")]
pub mod log;
#[cfg(all(feature = "http", feature = "metrics"))]
pub mod recorder;
#[cfg(feature = "redis")]
mod redis_server;
#[cfg(feature = "redis")]
pub use redis_server::*;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tollgate::{ConcurrencyLimiter, Grant, Limiter, Refusal, Snapshot, Timestamp};

/// tollgate's `ConcurrencyLimiter` with at most `limit` permits in flight.
/// The one place the tests build one, so a change of its constructor is
/// one edit here.
pub fn concurrency(limit: u32) -> ConcurrencyLimiter {
    ConcurrencyLimiter::with_limit(limit).expect("limit is at least 1")
}

/// A release-based `Limiter` of the test's own: tollgate's real
/// `ConcurrencyLimiter` (at most `limit` permits in flight) behind the
/// `Limiter` trait, which the concurrency limiter no longer implements.
/// `try_acquire_n` takes permits through a guard and detaches them
/// (`into_raw`), `refund` gives them back (`release`). It counts its checks
/// so a test can see the queue does not poll it. Queue it with
/// `release_on_drop(true)`, as any release-based limiter that is not
/// tollgate's own; tests that need no counter queue the
/// `ConcurrencyLimiter` itself.
#[derive(Debug)]
pub struct InFlight {
    inner: ConcurrencyLimiter,
    checks: AtomicUsize,
}

impl InFlight {
    pub fn new(limit: u32) -> Self {
        Self {
            inner: concurrency(limit),
            checks: AtomicUsize::new(0),
        }
    }

    pub fn held(&self) -> u32 {
        self.inner.in_flight()
    }

    /// Calls of `try_acquire_n` so far.
    pub fn checks(&self) -> usize {
        self.checks.load(Ordering::SeqCst)
    }

    /// Nothing in flight (no longer a `Limiter` method).
    pub fn is_idle(&self, _now: Timestamp) -> bool {
        self.inner.in_flight() == 0
    }
}

impl Limiter for InFlight {
    type Permit = Grant;

    fn capacity(&self, _: &()) -> u32 {
        self.inner.limit()
    }

    fn try_acquire_n(&self, _: &(), n: u32, now: Timestamp) -> Result<Grant, Refusal<'static>> {
        self.checks.fetch_add(1, Ordering::SeqCst);
        let permit = self.inner.try_acquire(n)?;
        let _kept = permit.into_raw(); // given back by `refund`
        Ok(Grant::new(n, now))
    }

    fn cancel(&self, key: &(), grant: Grant, now: Timestamp) {
        self.refund(key, grant.permits(), now);
    }

    fn refund(&self, _: &(), n: u32, _now: Timestamp) {
        self.inner.release(n);
    }

    fn snapshot(&self, _: &(), _now: Timestamp) -> Snapshot {
        self.inner.snapshot()
    }

    fn time_until_ready(
        &self,
        _: &(),
        n: u32,
        _now: Timestamp,
    ) -> Result<Duration, Refusal<'static>> {
        let limit = self.inner.limit();
        if n > limit {
            return Err(Refusal::never(n, self.inner.snapshot()));
        }
        // no exact wait exists: the retry hint while it does not fit
        Ok(if n <= self.inner.available() {
            Duration::ZERO
        } else {
            self.inner.retry_hint()
        })
    }

    fn required_resolution(&self) -> Duration {
        Duration::ZERO // no time component
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

/// Waits, on real time, until `cond` holds: the explicit signal that
/// replaces a fixed sleep ("the server has queued the request by now").
/// Polls every millisecond; panics naming `what` after 30 s, far beyond
/// any stall of a loaded machine.
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(
            std::time::Instant::now() < deadline,
            "still waiting after 30 s for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
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
