//! Waiting for permits on RTIC: [`RticClock::acquire`] and
//! [`RticClock::acquire_by`], sleeping on the timebase's own
//! `delay_until`.

use tollgate_core::error::check_clock;
use tollgate_core::limiter::Limiter;
use tollgate_core::time::Timestamp;
use tollgate_core::wait::WaitError;

use rtic_time::Timebase;

use crate::clock::RticClock;
use crate::tick_count::TickCount;

/// The longest single sleep on a 32-bit timebase, in ticks: a quarter of a
/// wrap, well inside the half wrap within which RTIC's timer queue places
/// an instant, and inside the clock's read rule (so a waiting task keeps
/// the clock read).
const LONGEST_SLEEP_32: u64 = 1 << 30;

impl<M: Timebase> RticClock<M>
where
    M::Instant: TickCount,
{
    /// Waits until `n` permits of `limiter` for `key` (`&()` for a direct
    /// limiter) are granted and takes them; resolves to **the instant of
    /// `M` at which they were granted**: the reading of `M::now()` that the
    /// admitting check used, so `M::delay_until(granted + period)` paces
    /// from the admission exactly, however late the task runs after it.
    ///
    /// Check; on a refusal sleep with `M::delay_until` until the refusal's
    /// `retry_after` (rounded **up** to a tick, and at least the next tick);
    /// check again. No polling loop, no allocation, no queue: whichever
    /// waiter checks first after capacity returns gets it. Any [`Limiter`]
    /// whose permits are spent when granted (`Copy` permits): a bucket, a
    /// window, a chain of them, a keyed table. `n = 0` resolves at once.
    ///
    /// **Cancel-safe**: permits are taken only by the check that resolves
    /// the future, so dropping it while it sleeps (a
    /// `M::timeout_after(d, CLOCK.acquire(..))` that expires, say) takes
    /// nothing.
    ///
    /// On a 32-bit timebase a wait longer than a quarter of the wrap
    /// period sleeps in pieces of at most a quarter wrap (RTIC places an
    /// instant within half a wrap of now); each piece reads the clock, so
    /// a waiting task keeps the clock within its read rule by itself.
    ///
    /// ```
    /// use tollgate::rtic::{RticClock, WaitError};
    /// use tollgate::{valid, Bucket, Gcra, Quota};
    /// # use tollgate::rtic::rtic_time::{fugit, Timebase, TimeoutError};
    /// # use core::sync::atomic::{AtomicU32, Ordering};
    /// # static TICKS: AtomicU32 = AtomicU32::new(u32::MAX - 30);
    /// # /// SysTick at 1 kHz, 32-bit (a stand-in for rtic-monotonics' driver).
    /// # struct Mono;
    /// # impl Timebase for Mono {
    /// #     type Instant = fugit::MonotonicTimerInstantU32<1_000>;
    /// #     type Duration = fugit::TimerDurationU32<1_000>;
    /// #     fn now() -> Self::Instant { Self::Instant::from_ticks(TICKS.load(Ordering::SeqCst)) }
    /// #     async fn delay(_: Self::Duration) {}
    /// #     async fn delay_until(i: Self::Instant) { TICKS.store(i.as_ticks(), Ordering::SeqCst) }
    /// #     async fn timeout_at<F: core::future::Future>(_: Self::Instant, f: F) -> Result<F::Output, TimeoutError> { Ok(f.await) }
    /// #     async fn timeout_after<F: core::future::Future>(_: Self::Duration, f: F) -> Result<F::Output, TimeoutError> { Ok(f.await) }
    /// # }
    ///
    /// static CLOCK: RticClock<Mono> = RticClock::new();
    /// // one frame per 20 ms, evenly spaced
    /// static RADIO: Bucket<Gcra> = Bucket::leaky_bucket(valid!(Quota::per_second(50)));
    ///
    /// // in an RTIC software task
    /// async fn send_frames() -> Result<(), WaitError> {
    ///     let mut last = None;
    ///     for _ in 0..4 {
    ///         let granted = CLOCK.acquire(&RADIO, &(), 1).await?;
    ///         // ... transmit ...
    ///         if let Some(last) = last {
    ///             // exactly 20 ticks apart, across the wrap too
    ///             assert_eq!(granted.as_ticks().wrapping_sub(last), 20);
    ///         }
    ///         last = Some(granted.as_ticks());
    ///     }
    ///     Ok(())
    /// }
    /// # let mut f = core::pin::pin!(send_frames());
    /// # let mut cx = core::task::Context::from_waker(core::task::Waker::noop());
    /// # assert!(matches!(f.as_mut().poll(&mut cx), core::task::Poll::Ready(Ok(()))));
    /// # assert_eq!(TICKS.load(Ordering::SeqCst), 29); // across the wrap
    /// ```
    ///
    /// # Errors
    /// The future resolves to [`WaitError::CapacityExceeded`] at once if
    /// `n` can never be granted (above the burst or largest weight), and to
    /// [`WaitError::ClockTooCoarse`] at once if the limiter's finest step is
    /// shorter than one tick of `M`.
    pub async fn acquire<L, K>(&self, limiter: &L, key: &K, n: u32) -> Result<M::Instant, WaitError>
    where
        L: Limiter<K, Permit: Copy> + ?Sized,
        K: ?Sized,
    {
        self.wait(limiter, key, n, None).await
    }

    /// [`acquire`](Self::acquire), giving up with [`WaitError::Timeout`]
    /// if the permits cannot be granted at or before `deadline` (an
    /// instant of `M`; on a 32-bit timebase, within half a wrap of now).
    /// It gives up as soon as the limiter's answer shows the deadline
    /// cannot be met, without sleeping until it, and takes nothing then;
    /// permits available right now are granted even if the deadline has
    /// passed. A request granted on the deadline's tick is granted.
    ///
    /// (`M::timeout_at(deadline, CLOCK.acquire(..))` also bounds a wait,
    /// as `acquire` is cancel-safe; it sleeps until the deadline first.)
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire), and [`WaitError::Timeout`] (its
    /// times are this clock's timestamps).
    pub async fn acquire_by<L, K>(
        &self,
        limiter: &L,
        key: &K,
        n: u32,
        deadline: M::Instant,
    ) -> Result<M::Instant, WaitError>
    where
        L: Limiter<K, Permit: Copy> + ?Sized,
        K: ?Sized,
    {
        self.wait(limiter, key, n, Some(deadline)).await
    }

    async fn wait<L, K>(
        &self,
        limiter: &L,
        key: &K,
        n: u32,
        deadline: Option<M::Instant>,
    ) -> Result<M::Instant, WaitError>
    where
        L: Limiter<K, Permit: Copy> + ?Sized,
        K: ?Sized,
    {
        // where a limiter meets the clock: a step finer than a tick cannot
        // be enforced (a `static` bucket was never checked against it)
        let (step, resolution) = (limiter.required_resolution(), Self::RESOLUTION);
        if check_clock(step, resolution).is_err() {
            return Err(WaitError::ClockTooCoarse { step, resolution });
        }
        // the deadline on the extended time line, placed at the first reading
        let mut deadline_at: Option<Timestamp> = None;
        loop {
            let ticks = self.ticks();
            let now = Self::timestamp_of_ticks(ticks);
            let wait = match limiter.try_acquire_n(key, n, now) {
                // a rate's permit is spent when granted
                Ok(_) => return Ok(Self::instant_of_ticks(ticks)),
                Err(refusal) if refusal.is_never() => {
                    return Err(WaitError::CapacityExceeded(refusal));
                }
                Err(refusal) => refusal.retry_after(),
            };
            let ready_at = now.saturating_add(wait);
            if let Some(deadline) = deadline {
                let deadline = *deadline_at
                    .get_or_insert_with(|| Self::timestamp_of_ticks(Self::extend(deadline, ticks)));
                if ready_at > deadline {
                    return Err(WaitError::Timeout { ready_at, deadline });
                }
            }
            // the first tick at which the limiter is ready, and at least
            // the next tick, so a zero wait never spins
            let mut wake = Self::ticks_at(ready_at).max(ticks.saturating_add(1));
            if Self::BITS < 64 {
                wake = wake.min(ticks.saturating_add(LONGEST_SLEEP_32));
            }
            M::delay_until(Self::instant_of_ticks(wake)).await;
        }
    }
}
