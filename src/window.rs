//! Window limiters: at most `limit` permits per window of time.
//!
//! Both are lazily computed from their state and `now`: no timer, no
//! background task, usable in `no_std`.
//!
//! - [`FixedWindow`]: windows aligned on multiples of their length `w`
//!   (`[k·w, (k+1)·w)`); each window admits up to `limit` permits. One atomic
//!   word of state, the cheapest limiter in the crate. A client can take
//!   `limit` at the end of one window and `limit` again at the start of the
//!   next, so up to `2·limit` can pass in a span of length `w` straddling a
//!   boundary. A refusal's `retry_after` is the time to the *next window
//!   boundary*, not a whole window (the mistake .NET made in
//!   dotnet/runtime#92557).
//! - [`SlidingWindow`]: the window is split into `SEGMENTS` segments of
//!   length `w / SEGMENTS` (.NET's `SegmentsPerWindow`). A permit counts
//!   against the window until the segment it was taken in leaves the window,
//!   so any `SEGMENTS` consecutive segments admit at most `limit` permits:
//!   fairer than a fixed window, at the price of about `4·SEGMENTS + 12` bytes of
//!   state and a short critical section (see [`SlidingWindowState`]).
//!   `retry_after` is the time until enough old segments expire for the
//!   request.
//!
//! ```
//! use core::time::Duration;
//! use tollgate::{Bucket, FixedWindow, Limiter, SlidingWindow};
//!
//! let fixed = Bucket::new(FixedWindow::new(2, Duration::from_secs(1))?);
//! assert!(fixed.check(0).is_allowed());
//! assert!(fixed.check(0).is_allowed());
//! // At 0.75 s the window is spent; the next one opens at 1 s.
//! assert_eq!(fixed.check(750_000_000).retry_after(), Duration::from_millis(250));
//!
//! // 2 per second, in 4 segments of 250 ms.
//! let sliding = Bucket::new(SlidingWindow::<4>::new(2, Duration::from_secs(1))?);
//! assert!(sliding.check(0).is_allowed());
//! assert!(sliding.check(600_000_000).is_allowed());
//! // The first permit leaves the window at 1 s (when its segment expires).
//! assert_eq!(sliding.check(750_000_000).retry_after(), Duration::from_millis(250));
//! # Ok::<(), tollgate::WindowError>(())
//! ```
//!
//! # Clocks that go backwards
//!
//! Like the GCRA buckets, window limiters never admit extra when `now` goes
//! back. A caller whose `now` lies before the window the state already
//! counts in (a stale `now`, or a small backwards step) is charged against
//! that newer window, never a fresh older one. If the state's window starts
//! more than the *heal threshold* (default 1 s, `with_heal_threshold`) after
//! `now`, the clock is taken to have jumped back: the permits already counted
//! are re-dated to `now` (kept, never dropped), so service resumes as if they
//! had just been taken instead of after the jump.
//!
//! A *refund* gives permits back to `now`'s own window (for the sliding
//! window: `now`'s segment and older live ones, newest first). A refund whose
//! `now` lies before the window the state counts in (a stale caller, such as
//! a chain whose later member refused while another thread opened the next
//! window) gives nothing back from the newer window: its permits may have
//! been charged to an older window that is already over, and crediting the
//! newer one would let it admit more than `limit`. So under that race a
//! refused request can cost its permits (fail closed), never grant extra.

use core::fmt;

mod fixed;
mod sliding;

pub use fixed::{FixedWindow, FixedWindowState};
pub use sliding::{SlidingWindow, SlidingWindowState};

/// Default heal threshold of the window limiters: 1 second.
pub const DEFAULT_HEAL_THRESHOLD_NANOS: u64 = 1_000_000_000;

/// Why a window limiter could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WindowError {
    /// The limit is zero: a window that can never admit anything.
    ZeroLimit,
    /// The window length is zero.
    ZeroWindow,
    /// A sliding window with zero segments.
    ZeroSegments,
    /// The window length is not a whole number of nanoseconds per segment.
    WindowNotDivisible {
        /// Window length asked for, in nanoseconds.
        window_nanos: u64,
        /// Segments asked for.
        segments: u64,
    },
    /// A fixed window this short cannot number every window up to
    /// `u64::MAX` ns next to a count of `limit` in one 64-bit word: more than
    /// about one permit per nanosecond. Count in larger units or lengthen the
    /// window.
    WindowTooShort {
        /// Window length asked for, in nanoseconds.
        window_nanos: u64,
        /// The limit asked for.
        limit: u32,
        /// The shortest window accepted for this limit, in nanoseconds.
        min_window_nanos: u64,
    },
    /// The window (or, for a sliding window, its segment) is finer than the
    /// clock can resolve.
    BelowClockResolution {
        /// The window or segment length in nanoseconds.
        step_nanos: u64,
        /// The clock's resolution in nanoseconds.
        resolution_nanos: u64,
    },
}

impl fmt::Display for WindowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::ZeroLimit => f.write_str("window limit must be at least 1 permit"),
            Self::ZeroWindow => f.write_str("window length must be at least 1 ns"),
            Self::ZeroSegments => f.write_str("a sliding window needs at least 1 segment"),
            Self::WindowNotDivisible {
                window_nanos,
                segments,
            } => write!(
                f,
                "a window of {window_nanos} ns cannot be split into {segments} whole-nanosecond segments"
            ),
            Self::WindowTooShort {
                window_nanos,
                limit,
                min_window_nanos,
            } => write!(
                f,
                "a fixed window of {window_nanos} ns is too short for a limit of {limit} (at least {min_window_nanos} ns)"
            ),
            Self::BelowClockResolution {
                step_nanos,
                resolution_nanos,
            } => write!(
                f,
                "window step of {step_nanos} ns is finer than the clock resolution of {resolution_nanos} ns"
            ),
        }
    }
}

impl core::error::Error for WindowError {}

/// The wait from `now` until `start + len`, exact even when `start + len`
/// lies beyond `u64::MAX` (then it saturates), and at least 1 ns. `start`
/// is the start of a window or segment that has not ended at `now`.
#[inline]
const fn wait_until(start: u64, len: u64, now: u64) -> u64 {
    let wait = if start >= now {
        (start - now).saturating_add(len)
    } else {
        len.saturating_sub(now - start)
    };
    if wait == 0 {
        1
    } else {
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_display_what_is_wrong() {
        extern crate std;
        use std::string::ToString;
        assert!(WindowError::ZeroLimit.to_string().contains("limit"));
        assert!(WindowError::ZeroSegments.to_string().contains("segment"));
        let e = WindowError::WindowTooShort {
            window_nanos: 3,
            limit: 7,
            min_window_nanos: 8,
        };
        assert!(e.to_string().contains("at least 8 ns"));
    }

    #[test]
    fn wait_is_exact_past_the_end_of_time() {
        assert_eq!(wait_until(0, 10, 3), 7);
        assert_eq!(wait_until(20, 10, 3), 27);
        // a window [MAX - 1, MAX + 6) at MAX: 6 ns, though unreachable
        assert_eq!(wait_until(u64::MAX - 1, 7, u64::MAX), 6);
        assert_eq!(wait_until(u64::MAX, u64::MAX, 0), u64::MAX);
        assert_eq!(wait_until(0, 5, 9), 1);
    }
}
