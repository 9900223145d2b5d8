//! Partition keys: which bucket of a policy a request is charged to.

use core::fmt;
use core::net::{IpAddr, SocketAddr};
use std::boxed::Box;
use std::sync::Arc;

use http::header::{FORWARDED, HeaderName};
use http::{Extensions, HeaderMap, Method, Uri};

/// The key a request is charged to inside a policy's keyed table, as a
/// [custom key function](KeySource::custom) returns it.
///
/// Whatever a client sends, a table stores a fixed-size key: an address
/// (an IPv6 address cut to the policy's [`ipv6_prefix`], /64 by default),
/// or for bytes a 128-bit keyed digest (SipHash-2-4 under the layer's
/// secret random key), never the bytes themselves.
///
/// [`ipv6_prefix`]: crate::Policy::ipv6_prefix
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PartitionKey {
    /// One bucket shared by every request ([`KeySource::Global`]).
    Global,
    /// A client address.
    Ip(IpAddr),
    /// Opaque bytes: a header value or a custom key (stored as their
    /// digest).
    Bytes(Box<[u8]>),
}

/// A borrowed view of a request, given to custom key closures.
#[derive(Debug, Clone, Copy)]
pub struct RequestHead<'a> {
    /// The method.
    pub method: &'a Method,
    /// The URI.
    pub uri: &'a Uri,
    /// The headers.
    pub headers: &'a HeaderMap,
    /// The extensions (where servers put the peer address).
    pub extensions: &'a Extensions,
}

/// A custom key function: `None` means "no key" (the policy's
/// [`MissingKey`](crate::MissingKey) outcome applies).
pub(crate) type KeyFn = Arc<dyn Fn(&RequestHead<'_>) -> Option<PartitionKey> + Send + Sync>;

/// How a policy finds a request's partition key.
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum KeySource {
    /// No partition: one limiter for every request under the policy.
    #[default]
    Global,
    /// The TCP peer's IP address.
    PeerIp,
    /// The client's IP address behind reverse proxies: the right-most
    /// address of the forwarding chain that is not a trusted proxy; the peer
    /// address when the peer itself is not trusted (forwarding headers from
    /// untrusted peers are ignored). See
    /// [`RateLimitLayerBuilder::trusted_proxies`](crate::RateLimitLayerBuilder::trusted_proxies).
    /// The chain is read from `X-Forwarded-For: client, proxy1, proxy2`.
    ClientIp,
    /// As [`ClientIp`](Self::ClientIp), the chain read from RFC 7239
    /// `Forwarded: for=client, for="[2001:db8::1]:80"` instead.
    ForwardedClientIp,
    /// The value of a request header (an API key). A request without it has
    /// no key. The table stores the value's 128-bit keyed digest, not the
    /// value: a key costs the same memory whatever its length.
    Header(HeaderName),
    /// A custom function of the request.
    Custom(KeyFn),
}

impl fmt::Debug for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Global => f.write_str("Global"),
            Self::PeerIp => f.write_str("PeerIp"),
            Self::ClientIp => f.write_str("ClientIp"),
            Self::ForwardedClientIp => f.write_str("ForwardedClientIp"),
            Self::Header(h) => f.debug_tuple("Header").field(h).finish(),
            Self::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

impl KeySource {
    /// A custom key function.
    pub fn custom<F>(f: F) -> Self
    where
        F: Fn(&RequestHead<'_>) -> Option<PartitionKey> + Send + Sync + 'static,
    {
        Self::Custom(Arc::new(f))
    }
}

/// Which forwarding header carries the client chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2`.
    XForwardedFor,
    /// RFC 7239 `Forwarded: for=client, for="[2001:db8::1]:80"`.
    Forwarded,
}

/// Reads the peer address from a request's extensions. The default reads a
/// [`SocketAddr`] extension; for axum's `ConnectInfo` pass
/// `|ext| ext.get::<ConnectInfo<SocketAddr>>().map(|c| c.0)`.
pub(crate) type PeerAddrFn = fn(&Extensions) -> Option<SocketAddr>;

pub(crate) fn socket_addr_extension(ext: &Extensions) -> Option<SocketAddr> {
    ext.get::<SocketAddr>().copied()
}

/// An IP network of trusted proxies: the [`ipnet`] crate's type
/// (`"10.0.0.0/8".parse()`, `"::1/128".parse()`). Config files also accept
/// a bare address (`"10.0.0.7"`, a /32 or /128).
pub use ipnet::IpNet;

/// `net` with an IPv4-mapped IPv6 network (`::ffff:10.0.0.0/104`) turned
/// into its IPv4 network, as addresses are compared as IPv4.
pub(crate) fn canonical_net(net: IpNet) -> IpNet {
    if let IpNet::V6(v6) = net
        && let (Some(v4), Some(len)) = (
            v6.network().to_ipv4_mapped(),
            v6.prefix_len().checked_sub(96),
        )
        && let Ok(n) = ipnet::Ipv4Net::new(v4, len)
    {
        return IpNet::V4(n);
    }
    net
}

/// Parses a trusted-proxy entry of a config file: a network
/// (`10.0.0.0/8`) or a single address (`10.0.0.7`).
#[cfg(any(feature = "config", test))]
pub(crate) fn parse_net(s: &str) -> Option<IpNet> {
    s.parse::<IpNet>()
        .ok()
        .or_else(|| s.parse::<IpAddr>().ok().map(IpNet::from))
}

/// True when `ip` lies in one of `nets` (IPv4-mapped IPv6 addresses are
/// compared as IPv4; `nets` are canonical).
fn trusted_by(nets: &[IpNet], ip: IpAddr) -> bool {
    nets.iter().any(|n| n.contains(&ip))
}

/// Why a key could not be extracted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyError {
    /// No peer address in the extensions: a server misconfiguration.
    NoPeerAddr,
    /// The key header is absent.
    NoHeader,
    /// The custom function returned `None`.
    CustomNone,
}

