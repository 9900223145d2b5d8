//! The seam between request-handling layers and *where* a keyed limit is
//! kept: in this process or in a shared store such as Redis.
//!
//! [`AsyncKeyedLimiter`] is what an HTTP layer (or any async caller) needs
//! from a backend: "may the request with this key take `n` permits?",
//! answered asynchronously with a [`RemoteDecision`]. The Redis store
//! (`tollgate::redis::RedisStore`, feature `redis`) implements it for
//! byte-like keys, and so does every in-process limiter: a
//! [`KeyedRateLimiter`] (any keyed table with its clock) answers per key,
//! a [`RateLimiter`] answers for every key from one bucket (a global
//! limit). A layer written against this trait takes any backend without
//! knowing which.
//!
//! A [`RemoteDecision`] is a core [`Decision`] plus its [`DecisionSource`]:
//! whether the store answered, a local cache of refusals answered, or the
//! store was unavailable and the failure policy decided. Callers that only
//! care about admit/refuse use [`RemoteDecision::decision`]; metrics and
//! logs use the source.
//!
//! ```
//! use tollgate::remote::{AsyncKeyedLimiter, DecisionSource};
//! use tollgate::{KeyedRateLimiter, ManualClock, Quota, RateLimiter};
//!
//! async fn admit<L: AsyncKeyedLimiter<String>>(limiter: &L, client: &str) -> bool {
//!     match limiter.check_n(&client.to_owned(), 1).await {
//!         Ok(d) => d.decision().is_allowed(),
//!         Err(_) => false, // can never succeed
//!     }
//! }
//!
//! // An in-process keyed table through the same seam as the Redis store.
//! let per_client = KeyedRateLimiter::token_bucket(Quota::per_second(1)?, ManualClock::new())?;
//! let first = poll_ready(per_client.check_n(&"client-a".to_owned(), 1))?;
//! assert_eq!(first.source(), DecisionSource::Local);
//! assert!(!poll_ready(admit(&per_client, "client-a"))); // client-a is spent
//! assert!(poll_ready(admit(&per_client, "client-b"))); // client-b is not
//!
//! // A global limiter: one bucket for every key.
//! let global = RateLimiter::token_bucket(Quota::per_second(1)?, ManualClock::new())?;
//! assert!(poll_ready(admit(&global, "client-a")));
//! assert!(!poll_ready(admit(&global, "client-b")));
//!
//! // (a tiny executor for futures that never wait)
//! fn poll_ready<F: core::future::Future>(f: F) -> F::Output {
//!     let mut f = core::pin::pin!(f);
//!     let mut cx = core::task::Context::from_waker(core::task::Waker::noop());
//!     match f.as_mut().poll(&mut cx) {
//!         core::task::Poll::Ready(v) => v,
//!         core::task::Poll::Pending => unreachable!("in-process limiters never wait"),
//!     }
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use core::future::Future;

use crate::clock::Clock;
use crate::decision::{CapacityExceeded, Decision};
use crate::keyed::KeyedLimiter;
use crate::limiter::Limiter;
use crate::rate_limiter::{KeyedRateLimiter, RateLimiter};

/// Who produced a [`RemoteDecision`].
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DecisionSource {
    /// The shared store answered (one round trip).
    Store,
    /// A local cache of recent refusals answered without asking the store:
    /// the key was refused earlier and its `retry_after` has not passed.
    /// The `retry_after` is the time still left; the snapshot is the one the
    /// store reported with that refusal.
    RefusalCache,
    /// An in-process limiter answered (there is no shared store).
    Local,
    /// The store failed or timed out; the configured failure policy decided
    /// (fail-open admits, fail-open with a ceiling asks a local fallback
    /// limiter, fail-closed refuses).
    StoreUnavailable,
}

/// A [`Decision`] together with where it came from.
#[must_use = "a rate-limit decision that is not inspected limits nothing"]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RemoteDecision {
    decision: Decision,
    source: DecisionSource,
}

