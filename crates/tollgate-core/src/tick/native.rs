//! The tick-native calls, for interrupt handlers: `now` as a `u32` tick
//! count, an answer in ticks; on a [`TickState`], a [`Bucket`] or a
//! [`BucketRef`].

use super::step::Step;
use super::{FULL, TickGcra, TickState};
use crate::limiter::{Bucket, BucketRef};
use crate::refusal::Refusal;

impl TickGcra {
    #[inline(always)]
    pub(super) fn update(&self, state: &TickState, n: u32, now: u32) -> Step {
        state.tat.update(|tat| self.step(tat, n, now))
    }

    /// The wait a tick-native check reports for a request of more permits
    /// than the burst: it can never be admitted. No other wait is this
    /// long (every wait is below 2³¹ ticks).
    pub const NEVER: u32 = u32::MAX;

    /// Takes one permit at tick `now`: the interrupt handler's call. One
    /// compare-and-swap (or one critical section), 32-bit arithmetic.
    ///
    /// # Errors
    /// The exact number of ticks until the same request would be admitted
    /// (at least 1, not one tick sooner) if nothing else takes capacity
    /// meanwhile; nothing was taken.
    ///
    /// ```
    /// use tollgate::tick::{TickGcra, TickState};
    /// use tollgate::BucketKind;
    ///
    /// let leaky = TickGcra::from_ticks(BucketKind::LeakyBucket, 50, 1, 1_000)?;
    /// let state = TickState::new();
    /// assert!(leaky.check_ticks(&state, 10).is_ok());
    /// assert_eq!(leaky.check_ticks(&state, 30), Err(30));
    /// assert!(leaky.check_ticks(&state, 60).is_ok());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[inline]
    pub fn check_ticks(&self, state: &TickState, now: u32) -> Result<(), u32> {
        // every valid configuration has capacity ≥ 1
        self.update(state, 1, now).ticks()
    }

    /// Takes `n` permits at tick `now`; `n = 0` is a peek (changes nothing,
    /// `Ok`).
    ///
    /// # Errors
    /// The ticks until the same request would be admitted, as
    /// [`check_ticks`](Self::check_ticks); [`TickGcra::NEVER`] if `n` is
    /// above the burst (it could never be granted).
    ///
    /// ```
    /// use tollgate::tick::{TickGcra, TickState};
    /// use tollgate::BucketKind;
    ///
    /// let gcra = TickGcra::from_ticks(BucketKind::TokenBucket, 10, 4, 1_000)?;
    /// let state = TickState::new();
    /// assert!(gcra.check_n_ticks(&state, 3, 0).is_ok());
    /// assert_eq!(gcra.check_n_ticks(&state, 2, 0), Err(10));
    /// assert_eq!(gcra.check_n_ticks(&state, 5, 0), Err(TickGcra::NEVER));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[inline]
    pub fn check_n_ticks(&self, state: &TickState, n: u32, now: u32) -> Result<(), u32> {
        if n > self.capacity {
            return Err(Self::NEVER);
        }
        if n == 0 {
            return Ok(());
        }
        self.update(state, n, now).ticks()
    }