impl KeyError {
    /// The reason, as the `tracing` event names it.
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::NoPeerAddr => "no peer address in the request extensions",
            Self::NoHeader => "the key header is absent",
            Self::CustomNone => "the custom key function returned no key",
        }
    }
}

/// A request's key as extracted, borrowing the request: a header key is
/// its value's bytes in the request (nothing copied).
#[derive(Debug)]
pub(crate) enum Extracted<'a> {
    /// One bucket for everyone.
    Global,
    /// A client address (canonical: IPv4-mapped IPv6 as IPv4).
    Ip(IpAddr),
    /// A header value.
    Bytes(&'a [u8]),
    /// What a custom function returned.
    Custom(PartitionKey),
    /// No key: the shared bucket of [`MissingKey::SharedBucket`](crate::MissingKey::SharedBucket).
    KeyLess,
}

impl Extracted<'_> {
    /// The fixed-size key of a policy's in-process table: an address
    /// (IPv6 cut to `v6_prefix` bits), or the layer's keyed digest of the
    /// bytes. Allocation-free.
    pub(crate) fn table_key(&self, digest: &KeyDigest, v6_prefix: u8) -> TableKey {
        match self {
            Self::Global | Self::Custom(PartitionKey::Global) => TableKey::Global,
            Self::Ip(ip) | Self::Custom(PartitionKey::Ip(ip)) => {
                TableKey::Ip(ip_prefix(canonical(*ip), v6_prefix))
            }
            Self::Bytes(b) => TableKey::Digest(digest.digest(b)),
            Self::Custom(PartitionKey::Bytes(b)) => TableKey::Digest(digest.digest(b)),
            Self::KeyLess => TableKey::KeyLess,
        }
    }
}

/// The key of a policy's in-process table: fixed size (at most 17 bytes
/// of payload) whatever the client sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum TableKey {
    /// [`PartitionKey::Global`].
    Global,
    /// An address; an IPv6 address cut to the policy's prefix.
    Ip(IpAddr),
    /// The layer's 128-bit keyed digest of a header value or custom key.
    Digest([u64; 2]),
    /// The bucket key-less requests share ([`Extracted::KeyLess`]).
    KeyLess,
    /// A network's overflow bucket (see [`network_key`]).
    Network(IpAddr),
}

