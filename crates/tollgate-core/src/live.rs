//! Live reconfiguration: change a running limiter's quota without losing
//! what its clients have already used.
//!
//! What a bucket has used is carried over by an explicit [`Inheritance`]
//! rule (Bucket4j's "tokens inheritance strategy"):
//!
//! | rule | after the change | example: 6 of 10 used, new burst 20 |
//! |---|---|---|
//! | [`Inheritance::UsedAmount`] | the same number of permits stays used | 6 of 20 used, 14 free |
//! | [`Inheritance::UsedFraction`] | the same fraction stays used | 12 of 20 used, 8 free |
//! | [`Inheritance::Reset`] | nothing is used: a full bucket | 0 of 20 used, 20 free |
//!
//! Used permits are charged again at the new interval, so they drain at
//! the new rate. More used than the new quota holds leaves an empty bucket
//! (no debt beyond it). Rounding only ever leaves less room, never more.
//!
//! Where it is offered:
//! - one bucket: [`LiveBucket`] (`set_quota`, `set_algorithm`), usable as
//!   a `static`;
//! - every keyed table: [`KeyedTable::reconfigure`] (every key that runs
//!   the default algorithm) and [`KeyedTable::update_key_quota`] (one
//!   key, when a per-key quota function's answer for it changes);
//! - the concurrency limiter: [`ConcurrencyLimiter::set_limit`] (permits
//!   in flight are not a function of the limit: nothing to carry);
//! - the layers built on these (a rules file's reload keeps the buckets of
//!   every rule that did not change).
//!
//! The change is atomic with respect to every check: a check is decided
//! entirely under the old quota (and then carried over) or entirely under
//! the new one. A `LiveBucket` check that meets a change in progress waits
//! for it (a few instructions; on a `no_std` build the change runs in a
//! critical section, so an interrupt handler never meets one); keyed tables
//! convert under their shard locks or critical section.
//!
//! Two things to know:
//!
//! - **No debt is carried.** Used permits beyond the new capacity are
//!   dropped, so switching a busy bucket back and forth between a large and
//!   a small burst hands out more than either quota would alone (each
//!   switch down forgets the excess). Change quotas when the configuration
//!   changes, not as a control loop.
//! - **`now` matters.** A change carried over at a stale `now` credits the
//!   staleness, as a check at that `now` would.
//!
//! A lock-free check (a [`LiveBucket`] or the
//! [`LockFreeGcraTable`](crate::keyed::LockFreeGcraTable)) is validated
//! against the change counter before it decides and just before it swaps,
//! and a conversion of a full bucket whose TAT is behind `now` stamps it one
//! unit later (never earlier, which would credit stale callers), so a check
//! decided under the old quota cannot install its result over a converted
//! one. Two windows are left, both needing a check preempted between its
//! last look and its swap: (a) *two or more* complete changes run and carry
//! the TAT back to exactly the value it had read; (b) one change converts a
//! full bucket whose TAT equals the change's `now` and so writes it back
//! unchanged. Either way that admission is decided under the quota before
//! the change(s), once. Reconfigurations are configuration reloads, far
//! apart, so this is not a practical concern; the tables with locks
//! (sharded, heapless) have no such window.
//!
//! ```
//! use tollgate::live::{Inheritance, LiveBucket};
//! use tollgate::{Quota, Timestamp};
//!
//! let bucket = LiveBucket::token_bucket(Quota::per_second(10)?);
//! let now = Timestamp::ZERO;
//! assert!(bucket.check_n(6, now).is_ok()); // 6 of 10 used
//! bucket.set_quota(Quota::per_second(20)?, Inheritance::UsedAmount, now);
//! assert_eq!(bucket.snapshot(now).remaining(), 14);
//! bucket.set_quota(Quota::per_second(20)?, Inheritance::Reset, now);
//! assert_eq!(bucket.snapshot(now).remaining(), 20);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`KeyedTable::reconfigure`]: crate::keyed::KeyedTable::reconfigure
//! [`KeyedTable::update_key_quota`]: crate::keyed::KeyedTable::update_key_quota
//! [`ConcurrencyLimiter::set_limit`]: crate::ConcurrencyLimiter::set_limit

use core::time::Duration;

