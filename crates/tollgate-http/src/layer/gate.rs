//! How a policy is charged and what a request holds from it: the policy's
//! store or the queue in front of it ([`Gate`]), the permit an admission
//! gives ([`Permit`]) and the admission itself ([`Admitted`]).

use tollgate_core::clock::Clock;
use tollgate_core::limiter::Limiter;
use tollgate_core::snapshot::Snapshot;
use tollgate_core::time::Timestamp;
use tollgate_partitioned::{Lease, PolicyStore};
use tollgate_queue::{Queue, QueuePermit};

use crate::key::TableKey;

/// A policy's store: a limiter over the layer's fixed-size [`TableKey`]s.
pub(crate) type HttpStore = PolicyStore<TableKey>;

/// What a request holds from a policy's store.
pub(crate) type HttpLease = Lease<TableKey>;

/// The queue of a policy that queues, in front of its store.
pub(crate) type HttpQueue = Queue<HttpStore, TableKey>;

/// How a policy is charged: its store directly (over the limit is
/// refused), or through its queue (over the limit waits in its key's
/// line, woken by the release for an in-flight limit and by the line's
/// timer for a rate).
#[derive(Clone)]
pub(crate) enum Gate {
    Direct(HttpStore),
    Queued(HttpQueue),
}

impl Gate {
    /// The policy's store.
    pub(crate) fn store(&self) -> &HttpStore {
        match self {
            Self::Direct(store) => store,
            Self::Queued(queue) => queue.limiter(),
        }
    }

    /// The state of `key` right after an admission, for the headers: read
    /// on the clock that charged it (a queue reads tokio's).
    pub(super) fn snapshot(&self, key: &TableKey, now: Timestamp) -> Snapshot {
        match self {
            Self::Direct(store) => store.snapshot(key, now),
            Self::Queued(queue) => queue.limiter().snapshot(key, queue.clock().now()),
        }
    }
}

/// What a request holds from one policy: a lease from its store, or the
/// permit of its queue (whose drop wakes the waiters a release admits).
#[derive(Debug)]
pub(crate) enum Permit {
    Lease(HttpLease),
    Queued(QueuePermit<HttpStore, TableKey>),
}

impl Permit {
    /// True if it holds in-flight permits (kept until the response ends).
    pub(crate) fn holds_in_flight(&self) -> bool {
        match self {
            Self::Lease(lease) => lease.holds_in_flight(),
            Self::Queued(p) => p.inner().is_some_and(HttpLease::holds_in_flight),
        }
    }

    /// Gives the permits back to `store`, the one that granted them (the
    /// request was refused by a later policy, or went away): see
    /// [`Limiter::cancel`].
    pub(super) fn give_back(self, store: Option<&HttpStore>, key: &TableKey, now: Timestamp) {
        match self {
            Self::Lease(lease) => match store {
                Some(store) => store.cancel(key, lease, now),
                None => drop(lease),
            },
            Self::Queued(p) => p.release(),
        }
    }
}

/// A policy's admission of a request: its permit, the key it was charged
/// to (in the policy's network overflow table if `overflow`) and, only
/// when the layer sends headers on success, the policy's state right after
/// it (computed when asked).
pub(crate) struct Admitted {
    pub(crate) permit: Permit,
    pub(crate) key: TableKey,
    pub(crate) overflow: bool,
    pub(crate) snapshot: Option<Snapshot>,
}
