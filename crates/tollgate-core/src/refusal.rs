//! The one answer of a limiter that says no: [`Refusal`].
//!
//! Every acquisition in tollgate returns `Result<permit, Refusal>`: a
//! bucket's check, a keyed table's, an in-flight limit's, a partitioned
//! limiter's, a chain's. A refusal says
//!
//! - **when to retry**: [`retry_after`](Refusal::retry_after), the exact
//!   wait (to the nanosecond) after which the same request would be
//!   admitted if nothing else took capacity meanwhile; for an in-flight
//!   limit, zero (capacity comes back with a release, not with time);
//! - **whether it can ever succeed**: [`is_never`](Refusal::is_never) for a
//!   request of more permits than the limiter can ever hold (`n` above the
//!   burst, the largest weight, the window or the in-flight limit), so a
//!   caller never waits for the impossible;
//! - **the quota**: the refusing limiter's [`Snapshot`] (its limit, what
//!   remains, when it is full again);
//! - **who refused**: for a named limiter (a
//!   `tollgate::partitioned::Partitioned` one), the
//!   [`limiter`](Refusal::limiter) and [`policy`](Refusal::policy) names,
//!   the [`stage`](Refusal::stage) of a chain, and the keyed table's
//!   [`path`](Refusal::path). A bare bucket's names are empty.
//!
//! ```
//! use tollgate::{Bucket, Quota, Timestamp};
//!
//! let bucket = Bucket::token_bucket(Quota::per_second(2)?);
//! let now = Timestamp::ZERO;
//! assert!(bucket.check_n(2, now).is_ok());
//! let refusal = bucket.check(now).unwrap_err();
//! assert_eq!(refusal.retry_after().as_millis(), 500);
//! assert_eq!(refusal.limit(), 2);
//! assert!(bucket.check_n(3, now).unwrap_err().is_never());
//! # Ok::<(), tollgate::ConfigError>(())
//! ```

use core::fmt;
use core::time::Duration;

use crate::snapshot::{Snapshot, nanos_to_secs_ceil};
use crate::time::duration_to_nanos;

/// `retry_after` of a request that can never be admitted.
const NEVER: u64 = u64::MAX;

/// A wait of `nanos`, never taken for the [`NEVER`] marker.
const fn finite(nanos: u64) -> u64 {
    if nanos == NEVER { NEVER - 1 } else { nanos }
}

/// A refused acquisition: when to retry, the quota, and who refused. See
/// the [module documentation](self).
#[must_use = "a refusal says when to retry"]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Refusal<'a> {
    /// In nanoseconds; [`NEVER`] for a request that can never succeed.
    retry_after: u64,
    snapshot: Snapshot,
    limiter: &'a str,
    policy: &'a str,
    /// Permits asked for (reported by a request that can never succeed).
    requested: u32,
    stage: u32,
    path: KeyedPath,
    /// Capacity comes back when a holder releases it, not with time.
    until_release: bool,
}

impl Refusal<'static> {
    /// A refusal: the same request would be admitted after `retry_after`;
    /// `snapshot` is the refusing limiter's state. For a limiter of your
    /// own; name it with [`by`](Refusal::by).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{Refusal, Snapshot};
    ///
    /// let r = Refusal::new(Duration::from_secs(60), Snapshot::new(5, 0, Duration::ZERO))
    ///     .by("tenants", "allow_list");
    /// assert_eq!((r.limiter(), r.policy(), r.stage()), ("tenants", "allow_list", 0));
    /// assert_eq!(r.to_string(), "refused by tenants/allow_list: retry after 60s");
    /// ```
    pub const fn new(retry_after: Duration, snapshot: Snapshot) -> Self {
        Self::from_nanos(duration_to_nanos(retry_after), snapshot)
    }

    /// A request for `requested` permits that can never be admitted: the
    /// limiter (whose state is `snapshot`) never holds that many.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{Refusal, Snapshot};
    ///
    /// let r = Refusal::never(8, Snapshot::new(5, 5, Duration::ZERO));
    /// assert!(r.is_never());
    /// assert_eq!(r.retry_after(), Duration::MAX);
    /// assert_eq!(r.to_string(), "a request for 8 permits can never succeed: the limit is 5");
    /// ```
    pub const fn never(requested: u32, snapshot: Snapshot) -> Self {
        Self {
            retry_after: NEVER,
            snapshot,
            limiter: "",
            policy: "",
            requested,
            stage: 0,
            path: KeyedPath::Own,
            until_release: false,
        }
    }

    /// A request for `requested` permits from a limiter that never holds
    /// more than `limit` at once: [`Refusal::never`], its snapshot carrying
    /// only the limit.
    ///
    /// ```
    /// use tollgate::Refusal;
    ///
    /// let r = Refusal::above(8, 5);
    /// assert!(r.is_never());
    /// assert_eq!(r.snapshot().limit(), 5);
    /// ```
    #[cold]
    pub const fn above(requested: u32, limit: u32) -> Self {
        Self::never(requested, Snapshot::from_nanos(limit, 0, 0))
    }

    /// [`Refusal::new`] with the wait in nanoseconds.
    ///
    /// ```
    /// use tollgate::{Refusal, Snapshot};
    ///
    /// let r = Refusal::from_nanos(250_000_000, Snapshot::from_nanos(4, 0, 250_000_000));
    /// assert_eq!(r.retry_after_secs_ceil(), 1);
    /// ```
    #[inline(always)]
    pub const fn from_nanos(retry_after_nanos: u64, snapshot: Snapshot) -> Self {
        Self {
            retry_after: finite(retry_after_nanos),
            snapshot,
            limiter: "",
            policy: "",
            requested: 0,
            stage: 0,
            path: KeyedPath::Own,
            until_release: false,
        }
    }
}