use crate::gcra::{BucketKind, Gcra};
use crate::limiter::{Algorithm, Grant, Limiter};
use crate::quota::Quota;
use crate::refusal::Refusal;
use crate::snapshot::Snapshot;
use crate::sync::{AtomicU64, Ordering};
use crate::time::Timestamp;

/// The carry-over rule of a reconfiguration, defined beside the
/// [`Algorithm`] trait whose `carry_over` takes it.
pub use crate::limiter::Inheritance;

/// A [`Gcra`] configuration in atomics, for readers that do not lock: six
/// words (the last packs the kind, the capacity and the unit of time the
/// TAT is kept in) stored with `Release` and loaded with `Acquire` by a
/// protocol that detects a torn read (see [`LiveBucket`]): a TAT is never
/// read with another configuration's units.
#[derive(Debug)]
pub(crate) struct GcraCell {
    words: [AtomicU64; 6],
}

impl GcraCell {
    crate::sync::const_fn_unless_loom! {
        pub(crate) fn new(gcra: Gcra) -> Self {
            let w = gcra.to_words();
            Self {
                words: [
                    AtomicU64::new(w[0]),
                    AtomicU64::new(w[1]),
                    AtomicU64::new(w[2]),
                    AtomicU64::new(w[3]),
                    AtomicU64::new(w[4]),
                    AtomicU64::new(w[5]),
                ],
            }
        }
    }

    #[inline]
    pub(crate) fn load(&self) -> Gcra {
        Gcra::from_words([
            self.words[0].load(Ordering::Acquire),
            self.words[1].load(Ordering::Acquire),
            self.words[2].load(Ordering::Acquire),
            self.words[3].load(Ordering::Acquire),
            self.words[4].load(Ordering::Acquire),
            self.words[5].load(Ordering::Acquire),
        ])
    }

    pub(crate) fn store(&self, gcra: Gcra) {
        for (word, value) in self.words.iter().zip(gcra.to_words()) {
            word.store(value, Ordering::Release);
        }
    }
}

/// A TAT that no check ever stores: the state is being converted.
const FROZEN: u64 = u64::MAX;
/// The latest TAT a check stores (one below [`FROZEN`]).
const MAX_TAT: u64 = u64::MAX - 1;

/// A GCRA bucket (token or leaky) whose quota can change while it runs.
///
/// The same decisions as a [`Bucket<Gcra>`](crate::Bucket) with the same
/// quota; a change of quota carries the permits already used over by an
/// [`Inheritance`] rule. `const`-constructible for a `static`; 64 bytes.
///
/// # Protocol (for model checking)
///
/// `seq` is even while the configuration is stable and odd during a
/// change. A check loads `seq` (waiting while it is odd), the TAT (waiting
/// while it is frozen), then the configuration, decides, and either
/// installs the new TAT with a compare-and-swap or, for a refusal, checks
/// that `seq` has not moved (else it decides again). A change takes `seq`
/// from even to odd with a compare-and-swap (changes are serialised by
/// it), swaps the TAT for `FROZEN`, stores the new configuration, stores
/// the carried-over TAT, and makes `seq` even again. A check that read any
/// word of the new configuration therefore finds the TAT frozen or
/// replaced, so no check ever combines a TAT of one configuration with
/// another.
#[derive(Debug)]
pub struct LiveBucket {
    seq: AtomicU64,
    config: GcraCell,
    tat: AtomicU64,
}

impl LiveBucket {
    crate::sync::const_fn_unless_loom! {
        /// A full bucket running `gcra`.
        #[must_use]
        pub fn new(gcra: Gcra) -> Self {
            Self {
                seq: AtomicU64::new(0),
                config: GcraCell::new(gcra),
                tat: AtomicU64::new(0),
            }
        }
    }

    crate::sync::const_fn_unless_loom! {
        /// A full token bucket enforcing `quota`.
        #[must_use]
        pub fn token_bucket(quota: Quota) -> Self {
            Self::new(Gcra::token_bucket(quota))
        }
    }

    crate::sync::const_fn_unless_loom! {
        /// A strict-pacing leaky bucket enforcing `quota`.
        #[must_use]
        pub fn leaky_bucket(quota: Quota) -> Self {
            Self::new(Gcra::leaky_bucket(quota))
        }
    }

