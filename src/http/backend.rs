//! Remote backends for policies: a policy whose buckets live in a shared
//! store (Redis) instead of the layer's in-process table.

use core::future::Future;
use core::pin::Pin;
use std::boxed::Box;
use std::string::{String, ToString};
use std::vec::Vec;

use super::key::PartitionKey;
use crate::decision::CapacityExceeded;
use crate::remote::{AsyncKeyedLimiter, RemoteDecision};

/// A boxed, sendable future (what [`PolicyBackend`] returns).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The object-safe form of [`AsyncKeyedLimiter`] that a [`Policy`]
/// stores (see [`Policy::backend`]). Every `AsyncKeyedLimiter + Send +
/// Sync` implements it; there is no need to implement it by hand.
///
/// [`Policy`]: super::Policy
/// [`Policy::backend`]: super::Policy::backend
pub trait PolicyBackend: Send + Sync {
    /// The most permits one request can ever take.
    fn capacity(&self) -> u32;

    /// [`AsyncKeyedLimiter::check_n`], boxed.
    fn check_n<'a>(
        &'a self,
        key: &'a [u8],
        n: u32,
    ) -> BoxFuture<'a, Result<RemoteDecision, CapacityExceeded>>;

    /// [`AsyncKeyedLimiter::refund`], boxed.
    fn refund<'a>(&'a self, key: &'a [u8], n: u32) -> BoxFuture<'a, ()>;
}

impl<T: AsyncKeyedLimiter<[u8]> + Send + Sync> PolicyBackend for T {
    fn capacity(&self) -> u32 {
        AsyncKeyedLimiter::capacity(self)
    }

    fn check_n<'a>(
        &'a self,
        key: &'a [u8],
        n: u32,
    ) -> BoxFuture<'a, Result<RemoteDecision, CapacityExceeded>> {
        Box::pin(AsyncKeyedLimiter::check_n(self, key, n))
    }

    fn refund<'a>(&'a self, key: &'a [u8], n: u32) -> BoxFuture<'a, ()> {
        Box::pin(AsyncKeyedLimiter::refund(self, key, n))
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

/// The bytes a partition key is sent to a backend as: `global`,
/// `ip:<address>` or `k:<bytes>` (tagged, so that a header value can
/// never collide with an address or the global key).
pub(crate) fn key_bytes(key: &PartitionKey) -> Vec<u8> {
    let mut out = Vec::new();
    match key {
        PartitionKey::Global => out.extend_from_slice(b"global"),
        PartitionKey::Ip(ip) => {
            out.extend_from_slice(b"ip:");
            out.extend_from_slice(ip.to_string().as_bytes());
        }
        PartitionKey::Bytes(b) => {
            out.extend_from_slice(b"k:");
            out.extend_from_slice(b);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    #[test]
    fn keys_are_tagged_and_distinct() {
        let ip = PartitionKey::Ip(IpAddr::from([192, 0, 2, 7]));
        assert_eq!(key_bytes(&ip), b"ip:192.0.2.7");
        assert_eq!(key_bytes(&PartitionKey::Global), b"global");
        let header = PartitionKey::Bytes(b"ip:192.0.2.7".as_slice().into());
        assert_eq!(key_bytes(&header), b"k:ip:192.0.2.7");
        assert_ne!(key_bytes(&header), key_bytes(&ip));
    }
}
