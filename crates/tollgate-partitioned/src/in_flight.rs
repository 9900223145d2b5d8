//! Per-key in-flight limits: the concurrency limit as a keyed table's
//! algorithm, behind [`PartitionedBuilder::concurrency`](super::PartitionedBuilder::concurrency).

use core::time::Duration;
use std::sync::Arc;

use tollgate_core::concurrency::DEFAULT_RETRY_HINT;
use tollgate_core::keyed::{ShardedKeyedTable, TableBuilder};
use tollgate_core::limiter::Inheritance;
use tollgate_core::refusal::Refusal;
use tollgate_core::snapshot::Snapshot;
use tollgate_core::sync::{AtomicU32, Ordering};
use tollgate_core::time::{Timestamp, duration_to_nanos};

use super::store::Keyed;
use super::{Partitioned, PolicyStore};

/// The concurrency limit as an [`Algorithm`](tollgate_core::Algorithm), for the
/// per-key in-flight limits of a [`Partitioned`](super::Partitioned)
/// limiter: `check_n` takes permits and `refund` releases them. Private
/// on purpose: outside a lease that releases on drop it would leak permits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct InFlight {
    pub(crate) limit: u32,
    pub(crate) retry_hint: u64,
}

/// Permits in flight for one key.
#[derive(Debug, Default)]
pub(crate) struct InFlightState(AtomicU32);

impl InFlight {
    /// At most `limit` in flight, with the default retry hint.
    pub(crate) const fn with_limit(limit: u32) -> Self {
        Self {
            limit,
            retry_hint: duration_to_nanos(DEFAULT_RETRY_HINT),
        }
    }

    fn snapshot_of(&self, in_flight: u32) -> Snapshot {
        let reset = if in_flight == 0 { 0 } else { self.retry_hint };
        Snapshot::from_nanos(self.limit, self.limit.saturating_sub(in_flight), reset)
    }
}

impl tollgate_core::limiter::Algorithm for InFlight {
    type State = InFlightState;

    #[cfg(not(loom))]
    #[allow(clippy::declare_interior_mutable_const)]
    const FRESH_STATE: InFlightState = InFlightState(AtomicU32::new(0));

    fn new_state(&self) -> InFlightState {
        InFlightState(AtomicU32::new(0))
    }

    /// An in-flight limit's permits come back at their release.
    fn frees_on_release(&self) -> bool {
        true
    }

    fn capacity(&self) -> u32 {
        self.limit
    }

    fn check_n(
        &self,
        state: &InFlightState,
        n: u32,
        now: tollgate_core::time::Timestamp,
    ) -> Result<tollgate_core::time::Timestamp, Refusal<'static>> {
        if n > self.limit {
            return Err(Refusal::never(n, self.snapshot_of(0)));
        }
        let mut v = state.0.load(Ordering::Relaxed);
        loop {
            if u64::from(v) + u64::from(n) > u64::from(self.limit) {
                return Err(
                    Refusal::from_nanos(self.retry_hint, self.snapshot_of(v)).until_release()
                );
            }
            if n == 0 {
                return Ok(now.saturating_add(self.snapshot_of(v).reset_after()));
            }
            match state
                .0
                .compare_exchange_weak(v, v + n, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Ok(now.saturating_add(self.snapshot_of(v + n).reset_after())),
                Err(current) => v = current,
            }
        }
    }

    fn refund(&self, state: &InFlightState, n: u32, _now: tollgate_core::time::Timestamp) {
        let _ = tollgate_core::sync::update_u32(&state.0, |v| {
            (v != 0 && n != 0).then(|| v - core::cmp::min(v, n))
        });
    }

    fn snapshot(&self, state: &InFlightState, _now: tollgate_core::time::Timestamp) -> Snapshot {
        self.snapshot_of(state.0.load(Ordering::Relaxed))
    }

    fn time_until_ready(
        &self,
        state: &InFlightState,
        n: u32,
        _now: tollgate_core::time::Timestamp,
    ) -> Result<Duration, Refusal<'static>> {
        if n > self.limit {
            return Err(Refusal::never(n, self.snapshot_of(0)));
        }
        let v = state.0.load(Ordering::Relaxed);
        Ok(if u64::from(v) + u64::from(n) > u64::from(self.limit) {
            Duration::from_nanos(self.retry_hint)
        } else {
            Duration::ZERO
        })
    }

    fn is_idle(&self, state: &InFlightState, _now: tollgate_core::time::Timestamp) -> bool {
        state.0.load(Ordering::Relaxed) == 0
    }

    fn required_resolution(&self) -> Duration {
        Duration::ZERO
    }

    /// Permits in flight are not a function of the limit: nothing to carry.
    fn carry_over(
        &self,
        _next: &Self,
        _state: &InFlightState,
        _how: tollgate_core::limiter::Inheritance,
        _now: tollgate_core::time::Timestamp,
    ) {
    }
}

