//! The rate limiter's permit ([`Grant`]) and the two ways to hold one
//! algorithm's state: [`Bucket`] (owns it) and [`BucketRef`] (borrows it,
//! for a `static` state beside a `const` algorithm).

use core::time::Duration;

use super::{Algorithm, Limiter};
use crate::refusal::Refusal;
use crate::snapshot::Snapshot;
use crate::time::Timestamp;

/// A rate limiter's permit: spent when granted, nothing to release on drop.
///
/// It records how many permits it took and the instant the limiter's state
/// is full again as this admission left it, so that
/// [`cancel`](Limiter::cancel) gives back exactly what it took, and a
/// keyed table's sweep knows when the key is idle. It is `Copy` and holds
/// no reference; a caller that ignores it pays nothing for it (the check is
/// inlined and the fields are never computed).
///
/// ```
/// use tollgate::{Bucket, Limiter, Quota, Timestamp};
///
/// let bucket = Bucket::token_bucket(Quota::per_second(10)?.with_burst(5)?);
/// let grant = bucket.try_acquire_n(&(), 3, Timestamp::ZERO)?;
/// assert_eq!(grant.permits(), 3);
/// // 3 permits at 100 ms each come back 300 ms later
/// assert_eq!(grant.full_at(), Timestamp::from_millis(300));
/// bucket.cancel(&(), grant, Timestamp::ZERO);
/// assert_eq!(bucket.snapshot(Timestamp::ZERO).remaining(), 5);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Grant {
    permits: u32,
    full_at: Timestamp,
}

impl Grant {
    /// A grant of `permits` that left the limiter full again at `full_at`:
    /// for a limiter of your own.
    #[inline(always)]
    #[must_use]
    pub const fn new(permits: u32, full_at: Timestamp) -> Self {
        Self { permits, full_at }
    }

    /// The permits taken.
    #[inline]
    #[must_use]
    pub const fn permits(&self) -> u32 {
        self.permits
    }

    /// The instant the limiter's state is full again as this admission left
    /// it (later admissions move it on).
    #[inline]
    #[must_use]
    pub const fn full_at(&self) -> Timestamp {
        self.full_at
    }
}

/// An [`Algorithm`] together with its state: the one-limiter case.
///
/// ```
/// use tollgate::{Bucket, Quota, Timestamp};
///
/// let bucket = Bucket::token_bucket(Quota::per_second(2)?);
/// let now = Timestamp::ZERO;
/// assert!(bucket.check(now).is_ok());
/// assert!(bucket.check(now).is_ok());
/// assert!(bucket.check(now).is_err());
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Debug)]
pub struct Bucket<A: Algorithm> {
    algorithm: A,
    state: A::State,
}

impl<A: Algorithm> Bucket<A> {
    /// A full limiter running `algorithm`.
    #[must_use]
    pub fn new(algorithm: A) -> Self {
        let state = algorithm.new_state();
        Self { algorithm, state }
    }

    /// A limiter from an algorithm and an existing state.
    #[must_use]
    pub const fn from_parts(algorithm: A, state: A::State) -> Self {
        Self { algorithm, state }
    }

    /// The algorithm (configuration).
    #[must_use]
    pub const fn algorithm(&self) -> &A {
        &self.algorithm
    }

    /// The state.
    #[must_use]
    pub const fn state(&self) -> &A::State {
        &self.state
    }
}

