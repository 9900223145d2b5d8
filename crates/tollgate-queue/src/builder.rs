//! [`QueueBuilder`]: a queue's order, bounds and release rule.

use core::hash::Hash;
use core::time::Duration;
use std::sync::{Arc, Weak};

use tollgate_core::limiter::Limiter;
use tollgate_core::sync::{AtomicU32, AtomicU64, Mutex};

use super::shared::{Counters, Inner, Shared};
use super::waiters::Waiters;
use super::{Queue, QueueOrder, TokioClock};

/// Builds a [`Queue`]; from [`Queue::builder`].
#[derive(Debug)]
#[must_use]
pub struct QueueBuilder<L, K = ()> {
    limiter: L,
    key: core::marker::PhantomData<fn(&K)>,
    order: QueueOrder,
    queue_limit: u64,
    max_wait: Option<Duration>,
    release_on_drop: bool,
    clock: Option<TokioClock>,
    #[cfg(loom)]
    model_clock: Option<Arc<tollgate_core::clock::ManualClock>>,
}

impl<L, K> QueueBuilder<L, K> {
    /// The defaults: oldest first, unbounded, no `max_wait`, permits spent
    /// on drop.
    pub(super) fn new(limiter: L) -> Self {
        Self {
            limiter,
            key: core::marker::PhantomData,
            order: QueueOrder::OldestFirst,
            queue_limit: u64::MAX,
            max_wait: None,
            release_on_drop: false,
            clock: None,
            #[cfg(loom)]
            model_clock: None,
        }
    }
}

impl<
    L: Limiter<K, Permit: Send + 'static> + Send + Sync + 'static,
    K: Hash + Eq + Clone + Send + Sync + 'static,
> QueueBuilder<L, K>
{
    /// Loom models only: the manual clock the queue reads instead of
    /// tokio's (the model moves it and fires the queue's timer with
    /// [`Queue::model_fire_timer`]).
    #[cfg(loom)]
    pub fn model_clock(mut self, clock: Arc<tollgate_core::clock::ManualClock>) -> Self {
        self.model_clock = Some(clock);
        self
    }

    /// Which waiter of a key is served first (default
    /// [`QueueOrder::OldestFirst`]).
    pub fn order(mut self, order: QueueOrder) -> Self {
        self.order = order;
        self
    }

    /// The most permits that may wait at once for one key (default:
    /// unbounded). 0 means no waiting at all: `acquire` then behaves like
    /// `try_acquire` but reports [`WaitError::QueueFull`](super::WaitError::QueueFull).
    pub fn queue_limit(mut self, permits: u64) -> Self {
        self.queue_limit = permits;
        self
    }

    /// Refuse at once a request whose estimated wait exceeds `max_wait`,
    /// and refuse a waiter once it has waited `max_wait` (default: none).
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = Some(max_wait);
        self
    }

    /// Whether dropping a [`QueuePermit`](super::QueuePermit) gives its permits back to the
    /// limiter ([`Limiter::cancel`]) and wakes the waiters that now fit:
    /// for a limiter of your own whose capacity comes back by refunds
    /// rather than with time. Not needed for an in-flight limit, whose
    /// permit releases itself when dropped (the queue then wakes its
    /// waiters); leave it off (the default) for rate limiters, whose
    /// permits are spent and whose capacity returns with time.
    pub fn release_on_drop(mut self, release: bool) -> Self {
        self.release_on_drop = release;
        self
    }

    /// The clock to read (default: a new [`TokioClock`]). Share one clock
    /// between the queue and any other user of the same limiter.
    pub fn clock(mut self, clock: TokioClock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The queue.
    #[must_use]
    pub fn build(self) -> Queue<L, K> {
        let clock = self.clock.unwrap_or_default();
        #[cfg(loom)]
        let model_clock = self
            .model_clock
            .unwrap_or_else(|| Arc::new(tollgate_core::clock::ManualClock::new()));
        let shared = Arc::new_cyclic(|this: &Weak<Shared<L, K>>| Shared {
            limiter: self.limiter,
            clock,
            order: self.order,
            queue_limit: self.queue_limit,
            max_wait: self.max_wait,
            release_on_drop: self.release_on_drop,
            gate: AtomicU64::new(0),
            due: AtomicU32::new(0),
            pending_bits: AtomicU64::new(0),
            pending: Mutex::new(Vec::new()),
            driving: AtomicU32::new(0),
            inner: Mutex::new(Inner {
                waiters: Waiters::default(),
                closed: false,
            }),
            this: Weak::clone(this),
            counters: Counters::default(),
            #[cfg(loom)]
            model_clock,
        });
        Queue { shared }
    }
}
