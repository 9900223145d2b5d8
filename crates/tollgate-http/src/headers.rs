//! Response headers: `Retry-After` and the IETF `RateLimit-Policy` /
//! `RateLimit` fields (draft-ietf-httpapi-ratelimit-headers-11, RFC 9651
//! structured-field lists): the quota (`q`, `w`, `qu`), the available
//! quota `r` and its effective window `t`, and the partition key `pk` as a
//! keyed digest (see the [guide](crate::guide#refusals-and-headers)).

use core::fmt::{self, Write};

use bytes::Bytes;
use http::HeaderMap;
use http::header::{HeaderName, HeaderValue, RETRY_AFTER};
use std::sync::OnceLock;
use std::vec::Vec;

use super::backend::BackendKey;
use super::key::{KeyDigest, TableKey};
use super::policy::{Policy, PolicyAlgorithm, StoreAlg};
use tollgate_core::gcra::BucketKind;
use tollgate_core::limiter::Algorithm;
#[cfg(test)]
use tollgate_core::quota::Quota;
use tollgate_core::snapshot::Snapshot;
use tollgate_core::time::duration_to_nanos;

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

/// The `RateLimit-Policy` item of `policy`: `q` and `w` for a rate or a
/// window; `q` and `qu="concurrent-requests"` (no window) for an in-flight
/// limit.
pub(crate) fn policy_item(policy: &Policy) -> Option<HeaderValue> {
    let mut item = StackText::new();
    match policy.algorithm() {
        PolicyAlgorithm::TokenBucket(q) | PolicyAlgorithm::LeakyBucket(q) => {
            write_rate_item(&mut item, policy.name(), q.permits(), q.period_nanos()).ok()?;
        }
        PolicyAlgorithm::FixedWindow { limit, window }
        | PolicyAlgorithm::SlidingWindow { limit, window } => {
            write_rate_item(&mut item, policy.name(), *limit, duration_to_nanos(*window)).ok()?;
        }
        PolicyAlgorithm::Concurrency { limit } => {
            write!(
                item,
                "\"{}\";q={limit};qu=\"concurrent-requests\"",
                policy.name()
            )
            .ok()?;
        }
    }
    item.header_value()
}

/// A policy's partition key as the `pk` parameter shows it: the first 9
/// bytes of the layer's secret keyed digest (SipHash-2-4-128) of the key
/// the request was charged to, never the key itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PartitionTag([u8; 9]);

/// The key a request was charged to, for its [`PartitionTag`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum ChargedKey<'a> {
    /// A key of an in-process table.
    Table(&'a TableKey),
    /// The key sent to a remote backend (`global` is the shared one).
    Backend(&'a [u8]),
}

impl PartitionTag {
    /// The tag of `key` under `digest`; `None` for a policy's one shared
    /// bucket (a global key, or the bucket key-less requests share).
    pub(crate) fn of(digest: &KeyDigest, key: ChargedKey<'_>) -> Option<Self> {
        // a domain byte keeps the kinds of key apart (and the tag apart
        // from the table's own digest of a header key)
        let mut buf = [0u8; 64];
        let bytes: &[u8] = match key {
            ChargedKey::Table(TableKey::Global | TableKey::KeyLess) => return None,
            ChargedKey::Backend(b) if b == BackendKey::GLOBAL.as_bytes() => return None,
            ChargedKey::Table(TableKey::Ip(ip)) => tagged(&mut buf, b'i', &ip_bytes(ip))?,
            ChargedKey::Table(TableKey::Network(ip)) => tagged(&mut buf, b'n', &ip_bytes(ip))?,
            ChargedKey::Table(TableKey::Digest([a, b])) => {
                let mut words = [0u8; 16];
                words[..8].copy_from_slice(&a.to_le_bytes());
                words[8..].copy_from_slice(&b.to_le_bytes());
                tagged(&mut buf, b'k', &words)?
            }
            ChargedKey::Backend(bytes) => tagged(&mut buf, b'r', bytes)?,
        };
        let [h1, h2] = digest.digest(bytes);
        let mut tag = [0u8; 9];
        tag[..8].copy_from_slice(&h1.to_le_bytes());
        tag[8] = h2.to_le_bytes()[0];
        Some(Self(tag))
    }

    /// `:<base64>:`, an RFC 9651 byte sequence (9 bytes: 12 characters,
    /// no padding).
    fn write(&self, out: &mut StackText) -> fmt::Result {
        const ALPHABET: &[u8; 64] =
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        out.write_str(":")?;
        for chunk in self.0.chunks_exact(3) {
            let n = u32::from(chunk[0]) << 16 | u32::from(chunk[1]) << 8 | u32::from(chunk[2]);
            for shift in [18u32, 12, 6, 0] {
                let c = ALPHABET[((n >> shift) & 63) as usize];
                out.write_char(char::from(c))?;
            }
        }
        out.write_str(":")
    }
}

fn ip_bytes(ip: &std::net::IpAddr) -> [u8; 16] {
    match ip {
        std::net::IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        std::net::IpAddr::V6(v6) => v6.octets(),
    }
}

/// `domain` then `bytes` in `buf` (`None` if it does not fit).
fn tagged<'b>(buf: &'b mut [u8; 64], domain: u8, bytes: &[u8]) -> Option<&'b [u8]> {
    let end = bytes.len().checked_add(1)?;
    let out = buf.get_mut(..end)?;
    out[0] = domain;
    out[1..].copy_from_slice(bytes);
    Some(out)
}

