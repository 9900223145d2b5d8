//! Refusal bodies as RFC 9457 problem details (opt-in:
//! [`RateLimitLayerBuilder::problem_details`](crate::RateLimitLayerBuilder::problem_details)),
//! with the `quota-exceeded` problem type of
//! draft-ietf-httpapi-ratelimit-headers-11. The JSON is written by hand:
//! its only variable parts are a validated policy name (escaped all the
//! same) and numbers.

use core::fmt::Write;
use std::string::String;

use bytes::Bytes;
use http::StatusCode;
use http::header::HeaderValue;

use crate::headers::secs_ceil;

/// `application/problem+json`.
pub(crate) const CONTENT_TYPE: HeaderValue = HeaderValue::from_static("application/problem+json");

/// The problem type the draft registers for a client over its quota.
pub(crate) const QUOTA_EXCEEDED: &str =
    "https://iana.org/assignments/http-problem-types#quota-exceeded";

/// The problem-details body of a refusal by `policy` (`status` and the
/// wait, whose `retry-after` member is `Retry-After`'s value).
pub(crate) fn quota_exceeded(policy: &str, status: StatusCode, wait_nanos: u64) -> Bytes {
    let secs = secs_ceil(wait_nanos);
    let mut name = String::with_capacity(policy.len() + 2);
    json_string(&mut name, policy);
    let mut out = String::with_capacity(320 + 2 * name.len());
    // writing to a String cannot fail
    let _ = write!(
        out,
        "{{\"type\":\"{QUOTA_EXCEEDED}\",\
         \"title\":\"Request cannot be satisfied as assigned quota has been exceeded\",\
         \"status\":{status},\
         \"detail\":\"Policy {detail} refused the request; retry in {secs} s.\",\
         \"retry-after\":{secs},\
         \"violated-policies\":[{name}]}}",
        status = status.as_u16(),
        detail = &name[1..name.len() - 1],
    );
    Bytes::from(out)
}

/// `s` as a JSON string, quotes included.
fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_json_requires() {
        let mut s = String::new();
        json_string(&mut s, "a\"b\\c\n/d");
        assert_eq!(s, r#""a\"b\\c\u000a/d""#);
    }

    #[test]
    fn body_has_the_drafts_members() {
        let body = quota_exceeded("api/v1", StatusCode::TOO_MANY_REQUESTS, 4_200_000_000);
        let text = core::str::from_utf8(&body).unwrap();
        assert!(text.starts_with(&format!("{{\"type\":\"{QUOTA_EXCEEDED}\"")));
        assert!(text.contains("\"status\":429,"), "{text}");
        assert!(text.contains("\"retry-after\":5,"), "{text}");
        assert!(
            text.ends_with("\"violated-policies\":[\"api/v1\"]}"),
            "{text}"
        );
    }
}
