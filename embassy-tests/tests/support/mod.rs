//! What every test binary here needs around embassy-time's mock driver: a
//! lock that serialises the tests of one binary (the mock clock is
//! process-global) and resets the clock, a waker that counts its wake-ups,
//! and moving the clock on by ticks.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};

use embassy_time::{Duration, Instant, MockDriver};

static SERIAL: Mutex<()> = Mutex::new(());

/// Serialises the tests and resets the global mock clock to tick 0.
pub fn fresh_time() -> MutexGuard<'static, ()> {
    let guard = SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    MockDriver::get().reset();
    guard
}

/// A waker that counts how often it was woken.
#[derive(Default)]
pub struct CountingWaker(pub AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Polls futures by hand with a [`CountingWaker`].
pub struct Poller {
    count: Arc<CountingWaker>,
    waker: Waker,
}

impl Poller {
    /// A poller whose waker has not been woken yet.
    pub fn new() -> Self {
        let count = Arc::new(CountingWaker::default());
        let waker = Waker::from(count.clone());
        Self { count, waker }
    }

    /// Polls `fut` once with the counting waker.
    pub fn poll<F: Future + Unpin>(&self, fut: &mut F) -> Poll<F::Output> {
        Pin::new(fut).poll(&mut Context::from_waker(&self.waker))
    }

    /// How often the waker was woken so far.
    pub fn wakes(&self) -> usize {
        self.count.0.load(Ordering::SeqCst)
    }
}

/// Moves the mock clock on by `ticks`.
pub fn advance_ticks(ticks: u64) {
    MockDriver::get().advance(Duration::from_ticks(ticks));
}

/// The mock clock's tick.
pub fn now_ticks() -> u64 {
    Instant::now().as_ticks()
}
