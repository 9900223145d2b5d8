//! Response headers: `Retry-After` and the IETF `RateLimit-Policy` /
//! `RateLimit` fields (draft-ietf-httpapi-ratelimit-headers, structured
//! field lists).

use core::fmt::{self, Write};

use bytes::Bytes;
use http::HeaderMap;
use http::header::{HeaderName, HeaderValue, RETRY_AFTER};
use std::sync::OnceLock;
use std::vec::Vec;

use super::policy::{Policy, PolicyAlgorithm};
#[cfg(test)]
use tollgate_core::quota::Quota;

/// `RateLimit-Policy`.
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit`.
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

const NANOS_PER_SEC: u64 = 1_000_000_000;

/// Whole seconds rounded up: a positive wait is never `0`.
pub(crate) const fn secs_ceil(nanos: u64) -> u64 {
    nanos / NANOS_PER_SEC + !nanos.is_multiple_of(NANOS_PER_SEC) as u64
}

/// A fixed-size text buffer on the stack, so that building a header value
/// needs no `String`.
pub(crate) struct StackText {
    buf: [u8; 160],
    len: usize,
}

impl StackText {
    pub(crate) const fn new() -> Self {
        Self {
            buf: [0; 160],
            len: 0,
        }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// The header value (`None` if it overflowed or holds a byte a header
    /// cannot carry, which policy-name validation rules out).
    pub(crate) fn header_value(&self) -> Option<HeaderValue> {
        HeaderValue::from_bytes(self.as_bytes()).ok()
    }
}

impl Write for StackText {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len.checked_add(s.len()).ok_or(fmt::Error)?;
        let dst = self.buf.get_mut(self.len..end).ok_or(fmt::Error)?;
        dst.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// A policy name usable as a structured-field string: 1 to 64 characters
/// from `A-Z a-z 0-9 - _ . : /`.
pub(crate) fn valid_policy_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':' | b'/'))
}

/// One `RateLimit-Policy` list member: `"name";q=<permits>;w=<seconds>`:
/// the window is the quota's period rounded up to whole seconds (at least
/// 1), and `q` the permits the rate grants in that window, rounded down
/// (`100 per minute` → `q=100;w=60`; `1 per 300 ms` → `q=3;w=1`).
#[cfg(test)]
pub(crate) fn write_policy_item(out: &mut StackText, name: &str, quota: &Quota) -> fmt::Result {
    write_rate_item(out, name, quota.permits(), quota.period_nanos())
}

/// [`write_policy_item`] for `permits` per `period_nanos` (a quota, or a
/// window's limit and length: a whole-second window reports
/// `q=limit;w=window`).
pub(crate) fn write_rate_item(
    out: &mut StackText,
    name: &str,
    permits: u32,
    period_nanos: u64,
) -> fmt::Result {
    let period = period_nanos.max(1);
    let w = secs_ceil(period).max(1);
    let q = u128::from(permits) * u128::from(w) * u128::from(NANOS_PER_SEC) / u128::from(period);
    let q = u64::try_from(q).unwrap_or(u64::MAX);
    write!(out, "\"{name}\";q={q};w={w}")
}

/// The `RateLimit-Policy` item of `policy` (`None` for an in-flight
/// limit, which has no quota over time).
pub(crate) fn policy_item(policy: &Policy) -> Option<HeaderValue> {
    let (permits, period) = match policy.algorithm() {
        PolicyAlgorithm::TokenBucket(q) | PolicyAlgorithm::LeakyBucket(q) => {
            (q.permits(), q.period_nanos())
        }
        PolicyAlgorithm::FixedWindow { limit, window }
        | PolicyAlgorithm::SlidingWindow { limit, window } => {
            (*limit, tollgate_core::time::duration_to_nanos(*window))
        }
        _ => return None,
    };
    let mut item = StackText::new();
    write_rate_item(&mut item, policy.name(), permits, period).ok()?;
    item.header_value()
}

/// One `RateLimit` list member: `"name";r=<remaining>;t=<seconds>`.
pub(crate) fn write_state_item(
    out: &mut StackText,
    name: &str,
    remaining: u32,
    reset_nanos: u64,
) -> fmt::Result {
    write!(out, "\"{name}\";r={remaining};t={}", secs_ceil(reset_nanos))
}

/// Header values for every whole number of seconds from 0 to a bound,
/// written once into one shared buffer: cloning one is a reference count
/// increment, so a refusal formats and copies nothing.
pub(crate) struct Precomputed(Vec<HeaderValue>);

impl Precomputed {
    /// The values `write` gives for 0 to `last` seconds (none if one fails).
    pub(crate) fn build(last: u64, write: impl Fn(&mut StackText, u64) -> fmt::Result) -> Self {
        let mut text = Vec::new();
        let mut ends = Vec::new();
        for secs in 0..=last {
            let mut t = StackText::new();
            if write(&mut t, secs).is_err() {
                return Self(Vec::new());
            }
            text.extend_from_slice(t.as_bytes());
            ends.push(text.len());
        }
        let all = Bytes::from(text);
        let mut start = 0;
        let mut values = Vec::with_capacity(ends.len());
        for end in ends {
            match HeaderValue::from_maybe_shared(all.slice(start..end)) {
                Ok(v) => values.push(v),
                Err(_) => return Self(Vec::new()),
            }
            start = end;
        }
        Self(values)
    }

    /// The value for `secs`, if precomputed.
    #[inline]
    pub(crate) fn get(&self, secs: u64) -> Option<HeaderValue> {
        self.0.get(usize::try_from(secs).ok()?).cloned()
    }
}

/// Seconds of `Retry-After` precomputed (ten minutes).
const RETRY_AFTER_PRECOMPUTED: u64 = 600;

/// Sets `Retry-After` (seconds, rounded up, at least 1 for a positive wait).
pub(crate) fn set_retry_after(headers: &mut HeaderMap, retry_after_nanos: u64) {
    static VALUES: OnceLock<Precomputed> = OnceLock::new();
    let secs = secs_ceil(retry_after_nanos);
    let values = VALUES
        .get_or_init(|| Precomputed::build(RETRY_AFTER_PRECOMPUTED, |t, secs| write!(t, "{secs}")));
    if let Some(v) = values.get(secs) {
        headers.insert(RETRY_AFTER, v);
        return;
    }
    let mut t = StackText::new();
    if write!(t, "{secs}").is_ok()
        && let Some(v) = t.header_value()
    {
        headers.insert(RETRY_AFTER, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_up() {
        assert_eq!(secs_ceil(0), 0);
        assert_eq!(secs_ceil(1), 1);
        assert_eq!(secs_ceil(300_000_000), 1);
        assert_eq!(secs_ceil(1_000_000_000), 1);
        assert_eq!(secs_ceil(1_000_000_001), 2);
        assert_eq!(secs_ceil(u64::MAX), u64::MAX / NANOS_PER_SEC + 1);
    }

    #[test]
    fn items() {
        let q = Quota::per_minute(100).unwrap();
        let mut t = StackText::new();
        write_policy_item(&mut t, "api", &q).unwrap();
        assert_eq!(t.as_bytes(), b"\"api\";q=100;w=60");
        let fast = Quota::new(1, core::time::Duration::from_millis(300)).unwrap();
        let mut t = StackText::new();
        write_policy_item(&mut t, "f", &fast).unwrap();
        assert_eq!(t.as_bytes(), b"\"f\";q=3;w=1");
        let odd = Quota::new(3, core::time::Duration::from_millis(1500)).unwrap();
        let mut t = StackText::new();
        write_policy_item(&mut t, "o", &odd).unwrap();
        assert_eq!(t.as_bytes(), b"\"o\";q=4;w=2");
        let mut t = StackText::new();
        write_state_item(&mut t, "api", 0, 4_200_000_000).unwrap();
        assert_eq!(t.as_bytes(), b"\"api\";r=0;t=5");
        assert!(
            valid_policy_name("api/login") && !valid_policy_name("a\"b") && !valid_policy_name("")
        );
        let mut t = StackText::new();
        assert!(write!(t, "{}", "x".repeat(200)).is_err());
    }

    #[test]
    fn precomputed_values_match_formatting() {
        let p = Precomputed::build(70, |t, secs| {
            write_state_item(t, "api", 0, secs * NANOS_PER_SEC)
        });
        for secs in 0..=70 {
            let mut t = StackText::new();
            write_state_item(&mut t, "api", 0, secs * NANOS_PER_SEC).unwrap();
            assert_eq!(p.get(secs).unwrap().as_bytes(), t.as_bytes(), "{secs}");
        }
        assert!(p.get(71).is_none());
        let mut map = HeaderMap::new();
        for (nanos, want) in [
            (1, "1"),
            (300_000_000, "1"),
            (61_000_000_000, "61"),
            (700_000_000_000, "700"),
        ] {
            set_retry_after(&mut map, nanos);
            assert_eq!(map[RETRY_AFTER], want);
        }
    }
}
