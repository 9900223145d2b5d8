//! What a policy does with a request whose key cannot be extracted.

use core::time::Duration;

use http::StatusCode;

/// What the layer does with a request whose partition key cannot be
/// extracted (no peer address, no key header, a custom function returning
/// `None`).
///
/// The default, [`ClientIp`](Self::ClientIp) with 429, limits such a
/// request by its client's address: a client that leaves out its API key
/// gets one client's quota, not a free pass and not a server error. Every
/// outcome but [`Allow`](Self::Allow) limits; none of them logs a line per
/// request: with feature `tracing` a policy warns about missing keys at
/// most once per [`MISSING_KEY_LOG_INTERVAL`], with the number of requests
/// since its last warning.
///
/// ```
/// use http::StatusCode;
/// use tollgate::http::{KeySource, MissingKey, Policy};
/// use tollgate::Quota;
///
/// // requests without an API key share one bucket of 100 per minute, and
/// // are told to authenticate when it is empty
/// let api = Policy::token_bucket("api", Quota::per_minute(100)?)
///     .prefix("/api")
///     .key(KeySource::Header(http::HeaderName::from_static("x-api-key")))
///     .missing_key(MissingKey::SharedBucket(StatusCode::UNAUTHORIZED));
/// # let _ = api;
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MissingKey {
    /// Charge the request to its client's address instead: the right-most
    /// untrusted address of the forwarding chain, as
    /// [`KeySource::ClientIp`](crate::KeySource::ClientIp) finds it
    /// (read from `Forwarded` for a
    /// [`ForwardedClientIp`](crate::KeySource::ForwardedClientIp) policy),
    /// under the policy's quota. Refused with this status (with
    /// `Retry-After` and the `RateLimit` fields). A request without even a
    /// peer address (a server that does not record it) is answered 500.
    /// The default, with 429.
    ClientIp(StatusCode),
    /// Charge every key-less request of the policy to one bucket they all
    /// share, under the policy's quota; refused with this status (e.g. 401
    /// to ask for a key, or 429).
    SharedBucket(StatusCode),
    /// Answer with this status, charging nothing (e.g. 401). Such
    /// answers are not limited: prefer [`SharedBucket`](Self::SharedBucket)
    /// where a client could repeat them at will.
    Reject(StatusCode),
    /// Let the request through without charging this policy.
    Allow,
}

impl Default for MissingKey {
    fn default() -> Self {
        Self::ClientIp(StatusCode::TOO_MANY_REQUESTS)
    }
}

impl MissingKey {
    /// The status it answers with, if it answers with one.
    pub(crate) fn status(self) -> Option<StatusCode> {
        match self {
            Self::ClientIp(s) | Self::SharedBucket(s) | Self::Reject(s) => Some(s),
            Self::Allow => None,
        }
    }
}

/// How often, at most, a policy logs a warning about requests without a
/// key (feature `tracing`): one line per interval, counting the requests
/// since the previous line.
pub const MISSING_KEY_LOG_INTERVAL: Duration = Duration::from_secs(10);