    /// The configuration in force.
    #[must_use]
    pub fn algorithm(&self) -> Gcra {
        loop {
            let seq = self.stable_seq();
            let gcra = self.config.load();
            if self.seq.load(Ordering::Acquire) == seq {
                return gcra;
            }
        }
    }

    /// Enforces `quota` from now on, same kind of bucket, carrying the
    /// permits used over by `how`. See the [module documentation](self).
    pub fn set_quota(&self, quota: Quota, how: Inheritance, now: Timestamp) {
        let gcra = self.algorithm();
        let mut next = Gcra::new(gcra.kind(), quota);
        if gcra.heal_threshold() != crate::gcra::DEFAULT_HEAL_THRESHOLD {
            next = next.with_heal_threshold(gcra.heal_threshold());
        }
        self.set_algorithm(next, how, now);
    }

    /// Runs `next` from now on (a token or a leaky bucket, any quota),
    /// carrying the permits used over by `how`.
    pub fn set_algorithm(&self, next: Gcra, how: Inheritance, now: Timestamp) {
        #[cfg(not(feature = "std"))]
        critical_section::with(|_| self.change(next, how, now));
        #[cfg(feature = "std")]
        self.change(next, how, now);
    }

    fn change(&self, next: Gcra, how: Inheritance, now: Timestamp) {
        // take the writer's turn: even → odd
        let mut seq = self.seq.load(Ordering::Relaxed);
        loop {
            if seq % 2 == 1 {
                wait();
                seq = self.seq.load(Ordering::Relaxed);
                continue;
            }
            match self
                .seq
                .compare_exchange_weak(seq, seq + 1, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(current) => seq = current,
            }
        }
        let tat = self.tat.swap(FROZEN, Ordering::AcqRel);
        let old = self.config.load();
        self.config.store(next);
        let carried = next
            .inherit_tat(&old, tat, now.as_nanos(), how)
            .min(MAX_TAT);
        self.tat.store(carried, Ordering::Release);
        self.seq.store(seq + 2, Ordering::Release);
    }

    /// `seq` once it is even (no change in progress).
    #[inline]
    fn stable_seq(&self) -> u64 {
        loop {
            let seq = self.seq.load(Ordering::Acquire);
            if seq.is_multiple_of(2) {
                return seq;
            }
            wait();
        }
    }

    /// The TAT once it is not frozen.
    #[inline]
    fn stable_tat(&self) -> u64 {
        loop {
            let tat = self.tat.load(Ordering::Acquire);
            if tat != FROZEN {
                return tat;
            }
            wait();
        }
    }

    /// Reads a consistent `(configuration, TAT)` pair and applies `f`.
    #[inline]
    fn read<R>(&self, f: impl Fn(&Gcra, u64) -> R) -> R {
        loop {
            let seq = self.stable_seq();
            let tat = self.stable_tat();
            let gcra = self.config.load();
            if self.seq.load(Ordering::Acquire) == seq {
                return f(&gcra, tat);
            }
        }
    }
}

impl LiveBucket {
    /// The check protocol (see the type's docs) around one GCRA step:
    /// `step` decides on a consistent `(configuration, TAT)` pair and says
    /// which TAT to store; the decision stands once the store (or, for a
    /// refusal, the unchanged `seq`) confirms that no change overlapped
    /// it; `finish` then turns what was decided into the result, with
    /// the configuration it was decided with. [`Limiter::check_n`] steps
    /// to an outcome of two words (kept in registers through the swap)
    /// and builds its verdict once the swap stands.
    #[inline(always)]
    fn decide<O, R>(
        &self,
        step: impl Fn(&Gcra, u64) -> Result<(O, Option<u64>), Refusal<'static>>,
        finish: impl Fn(&Gcra, O) -> R,
    ) -> Result<R, Refusal<'static>> {
        loop {
            let seq = self.stable_seq();
            let tat = self.stable_tat();
            let gcra = self.config.load();
            // never step with a half-written configuration
            if self.seq.load(Ordering::Acquire) != seq {
                continue;
            }
            let (decided, store) = step(&gcra, tat)?;
            let stands = match store {
                // one more look just before the swap (a conversion that
                // wrote the TAT since makes it fail anyway)
                Some(_) if self.seq.load(Ordering::Acquire) != seq => false,
                Some(new_tat) => self
                    .tat
                    .compare_exchange(
                        tat,
                        new_tat.min(MAX_TAT),
                        Ordering::AcqRel,
                        Ordering::Relaxed,
                    )
                    .is_ok(),
                // nothing written: valid only if no change overlapped it
                None => self.seq.load(Ordering::Acquire) == seq,
            };
            if stands {
                return Ok(finish(&gcra, decided));
            }
        }
    }
}

