//! Partition keys: which bucket of a policy a request is charged to.

use core::fmt;
use core::net::{IpAddr, SocketAddr};
use std::boxed::Box;
use std::sync::Arc;

use http::header::{HeaderName, FORWARDED};
use http::{Extensions, HeaderMap, Method, Uri};

/// The key a request is charged to inside a policy's keyed table.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PartitionKey {
    /// One bucket shared by every request ([`KeySource::Global`]).
    Global,
    /// A client address.
    Ip(IpAddr),
    /// Opaque bytes: a header value or a custom key.
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
/// [`MissingKey`](crate::http::MissingKey) outcome applies).
pub type KeyFn = Arc<dyn Fn(&RequestHead<'_>) -> Option<PartitionKey> + Send + Sync>;

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
    /// [`RateLimitLayerBuilder::trusted_proxies`](crate::http::RateLimitLayerBuilder::trusted_proxies).
    ClientIp(ForwardedHeader),
    /// The value of a request header (an API key). A request without it has
    /// no key.
    Header(HeaderName),
    /// A custom function of the request.
    Custom(KeyFn),
}

impl fmt::Debug for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Global => f.write_str("Global"),
            Self::PeerIp => f.write_str("PeerIp"),
            Self::ClientIp(h) => f.debug_tuple("ClientIp").field(h).finish(),
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2` (the default).
    #[default]
    XForwardedFor,
    /// RFC 7239 `Forwarded: for=client, for="[2001:db8::1]:80"`.
    Forwarded,
}

/// Reads the peer address from a request's extensions. The default reads a
/// [`SocketAddr`] extension; for axum's `ConnectInfo` pass
/// `|ext| ext.get::<ConnectInfo<SocketAddr>>().map(|c| c.0)`.
pub type PeerAddrFn = fn(&Extensions) -> Option<SocketAddr>;

pub(crate) fn socket_addr_extension(ext: &Extensions) -> Option<SocketAddr> {
    ext.get::<SocketAddr>().copied()
}

/// An IP network (`10.0.0.0/8`, `::1/128`, or a single address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpNet {
    addr: IpAddr,
    prefix: u8,
}

/// A malformed [`IpNet`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum IpNetError {
    /// The address part is not an IP address.
    Address,
    /// The prefix length is not a number within the address size.
    PrefixLength,
}

impl fmt::Display for IpNetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Address => "not an IP address",
            Self::PrefixLength => "prefix length out of range",
        })
    }
}

impl core::error::Error for IpNetError {}

impl core::str::FromStr for IpNet {
    type Err = IpNetError;
    fn from_str(s: &str) -> Result<Self, IpNetError> {
        let (a, p) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = a.trim().parse().map_err(|_| IpNetError::Address)?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            Some(p) => p
                .trim()
                .parse::<u8>()
                .map_err(|_| IpNetError::PrefixLength)?,
            None => max,
        };
        if prefix > max {
            return Err(IpNetError::PrefixLength);
        }
        Ok(Self { addr, prefix })
    }
}

impl IpNet {
    /// True when `ip` lies in this network (IPv4-mapped IPv6 addresses are
    /// compared as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(n) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(n) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
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
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::NoPeerAddr => "no peer address in the request extensions",
            Self::NoHeader => "the key header is absent",
            Self::CustomNone => "the custom key function returned no key",
        }
    }
}

pub(crate) fn extract(
    source: &KeySource,
    head: &RequestHead<'_>,
    peer: PeerAddrFn,
    trusted: &[IpNet],
) -> Result<PartitionKey, KeyError> {
    match source {
        KeySource::Global => Ok(PartitionKey::Global),
        KeySource::PeerIp => peer(head.extensions)
            .map(|a| PartitionKey::Ip(canonical(a.ip())))
            .ok_or(KeyError::NoPeerAddr),
        KeySource::ClientIp(which) => {
            let peer = peer(head.extensions).ok_or(KeyError::NoPeerAddr)?;
            Ok(PartitionKey::Ip(client_ip(
                canonical(peer.ip()),
                head.headers,
                *which,
                trusted,
            )))
        }
        KeySource::Header(name) => head
            .headers
            .get(name)
            .map(|v| PartitionKey::Bytes(v.as_bytes().into()))
            .ok_or(KeyError::NoHeader),
        KeySource::Custom(f) => f(head).ok_or(KeyError::CustomNone),
    }
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
    let is_trusted = |ip: IpAddr| trusted.iter().any(|n| n.contains(ip));
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

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn ipnet_contains() {
        let n: IpNet = "10.0.0.0/8".parse().unwrap();
        assert!(n.contains(ip("10.255.0.1")) && !n.contains(ip("11.0.0.1")));
        assert!(n.contains(ip("::ffff:10.1.2.3")));
        let all: IpNet = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("1.2.3.4")));
        assert_eq!(
            "10.0.0.0/33".parse::<IpNet>(),
            Err(IpNetError::PrefixLength)
        );
        assert_eq!("nope".parse::<IpNet>(), Err(IpNetError::Address));
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