/// The layer's keyed digest of header and custom keys: **SipHash-2-4 with
/// a 128-bit output** under a secret 128-bit key drawn from the operating
/// system's randomness when the layer is built (kept across reloads, so a
/// reloaded rule keeps its keys).
///
/// Why: a table stores this digest instead of the client's bytes, so a key
/// costs the same memory whatever its length. The digest *is* the key's
/// identity (two values with one digest share a bucket), so it must resist
/// collisions chosen by a client: SipHash is a keyed pseudorandom function,
/// and without the secret key a client cannot find two values with the
/// same digest (nor one matching another client's) better than by chance;
/// with 128 bits, chance is about n²/2¹²⁹ (10¹² keys: 10⁻¹⁵). SipHash-2-4
/// rather than 1-3: the authors' full-strength variant, as this digest is
/// an identity and not merely a hash-table slot; it hashes a 4 KiB header
/// in about 2 µs, less than the HTTP parsing of it.
#[derive(Clone)]
pub(crate) struct KeyDigest {
    k0: u64,
    k1: u64,
}

impl fmt::Debug for KeyDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeyDigest { .. }") // the key is a secret
    }
}

impl KeyDigest {
    /// A fresh secret key from the operating system's randomness (through
    /// `std`'s `RandomState`, which is seeded from it).
    pub(crate) fn random() -> Self {
        use std::hash::BuildHasher;
        let state = std::collections::hash_map::RandomState::new();
        Self::with_keys(
            state.hash_one(0x243f_6a88_85a3_08d3_u64),
            state.hash_one(0x1319_8a2e_0370_7344_u64),
        )
    }

    /// A fixed key (fuzzing and tests).
    pub(crate) const fn with_keys(k0: u64, k1: u64) -> Self {
        Self { k0, k1 }
    }

    /// SipHash-2-4-128 of `bytes`; allocation-free.
    pub(crate) fn digest(&self, bytes: &[u8]) -> [u64; 2] {
        use core::hash::Hasher;
        use siphasher::sip128::{Hasher128, SipHasher24};
        let mut h = SipHasher24::new_with_keys(self.k0, self.k1);
        h.write(bytes);
        let h = h.finish128();
        // two words rather than a u128: a table key (and the lease that
        // holds it) stays 8-byte aligned, so it is smaller and cheaper to move
        [h.h1, h.h2]
    }
}

/// The default [`Policy::ipv6_prefix`](super::Policy::ipv6_prefix): one
/// key per /64, the smallest network a client is usually given (RFC 6177).
pub const DEFAULT_IPV6_PREFIX: u8 = 64;

/// `ip` with an IPv6 address cut to its first `v6_prefix` bits (an IPv4
/// address is kept whole).
pub(crate) fn ip_prefix(ip: IpAddr, v6_prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V6(v6) if v6_prefix < 128 => {
            let mask = u128::MAX
                .checked_shl(128 - u32::from(v6_prefix))
                .unwrap_or(0);
            IpAddr::V6((u128::from(v6) & mask).into())
        }
        ip => ip,
    }
}

pub(crate) fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

pub(crate) fn extract<'a>(
    source: &KeySource,
    head: &RequestHead<'a>,
    peer: PeerAddrFn,
    trusted: &[IpNet],
) -> Result<Extracted<'a>, KeyError> {
    match source {
        KeySource::Global => Ok(Extracted::Global),
        KeySource::PeerIp => peer(head.extensions)
            .map(|a| Extracted::Ip(canonical(a.ip())))
            .ok_or(KeyError::NoPeerAddr),
        KeySource::ClientIp | KeySource::ForwardedClientIp => {
            client_address(source, head, peer, trusted)
                .map(Extracted::Ip)
                .ok_or(KeyError::NoPeerAddr)
        }
        KeySource::Header(name) => head
            .headers
            .get(name)
            .map(|v| Extracted::Bytes(v.as_bytes()))
            .ok_or(KeyError::NoHeader),
        KeySource::Custom(f) => f(head).map(Extracted::Custom).ok_or(KeyError::CustomNone),
    }
}

/// The network of IPv4 address bits an overflowing key is charged to
/// ([`Policy::overflow_networks`](crate::Policy::overflow_networks)).
pub(crate) const OVERFLOW_IPV4_BITS: u32 = 24;
/// The network of IPv6 address bits an overflowing key is charged to.
pub(crate) const OVERFLOW_IPV6_BITS: u32 = 48;

/// The overflow table's key of `ip`'s network: its /24 (IPv4) or /48
/// (IPv6), tagged apart from any address key.
pub(crate) fn network_key(ip: IpAddr) -> TableKey {
    TableKey::Network(match canonical(ip) {
        IpAddr::V4(v4) => {
            IpAddr::V4((u32::from(v4) & (u32::MAX << (32 - OVERFLOW_IPV4_BITS))).into())
        }
        IpAddr::V6(v6) => {
            IpAddr::V6((u128::from(v6) & (u128::MAX << (128 - OVERFLOW_IPV6_BITS))).into())
        }
    })
}