impl RemoteDecision {
    /// A decision from `source`.
    pub const fn new(decision: Decision, source: DecisionSource) -> Self {
        Self { decision, source }
    }

    /// The admission decision.
    pub const fn decision(&self) -> &Decision {
        &self.decision
    }

    /// The admission decision, by value.
    pub const fn into_decision(self) -> Decision {
        self.decision
    }

    /// Who answered.
    #[must_use]
    pub const fn source(&self) -> DecisionSource {
        self.source
    }

    /// True if the store could not be asked and the failure policy decided.
    #[must_use]
    pub const fn store_unavailable(&self) -> bool {
        matches!(self.source, DecisionSource::StoreUnavailable)
    }

    /// Shorthand for `decision().is_allowed()`.
    #[must_use]
    pub const fn is_allowed(&self) -> bool {
        self.decision.is_allowed()
    }

    /// Shorthand for `decision().is_denied()`.
    #[must_use]
    pub const fn is_denied(&self) -> bool {
        self.decision.is_denied()
    }
}

/// An asynchronous keyed limiter: the backend seam for request layers
/// (see the [module docs](self)).
///
/// Contract, as for [`KeyedLimiter`]: `n = 0` is a peek that takes nothing;
/// `n > capacity()` is `Err(CapacityExceeded)` (it can never succeed) and
/// takes nothing; a returned future completes in bounded time (a store
/// backend enforces its own timeout and applies its failure policy instead
/// of returning store errors).
pub trait AsyncKeyedLimiter<K: ?Sized> {
    /// The most permits one request can ever take (for a key with the
    /// default quota).
    fn capacity(&self) -> u32;

    /// Tries to take `n` permits for `key`; `n = 0` is a peek.
    ///
    /// # Errors
    /// [`CapacityExceeded`] if `n` can never be granted.
    fn check_n(
        &self,
        key: &K,
        n: u32,
    ) -> impl Future<Output = Result<RemoteDecision, CapacityExceeded>> + Send;

    /// Gives back `n` permits of an earlier admission for `key` (best
    /// effort: a store backend that cannot be reached drops the refund).
    fn refund(&self, key: &K, n: u32) -> impl Future<Output = ()> + Send;
}

/// Every in-process keyed table, with its clock, answers at once.
impl<K, T, C> AsyncKeyedLimiter<K> for KeyedRateLimiter<T, C>
where
    K: ?Sized,
    T: KeyedLimiter<K> + Sync,
    C: Clock + Sync,
{
    fn capacity(&self) -> u32 {
        crate::limiter::Algorithm::capacity(&self.table().default_algorithm())
    }

    fn check_n(
        &self,
        key: &K,
        n: u32,
    ) -> impl Future<Output = Result<RemoteDecision, CapacityExceeded>> + Send {
        let result = self
            .try_acquire_n(key, n)
            .map(|d| RemoteDecision::new(d.into_decision(), DecisionSource::Local));
        core::future::ready(result)
    }

    fn refund(&self, key: &K, n: u32) -> impl Future<Output = ()> + Send {
        KeyedRateLimiter::refund(self, key, n);
        core::future::ready(())
    }
}

/// One in-process limiter for every key: a global limit through the seam.
impl<K, C, L> AsyncKeyedLimiter<K> for RateLimiter<C, L>
where
    K: ?Sized,
    C: Clock + Sync,
    L: Limiter + Sync,
{
    fn capacity(&self) -> u32 {
        self.limiter().capacity()
    }

    fn check_n(
        &self,
        _key: &K,
        n: u32,
    ) -> impl Future<Output = Result<RemoteDecision, CapacityExceeded>> + Send {
        let result = self
            .try_acquire_n(n)
            .map(|d| RemoteDecision::new(d, DecisionSource::Local));
        core::future::ready(result)
    }

    fn refund(&self, _key: &K, n: u32) -> impl Future<Output = ()> + Send {
        RateLimiter::refund(self, n);
        core::future::ready(())
    }
}