impl<'a> Refusal<'a> {
    /// This refusal, made by `policy` of the limiter named `limiter`.
    pub const fn by<'b>(self, limiter: &'b str, policy: &'b str) -> Refusal<'b> {
        Refusal {
            retry_after: self.retry_after,
            snapshot: self.snapshot,
            limiter,
            policy,
            requested: self.requested,
            stage: self.stage,
            path: self.path,
            until_release: self.until_release,
        }
    }

    /// This refusal, of a limiter whose capacity comes back when a holder
    /// releases it (drops its permit) rather than with time: an in-flight
    /// limit. `retry_after` stays what it was, a hint for a client; a
    /// `tollgate::queue::Queue` wakes such a waiter at the release,
    /// and arms no timer for it.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{Refusal, Snapshot};
    ///
    /// let busy = Refusal::new(Duration::from_secs(1), Snapshot::new(4, 0, Duration::ZERO)).until_release();
    /// assert!(busy.is_until_release());
    /// assert_eq!(busy.retry_after(), Duration::from_secs(1));
    /// ```
    pub const fn until_release(mut self) -> Self {
        self.until_release = true;
        self
    }

    /// True when capacity comes back by a release, not with time (see
    /// [`until_release`](Self::until_release)).
    #[must_use]
    pub const fn is_until_release(&self) -> bool {
        self.until_release
    }

    /// This refusal, answered by `path` of a keyed table: for a table or a
    /// shared store of your own that reports its
    /// [`KeyedPath`] as tollgate's tables do.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::keyed::KeyedPath;
    /// use tollgate::{Refusal, Snapshot};
    ///
    /// let r = Refusal::new(Duration::from_secs(1), Snapshot::new(5, 0, Duration::from_secs(1)))
    ///     .on_path(KeyedPath::Fallback);
    /// assert_eq!(r.path(), KeyedPath::Fallback);
    /// ```
    #[inline]
    pub const fn on_path(mut self, path: KeyedPath) -> Self {
        self.path = path;
        self
    }

    /// This refusal, made by the member `stages` places further down a
    /// chain: for a chain of your own, whose refusal's
    /// [`stage`](Self::stage) counts the members before the refusing one.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{Refusal, Snapshot};
    ///
    /// let r = Refusal::new(Duration::from_secs(1), Snapshot::new(5, 0, Duration::from_secs(1)));
    /// assert_eq!(r.later_by(2).stage(), 2);
    /// ```
    pub const fn later_by(mut self, stages: usize) -> Self {
        self.stage = self.stage.saturating_add(stages as u32);
        self
    }

    /// This refusal with the wait `retry_after_nanos` instead, unless it
    /// can never succeed (a chain reports its longest wait).
    #[cfg_attr(not(feature = "std"), allow(dead_code))]
    pub(crate) const fn waiting_at_least(mut self, retry_after_nanos: u64) -> Self {
        if self.retry_after < retry_after_nanos && !self.is_never() {
            self.retry_after = finite(retry_after_nanos);
        }
        self
    }

    /// The exact time after which the same request would be admitted if
    /// nothing else takes capacity first; [`Duration::MAX`] for a request
    /// that can never be admitted. Zero for an in-flight limit (capacity
    /// comes back when a holder releases it).
    #[must_use]
    pub const fn retry_after(&self) -> Duration {
        if self.is_never() {
            Duration::MAX
        } else {
            Duration::from_nanos(self.retry_after)
        }
    }

    /// [`retry_after`](Self::retry_after) in nanoseconds (`u64::MAX` for
    /// a request that can never be admitted).
    #[must_use]
    pub const fn retry_after_nanos(&self) -> u64 {
        self.retry_after
    }

    /// [`retry_after`](Self::retry_after) in whole seconds rounded **up**:
    /// what a protocol that counts in seconds needs (a `Retry-After`
    /// answer, a retry timer in seconds). Never 0 for a positive wait
    /// (a 300 ms wait gives 1).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{Refusal, Snapshot};
    ///
    /// let secs = |ns| Refusal::new(Duration::from_nanos(ns), Snapshot::new(1, 0, Duration::ZERO)).retry_after_secs_ceil();
    /// assert_eq!((secs(0), secs(1), secs(300_000_000), secs(1_000_000_001)), (0, 1, 1, 2));
    /// ```
    #[must_use]
    pub const fn retry_after_secs_ceil(&self) -> u64 {
        nanos_to_secs_ceil(self.retry_after)
    }