/// A policy's service limit for a `RateLimit` item: the available quota
/// `r` and its effective window `t` in nanoseconds (`None` for an
/// in-flight limit, whose quota does not come back with time).
///
/// The promise it makes (draft-11's "effective window"): a client that
/// sends at most `r` more requests within the next `t` seconds, at any
/// pace, is not refused by this policy; `t` is also when more than `r`
/// may become available. Per algorithm, from the policy's state after
/// the request (`B` the burst, `T` the emission interval, `lead` the
/// bucket's time until full):
///
/// - token bucket: `r` = permits available at once; `t` = the time until
///   permit `r + 1` is available, `lead − (B − r − 1)·T` (in `(0, T]`),
///   `T` for a full bucket. Permits only accumulate, so `r` can be spent
///   at any pace.
/// - leaky bucket: `r` = 1 if a request would pass now, else 0 (requests
///   are paced one per `T`, however many the bucket's weight allows);
///   `t` = `T` when `r` = 1, the wait until the next admission when 0.
/// - fixed window: `r` = the window's limit minus its count; `t` = the
///   time until the window ends (the whole window for an untouched one).
/// - sliding window: `r` = the limit minus the requests counted in the
///   window; `t` = the time until every one of them has left the window
///   (the whole window if none is counted). Quota may come back sooner, as
///   older segments leave: `t` is an upper bound, never too short.
/// - in-flight limit: `r` = the permits free; no `t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ServiceLimit {
    pub(crate) r: u32,
    pub(crate) t_nanos: Option<u64>,
}

impl ServiceLimit {
    /// The service limit of a policy running `alg`, from its state `s`.
    pub(crate) fn of(alg: &StoreAlg, s: &Snapshot) -> Self {
        let reset = s.reset_after_nanos();
        let (r, t) = match alg {
            StoreAlg::Gcra(g) => {
                let interval = g.interval_nanos().max(1);
                let burst = g.capacity();
                match g.kind() {
                    BucketKind::TokenBucket => {
                        let r = s.remaining().min(burst);
                        let t = if r >= burst {
                            interval
                        } else {
                            let ahead = u64::from(burst - r - 1).saturating_mul(interval);
                            reset.saturating_sub(ahead).clamp(1, interval)
                        };
                        (r, Some(t))
                    }
                    BucketKind::LeakyBucket => {
                        let r = s.remaining().min(1);
                        (r, Some(if r == 1 { interval } else { reset.max(1) }))
                    }
                }
            }
            StoreAlg::Fixed(f) => (s.remaining(), Some(nonzero_or(reset, f.window()))),
            StoreAlg::Sliding(w) => (s.remaining(), Some(nonzero_or(reset, w.window()))),
            StoreAlg::InFlight(_) => (s.remaining(), None),
        };
        Self { r, t_nanos: t }
    }

