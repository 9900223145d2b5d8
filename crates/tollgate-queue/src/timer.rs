//! The timer of a queue's line, and the clock it is read against.
//!
//! Normally a tokio [`Sleep`] on the [`TokioClock`]. Under `cfg(loom)` the
//! admission protocol is model-checked without tokio: the clock is a
//! [`ManualClock`](tollgate_core::ManualClock) the model moves, and the timer only
//! records where it is armed; the model fires it by calling
//! `Queue::model_fire_timer` (what tokio's timer driver does by waking the
//! queue's timer waker). Everything else in the queue is the same code.

#[cfg(not(loom))]
mod imp {
    use core::future::Future;
    use core::pin::Pin;
    use std::boxed::Box;
    use std::task::{Context, Waker};

    use tokio::time::{Instant, Sleep};

    use crate::TokioClock;
    use tollgate_core::time::Timestamp;

    /// The queue's timer: exists only while someone waits (created when
    /// the first waiter is linked, inside the runtime; dropped when the
    /// line empties), armed at the serving waiter's `retry_after`. Each
    /// line has its own.
    #[derive(Debug, Default)]
    pub(crate) struct QueueTimer {
        sleep: Option<Pin<Box<Sleep>>>,
        /// Where `sleep` is armed.
        armed: Option<Instant>,
    }

    impl QueueTimer {
        /// Creates the timer if there is none (inside the runtime: a poll
        /// of `acquire`).
        pub(crate) fn start(&mut self, clock: &TokioClock) {
            if self.sleep.is_none() {
                let far = clock.instant_at(Timestamp::MAX);
                self.sleep = Some(Box::pin(tokio::time::sleep_until(far)));
                self.armed = None;
            }
        }

        /// Points the timer at `at` (ns on `clock`) and registers `waker`
        /// with it. True if it has already fired (a deadline already past):
        /// the caller must then re-examine the serving waiter itself.
        pub(crate) fn arm(&mut self, clock: &TokioClock, at: u64, waker: &Waker) -> bool {
            let Some(sleep) = self.sleep.as_mut() else {
                return false;
            };
            let when = clock.instant_at(Timestamp::from_nanos(at));
            if self.armed != Some(when) {
                sleep.as_mut().reset(when);
                self.armed = Some(when);
            }
            // Unconstrained: a task's exhausted co-operative budget must
            // not turn this poll into a self-wake.
            let mut cx = Context::from_waker(waker);
            let mut fut = tokio::task::coop::unconstrained(sleep.as_mut());
            if Pin::new(&mut fut).poll(&mut cx).is_ready() {
                self.armed = None;
                return true;
            }
            false
        }
    }

    /// A waiter's expiry (`max_wait` or its deadline).
    #[derive(Debug)]
    pub(crate) struct ExpiryTimer(Pin<Box<Sleep>>);

    impl ExpiryTimer {
        pub(crate) fn at(clock: &TokioClock, at: u64) -> Self {
            let when = clock.instant_at(Timestamp::from_nanos(at));
            Self(Box::pin(tokio::time::sleep_until(when)))
        }

        /// True once it has passed; otherwise registers the task's waker.
        pub(crate) fn poll_passed(&mut self, cx: &mut Context<'_>, _now: u64) -> bool {
            self.0.as_mut().poll(cx).is_ready()
        }
    }
}

#[cfg(loom)]
mod imp {
    use std::task::{Context, Waker};

    use crate::TokioClock;

    /// Under loom: where the timer is armed (ns on the model's clock), for
    /// the model to fire it. It never fires by itself.
    #[derive(Debug, Default)]
    pub(crate) struct QueueTimer {
        running: bool,
        pub(crate) armed: Option<u64>,
    }

    impl QueueTimer {
        pub(crate) fn start(&mut self, _clock: &TokioClock) {
            if !self.running {
                self.running = true;
                self.armed = None;
            }
        }

        pub(crate) fn arm(&mut self, _clock: &TokioClock, at: u64, _waker: &Waker) -> bool {
            if self.running {
                self.armed = Some(at);
            }
            false
        }
    }

    /// Under loom: a waiter's expiry is checked against the model's clock
    /// on every poll (the model polls again after moving the clock).
    #[derive(Debug)]
    pub(crate) struct ExpiryTimer(u64);

    impl ExpiryTimer {
        pub(crate) fn at(_clock: &TokioClock, at: u64) -> Self {
            Self(at)
        }

        pub(crate) fn poll_passed(&mut self, _cx: &mut Context<'_>, now: u64) -> bool {
            now >= self.0
        }
    }
}

pub(crate) use imp::{ExpiryTimer, QueueTimer};