    /// True for a request that can never be admitted: it asks for more
    /// permits than the limiter ever holds at once. Waiting does not help.
    #[must_use]
    pub const fn is_never(&self) -> bool {
        self.retry_after == NEVER
    }

    /// The permits asked for by a request that can never be admitted (0
    /// for any other refusal).
    #[must_use]
    pub const fn requested(&self) -> u32 {
        self.requested
    }

    /// The refusing limiter's state (nothing was taken).
    #[must_use]
    pub const fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// The refusing limiter's limit (burst, largest weight, window limit or
    /// in-flight limit): the quota.
    #[must_use]
    pub const fn limit(&self) -> u32 {
        self.snapshot.limit()
    }

    /// The name of the limiter that refused (empty for an unnamed one, such
    /// as a bucket).
    #[must_use]
    pub const fn limiter(&self) -> &'a str {
        self.limiter
    }

    /// The name of the refusing policy (`"default"` for a partitioned
    /// limiter's default; empty for an unnamed limiter).
    #[must_use]
    pub const fn policy(&self) -> &'a str {
        self.policy
    }

    /// Which limiter of a chain refused (0 for the first, and for a limiter
    /// that is not a chain).
    #[must_use]
    pub const fn stage(&self) -> usize {
        self.stage as usize
    }

    /// Which path of a keyed table answered: the key's own slot or an
    /// overflow policy ([`KeyedPath::Own`] for a limiter that is not a
    /// table).
    #[must_use]
    pub const fn path(&self) -> KeyedPath {
        self.path
    }
}

impl fmt::Display for Refusal<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.limiter.is_empty() || !self.policy.is_empty() {
            write!(f, "refused by {}/{}: ", self.limiter, self.policy)?;
        }
        if self.is_never() {
            write!(
                f,
                "a request for {} permits can never succeed: the limit is {}",
                self.requested,
                self.limit()
            )
        } else if self.limiter.is_empty() && self.policy.is_empty() {
            write!(f, "rate limited: retry after {:?}", self.retry_after())
        } else {
            write!(f, "retry after {:?}", self.retry_after())
        }
    }
}

impl core::error::Error for Refusal<'_> {}

/// Which state a keyed table used to answer a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KeyedPath {
    /// The key's own state (already tracked, newly inserted, or, for a peek
    /// of an untracked key, the fresh state it would get).
    Own,
    /// The table was full: answered by the shared overflow state
    /// ([`OverflowPolicy::SharedBucket`](crate::keyed::OverflowPolicy::SharedBucket)).
    SharedOverflow,
    /// The table was full: refused ([`OverflowPolicy::Deny`](crate::keyed::OverflowPolicy::Deny)).
    OverflowDenied,
    /// The table was full: admitted as a fresh key ([`OverflowPolicy::Allow`](crate::keyed::OverflowPolicy::Allow)).
    OverflowAllowed,
    /// A table kept elsewhere (a shared store) was not asked: a local
    /// cache of its recent refusals answered, with the time still left.
    Cached,
    /// A table kept elsewhere could not be asked (an error, a timeout, an
    /// open circuit breaker): its failure policy answered.
    Fallback,
}

impl KeyedPath {
    /// True when the table was full of busy keys and the key got no slot
    /// ([`SharedOverflow`](Self::SharedOverflow),
    /// [`OverflowDenied`](Self::OverflowDenied),
    /// [`OverflowAllowed`](Self::OverflowAllowed)).
    #[must_use]
    pub const fn is_overflow(&self) -> bool {
        matches!(
            self,
            Self::SharedOverflow | Self::OverflowDenied | Self::OverflowAllowed
        )
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::string::ToString;

    use super::*;

    #[test]
    fn a_finite_wait_is_never_taken_for_never() {
        let s = Snapshot::new(3, 0, Duration::ZERO);
        let r = Refusal::from_nanos(u64::MAX, s);
        assert!(!r.is_never());
        assert_eq!(r.retry_after_nanos(), u64::MAX - 1);
        assert!(Refusal::never(4, s).is_never());
        assert!(!Refusal::new(Duration::MAX, s).is_never());
    }

    #[test]
    fn a_chain_keeps_the_longest_wait_and_never() {
        let s = Snapshot::new(3, 0, Duration::ZERO);
        let r = Refusal::from_nanos(5, s).waiting_at_least(9).later_by(2);
        assert_eq!((r.retry_after_nanos(), r.stage()), (9, 2));
        assert_eq!(
            Refusal::from_nanos(9, s)
                .waiting_at_least(5)
                .retry_after_nanos(),
            9
        );
        assert!(Refusal::never(4, s).waiting_at_least(9).is_never());
    }

    #[test]
    fn display_names_who_refused() {
        let s = Snapshot::new(3, 0, Duration::ZERO);
        let r = Refusal::new(Duration::from_millis(5), s);
        assert_eq!(r.to_string(), "rate limited: retry after 5ms");
        assert_eq!(
            Refusal::never(4, s).by("api", "per_ip").to_string(),
            "refused by api/per_ip: a request for 4 permits can never succeed: the limit is 3"
        );
    }
}