    /// A refusal's: nothing available, for `wait` (a rate), or nothing
    /// free (an in-flight limit, whose `Retry-After` is only a hint).
    pub(crate) fn refused(alg: &StoreAlg, wait_nanos: u64) -> Self {
        let t_nanos = match alg {
            StoreAlg::InFlight(_) => None,
            _ => Some(wait_nanos),
        };
        Self { r: 0, t_nanos }
    }
}

fn nonzero_or(nanos: u64, whole: core::time::Duration) -> u64 {
    if nanos == 0 {
        duration_to_nanos(whole)
    } else {
        nanos
    }
}

/// One `RateLimit` list member: `"name";r=<available>;t=<seconds>` with
/// `;pk=:<tag>:` for a partitioned policy; `t` rounded up to whole
/// seconds (never shorter than the promise), absent for an in-flight limit.
pub(crate) fn write_state_item(
    out: &mut StackText,
    name: &str,
    limit: ServiceLimit,
    pk: Option<&PartitionTag>,
) -> fmt::Result {
    write!(out, "\"{name}\";r={}", limit.r)?;
    if let Some(t) = limit.t_nanos {
        write!(out, ";t={}", secs_ceil(t))?;
    }
    if let Some(pk) = pk {
        out.write_str(";pk=")?;
        pk.write(out)?;
    }
    Ok(())
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

    /// No value: every one is formatted when needed.
    pub(crate) const fn none() -> Self {
        Self(Vec::new())
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

    fn refused(t_nanos: u64) -> ServiceLimit {
        ServiceLimit {
            r: 0,
            t_nanos: Some(t_nanos),
        }
    }

    #[test]
    fn effective_window_of_a_token_bucket() {
        use tollgate_core::gcra::Gcra;
        // burst 5, one per 200 ms
        let g = Gcra::token_bucket(Quota::per_second(5).unwrap());
        let alg = StoreAlg::Gcra(g);
        let full = g.snapshot_for_lead(core::time::Duration::ZERO);
        assert_eq!(ServiceLimit::of(&alg, &full), limit(5, 200_000_000));
        // two spent: 3 at once, the fourth in 200 ms
        let two = g.snapshot_for_lead(core::time::Duration::from_millis(400));
        assert_eq!(ServiceLimit::of(&alg, &two), limit(3, 200_000_000));
        // 2.5 spent: 2 at once, the third in 100 ms
        let half = g.snapshot_for_lead(core::time::Duration::from_millis(500));
        assert_eq!(ServiceLimit::of(&alg, &half), limit(2, 100_000_000));
        let leaky = StoreAlg::Gcra(Gcra::leaky_bucket(Quota::per_second(5).unwrap()));
        let busy = Snapshot::from_nanos(1, 0, 150_000_000);
        assert_eq!(ServiceLimit::of(&leaky, &busy), limit(0, 150_000_000));
    }

    fn limit(r: u32, t: u64) -> ServiceLimit {
        ServiceLimit {
            r,
            t_nanos: Some(t),
        }
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
        write_state_item(&mut t, "api", refused(4_200_000_000), None).unwrap();
        assert_eq!(t.as_bytes(), b"\"api\";r=0;t=5");
        let mut t = StackText::new();
        let in_flight = ServiceLimit::refused(&StoreAlg::InFlight(3), 1);
        let tag = PartitionTag([0, 1, 2, 3, 4, 5, 6, 7, 0xff]);
        write_state_item(&mut t, "c", in_flight, Some(&tag)).unwrap();
        assert_eq!(t.as_bytes(), b"\"c\";r=0;pk=:AAECAwQFBgf/:");
        assert!(
            valid_policy_name("api/login") && !valid_policy_name("a\"b") && !valid_policy_name("")
        );
        let mut t = StackText::new();
        assert!(write!(t, "{}", "x".repeat(200)).is_err());
    }

    #[test]
    fn precomputed_values_match_formatting() {
        let p = Precomputed::build(70, |t, secs| {
            write_state_item(t, "api", refused(secs * NANOS_PER_SEC), None)
        });
        for secs in 0..=70 {
            let mut t = StackText::new();
            write_state_item(&mut t, "api", refused(secs * NANOS_PER_SEC), None).unwrap();
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