    /// Gives back `n` permits of an earlier admission at tick `now` (the TAT
    /// moves back by `n·T`, never before `now`, so never above the burst).
    /// A refund that leaves the bucket full stores `now` as its TAT, so a
    /// caller whose `now` is older still sees the permits as taken; at tick
    /// 0 itself that would be the sentinel, so it stores 1 (one tick less
    /// room).
    ///
    /// ```
    /// use tollgate::tick::{TickGcra, TickState};
    /// use tollgate::BucketKind;
    ///
    /// let gcra = TickGcra::from_ticks(BucketKind::TokenBucket, 10, 2, 1_000)?;
    /// let state = TickState::new();
    /// assert!(gcra.check_n_ticks(&state, 2, 5).is_ok());
    /// gcra.refund_ticks(&state, 1, 5);
    /// assert_eq!(gcra.available_ticks(&state, 5), 1);
    /// gcra.refund_ticks(&state, 9, 5);
    /// assert_eq!(gcra.available_ticks(&state, 5), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn refund_ticks(&self, state: &TickState, n: u32, now: u32) {
        state.tat.update(|tat| ((), self.refunded(tat, n, now)));
    }

    /// The lead at tick `now`: ticks until the bucket is full again (0 when
    /// full).
    ///
    /// ```
    /// use tollgate::tick::{TickGcra, TickState};
    /// use tollgate::BucketKind;
    ///
    /// let gcra = TickGcra::from_ticks(BucketKind::TokenBucket, 10, 4, 1_000)?;
    /// let state = TickState::new();
    /// let _ = gcra.check_ticks(&state, 100);
    /// assert_eq!(gcra.lead_ticks(&state, 100), 10);
    /// assert_eq!(gcra.lead_ticks(&state, 104), 6);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn lead_ticks(&self, state: &TickState, now: u32) -> u32 {
        self.lead_at(state.tat.load(), now)
    }

    /// Permits that could be taken at tick `now` (one 32-bit division).
    ///
    /// ```
    /// use tollgate::tick::{TickGcra, TickState};
    /// use tollgate::BucketKind;
    ///
    /// let gcra = TickGcra::from_ticks(BucketKind::TokenBucket, 10, 4, 1_000)?;
    /// let state = TickState::new();
    /// assert_eq!(gcra.available_ticks(&state, 0), 4);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn available_ticks(&self, state: &TickState, now: u32) -> u32 {
        self.slack(self.lead_ticks(state, now)) / self.interval
    }

    /// Ticks from `now` until `n` permits would be admitted (0 if now).
    ///
    /// # Errors
    /// A refusal that [`is_never`](Refusal::is_never) if `n` is above the burst.
    ///
    /// ```
    /// use tollgate::tick::{TickGcra, TickState};
    /// use tollgate::BucketKind;
    ///
    /// let gcra = TickGcra::from_ticks(BucketKind::TokenBucket, 10, 4, 1_000)?;
    /// let state = TickState::new();
    /// assert!(gcra.check_n_ticks(&state, 4, 0).is_ok());
    /// assert_eq!(gcra.time_until_ready_ticks(&state, 2, 0)?, 20);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn time_until_ready_ticks(
        &self,
        state: &TickState,
        n: u32,
        now: u32,
    ) -> Result<u32, Refusal<'static>> {
        if n > self.capacity {
            return Err(self.exceeded(n));
        }
        if n == 0 {
            return Ok(0);
        }
        Ok(self
            .lead_ticks(state, now)
            .saturating_sub(self.admit_lead(n)))
    }

    /// Marks an idle bucket as full for good: if it has been full for at
    /// least the heal threshold (so that no caller within the threshold can
    /// see it otherwise), it stores the sentinel TAT 0, which reads as full
    /// at every tick, and the bucket can then sit unused for any time; any
    /// other bucket is left alone. Call it (from any periodic task, more
    /// often than every [`horizon_ticks`](Self::horizon_ticks)) for buckets
    /// that may sit unused for longer than the horizon after their last
    /// admission.
    ///
    /// ```
    /// use tollgate::tick::{TickGcra, TickState};
    /// use tollgate::BucketKind;
    ///
    /// let gcra = TickGcra::from_ticks(BucketKind::TokenBucket, 10, 4, 1_000)?
    ///     .with_heal_threshold_ticks(20)?;
    /// let state = TickState::new();
    /// assert!(gcra.check_ticks(&state, 5).is_ok());
    /// // full again at tick 15; a caller 20 ticks stale could still see it busy
    /// gcra.refresh_ticks(&state, 30);
    /// assert_eq!(state.tat_ticks(), 15);
    /// gcra.refresh_ticks(&state, 35);
    /// assert_eq!(state.tat_ticks(), 0);
    /// // however long it then sits, it reads as full
    /// for now in [16, u32::MAX / 2, u32::MAX - 5, u32::MAX] {
    ///     assert_eq!(gcra.available_ticks(&state, now), 4);
    /// }
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    pub fn refresh_ticks(&self, state: &TickState, now: u32) {
        let stale = now.wrapping_sub(self.heal_threshold);
        state.tat.update(|tat| {
            let idle = tat != FULL && self.lead_at(tat, now) == 0 && self.lead_at(tat, stale) == 0;
            ((), if idle { Some(FULL) } else { None })
        });
    }
}

impl Bucket<TickGcra> {
    /// [`TickGcra::check_ticks`] on this bucket's state.
    ///
    /// ```
    /// use tollgate::tick::{TickGcra, TickState};
    /// use tollgate::{valid, Bucket, BucketKind};
    ///
    /// static SENSOR: Bucket<TickGcra> = Bucket::from_parts(
    ///     valid!(TickGcra::from_ticks(BucketKind::TokenBucket, 8, 2, 1_000)),
    ///     TickState::new(),
    /// );
    /// assert!(SENSOR.check_ticks(0).is_ok());
    /// assert!(SENSOR.check_ticks(0).is_ok());
    /// assert_eq!(SENSOR.check_ticks(0), Err(8)); // ticks to wait
    /// ```
    ///
    /// # Errors
    /// The ticks until the same request would be admitted.
    #[inline]
    pub fn check_ticks(&self, now: u32) -> Result<(), u32> {
        self.algorithm().check_ticks(self.state(), now)
    }

