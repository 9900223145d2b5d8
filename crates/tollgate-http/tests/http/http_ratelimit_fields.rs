//! Every `RateLimit-Policy` / `RateLimit` value the layer sends is an RFC
//! 9651 structured-field list that the `sfv` crate parses, with the
//! parameters of draft-ietf-httpapi-ratelimit-headers-11 and their types:
//! each algorithm, admitted and refused, a global limiter and a route
//! policy in one response, keyed and shared policies. The partition key
//! `pk` is a digest, never the client's key. Over real TCP, on tokio's
//! paused time.

use crate::support;

use std::time::Duration;

use support::http::{Req, Resp, connect_info, hello, paused_clock, send_paused, serve};
use tollgate::Quota;
use tollgate::http::{KeySource, Policy, RateLimitLayer};

const UNITS: [&str; 3] = ["requests", "content-bytes", "concurrent-requests"];

/// Checks both fields of `res` (if it has them) member by member, and
/// returns `(policy names, pk of each member)`.
fn check_fields(res: &Resp) -> (Vec<String>, Vec<Option<Vec<u8>>>) {
    if res.header("ratelimit-policy").is_none() {
        assert!(res.header("ratelimit").is_none(), "{res:?}");
        return (Vec::new(), Vec::new());
    }
    let policy = res.sf_members("ratelimit-policy");
    let state = res.sf_members("ratelimit");
    let names: Vec<String> = policy.iter().map(|(n, _)| n.clone()).collect();
    assert_eq!(
        names,
        state.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
        "both fields name the same policies, in order"
    );
    for (name, params) in &policy {
        let mut keys = Vec::new();
        for (k, v) in params {
            keys.push(k.as_str());
            match k.as_str() {
                "q" => assert!(
                    v.as_integer().is_some_and(|q| i64::from(q) >= 0),
                    "{name} q"
                ),
                "w" => assert!(
                    v.as_integer().is_some_and(|w| i64::from(w) >= 1),
                    "{name} w"
                ),
                "qu" => assert!(
                    v.as_string().is_some_and(|u| UNITS.contains(&u.as_str())),
                    "{name} qu {v:?}"
                ),
                other => panic!("{name}: unexpected parameter {other}"),
            }
        }
        assert_eq!(keys.first(), Some(&"q"), "{name}: q is required");
    }
    let retry_after: Option<u64> = res.header("retry-after").map(|v| v.parse().unwrap());
    let mut pks = Vec::new();
    for (name, params) in &state {
        let mut pk = None;
        assert_eq!(params.first().map(|(k, _)| k.as_str()), Some("r"), "{name}");
        for (k, v) in params {
            match k.as_str() {
                "r" => assert!(
                    v.as_integer().is_some_and(|r| i64::from(r) >= 0),
                    "{name} r"
                ),
                "t" => {
                    let t = u64::try_from(i64::from(v.as_integer().unwrap())).unwrap();
                    // Retry-After never names a time before t
                    if let Some(retry) = retry_after {
                        assert!(t <= retry, "{name}: t={t} after Retry-After {retry}");
                    }
                }
                "pk" => {
                    let bytes = v.as_byte_sequence().expect("pk is a byte sequence");
                    assert_eq!(bytes.len(), 9, "{name} pk");
                    pk = Some(bytes.to_vec());
                }
                other => panic!("{name}: unexpected parameter {other}"),
            }
        }
        pks.push(pk);
    }
    (names, pks)
}

fn layer() -> RateLimitLayer {
    let api_key = || KeySource::Header(http::HeaderName::from_static("x-api-key"));
    RateLimitLayer::builder()
        .clock(paused_clock())
        .peer_addr(connect_info)
        .headers_on_success(true)
        .global(
            Policy::token_bucket("global", Quota::per_second(50).unwrap()).key(KeySource::PeerIp),
        )
        .policies([
            Policy::token_bucket("tb", Quota::per_minute(3).unwrap()).prefix("/tb"),
            Policy::leaky_bucket("lb", Quota::per_minute(2).unwrap())
                .prefix("/lb")
                .key(KeySource::PeerIp),
            Policy::fixed_window("fw", 2, Duration::from_secs(90))
                .prefix("/fw")
                .key(api_key()),
            Policy::sliding_window("sw", 2, Duration::from_secs(30))
                .prefix("/sw")
                .key(KeySource::PeerIp),
            Policy::concurrency("c", 3).prefix("/c").key(api_key()),
        ])
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn every_value_parses_admitted_and_refused() {
    let s = serve(hello(layer())).await;
    for (path, refused) in [
        ("/tb", true),
        ("/lb", true),
        ("/fw", true),
        ("/sw", true),
        ("/c", false),
    ] {
        let mut statuses = Vec::new();
        for _ in 0..5 {
            let r = send_paused(s.addr, Req::get(path).header("x-api-key", "k1")).await;
            let (names, _) = check_fields(&r);
            // the global limiter and the route policy, in that order
            assert_eq!(
                names.len(),
                if r.status == 200 { 2 } else { 1 },
                "{path}: {names:?}"
            );
            if r.status == 429 {
                assert_eq!(names, [path.trim_start_matches('/')]);
            }
            statuses.push(r.status);
        }
        assert_eq!(statuses.contains(&429), refused, "{path}: {statuses:?}");
        assert_eq!(statuses[0], 200, "{path}");
    }
    // the global limiter refusing: only its member
    let mut last = None;
    for _ in 0..60 {
        let r = send_paused(s.addr, Req::get("/open")).await;
        check_fields(&r);
        if r.status == 429 {
            last = Some(r);
            break;
        }
    }
    let r = last.expect("the global limiter refuses its 51st request");
    let (names, pks) = check_fields(&r);
    assert_eq!(names, ["global"]);
    assert!(pks[0].is_some(), "the global limiter is keyed by peer IP");
}

#[tokio::test(start_paused = true)]
async fn pk_is_a_digest_never_the_key() {
    let s = serve(hello(layer())).await;
    let secret = "s3cret-api-key-of-a-client";
    let pk_of = |r: &Resp, policy: &str| {
        let (names, pks) = check_fields(r);
        let i = names.iter().position(|n| n == policy).unwrap();
        pks[i].clone()
    };
    let a = send_paused(s.addr, Req::get("/fw").header("x-api-key", secret)).await;
    assert_eq!(a.status, 200);
    for (name, value) in &a.headers {
        assert!(!value.contains(secret), "{name}: {value}");
    }
    let pk_a = pk_of(&a, "fw").expect("a keyed policy sends pk");
    assert!(!secret.as_bytes().windows(9).any(|w| w == pk_a.as_slice()));
    // the same key, the same pk; another key, another pk
    let again = send_paused(s.addr, Req::get("/fw").header("x-api-key", secret)).await;
    assert_eq!(pk_of(&again, "fw"), Some(pk_a.clone()));
    let b = send_paused(s.addr, Req::get("/fw").header("x-api-key", "another")).await;
    assert_ne!(pk_of(&b, "fw"), Some(pk_a.clone()));
    // refused: the same pk as the key's admitted responses
    let refused = send_paused(s.addr, Req::get("/fw").header("x-api-key", secret)).await;
    assert_eq!(refused.status, 429);
    assert_eq!(pk_of(&refused, "fw"), Some(pk_a));
    // one shared bucket: no pk, admitted or refused
    for _ in 0..4 {
        let r = send_paused(s.addr, Req::get("/tb")).await;
        assert_eq!(pk_of(&r, "tb"), None, "{:?}", r.header("ratelimit"));
    }
}