/// The direct calls of a bucket ([`Bucket`], [`BucketRef`]): inherent, so
/// a user needs no trait in scope; its [`Limiter`] impl forwards to them.
macro_rules! direct_methods {
    ($ty:ty, $state:ident => $get:expr) => {
        impl<A: Algorithm> $ty {
            /// Tries to take one permit at `now`.
            ///
            /// # Errors
            /// The [`Refusal`] (when to retry, and the bucket's state);
            /// nothing was taken.
            #[inline(always)]
            pub fn check(&self, now: Timestamp) -> Result<(), Refusal<'static>> {
                self.check_n(1, now)
            }

            /// Tries to take `n` permits at `now`; `n = 0` is a peek.
            ///
            /// # Errors
            /// The [`Refusal`] (one that [`is_never`](Refusal::is_never) if
            /// `n` can never be granted); nothing was taken.
            #[inline(always)]
            pub fn check_n(&self, n: u32, now: Timestamp) -> Result<(), Refusal<'static>> {
                let $state = self;
                self.algorithm.check_n($get, n, now).map(|_| ())
            }

            /// Gives back `n` permits of an earlier admission (a request
            /// that a later stage refused); never above the burst.
            #[inline]
            pub fn refund(&self, n: u32, now: Timestamp) {
                let $state = self;
                self.algorithm.refund($get, n, now);
            }

            /// The bucket's state at `now` (limit, remaining, reset),
            /// computed when asked; takes nothing.
            #[inline]
            #[must_use]
            pub fn snapshot(&self, now: Timestamp) -> Snapshot {
                let $state = self;
                self.algorithm.snapshot($get, now)
            }

            /// The time until `n` permits would be admitted (zero if now).
            ///
            /// # Errors
            /// A refusal that [`is_never`](Refusal::is_never) if `n` can
            /// never be granted.
            #[inline]
            pub fn time_until_ready(
                &self,
                n: u32,
                now: Timestamp,
            ) -> Result<Duration, Refusal<'static>> {
                let $state = self;
                self.algorithm.time_until_ready($get, n, now)
            }

            /// True if the bucket is indistinguishable from a fresh one at
            /// `now` (see [`Algorithm::is_idle`]).
            #[inline]
            #[must_use]
            pub fn is_idle(&self, now: Timestamp) -> bool {
                let $state = self;
                self.algorithm.is_idle($get, now)
            }
        }

        impl<A: Algorithm> Limiter for $ty {
            type Permit = Grant;
            #[inline]
            fn capacity(&self, _: &()) -> u32 {
                self.algorithm.capacity()
            }
            #[inline(always)]
            fn try_acquire_n(
                &self,
                _: &(),
                n: u32,
                now: Timestamp,
            ) -> Result<Grant, Refusal<'static>> {
                let $state = self;
                self.algorithm
                    .check_n($get, n, now)
                    .map(|full_at| Grant::new(n, full_at))
            }
            #[inline]
            fn cancel(&self, _: &(), grant: Grant, now: Timestamp) {
                <$ty>::refund(self, grant.permits(), now);
            }
            #[inline]
            fn refund(&self, _: &(), n: u32, now: Timestamp) {
                <$ty>::refund(self, n, now);
            }
            #[inline]
            fn snapshot(&self, _: &(), now: Timestamp) -> Snapshot {
                <$ty>::snapshot(self, now)
            }
            #[inline]
            fn time_until_ready(
                &self,
                _: &(),
                n: u32,
                now: Timestamp,
            ) -> Result<Duration, Refusal<'static>> {
                <$ty>::time_until_ready(self, n, now)
            }
            #[inline]
            fn required_resolution(&self) -> Duration {
                self.algorithm.required_resolution()
            }
            #[inline]
            fn time_until_ready_after(
                &self,
                _: &(),
                ahead: u64,
                n: u32,
                now: Timestamp,
            ) -> Option<Duration> {
                let $state = self;
                self.algorithm.time_until_ready_after($get, ahead, n, now)
            }
        }
    };
}

direct_methods!(Bucket<A>, b => &b.state);

/// An [`Algorithm`] and its state held by reference: a [`Limiter`] whose
/// configuration can stay in flash.
///
/// A `static` [`Bucket`] holds its configuration next to its atomic state,
/// and a `static` with interior mutability is placed in RAM whole (56 bytes
/// for a [`Bucket<Gcra>`](crate::Gcra)). Keeping the algorithm in an
/// immutable `static` (read-only memory) and only the state in a mutable one
/// brings a bucket's RAM down to its state: 8 bytes for a GCRA bucket.
///
/// ```
/// use tollgate::{valid, BucketRef, Gcra, GcraState, Quota, Timestamp};
///
/// static RADIO_CONFIG: Gcra = Gcra::leaky_bucket(valid!(Quota::per_second(50))); // read-only memory
/// static RADIO_STATE: GcraState = GcraState::new(); // 8 bytes of RAM
/// static RADIO: BucketRef<'static, Gcra> = BucketRef::new(&RADIO_CONFIG, &RADIO_STATE);
///
/// assert!(RADIO.check(Timestamp::ZERO).is_ok());
/// assert!(RADIO.check(Timestamp::ZERO).is_err());
/// assert_eq!(core::mem::size_of::<GcraState>(), 8);
/// assert_eq!(core::mem::size_of::<tollgate::Bucket<Gcra>>(), 56);
/// ```
#[derive(Debug)]
pub struct BucketRef<'a, A: Algorithm> {
    algorithm: &'a A,
    state: &'a A::State,
}

impl<A: Algorithm> Clone for BucketRef<'_, A> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<A: Algorithm> Copy for BucketRef<'_, A> {}

impl<'a, A: Algorithm> BucketRef<'a, A> {
    /// A limiter applying `algorithm` to `state`.
    #[must_use]
    pub const fn new(algorithm: &'a A, state: &'a A::State) -> Self {
        Self { algorithm, state }
    }

    /// The algorithm (configuration).
    #[must_use]
    pub const fn algorithm(&self) -> &'a A {
        self.algorithm
    }

    /// The state.
    #[must_use]
    pub const fn state(&self) -> &'a A::State {
        self.state
    }
}

direct_methods!(BucketRef<'_, A>, b => b.state);
