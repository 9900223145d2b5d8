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
//! A [`RemoteDecision`] is a verdict (the [`Snapshot`] after an admission,
//! or the [`Refusal`]) plus its [`DecisionSource`]: whether the store
//! answered, a local cache of refusals answered, or the store was
//! unavailable and the failure policy decided. Callers that only care about
//! admit/refuse use [`RemoteDecision::is_ok`]; metrics and logs use the
//! source.
//!
//! ```
//! use tollgate::remote::{AsyncKeyedLimiter, DecisionSource};
//! use tollgate::{KeyedRateLimiter, ManualClock, Quota, RateLimiter};
//!
//! async fn admit<L: AsyncKeyedLimiter<String>>(limiter: &L, client: &str) -> bool {
//!     limiter.check_n(&client.to_owned(), 1).await.is_ok()
//! }
//!
//! // An in-process keyed table through the same seam as the Redis store.
//! let per_client = KeyedRateLimiter::token_bucket(Quota::per_second(1)?, ManualClock::new())?;
//! let first = poll_ready(per_client.check_n(&"client-a".to_owned(), 1));
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
use crate::keyed::KeyedTable;
use crate::limiter::Limiter;
use crate::rate_limiter::{KeyedRateLimiter, RateLimiter};
use crate::refusal::Refusal;
use crate::snapshot::Snapshot;

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

/// A verdict together with where it came from: on an admission, the
/// limiter's [`Snapshot`] after it (a store reports it with the verdict,
/// at no extra cost); on a refusal, the [`Refusal`].
#[must_use = "a rate-limit decision that is not inspected limits nothing"]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RemoteDecision {
    result: Result<Snapshot, Refusal<'static>>,
    source: DecisionSource,
}

impl RemoteDecision {
    /// The verdict `result` from `source`.
    pub const fn new(result: Result<Snapshot, Refusal<'static>>, source: DecisionSource) -> Self {
        Self { result, source }
    }

    /// The verdict: the snapshot after an admission, or the refusal.
    ///
    /// # Errors
    /// The [`Refusal`] (one that [`is_never`](Refusal::is_never) if the
    /// request can never be granted).
    pub const fn result(&self) -> Result<&Snapshot, &Refusal<'static>> {
        match &self.result {
            Ok(s) => Ok(s),
            Err(r) => Err(r),
        }
    }

    /// The verdict, by value.
    ///
    /// # Errors
    /// The [`Refusal`].
    pub const fn into_result(self) -> Result<Snapshot, Refusal<'static>> {
        self.result
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

    /// True if the request was admitted.
    #[must_use]
    pub const fn is_ok(&self) -> bool {
        self.result.is_ok()
    }

    /// True if the request was refused.
    #[must_use]
    pub const fn is_err(&self) -> bool {
        self.result.is_err()
    }

    /// The limiter's state: after the admission, or at the refusal.
    #[must_use]
    pub const fn snapshot(&self) -> &Snapshot {
        match &self.result {
            Ok(s) => s,
            Err(r) => r.snapshot(),
        }
    }
}

/// An asynchronous keyed limiter: the backend seam for request layers
/// (see the [module docs](self)).
///
/// Contract, as for [`Limiter`]: `n = 0` is a peek that takes nothing;
/// `n > capacity()` is refused [`never`](Refusal::is_never) and takes
/// nothing; a returned future completes in bounded time (a store
/// backend enforces its own timeout and applies its failure policy instead
/// of returning store errors).
pub trait AsyncKeyedLimiter<K: ?Sized> {
    /// The most permits one request can ever take (for a key with the
    /// default quota).
    fn capacity(&self) -> u32;

    /// Tries to take `n` permits for `key`; `n = 0` is a peek.
    fn check_n(&self, key: &K, n: u32) -> impl Future<Output = RemoteDecision> + Send;

    /// Gives back `n` permits of an earlier admission for `key` (best
    /// effort: a store backend that cannot be reached drops the refund).
    fn refund(&self, key: &K, n: u32) -> impl Future<Output = ()> + Send;
}

/// Every in-process keyed table, with its clock, answers at once.
impl<K, T, C> AsyncKeyedLimiter<K> for KeyedRateLimiter<T, C>
where
    K: ?Sized,
    T: KeyedTable<K> + Sync,
    C: Clock + Sync,
{
    fn capacity(&self) -> u32 {
        crate::limiter::Algorithm::capacity(&self.table().default_algorithm())
    }

    fn check_n(&self, key: &K, n: u32) -> impl Future<Output = RemoteDecision> + Send {
        let now = self.clock().now();
        let table = self.table();
        let result = table
            .try_acquire_n(key, n, now)
            .map(|_| table.snapshot(key, now));
        core::future::ready(RemoteDecision::new(result, DecisionSource::Local))
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
    L: Limiter<Permit: Copy> + Sync,
{
    fn capacity(&self) -> u32 {
        self.limiter().capacity(&())
    }

    fn check_n(&self, _key: &K, n: u32) -> impl Future<Output = RemoteDecision> + Send {
        let now = self.clock().now();
        let limiter = self.limiter();
        let result = limiter
            .try_acquire_n(&(), n, now)
            .map(|_| limiter.snapshot(&(), now));
        core::future::ready(RemoteDecision::new(result, DecisionSource::Local))
    }

    fn refund(&self, _key: &K, n: u32) -> impl Future<Output = ()> + Send {
        RateLimiter::refund(self, n);
        core::future::ready(())
    }
}