impl LiveBucket {
    /// Tries to take one permit at `now`.
    ///
    /// # Errors
    /// The [`Refusal`]; nothing was taken.
    #[inline]
    pub fn check(&self, now: Timestamp) -> Result<(), Refusal<'static>> {
        self.check_n(1, now)
    }

    /// Tries to take `n` permits at `now`; `n = 0` is a peek.
    ///
    /// # Errors
    /// The [`Refusal`] (one that [`is_never`](Refusal::is_never) if `n`
    /// can never be granted); nothing was taken.
    #[inline]
    pub fn check_n(&self, n: u32, now: Timestamp) -> Result<(), Refusal<'static>> {
        self.check_until_full(n, now).map(|_| ())
    }

    /// Gives back `n` permits of an earlier admission; never above the
    /// burst.
    pub fn refund(&self, n: u32, now: Timestamp) {
        let now = now.as_nanos();
        loop {
            let seq = self.stable_seq();
            let tat = self.stable_tat();
            let gcra = self.config.load();
            if self.seq.load(Ordering::Acquire) != seq {
                continue;
            }
            let Some(new_tat) = gcra.refunded(tat, n, now) else {
                return;
            };
            if self
                .tat
                .compare_exchange(tat, new_tat, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }

    /// The bucket's state at `now`, computed when asked.
    #[must_use]
    pub fn snapshot(&self, now: Timestamp) -> Snapshot {
        self.read(|g, tat| g.snapshot_of(tat, now.as_nanos()))
    }

    /// The time until `n` permits would be admitted (zero if now).
    ///
    /// # Errors
    /// A refusal that [`is_never`](Refusal::is_never) if `n` can never be
    /// granted.
    pub fn time_until_ready(&self, n: u32, now: Timestamp) -> Result<Duration, Refusal<'static>> {
        self.read(|g, tat| g.wait_of(tat, n, now.as_nanos()))
            .map(Duration::from_nanos)
    }

    /// True if the bucket is indistinguishable from a full one at `now`.
    #[must_use]
    pub fn is_idle(&self, now: Timestamp) -> bool {
        self.read(|g, tat| g.is_idle_at(tat, now.as_nanos()))
    }

    /// This bucket, then `next`: both must admit, all or nothing
    /// ([`Limiter::and`], callable without the trait in scope).
    #[inline]
    pub fn and<B: Limiter>(self, next: B) -> crate::Chain<Self, B> {
        crate::Chain::new(self, next)
    }

    /// Tries to take `n` permits at `now`; on an admission, the instant the
    /// bucket is full again as this admission left it (as
    /// [`Algorithm::check_n`]), not what a later one did.
    #[inline]
    pub(crate) fn check_until_full(
        &self,
        n: u32,
        now: Timestamp,
    ) -> Result<Timestamp, Refusal<'static>> {
        let now = now.as_nanos();
        self.decide(
            |gcra, tat| gcra.step_outcome(tat, n, now),
            |gcra, outcome| gcra.decision(outcome, now),
        )
        .and_then(core::convert::identity)
    }
}

/// A check that meets a change in progress waits for it: the change is a
/// handful of stores (on `no_std`, inside a critical section, so never
/// interrupted on a single core).
#[inline]
fn wait() {
    #[cfg(all(feature = "std", not(loom)))]
    std::thread::yield_now();
    #[cfg(any(not(feature = "std"), loom))]
    crate::sync::spin_loop();
}

impl Limiter for LiveBucket {
    type Permit = Grant;

    #[inline]
    fn capacity(&self, _: &()) -> u32 {
        self.algorithm().capacity()
    }

