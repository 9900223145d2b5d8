//! Entry points for the cargo-fuzz targets in `fuzz/`: thin wrappers over
//! crate-private code, so that the targets reach it without making it
//! public. It exists only in a build with `--cfg fuzzing` (which
//! `cargo fuzz` sets), never in a user's build or in the docs.

use core::net::IpAddr;
use core::time::Duration;
use std::string::{String, ToString};
use std::vec::Vec;

use http::{HeaderMap, Method, Request};

use crate::{IpNet, KeySource, LayerConfig, Policy, RateLimitLayer};
use tollgate_core::quota::Quota;

/// The client address the layer charges for a request from `peer` with
/// `headers`, behind `trusted` proxies (`forwarded`: RFC 7239 `Forwarded`
/// instead of `X-Forwarded-For`).
pub fn client_ip(peer: IpAddr, headers: &HeaderMap, forwarded: bool, trusted: &[IpNet]) -> IpAddr {
    let nets: Vec<IpNet> = trusted
        .iter()
        .map(|n| crate::key::canonical_net(*n))
        .collect();
    let which = if forwarded {
        crate::key::ForwardedHeader::Forwarded
    } else {
        crate::key::ForwardedHeader::XForwardedFor
    };
    crate::key::client_ip(crate::key::canonical(peer), headers, which, &nets)
}

/// A trusted-proxy entry as a config file reads it.
pub fn parse_net(s: &str) -> Option<IpNet> {
    crate::key::parse_net(s)
}

/// The 128-bit key a table stores for header bytes, under a fixed secret.
pub fn header_digest(k0: u64, k1: u64, bytes: &[u8]) -> [u64; 2] {
    crate::key::KeyDigest::with_keys(k0, k1).digest(bytes)
}

/// A rules file, parsed (`json`: JSON, else TOML) and built: the layer's
/// `Debug` text, or the error's `Display` text.
///
/// # Errors
/// The error's text.
pub fn build_config(text: &str, json: bool) -> Result<String, String> {
    let parsed = if json {
        LayerConfig::from_json(text)
    } else {
        LayerConfig::from_toml(text)
    };
    parsed
        .and_then(LayerConfig::build)
        .map(|l| std::format!("{l:?}"))
        .map_err(|e| e.to_string())
}

/// A duration as a config file reads it.
pub fn parse_duration(s: &str) -> Option<Duration> {
    crate::config::parse_duration(s)
}

/// Route policies, each with its path prefixes and optional methods, built
/// into a layer.
#[derive(Debug)]
pub struct Routes(RateLimitLayer);

impl Routes {
    /// A layer with one route policy per entry (unlimited in practice).
    ///
    /// # Errors
    /// The builder's error text (a bad prefix, a duplicate, …).
    pub fn new(policies: &[(Vec<String>, Option<Vec<Method>>)]) -> Result<Self, String> {
        let quota = Quota::per_second(u32::MAX / 2).map_err(|e| e.to_string())?;
        let mut b = RateLimitLayer::builder();
        for (i, (prefixes, methods)) in policies.iter().enumerate() {
            let mut p = Policy::token_bucket(std::format!("p{i}"), quota).key(KeySource::Global);
            for prefix in prefixes {
                p = p.prefix(prefix.clone());
            }
            if let Some(m) = methods {
                p = p.methods(m.iter().cloned());
            }
            b = b.policy(p);
        }
        b.build().map(Self).map_err(|e| e.to_string())
    }

    /// The index of the policy routing `method path` (`None`: no policy).
    #[must_use]
    pub fn route(&self, method: Method, path: &str) -> Option<usize> {
        let req = Request::builder().method(method).uri(path).body(()).ok()?;
        self.0.cell.load().route_of(&req, None).ok().flatten()
    }
}

/// A prefix as the layer normalises it, and whether it matches `path`
/// (`None`: the prefix is refused).
#[must_use]
pub fn prefix_matches(prefix: &str, path: &str) -> Option<bool> {
    crate::routing::PathPrefix::parse(prefix)
        .ok()
        .map(|p| p.matches(path))
}
