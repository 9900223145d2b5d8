//! Remote backends for policies: a policy whose buckets live in a shared
//! store (Redis) instead of the layer's in-process table.

use core::fmt::Write;
use core::future::Future;
use core::net::IpAddr;
use core::pin::Pin;
use std::boxed::Box;
use std::string::String;

use super::key::{Extracted, PartitionKey, canonical};
use tollgate_core::refusal::Refusal;
use tollgate_core::snapshot::Snapshot;

/// A boxed, sendable future (what [`PolicyBackend`] returns).
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A backend's answer: the verdict, and whether the store could not be
/// asked (its failure policy answered).
pub(crate) struct BackendAnswer {
    pub(crate) result: Result<Snapshot, Refusal<'static>>,
    pub(crate) unavailable: bool,
}

/// What a [`Policy`](super::Policy) with a remote backend stores (see
/// [`Policy::backend`](super::Policy::backend)): the Redis store, boxed
/// behind this private seam so that a layer built without feature `redis`
/// carries no trace of it.
pub(crate) trait PolicyBackend: Send + Sync {
    /// Takes `n` permits of `key`.
    fn check_n<'a>(&'a self, key: &'a [u8], n: u32) -> BoxFuture<'a, BackendAnswer>;
}

#[cfg(feature = "redis")]
impl PolicyBackend for tollgate_redis::RedisStore {
    fn check_n<'a>(&'a self, key: &'a [u8], n: u32) -> BoxFuture<'a, BackendAnswer> {
        Box::pin(async move {
            match tollgate_redis::RedisStore::check_n(self, key, n).await {
                Ok(permit) => BackendAnswer {
                    result: Ok(*permit.snapshot()),
                    unavailable: permit.store_unavailable(),
                },
                Err(refusal) => BackendAnswer {
                    unavailable: matches!(
                        refusal.path(),
                        tollgate_core::keyed::KeyedPath::Fallback
                    ),
                    result: Err(refusal),
                },
            }
        })
    }
}

/// Marker put in the **response extensions** when a policy's remote
/// backend could not be asked (error or timeout) and its failure policy
/// decided instead: fail-open admitted the request, or fail-closed refused
/// it. An outer layer (logging, metrics) reads it with
/// `response.extensions().get::<StoreUnavailable>()`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreUnavailable {
    /// The name of the policy whose backend was unavailable.
    pub policy: String,
}

/// The key a policy sends to its remote backend: fixed size, and the same
/// on every replica (no per-layer secret), so that a fleet shares one
/// bucket per client:
///
/// - `global` for [`PartitionKey::Global`](super::PartitionKey::Global);
/// - `keyless` for the bucket of requests without a key
///   ([`MissingKey::SharedBucket`](super::MissingKey::SharedBucket));
/// - `ip:<address>` for an IPv4 address, `ip:<network>/<bits>` for an IPv6
///   address cut to the policy's prefix (`ip:2001:db8:1:2::/64`), and
///   `ip:<address>` for a whole IPv6 address (`/128`);
/// - `k:<32 hex digits>` for a header value or custom bytes: the first 128
///   bits of their SHA-256. A cryptographic hash, because a shared store
///   cannot use a per-process secret: without one, only a hash that
///   resists second preimages keeps a client from crafting a value whose
///   key is another client's (SipHash with a key everyone can read would
///   not).
///
/// The tags keep a header value from ever naming an address's or the
/// global bucket. At most 49 bytes, built on the stack.
pub(crate) struct BackendKey {
    buf: [u8; 56],
    len: usize,
}

impl core::fmt::Write for BackendKey {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let end = self.len.checked_add(s.len()).ok_or(core::fmt::Error)?;
        let dst = self.buf.get_mut(self.len..end).ok_or(core::fmt::Error)?;
        dst.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

impl core::fmt::Debug for BackendKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&String::from_utf8_lossy(self.as_bytes()))
    }
}