/// A keyed table of in-flight limits, for [`PartitionedBuilder::concurrency`](super::PartitionedBuilder::concurrency)
/// and [`PolicyStore::in_flight`].
#[derive(Debug)]
pub struct InFlightTable<K>(pub(super) ShardedKeyedTable<K, InFlight>);

impl<R, K: core::hash::Hash + Eq + Clone + Send + Sync + 'static> Partitioned<R, K> {
    /// A table of at most `limit` in flight per key, for up to `max_keys`
    /// keys (a full table of busy keys refuses new keys: their
    /// permits could not be counted).
    ///
    /// # Errors
    /// [`ConfigError::ZeroLimit`](tollgate_core::ConfigError::ZeroLimit) or a table
    /// size error.
    pub fn in_flight_table(
        limit: u32,
        max_keys: usize,
    ) -> Result<InFlightTable<K>, tollgate_core::ConfigError> {
        if limit == 0 {
            return Err(tollgate_core::ConfigError::ZeroLimit);
        }
        let alg = InFlight::with_limit(limit);
        let table: TableBuilder<ShardedKeyedTable<K, InFlight>, InFlight, _> =
            ShardedKeyedTable::builder(alg);
        Ok(InFlightTable(
            table
                .max_keys(max_keys)
                .overflow(tollgate_core::keyed::OverflowPolicy::Deny)
                .build()?,
        ))
    }
}

impl<K> PolicyStore<K> {
    /// An in-flight limit per key (nginx `limit_conn`): a lease holds its
    /// permits until it drops. Build `table` with
    /// [`Partitioned::in_flight_table`].
    pub fn in_flight(table: InFlightTable<K>) -> Self
    where
        K: core::hash::Hash + Eq + Clone + Send + Sync + 'static,
    {
        Self {
            store: Arc::new(Keyed(table.0)),
            releases: true,
        }
    }

    /// Changes an in-flight store's limit to `limit` per key: the
    /// [`reconfigure`](Self::reconfigure) of the tables of
    /// [`PartitionedBuilder::concurrency`](super::PartitionedBuilder::concurrency).
    /// Permits in flight stay counted against the new limit.
    ///
    /// ```
    /// use tollgate::partitioned::{Partitioned, PolicyStore};
    /// use tollgate::{Limiter, Timestamp};
    ///
    /// let store = PolicyStore::in_flight(Partitioned::<(), u32>::in_flight_table(1, 100)?);
    /// let now = Timestamp::ZERO;
    /// let first = store.try_acquire(&7, now)?;
    /// assert!(store.try_acquire(&7, now).is_err());
    /// store.reconfigure_in_flight(2).unwrap();
    /// let second = store.try_acquire(&7, now)?; // the first is still counted
    /// assert!(store.try_acquire(&7, now).is_err());
    /// # drop((first, second));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// `limit` back, nothing changed, when it is zero or the store is not
    /// an in-flight table.
    pub fn reconfigure_in_flight(&self, limit: u32) -> Result<(), u32> {
        if limit == 0 {
            return Err(limit);
        }
        // in-flight permits carry over whatever the rule: `how` and `now`
        // change nothing
        self.reconfigure(
            InFlight::with_limit(limit),
            Inheritance::Reset,
            Timestamp::ZERO,
        )
        .map_err(|_| limit)
    }
}
