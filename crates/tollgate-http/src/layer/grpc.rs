//! gRPC refusals: the same refusal as an HTTP client's, rendered for a
//! gRPC client (a request whose `content-type` is `application/grpc` or
//! `application/grpc+…`).
//!
//! A gRPC client maps HTTP 429 to UNAVAILABLE ("try again now, or
//! elsewhere"): retry policies and load balancers then hammer the server.
//! So a gRPC request the layer refuses is answered the way a gRPC server
//! fails a call: HTTP 200 and a trailers-only response (its headers end
//! the stream, the body is empty) carrying `grpc-status`, a
//! percent-encoded `grpc-message` naming the policy and, with feature
//! `grpc`, `grpc-status-details-bin`: a `google.rpc.Status` holding a
//! `google.rpc.RetryInfo` (the wait, to the nanosecond) and a
//! `google.rpc.QuotaFailure` (one violation: the policy and what it
//! limits). The standard headers (`Retry-After`, `RateLimit-Policy`,
//! `RateLimit`) ride along as metadata.

use core::fmt::Write as _;
use std::string::String;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use http::{Response, StatusCode};

use super::Compiled;
use super::body::BodyMode;
use crate::policy::PolicyAlgorithm;

const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
const GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");
#[cfg(feature = "grpc")]
const GRPC_STATUS_DETAILS: HeaderName = HeaderName::from_static("grpc-status-details-bin");

/// `google.rpc.Code.RESOURCE_EXHAUSTED`.
const RESOURCE_EXHAUSTED: i32 = 8;

/// True if `headers` say the request is a gRPC call: `content-type`
/// `application/grpc`, `application/grpc+<format>` or
/// `application/grpc;<parameters>` (case-insensitive).
pub(super) fn is_grpc(headers: &HeaderMap) -> bool {
    const GRPC: &[u8] = b"application/grpc";
    let Some(v) = headers.get(CONTENT_TYPE) else {
        return false;
    };
    let v = v.as_bytes();
    v.len() >= GRPC.len()
        && v[..GRPC.len()].eq_ignore_ascii_case(GRPC)
        && matches!(v.get(GRPC.len()), None | Some(b'+' | b';'))
}

/// The gRPC code of a refusal answered with HTTP `status` (the layer's,
/// or a missing key's fallback's): 429 (the default) is
/// RESOURCE_EXHAUSTED; a status a user chose maps to the code a gRPC
/// client would expect of it.
fn code_of(status: StatusCode) -> i32 {
    match status.as_u16() {
        429 => RESOURCE_EXHAUSTED,
        400 => 3,        // INVALID_ARGUMENT
        401 => 16,       // UNAUTHENTICATED
        403 => 7,        // PERMISSION_DENIED
        404 => 5,        // NOT_FOUND
        503 => 14,       // UNAVAILABLE
        500..=599 => 13, // INTERNAL
        _ => 2,          // UNKNOWN
    }
}

/// The refusal of policy `refusing` for a gRPC request: trailers-only,
/// with the wait in `grpc-status-details-bin` (feature `grpc`).
pub(super) fn refusal<M: BodyMode<R>, R>(
    refusing: &Compiled,
    wait_nanos: u64,
    status: StatusCode,
) -> Response<M::Body> {
    let code = code_of(status);
    let mut message = String::new();
    let _ = write!(message, "rate limited by policy \"{}\"", refusing.name);
    #[cfg_attr(not(feature = "grpc"), allow(unused_mut))]
    let mut res = trailers_only::<M, R>(code, &message);
    #[cfg(feature = "grpc")]
    {
        let limits = describe(refusing.policy.algorithm());
        let details = details::encode(code, &message, &refusing.name, &limits, wait_nanos);
        if let Ok(v) = HeaderValue::from_str(&details) {
            res.headers_mut().insert(GRPC_STATUS_DETAILS, v);
        }
    }
    #[cfg(not(feature = "grpc"))]
    let _ = wait_nanos;
    res
}

/// A refusal without a policy's wait (a request without a key the policy
/// rejects) for a gRPC request: trailers-only, no details.
pub(super) fn status_only<M: BodyMode<R>, R>(status: StatusCode) -> Response<M::Body> {
    let mut message = String::new();
    let _ = write!(
        message,
        "refused by the rate limiter (HTTP {})",
        status.as_u16()
    );
    trailers_only::<M, R>(code_of(status), &message)
}