/// The client's address as [`KeySource::ClientIp`] finds it (from
/// `Forwarded` for a [`KeySource::ForwardedClientIp`] policy, from
/// `X-Forwarded-For` for any other): the key of those two sources, and
/// what a request without a key is charged to under
/// [`MissingKey::ClientIp`](crate::MissingKey::ClientIp); `None` without a
/// peer address.
pub(crate) fn client_address(
    source: &KeySource,
    head: &RequestHead<'_>,
    peer: PeerAddrFn,
    trusted: &[IpNet],
) -> Option<IpAddr> {
    let which = match source {
        KeySource::ForwardedClientIp => ForwardedHeader::Forwarded,
        _ => ForwardedHeader::XForwardedFor,
    };
    let peer = peer(head.extensions)?;
    Some(client_ip(
        canonical(peer.ip()),
        head.headers,
        which,
        trusted,
    ))
}

/// The right-most untrusted address of the chain `header entries…, peer`.
/// Walks from the peer leftwards while the current hop is trusted; the first
/// untrusted hop is the client. An unparsable entry stops the walk at the
/// trusted hop that reported it (never bypass: the request is charged to that
/// proxy's address, not to a name the client chose). A chain of only trusted
/// hops yields its left-most address.
pub(crate) fn client_ip(
    peer: IpAddr,
    headers: &HeaderMap,
    which: ForwardedHeader,
    trusted: &[IpNet],
) -> IpAddr {
    let is_trusted = |ip: IpAddr| trusted_by(trusted, ip);
    if !is_trusted(peer) {
        return peer;
    }
    let name = match which {
        ForwardedHeader::XForwardedFor => HeaderName::from_static("x-forwarded-for"),
        ForwardedHeader::Forwarded => FORWARDED,
    };
    // Header instances in order, entries left to right; walk right to left.
    let mut current = peer;
    for value in headers.get_all(&name).iter().rev() {
        let Ok(text) = core::str::from_utf8(value.as_bytes()) else {
            return current;
        };
        for entry in text.rsplit(',') {
            let parsed = match which {
                ForwardedHeader::XForwardedFor => parse_xff_entry(entry),
                ForwardedHeader::Forwarded => parse_forwarded_element(entry),
            };
            let Some(ip) = parsed else { return current };
            current = canonical(ip);
            if !is_trusted(current) {
                return current;
            }
        }
    }
    current
}

fn parse_xff_entry(entry: &str) -> Option<IpAddr> {
    parse_node(entry.trim())
}

/// An address as it appears in a forwarding header: `1.2.3.4`,
/// `1.2.3.4:80`, `2001:db8::1`, `[2001:db8::1]`, `[2001:db8::1]:80`.
fn parse_node(s: &str) -> Option<IpAddr> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Ok(sa) = s.parse::<SocketAddr>() {
        return Some(sa.ip());
    }
    let inner = s.strip_prefix('[')?.strip_suffix(']')?;
    inner.parse::<core::net::Ipv6Addr>().ok().map(IpAddr::V6)
}

