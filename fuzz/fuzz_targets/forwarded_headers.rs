//! Client-IP extraction behind trusted proxies: any peer, any trusted
//! networks, any `X-Forwarded-For` / `Forwarded` header values (bytes,
//! several instances). Never panics, and the answer is the chain's
//! right-most untrusted hop: the peer when it is not trusted, else an
//! address the headers name (or the peer), never one a trusted proxy
//! holds unless every hop is trusted.
#![no_main]

use std::net::IpAddr;

use arbitrary::Arbitrary;
use http::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;
use tollgate_http::fuzzing;

#[derive(Debug, Arbitrary)]
struct Input {
    peer: IpAddr,
    forwarded: bool,
    trusted: Vec<(IpAddr, u8)>,
    trusted_text: Vec<String>,
    values: Vec<Vec<u8>>,
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fuzz_target!(|input: Input| {
    let mut trusted = Vec::new();
    for (addr, len) in input.trusted.iter().take(8) {
        if let Ok(net) = tollgate::http::IpNet::new(*addr, *len) {
            trusted.push(net);
        }
    }
    for text in input.trusted_text.iter().take(4) {
        if let Some(net) = fuzzing::parse_net(text) {
            trusted.push(net);
        }
    }
    let name = if input.forwarded {
        HeaderName::from_static("forwarded")
    } else {
        HeaderName::from_static("x-forwarded-for")
    };
    let mut headers = HeaderMap::new();
    let mut text = String::new();
    for v in input.values.iter().take(8) {
        if let Ok(value) = HeaderValue::from_bytes(v) {
            text.push_str(&String::from_utf8_lossy(v));
            text.push(',');
            headers.append(name.clone(), value);
        }
    }
    let got = fuzzing::client_ip(input.peer, &headers, input.forwarded, &trusted);
    let peer = canonical(input.peer);
    let is_trusted = |ip: IpAddr| {
        let ip = canonical(ip);
        trusted.iter().any(|n| {
            // the layer compares IPv4-mapped networks as IPv4
            n.contains(&ip)
                || matches!(n, tollgate::http::IpNet::V6(v6) if v6.network().to_ipv4_mapped().is_some()
                    && v6.prefix_len() >= 96
                    && matches!(ip, IpAddr::V4(v4) if v6.contains(&v4.to_ipv6_mapped())))
        })
    };
    if !is_trusted(peer) {
        assert_eq!(got, peer, "an untrusted peer is its own key");
        return;
    }
    assert_eq!(got, canonical(got), "keys are canonical");
    if got != peer {
        // an address the headers name (as text, in some notation)
        let named = text
            .split([',', ';', '=', '"', '[', ']', ' ', '\t'])
            .filter_map(|t| {
                t.parse::<IpAddr>()
                    .ok()
                    .or_else(|| t.parse::<std::net::SocketAddr>().ok().map(|s| s.ip()))
                    .or_else(|| {
                        t.rsplit_once(':')
                            .and_then(|(a, _)| a.parse::<IpAddr>().ok())
                    })
            })
            .any(|ip| canonical(ip) == got)
            || text.contains(&got.to_string());
        assert!(named, "{got} is neither the peer nor named in {text:?}");
    }
});
