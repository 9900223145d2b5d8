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
//! use tollgate::{Bucket, FixedWindow, SlidingWindow, Timestamp};
//!
//! let ms = Timestamp::from_millis;
//! let fixed = Bucket::new(FixedWindow::new(2, Duration::from_secs(1))?);
//! assert!(fixed.check(ms(0)).is_ok());
//! assert!(fixed.check(ms(0)).is_ok());
//! // At 0.75 s the window is spent; the next one opens at 1 s.
//! assert_eq!(fixed.check(ms(750)).unwrap_err().retry_after(), Duration::from_millis(250));
//!
//! // 2 per second, in 4 segments of 250 ms.
//! let sliding = Bucket::new(SlidingWindow::<4>::new(2, Duration::from_secs(1))?);
//! assert!(sliding.check(ms(0)).is_ok());
//! assert!(sliding.check(ms(600)).is_ok());
//! // The first permit leaves the window at 1 s (when its segment expires).
//! assert_eq!(sliding.check(ms(750)).unwrap_err().retry_after(), Duration::from_millis(250));
//! # Ok::<(), tollgate::ConfigError>(())
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

mod fixed;
mod sliding;

pub use fixed::{FixedWindow, FixedWindowState};
pub use sliding::{SlidingWindow, SlidingWindowState};

/// Default heal threshold of the window limiters: 1 second.
pub const DEFAULT_HEAL_THRESHOLD: core::time::Duration = core::time::Duration::from_secs(1);
const DEFAULT_HEAL_THRESHOLD_NANOS: u64 = 1_000_000_000;

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
    if wait == 0 { 1 } else { wait }
}

#[cfg(test)]
mod tests {
    use super::*;

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