    #[inline]
    fn try_acquire_n(&self, _: &(), n: u32, now: Timestamp) -> Result<Grant, Refusal<'static>> {
        self.check_until_full(n, now)
            .map(|full_at| Grant::new(n, full_at))
    }

    #[inline]
    fn cancel(&self, _: &(), grant: Grant, now: Timestamp) {
        self.refund(grant.permits(), now);
    }

    fn refund(&self, _: &(), n: u32, now: Timestamp) {
        LiveBucket::refund(self, n, now);
    }

    fn snapshot(&self, _: &(), now: Timestamp) -> Snapshot {
        LiveBucket::snapshot(self, now)
    }

    fn time_until_ready(
        &self,
        _: &(),
        n: u32,
        now: Timestamp,
    ) -> Result<Duration, Refusal<'static>> {
        LiveBucket::time_until_ready(self, n, now)
    }

    fn required_resolution(&self) -> Duration {
        self.algorithm().interval()
    }

    fn time_until_ready_after(
        &self,
        _: &(),
        ahead: u64,
        n: u32,
        now: Timestamp,
    ) -> Option<Duration> {
        self.read(|g, tat| g.wait_after_of(tat, ahead, n, now.as_nanos()))
            .map(Duration::from_nanos)
    }
}

impl From<Gcra> for LiveBucket {
    fn from(gcra: Gcra) -> Self {
        Self::new(gcra)
    }
}

impl LiveBucket {
    /// Token or leaky bucket.
    #[must_use]
    pub fn kind(&self) -> BucketKind {
        self.algorithm().kind()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(per_sec: u32, burst: u32) -> Quota {
        Quota::per_second(per_sec)
            .and_then(|q| q.with_burst(burst))
            .unwrap()
    }

    #[test]
    fn each_inheritance_rule_keeps_what_it_says() {
        let now = Timestamp::ZERO;
        for (how, remaining) in [
            (Inheritance::UsedAmount, 14),
            (Inheritance::UsedFraction, 8),
            (Inheritance::Reset, 20),
        ] {
            let b = LiveBucket::token_bucket(q(10, 10));
            assert!(b.check_n(6, now).is_ok());
            b.set_quota(q(20, 20), how, now);
            assert_eq!(b.snapshot(now).remaining(), remaining, "{how:?}");
            assert_eq!(b.algorithm(), Gcra::token_bucket(q(20, 20)));
        }
    }

    #[test]
    fn more_used_than_the_new_quota_holds_is_an_empty_bucket() {
        let b = LiveBucket::token_bucket(q(10, 10));
        let now = Timestamp::from_secs(5);
        assert!(b.check_n(10, now).is_ok());
        b.set_quota(q(2, 2), Inheritance::UsedAmount, now);
        let d = b.check(now);
        // empty at now: the next permit in one new interval (500 ms)
        assert_eq!(d.unwrap_err().retry_after(), Duration::from_millis(500));
    }

    #[test]
    fn a_full_bucket_stays_full_and_kind_and_heal_threshold_are_kept() {
        let gcra = Gcra::leaky_bucket(q(10, 1)).with_heal_threshold(Duration::from_millis(3));
        let b = LiveBucket::new(gcra);
        b.set_quota(q(5, 1), Inheritance::UsedFraction, Timestamp::ZERO);
        assert_eq!(b.kind(), BucketKind::LeakyBucket);
        assert_eq!(b.algorithm().heal_threshold(), Duration::from_millis(3));
        assert!(b.is_idle(Timestamp::ZERO));
    }

    #[test]
    fn decides_as_a_bucket_of_the_same_quota() {
        let live = LiveBucket::token_bucket(q(10, 3));
        let plain = crate::Bucket::token_bucket(q(10, 3));
        for step in 0..200u64 {
            let now = Timestamp::from_millis(step * 37 % 400 + step * 5);
            let n = (step % 4) as u32;
            assert_eq!(live.check_n(n, now), plain.check_n(n, now), "step {step}");
            if step % 7 == 0 {
                live.refund(1, now);
                plain.refund(1, now);
            }
            assert_eq!(live.snapshot(now), plain.snapshot(now));
            assert_eq!(
                live.time_until_ready_after(&(), 2, 1, now),
                plain.time_until_ready_after(&(), 2, 1, now)
            );
        }
    }
}
