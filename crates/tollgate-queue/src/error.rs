//! Why a queued acquisition was refused.

use core::fmt;
use core::time::Duration;

use tollgate_core::refusal::Refusal;
#[cfg(test)]
use tollgate_core::snapshot::Snapshot;

/// Why [`Queue::acquire`](crate::Queue::acquire) or
/// [`Queue::try_acquire`](crate::Queue::try_acquire) did not grant
/// the permits. Nothing is taken from the limiter when an error is
/// returned.
///
/// `retry_after` figures are estimates made from the limiter's state and the
/// permits queued ahead at the moment of refusal (`None` when the limiter
/// cannot predict when capacity returns, as for a limiter whose capacity is
/// released by its holders).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WaitError {
    /// The request asks for more permits than the limiter can ever grant at
    /// once (the refusal [`is_never`](Refusal::is_never)): it would wait
    /// forever, so it is refused at once.
    CapacityExceeded(Refusal<'static>),
    /// Queueing the request would take the queued permits past
    /// `queue_limit`.
    QueueFull {
        /// Estimated time until enough queued permits have been admitted
        /// for this request to fit.
        retry_after: Option<Duration>,
    },
    /// Under [`QueueOrder::NewestFirst`](crate::QueueOrder), this
    /// waiter was one of the oldest and was refused to make room for a newer
    /// request (.NET's semantics).
    Displaced,
    /// The wait would exceed (or has reached) the queue's `max_wait`.
    MaxWaitExceeded {
        /// The estimated wait that was refused at once, or `None` when the
        /// request waited `max_wait` and was then refused.
        estimated_wait: Option<Duration>,
        /// The configured maximum.
        max_wait: Duration,
    },
    /// The per-call deadline passed, or the estimated wait ends after it.
    DeadlineExceeded,
    /// [`try_acquire`](crate::Queue::try_acquire) only: the request
    /// would have to wait.
    WouldWait {
        /// Estimated time until the request would be admitted.
        retry_after: Option<Duration>,
    },
    /// The queue was [closed](crate::Queue::close).
    Closed,
}

impl WaitError {
    /// The suggested wait before retrying, when one is known: the refusal's
    /// own estimate for `QueueFull`, `WouldWait` and an at-once
    /// `MaxWaitExceeded`; `None` for the others.
    #[must_use]
    pub const fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::QueueFull { retry_after } | Self::WouldWait { retry_after } => *retry_after,
            Self::MaxWaitExceeded { estimated_wait, .. } => *estimated_wait,
            _ => None,
        }
    }
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::CapacityExceeded(_) => f.write_str("the request can never be granted"),
            Self::QueueFull {
                retry_after: Some(r),
            } => write!(f, "rate-limit queue full: retry after {r:?}"),
            Self::QueueFull { retry_after: None } => f.write_str("rate-limit queue full"),
            Self::Displaced => {
                f.write_str("refused from the rate-limit queue to make room for newer requests")
            }
            Self::MaxWaitExceeded {
                estimated_wait: Some(w),
                max_wait,
            } => write!(
                f,
                "estimated wait {w:?} exceeds the maximum wait {max_wait:?}"
            ),
            Self::MaxWaitExceeded {
                estimated_wait: None,
                max_wait,
            } => write!(
                f,
                "waited the maximum wait {max_wait:?} without being admitted"
            ),
            Self::DeadlineExceeded => f.write_str("rate-limit deadline exceeded"),
            Self::WouldWait {
                retry_after: Some(r),
            } => write!(f, "rate limited: retry after {r:?}"),
            Self::WouldWait { retry_after: None } => f.write_str("rate limited: no capacity now"),
            Self::Closed => f.write_str("rate-limit queue closed"),
        }
    }
}

impl core::error::Error for WaitError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Self::CapacityExceeded(e) => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::string::ToString;

    use super::*;

    #[test]
    fn every_refusal_explains_itself_and_reports_its_retry_after() {
        let ms = Duration::from_millis;
        let cases = [
            (
                WaitError::CapacityExceeded(Refusal::never(6, Snapshot::new(5, 5, ms(0)))),
                "the request can never be granted",
                None,
            ),
            (
                WaitError::QueueFull {
                    retry_after: Some(ms(300)),
                },
                "rate-limit queue full: retry after 300ms",
                Some(ms(300)),
            ),
            (
                WaitError::QueueFull { retry_after: None },
                "rate-limit queue full",
                None,
            ),
            (
                WaitError::Displaced,
                "refused from the rate-limit queue to make room for newer requests",
                None,
            ),
            (
                WaitError::MaxWaitExceeded {
                    estimated_wait: Some(ms(300)),
                    max_wait: ms(200),
                },
                "estimated wait 300ms exceeds the maximum wait 200ms",
                Some(ms(300)),
            ),
            (
                WaitError::MaxWaitExceeded {
                    estimated_wait: None,
                    max_wait: ms(200),
                },
                "waited the maximum wait 200ms without being admitted",
                None,
            ),
            (
                WaitError::DeadlineExceeded,
                "rate-limit deadline exceeded",
                None,
            ),
            (
                WaitError::WouldWait {
                    retry_after: Some(ms(100)),
                },
                "rate limited: retry after 100ms",
                Some(ms(100)),
            ),
            (
                WaitError::WouldWait { retry_after: None },
                "rate limited: no capacity now",
                None,
            ),
            (WaitError::Closed, "rate-limit queue closed", None),
        ];
        for (error, text, retry) in cases {
            assert_eq!(error.to_string(), text);
            assert_eq!(error.retry_after(), retry);
        }
        let e = WaitError::CapacityExceeded(Refusal::never(2, Snapshot::new(1, 1, ms(0))));
        assert!(core::error::Error::source(&e).is_some());
        assert!(core::error::Error::source(&WaitError::Closed).is_none());
    }
}
