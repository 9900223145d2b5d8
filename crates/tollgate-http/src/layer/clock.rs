//! The clock a layer reads: one process-wide TSC clock unless the builder
//! was given another.

use core::time::Duration;
use std::sync::Arc;

use tollgate_core::clock::{Clock, QuantaClock};
use tollgate_core::time::Timestamp;

/// The default clock of every layer: one process-wide TSC clock (`quanta`,
/// which falls back to the OS's monotonic clock where the TSC is
/// unusable). Reading it is a `rdtsc` and a scaling, cheaper than
/// `Instant::now`.
pub(crate) fn layer_clock() -> QuantaClock {
    static CLOCK: std::sync::OnceLock<QuantaClock> = std::sync::OnceLock::new();
    CLOCK.get_or_init(QuantaClock::new).clone()
}

/// The clock a layer reads: [`layer_clock`] unless the builder was given
/// another ([`RateLimitLayerBuilder::clock`](crate::RateLimitLayerBuilder::clock)).
///
/// An enum rather than a `dyn Clock`: the default clock is the first
/// variant and is read inline (a compare of the variant, then the TSC
/// read), with no indirect call; only a clock given by the user is called
/// through its vtable.
#[derive(Clone)]
pub(crate) enum LayerClock {
    Quanta(QuantaClock),
    Given(Arc<dyn Clock + Send + Sync>),
}

impl Default for LayerClock {
    fn default() -> Self {
        Self::Quanta(layer_clock())
    }
}

impl Clock for LayerClock {
    #[inline]
    fn now(&self) -> Timestamp {
        match self {
            Self::Quanta(c) => c.now(),
            Self::Given(c) => c.now(),
        }
    }

    fn resolution(&self) -> Duration {
        match self {
            Self::Quanta(c) => c.resolution(),
            Self::Given(c) => c.resolution(),
        }
    }
}