/// The `for=` node of one RFC 7239 element (`for=1.2.3.4;proto=https`).
/// Obfuscated (`_x`) and `unknown` nodes are not addresses: `None`.
fn parse_forwarded_element(element: &str) -> Option<IpAddr> {
    let mut found = None;
    for pair in element.split(';') {
        let (k, v) = pair.split_once('=')?;
        if k.trim().eq_ignore_ascii_case("for") {
            if found.is_some() {
                return None;
            }
            let v = v.trim();
            let v = match v.strip_prefix('"') {
                Some(rest) => rest.strip_suffix('"')?,
                None => v,
            };
            found = Some(parse_node(v)?);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use std::vec::Vec;

    #[test]
    fn a_table_key_is_fixed_size() {
        // the bound the `http` module docs state; 8-byte aligned (a u128
        // digest made it 16, and every lease that holds a key larger)
        assert!(core::mem::size_of::<TableKey>() <= 24);
        assert_eq!(core::mem::align_of::<TableKey>(), 8);
    }

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn trusted_nets() {
        assert_eq!(parse_net("10.0.0.7"), Some("10.0.0.7/32".parse().unwrap()));
        assert_eq!(parse_net("10.0.0.0/33"), None);
        assert_eq!(parse_net("nope"), None);
        let mapped = canonical_net("::ffff:10.0.0.0/104".parse().unwrap());
        assert_eq!(mapped, "10.0.0.0/8".parse().unwrap());
        let nets = [mapped];
        assert!(trusted_by(&nets, canonical(ip("::ffff:10.1.2.3"))));
        assert!(!trusted_by(&nets, ip("11.0.0.1")));
    }

    #[test]
    fn networks_are_a_slash_24_and_a_slash_48() {
        assert_eq!(
            network_key(ip("192.0.2.7")),
            TableKey::Network(ip("192.0.2.0"))
        );
        assert_eq!(
            network_key(ip("::ffff:192.0.2.7")),
            TableKey::Network(ip("192.0.2.0"))
        );
        assert_eq!(
            network_key(ip("2001:db8:1:2:3:4:5:6")),
            TableKey::Network(ip("2001:db8:1::"))
        );
        assert_ne!(network_key(ip("192.0.2.7")), TableKey::Ip(ip("192.0.2.0")));
        assert_ne!(network_key(ip("192.0.2.7")), network_key(ip("192.0.3.7")));
    }

    #[test]
    fn ipv6_keys_are_cut_to_the_prefix() {
        assert_eq!(
            ip_prefix(ip("2001:db8:1:2:3:4:5:6"), 64),
            ip("2001:db8:1:2::")
        );
        assert_eq!(
            ip_prefix(ip("2001:db8:1:2:3:4:5:6"), 128),
            ip("2001:db8:1:2:3:4:5:6")
        );
        assert_eq!(ip_prefix(ip("2001:db8:1:2:3:4:5:6"), 1), ip("::"));
        assert_eq!(ip_prefix(ip("192.0.2.7"), 1), ip("192.0.2.7"));
    }

    #[test]
    fn digests_are_keyed() {
        let a = KeyDigest::with_keys(1, 2);
        assert_eq!(a.digest(b"k"), KeyDigest::with_keys(1, 2).digest(b"k"));
        assert_ne!(a.digest(b"k"), KeyDigest::with_keys(3, 4).digest(b"k"));
        assert_ne!(a.digest(b"k"), a.digest(b"k2"));
        assert_ne!(
            KeyDigest::random().digest(b"k"),
            KeyDigest::random().digest(b"k")
        );
    }

    #[test]
    fn right_most_untrusted_xff() {
        let trusted = nets(&["10.0.0.0/8"]);
        let mut h = HeaderMap::new();
        h.append(
            "x-forwarded-for",
            HeaderValue::from_static("6.6.6.6, 1.2.3.4"),
        );
        h.append("x-forwarded-for", HeaderValue::from_static("10.0.0.7"));
        let got = client_ip(ip("10.0.0.1"), &h, ForwardedHeader::XForwardedFor, &trusted);
        assert_eq!(got, ip("1.2.3.4"));
        // untrusted peer: header ignored
        let got = client_ip(ip("5.5.5.5"), &h, ForwardedHeader::XForwardedFor, &trusted);
        assert_eq!(got, ip("5.5.5.5"));
        // garbage stops at the reporting proxy
        let mut bad = HeaderMap::new();
        bad.append(
            "x-forwarded-for",
            HeaderValue::from_static("1.2.3.4, garbage"),
        );
        let got = client_ip(
            ip("10.0.0.1"),
            &bad,
            ForwardedHeader::XForwardedFor,
            &trusted,
        );
        assert_eq!(got, ip("10.0.0.1"));
    }

    #[test]
    fn forwarded_header() {
        let trusted = nets(&["10.0.0.0/8"]);
        let mut h = HeaderMap::new();
        h.append(
            FORWARDED,
            HeaderValue::from_static("for=9.9.9.9, for=\"[2001:db8::1]:443\";proto=https"),
        );
        let got = client_ip(ip("10.0.0.1"), &h, ForwardedHeader::Forwarded, &trusted);
        assert_eq!(got, ip("2001:db8::1"));
        let mut h = HeaderMap::new();
        h.append(FORWARDED, HeaderValue::from_static("for=_hidden"));
        let got = client_ip(ip("10.0.0.1"), &h, ForwardedHeader::Forwarded, &trusted);
        assert_eq!(got, ip("10.0.0.1"));
    }
}