impl BackendKey {
    const fn empty() -> Self {
        Self {
            buf: [0; 56],
            len: 0,
        }
    }

    /// The text of [`global`](Self::global).
    pub(crate) const GLOBAL: &'static str = "global";

    pub(crate) fn global() -> Self {
        let mut k = Self::empty();
        let _ = k.write_str(Self::GLOBAL);
        k
    }

    /// The bucket key-less requests share: `keyless`.
    pub(crate) fn key_less() -> Self {
        let mut k = Self::empty();
        let _ = k.write_str("keyless");
        k
    }

    /// `ip` (canonical) cut to `v6_prefix` bits if IPv6.
    pub(crate) fn ip(ip: IpAddr, v6_prefix: u8) -> Self {
        let mut k = Self::empty();
        let cut = super::key::ip_prefix(ip, v6_prefix);
        // at most "ip:" + 39 + "/128": always fits
        let _ = match cut {
            IpAddr::V6(_) if v6_prefix < 128 => write!(k, "ip:{cut}/{v6_prefix}"),
            _ => write!(k, "ip:{cut}"),
        };
        k
    }

    /// `k:` and the hex of the first 16 bytes of SHA-256(`bytes`).
    pub(crate) fn bytes(bytes: &[u8]) -> Self {
        use sha2::Digest;
        let mut k = Self::empty();
        let hash = sha2::Sha256::digest(bytes);
        let _ = k.write_str("k:");
        for b in &hash[..16] {
            let _ = write!(k, "{b:02x}");
        }
        k
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or(&[])
    }
}

/// The key an extracted request key is charged to on a remote backend.
impl Extracted<'_> {
    /// The key sent to a remote backend: fixed size, the same on every
    /// replica (see [`BackendKey`]).
    pub(crate) fn backend_key(&self, v6_prefix: u8) -> BackendKey {
        match self {
            Self::Global | Self::Custom(PartitionKey::Global) => BackendKey::global(),
            Self::Ip(ip) | Self::Custom(PartitionKey::Ip(ip)) => {
                BackendKey::ip(canonical(*ip), v6_prefix)
            }
            Self::Bytes(b) => BackendKey::bytes(b),
            Self::Custom(PartitionKey::Bytes(b)) => BackendKey::bytes(b),
            Self::KeyLess => BackendKey::key_less(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(k: &BackendKey) -> &str {
        core::str::from_utf8(k.as_bytes()).unwrap()
    }

    #[test]
    fn keys_are_tagged_fixed_size_and_distinct() {
        let v4 = BackendKey::ip(IpAddr::from([192, 0, 2, 7]), 64);
        assert_eq!(text(&v4), "ip:192.0.2.7");
        assert_eq!(text(&BackendKey::global()), "global");
        let v6 = BackendKey::ip("2001:db8:1:2:3:4:5:6".parse().unwrap(), 64);
        assert_eq!(text(&v6), "ip:2001:db8:1:2::/64");
        let whole = BackendKey::ip("2001:db8:1:2:3:4:5:6".parse().unwrap(), 128);
        assert_eq!(text(&whole), "ip:2001:db8:1:2:3:4:5:6");
        let long = BackendKey::ip(
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff".parse().unwrap(),
            127,
        );
        assert!(text(&long).ends_with("/127"), "{long:?}");
        let header = BackendKey::bytes(b"ip:192.0.2.7");
        assert_eq!(header.as_bytes().len(), 34);
        assert!(text(&header).starts_with("k:"));
        assert_ne!(header.as_bytes(), v4.as_bytes());
        let huge = BackendKey::bytes(&[b'x'; 1 << 16]);
        assert_eq!(huge.as_bytes().len(), 34);
        // SHA-256("abc") starts ba7816bf8f01cfea414140de5dae2223
        assert_eq!(
            text(&BackendKey::bytes(b"abc")),
            "k:ba7816bf8f01cfea414140de5dae2223"
        );
    }
}