    /// [`TickGcra::check_n_ticks`] on this bucket's state.
    ///
    /// # Errors
    /// The ticks until the same request would be admitted;
    /// [`TickGcra::NEVER`] if `n` is above the burst.
    ///
    /// ```
    /// use tollgate::tick::TickGcra;
    /// use tollgate::{Bucket, BucketKind};
    /// let bucket = Bucket::new(TickGcra::from_ticks(BucketKind::TokenBucket, 8, 2, 1_000)?);
    /// assert!(bucket.check_n_ticks(2, 0).is_ok());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[inline]
    pub fn check_n_ticks(&self, n: u32, now: u32) -> Result<(), u32> {
        self.algorithm().check_n_ticks(self.state(), n, now)
    }

    /// [`TickGcra::refund_ticks`] on this bucket's state.
    ///
    /// ```
    /// use tollgate::tick::TickGcra;
    /// use tollgate::{Bucket, BucketKind};
    /// let bucket = Bucket::new(TickGcra::from_ticks(BucketKind::TokenBucket, 8, 1, 1_000)?);
    /// assert!(bucket.check_ticks(5).is_ok());
    /// bucket.refund_ticks(1, 5);
    /// assert!(bucket.check_ticks(5).is_ok());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[inline]
    pub fn refund_ticks(&self, n: u32, now: u32) {
        self.algorithm().refund_ticks(self.state(), n, now);
    }
}

impl BucketRef<'_, TickGcra> {
    /// [`TickGcra::check_ticks`] on this bucket's state.
    ///
    /// ```
    /// use tollgate::tick::{TickGcra, TickState};
    /// use tollgate::{valid, BucketKind, BucketRef};
    ///
    /// static CONFIG: TickGcra = valid!(TickGcra::from_ticks(BucketKind::LeakyBucket, 8, 1, 1_000)); // flash
    /// static STATE: TickState = TickState::new(); // 4 bytes of RAM
    /// static UART: BucketRef<'static, TickGcra> = BucketRef::new(&CONFIG, &STATE);
    /// assert!(UART.check_ticks(3).is_ok());
    /// assert_eq!(UART.check_ticks(3), Err(8)); // ticks to wait
    /// ```
    ///
    /// # Errors
    /// The ticks until the same request would be admitted.
    #[inline]
    pub fn check_ticks(&self, now: u32) -> Result<(), u32> {
        self.algorithm().check_ticks(self.state(), now)
    }

    /// [`TickGcra::check_n_ticks`] on this bucket's state.
    ///
    /// # Errors
    /// The ticks until the same request would be admitted;
    /// [`TickGcra::NEVER`] if `n` is above the burst.
    ///
    /// ```
    /// use tollgate::tick::{TickGcra, TickState};
    /// use tollgate::{BucketKind, BucketRef};
    /// let config = TickGcra::from_ticks(BucketKind::TokenBucket, 8, 2, 1_000)?;
    /// let state = TickState::new();
    /// let bucket = BucketRef::new(&config, &state);
    /// assert_eq!(bucket.check_n_ticks(3, 0), Err(TickGcra::NEVER));
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[inline]
    pub fn check_n_ticks(&self, n: u32, now: u32) -> Result<(), u32> {
        self.algorithm().check_n_ticks(self.state(), n, now)
    }

    /// [`TickGcra::refund_ticks`] on this bucket's state.
    ///
    /// ```
    /// use tollgate::tick::{TickGcra, TickState};
    /// use tollgate::{BucketKind, BucketRef};
    /// let config = TickGcra::from_ticks(BucketKind::TokenBucket, 8, 1, 1_000)?;
    /// let state = TickState::new();
    /// let bucket = BucketRef::new(&config, &state);
    /// assert!(bucket.check_ticks(5).is_ok());
    /// bucket.refund_ticks(1, 5);
    /// assert!(bucket.check_ticks(5).is_ok());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[inline]
    pub fn refund_ticks(&self, n: u32, now: u32) {
        self.algorithm().refund_ticks(self.state(), n, now);
    }
}
