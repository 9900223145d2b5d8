//! The app's monotonic: rtic-monotonics' 32-bit SysTick monotonic,
//! numbered so that the app boots just before its wrap.

use rtic_monotonics::rtic_time::TimeoutError;
use rtic_monotonics::systick::prelude::*;

systick_monotonic!(SysTickMono, 1_000);

/// `Mono` at boot: 2 005 ticks before the wrap.
pub const OFFSET: u32 = 0u32.wrapping_sub(2_005);

pub type Instant = <SysTickMono as Timebase>::Instant;

/// rtic-monotonics' 32-bit SysTick monotonic, numbered from `OFFSET`:
/// every call goes to `SysTickMono`, with instants shifted by `OFFSET`.
pub struct Mono;

impl Mono {
    /// The instant at a tick count.
    pub fn at(ticks: u32) -> Instant {
        Instant::from_ticks(ticks)
    }

    /// The same instant on `SysTickMono`.
    fn unshift(instant: Instant) -> Instant {
        Instant::from_ticks(instant.as_ticks().wrapping_sub(OFFSET))
    }
}

impl Timebase for Mono {
    type Instant = Instant;
    type Duration = <SysTickMono as Timebase>::Duration;

    fn now() -> Instant {
        Instant::from_ticks(SysTickMono::now().as_ticks().wrapping_add(OFFSET))
    }

    async fn delay(duration: Self::Duration) {
        SysTickMono::delay(duration).await;
    }

    async fn delay_until(instant: Instant) {
        SysTickMono::delay_until(Self::unshift(instant)).await;
    }

    async fn timeout_at<F: core::future::Future>(
        instant: Instant,
        future: F,
    ) -> Result<F::Output, TimeoutError> {
        SysTickMono::timeout_at(Self::unshift(instant), future).await
    }

    async fn timeout_after<F: core::future::Future>(
        duration: Self::Duration,
        future: F,
    ) -> Result<F::Output, TimeoutError> {
        SysTickMono::timeout_after(duration, future).await
    }
}
