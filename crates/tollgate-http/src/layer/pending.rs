//! What a request that waits (in a policy's line, or for a remote
//! backend) holds meanwhile: its permits, given back unless it is
//! admitted, and its place in the queue gauge.

use std::sync::Arc;

use super::Shared;
use super::body::Held;
use super::gate::Admitted;
use tollgate_core::clock::Clock;

/// What a request that waits (in a line, or for a remote backend) holds:
/// its permits are given back unless it is admitted, for a client that
/// goes away meanwhile (its future dropped).
pub(super) struct Pending {
    pub(super) shared: Arc<Shared>,
    pub(super) global: Option<Admitted>,
    /// The route policy's index and admission.
    pub(super) route: Option<(usize, Admitted)>,
    /// Counted in the queue gauge of this route policy's metrics.
    pub(super) waiting: Option<Option<usize>>,
}

impl Pending {
    pub(super) fn new(shared: Arc<Shared>, global: Option<Admitted>) -> Self {
        Self {
            shared,
            global,
            route: None,
            waiting: None,
        }
    }

    /// Gives every permit back (the request was refused or went away).
    pub(super) fn cancel(&mut self) {
        let now = self.shared.clock.now();
        self.shared.give_back_global(self.global.take(), now);
        if let Some((i, a)) = self.route.take() {
            let store = self.shared.policies.get(i).and_then(|c| c.store_of(&a));
            a.permit.give_back(store, &a.key, now);
        }
    }

    /// The request goes on: the in-flight permits to hold.
    pub(super) fn admit(&mut self) -> Held {
        Held::new(
            self.global.take().map(|a| a.permit),
            self.route.take().map(|(_, a)| a.permit),
        )
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        // permits first, metrics after: once the gauge shows the request
        // gone, its permits are back (an observer can rely on it)
        self.cancel();
        if let Some(route) = self.waiting.take() {
            let m = self.shared.metrics_of(route);
            m.request_canceled.increment(1);
            m.queued.decrement(1.0);
        }
    }
}