/// HTTP 200, `content-type: application/grpc`, `grpc-status` and
/// `grpc-message`, an empty body (the headers end the stream).
fn trailers_only<M: BodyMode<R>, R>(code: i32, message: &str) -> Response<M::Body> {
    let mut res = Response::new(M::built(Bytes::new()));
    let map = res.headers_mut();
    map.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    map.insert(GRPC_STATUS, HeaderValue::from(code));
    if let Ok(v) = HeaderValue::from_str(&percent_encode(message)) {
        map.insert(GRPC_MESSAGE, v);
    }
    res
}

/// `grpc-message`'s encoding (the gRPC HTTP/2 protocol): every byte
/// outside `0x20..=0x7E`, and `%`, as `%XX`.
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for &b in text.as_bytes() {
        if (0x20..=0x7E).contains(&b) && b != b'%' {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// What a policy limits, in words (the `QuotaFailure` violation's
/// description).
#[cfg_attr(not(feature = "grpc"), allow(dead_code))]
fn describe(alg: &PolicyAlgorithm) -> String {
    let secs = |nanos: u64| nanos as f64 / 1e9;
    let mut d = String::new();
    let _ = match *alg {
        PolicyAlgorithm::TokenBucket(q) => write!(
            d,
            "token bucket: {} requests per {} s, bursts of {}",
            q.permits(),
            secs(q.period_nanos()),
            q.burst()
        ),
        PolicyAlgorithm::LeakyBucket(q) => write!(
            d,
            "leaky bucket: {} requests per {} s, evenly spaced",
            q.permits(),
            secs(q.period_nanos())
        ),
        PolicyAlgorithm::FixedWindow { limit, window } => write!(
            d,
            "fixed window: {limit} requests per window of {} s",
            window.as_secs_f64()
        ),
        PolicyAlgorithm::SlidingWindow { limit, window } => write!(
            d,
            "sliding window: {limit} requests in any {} s",
            window.as_secs_f64()
        ),
        PolicyAlgorithm::Concurrency { limit } => {
            write!(d, "in flight: {limit} requests at once")
        }
    };
    d
}

/// `grpc-status-details-bin`: the `google.rpc` messages, encoded by prost
/// (the types are declared here with prost's derive, field numbers from
/// `google/rpc/status.proto` and `google/rpc/error_details.proto`;
/// `Any` and `Duration` are prost-types' well-known types).
#[cfg(feature = "grpc")]
mod details {
    use std::string::String;
    use std::vec::Vec;

    use base64::Engine as _;
    use prost::Message;

    /// `google.rpc.Status`.
    #[derive(Clone, PartialEq, Message)]
    pub(super) struct Status {
        #[prost(int32, tag = "1")]
        pub(super) code: i32,
        #[prost(string, tag = "2")]
        pub(super) message: String,
        #[prost(message, repeated, tag = "3")]
        pub(super) details: Vec<prost_types::Any>,
    }

    /// `google.rpc.RetryInfo`.
    #[derive(Clone, PartialEq, Message)]
    pub(super) struct RetryInfo {
        #[prost(message, optional, tag = "1")]
        pub(super) retry_delay: Option<prost_types::Duration>,
    }

    /// `google.rpc.QuotaFailure`.
    #[derive(Clone, PartialEq, Message)]
    pub(super) struct QuotaFailure {
        #[prost(message, repeated, tag = "1")]
        pub(super) violations: Vec<Violation>,
    }

    /// `google.rpc.QuotaFailure.Violation`.
    #[derive(Clone, PartialEq, Message)]
    pub(super) struct Violation {
        #[prost(string, tag = "1")]
        pub(super) subject: String,
        #[prost(string, tag = "2")]
        pub(super) description: String,
    }

    fn any(type_url: &str, value: Vec<u8>) -> prost_types::Any {
        prost_types::Any {
            type_url: String::from(type_url),
            value,
        }
    }

    /// The base64 (standard alphabet, unpadded: what gRPC sends and
    /// tonic's decoder takes) of a `google.rpc.Status` with `code`,
    /// `message`, a `RetryInfo` of `wait_nanos` and a `QuotaFailure` of
    /// `policy`.
    pub(super) fn encode(
        code: i32,
        message: &str,
        policy: &str,
        limits: &str,
        wait_nanos: u64,
    ) -> String {
        const NANOS_PER_SEC: u64 = 1_000_000_000;
        let retry = RetryInfo {
            retry_delay: Some(prost_types::Duration {
                // at most u64::MAX / 1e9 seconds: fits an i64
                seconds: i64::try_from(wait_nanos / NANOS_PER_SEC).unwrap_or(i64::MAX),
                // below 1e9: fits an i32
                nanos: i32::try_from(wait_nanos % NANOS_PER_SEC).unwrap_or(0),
            }),
        };
        let quota = QuotaFailure {
            violations: std::vec![Violation {
                subject: String::from(policy),
                description: String::from(limits),
            }],
        };
        let status = Status {
            code,
            message: String::from(message),
            details: std::vec![
                any(
                    "type.googleapis.com/google.rpc.RetryInfo",
                    retry.encode_to_vec()
                ),
                any(
                    "type.googleapis.com/google.rpc.QuotaFailure",
                    quota.encode_to_vec()
                ),
            ],
        };
        base64::engine::general_purpose::STANDARD_NO_PAD.encode(status.encode_to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_content_types_are_recognised_and_others_are_not() {
        let with = |v: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(CONTENT_TYPE, HeaderValue::from_static(v));
            is_grpc(&h)
        };
        assert!(with("application/grpc"));
        assert!(with("application/grpc+proto"));
        assert!(with("Application/GRPC+json"));
        assert!(with("application/grpc;charset=utf-8"));
        assert!(!with("application/grpc-web"));
        assert!(!with("application/grpcx"));
        assert!(!with("application/json"));
        assert!(!is_grpc(&HeaderMap::new()));
    }

    /// The rendering itself, in both builds: trailers-only headers, and
    /// the details exactly when feature `grpc` is on, their `RetryInfo`
    /// the wait to the nanosecond (decoded back with prost).
    #[test]
    fn a_refusal_renders_as_trailers_only_with_details_exactly_under_feature_grpc() {
        use super::super::{Compiled, Rule};
        use crate::policy::{MissingKey, Policy};
        let policy = Policy::fixed_window("api é", 3, core::time::Duration::from_secs(10));
        let rule = Rule {
            plan: policy.plan("test").unwrap(),
            policy,
            gate: None,
            networks: None,
        };
        let c = Compiled::new(rule, MissingKey::Allow);
        let res = refusal::<super::super::body::Wrapped, String>(
            &c,
            1_500_000_001,
            StatusCode::TOO_MANY_REQUESTS,
        );
        assert_eq!(res.status(), StatusCode::OK);
        let h = res.headers();
        assert_eq!(h[CONTENT_TYPE], "application/grpc");
        assert_eq!(h[GRPC_STATUS], "8");
        assert_eq!(h[GRPC_MESSAGE], "rate limited by policy \"api %C3%A9\"");
        assert!(http_body::Body::is_end_stream(res.body()));
        let details = h.get("grpc-status-details-bin");
        assert_eq!(details.is_some(), cfg!(feature = "grpc"));
        #[cfg(feature = "grpc")]
        {
            use base64::Engine as _;
            use prost::Message as _;
            let raw = details.unwrap().as_bytes();
            assert!(!raw.ends_with(b"="), "unpadded");
            let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
                .decode(raw)
                .unwrap();
            let status = details::Status::decode(&bytes[..]).unwrap();
            assert_eq!(status.code, 8);
            assert_eq!(status.details.len(), 2);
            let retry = details::RetryInfo::decode(&status.details[0].value[..]).unwrap();
            let delay = retry.retry_delay.unwrap();
            assert_eq!((delay.seconds, delay.nanos), (1, 500_000_001));
            let quota = details::QuotaFailure::decode(&status.details[1].value[..]).unwrap();
            assert_eq!(quota.violations[0].subject, "api é");
            assert_eq!(
                quota.violations[0].description,
                "fixed window: 3 requests per window of 10 s"
            );
        }
    }

    /// A refusal without a wait (no key) keeps its status's meaning.
    #[test]
    fn a_keyless_refusal_maps_its_status_to_a_grpc_code_without_details() {
        let res =
            status_only::<super::super::body::Wrapped, String>(StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(res.headers()[GRPC_STATUS], "13");
        assert_eq!(
            res.headers()[GRPC_MESSAGE],
            "refused by the rate limiter (HTTP 500)"
        );
        assert!(res.headers().get("grpc-status-details-bin").is_none());
        assert_eq!(code_of(StatusCode::TOO_MANY_REQUESTS), 8);
        assert_eq!(code_of(StatusCode::SERVICE_UNAVAILABLE), 14);
    }

    #[test]
    fn grpc_message_is_percent_encoded_per_the_grpc_protocol() {
        assert_eq!(percent_encode("a \"b\" 100%"), "a \"b\" 100%25");
        assert_eq!(percent_encode("é\n"), "%C3%A9%0A");
    }
}
