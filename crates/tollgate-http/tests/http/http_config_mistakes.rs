//! Rules-file mistakes that loaded a looser limit than the one written, or
//! none, are errors naming the field and what would be valid (issue 28,
//! item 3): durations in a unit that reads two ways, prefixes the router
//! can never match, a file that sets no limit, a JSON array read by
//! position. Each in TOML and in JSON.

use crate::support;

use support::http::{Req, hello, send, serve};
use tollgate::http::{ConfigError, ConfigErrorKind, LayerConfig, Policy, RateLimitLayer};

fn build_toml(doc: &str) -> Result<RateLimitLayer, ConfigError> {
    LayerConfig::from_toml(doc).and_then(LayerConfig::build)
}

fn build_json(doc: &str) -> Result<RateLimitLayer, ConfigError> {
    LayerConfig::from_json(doc).and_then(LayerConfig::build)
}

/// `err` is at `field`, and its text is `field: ` and a message holding
/// each of `says`.
fn names(err: &ConfigError, field: &str, says: &[&str]) {
    assert_eq!(err.location(), field, "{err}");
    let text = err.to_string();
    assert!(text.starts_with(&format!("{field}: ")), "{text}");
    for s in says {
        assert!(text.contains(s), "want {s:?} in `{text}`");
    }
}

/// What every refused duration says: the field, then the units that exist.
const UNITS: &[&str] = &[
    "must be a positive duration with its unit",
    "d, h, m (minutes), s or ms, lower case",
    "\"1m30s\"",
];

/// A unit that reads two ways (`"1M"`: a month to humantime, which took it
/// as 2,630,016 s) and every other unit or form outside `ms`, `s`, `m`,
/// `h`, `d` in whole numbers, largest first.
const BAD_DURATIONS: [&str; 16] = [
    "1M", "1S", "1H", "1D", "1MS", "1mo", "1w", "1y", "1us", "1ns", "1min", "1.5s", "1m 30s",
    "30s1m", "1s1s", "60",
];

#[test]
fn durations_in_units_that_read_two_ways_are_refused() {
    for bad in BAD_DURATIONS {
        // a rule's period
        let toml =
            format!("[[rules]]\nname = \"a\"\nprefix = \"/a\"\nrate = 1\nperiod = \"{bad}\"\n");
        names(&build_toml(&toml).expect_err(bad), "rules[0].period", UNITS);
        let json = format!(
            r#"{{"rules": [{{"name": "a", "prefix": "/a", "rate": 1, "period": "{bad}"}}]}}"#
        );
        names(&build_json(&json).expect_err(bad), "rules[0].period", UNITS);
        // the global limiter's
        let toml = format!("[global]\nrate = 1\nperiod = \"{bad}\"\n");
        names(&build_toml(&toml).expect_err(bad), "global.period", UNITS);
        let json = format!(r#"{{"global": {{"rate": 1, "period": "{bad}"}}}}"#);
        names(&build_json(&json).expect_err(bad), "global.period", UNITS);
        // a queue's longest wait
        let toml = format!(
            "[global]\nrate = 1\n[[rules]]\nname = \"a\"\nprefix = \"/a\"\nrate = 1\nqueue = {{ max_wait = \"{bad}\" }}\n"
        );
        names(
            &build_toml(&toml).expect_err(bad),
            "rules[0].queue.max_wait",
            UNITS,
        );
        let json = format!(
            r#"{{"rules": [{{"name": "a", "prefix": "/a", "rate": 1, "queue": {{"max_wait": "{bad}"}}}}]}}"#
        );
        names(
            &build_json(&json).expect_err(bad),
            "rules[0].queue.max_wait",
            UNITS,
        );
    }
}

#[tokio::test]
async fn a_redis_timeout_in_a_unit_that_reads_two_ways_is_refused() {
    // building a Redis rule connects lazily: no server, but a runtime
    for bad in BAD_DURATIONS {
        let toml = format!(
            "[[rules]]\nname = \"a\"\nprefix = \"/a\"\nrate = 1\nbackend = \"redis\"\nredis_url = \"redis://127.0.0.1:1/\"\nredis_timeout = \"{bad}\"\n"
        );
        names(
            &build_toml(&toml).expect_err(bad),
            "rules[0].redis_timeout",
            UNITS,
        );
        let json = format!(
            r#"{{"rules": [{{"name": "a", "prefix": "/a", "rate": 1, "backend": "redis", "redis_url": "redis://127.0.0.1:1/", "redis_timeout": "{bad}"}}]}}"#
        );
        names(
            &build_json(&json).expect_err(bad),
            "rules[0].redis_timeout",
            UNITS,
        );
    }
}

#[tokio::test]
async fn durations_in_the_units_that_exist_load() {
    for (good, w) in [
        ("1s", 1),
        ("2000ms", 2),
        ("1m", 60),
        ("1m30s", 90),
        ("2h", 7200),
        ("1d", 86_400),
        ("1d12h", 129_600),
    ] {
        // the window the layer runs, as its RateLimit-Policy says
        let toml = format!("headers_on_success = true\n[global]\nrate = 5\nperiod = \"{good}\"\n");
        let layer = build_toml(&toml).unwrap_or_else(|e| panic!("{good}: {e}"));
        let s = serve(hello(layer)).await;
        let r = send(s.addr, Req::get("/")).await;
        let want = format!("\"global\";q=5;w={w}");
        assert_eq!(r.header("ratelimit-policy"), Some(want.as_str()), "{good}");
        let json = format!(r#"{{"global": {{"rate": 1, "period": "{good}"}}}}"#);
        build_json(&json).unwrap_or_else(|e| panic!("{good}: {e}"));
    }
}

/// Prefixes the router can never match as written, each with what its
/// error says instead (the valid form).
const BAD_PREFIXES: [(&str, &[&str]); 14] = [
    (
        "/api/login*",
        &["must be a literal path", "'*'", "\"/api/login\""],
    ),
    ("/api/*/items", &["must be a literal path", "'*'"]),
    ("/users/{id}", &["must be a literal path", "'{'"]),
    (
        "/api/login?",
        &["must be a path alone", "'?'", "\"/api/login\""],
    ),
    (
        "/api/log%69n",
        &["as themselves", "\"/api/login\", not \"/api/log%69n\""],
    ),
    ("/api/%2E%2E/login", &["as themselves", "\"%20\""]),
    ("/api/log%6", &["'%' must start a two-hex-digit escape"]),
    (
        "/api/../api/login",
        &[
            "'.' or '..' segment",
            "\"/api/login\", not \"/api/../api/login\"",
        ],
    ),
    ("/api/./login", &["'.' or '..' segment"]),
    ("/api/login/..", &["'.' or '..' segment"]),
    (
        "//api/login",
        &["empty segment", "\"/api/login\", not \"//api/login\""],
    ),
    ("/api//login", &["empty segment"]),
    (
        "/caf\u{e9}",
        &["must be a path as clients send it", "\"/caf%C3%A9\""],
    ),
    ("api/login", &["must start with '/'", "\"/api/login\""]),
];

#[test]
fn prefixes_the_router_cannot_match_are_refused() {
    // the second rule's, the second exempt entry's: the error says which
    let api = "[[rules]]\nname = \"api\"\nprefix = \"/api\"\nrate = 100\n";
    for (bad, says) in BAD_PREFIXES {
        let toml = format!("{api}[[rules]]\nname = \"login\"\nprefix = \"{bad}\"\nrate = 1\n");
        names(&build_toml(&toml).expect_err(bad), "rules[1].prefix", says);
        let json = format!(
            r#"{{"rules": [{{"name": "api", "prefix": "/api", "rate": 100}}, {{"name": "login", "prefix": "{bad}", "rate": 1}}]}}"#
        );
        names(&build_json(&json).expect_err(bad), "rules[1].prefix", says);

        let toml = format!("exempt = [\"/health\", \"{bad}\"]\n{api}");
        names(&build_toml(&toml).expect_err(bad), "exempt[1]", says);
        let json = format!(
            r#"{{"exempt": ["/health", "{bad}"], "rules": [{{"name": "api", "prefix": "/api", "rate": 100}}]}}"#
        );
        names(&build_json(&json).expect_err(bad), "exempt[1]", says);

        // in code too
        let quota = tollgate::Quota::per_second(1).unwrap();
        let err = RateLimitLayer::builder()
            .policy(Policy::token_bucket("api", quota).prefix("/api"))
            .policy(Policy::token_bucket("login", quota).prefix(bad))
            .build()
            .expect_err(bad);
        names(&err, "policies[1].prefix", says);
        let err = RateLimitLayer::builder()
            .exempt("/health")
            .exempt(bad)
            .build()
            .expect_err(bad);
        names(&err, "exempt[1]", says);
    }
}

#[test]
fn prefixes_the_router_matches_as_written_load() {
    for good in [
        "/",
        "/api/login",
        "/api/login/",
        "/API/Login",
        "/.well-known/acme-challenge",
        "/v1/items:batchGet",
        "/caf%C3%A9",
        "/files/a%2Fb",
        "/a%20b",
        "/~user/x;v=1",
    ] {
        let toml = format!("[[rules]]\nname = \"a\"\nprefix = \"{good}\"\nrate = 1\n");
        build_toml(&toml).unwrap_or_else(|e| panic!("{good}: {e}"));
        let toml = format!("exempt = [\"{good}\"]\n[global]\nrate = 1\n");
        build_toml(&toml).unwrap_or_else(|e| panic!("exempt {good}: {e}"));
        let json = format!(r#"{{"rules": [{{"name": "a", "prefix": "{good}", "rate": 1}}]}}"#);
        build_json(&json).unwrap_or_else(|e| panic!("{good}: {e}"));
    }
}

/// What a file without limits is told.
const NO_LIMIT: &[&str] = &[
    "the file sets no limit",
    "no [global] and no [[rules]]",
    "set allow_no_limits = true",
];

#[test]
fn a_file_that_sets_no_limit_is_refused_unless_it_says_so() {
    for toml in [
        "",
        "\n\n",
        "# rules for the api\n# (to be written)\n",
        "status = 429\nexempt = [\"/health\"]\n",
    ] {
        names(&build_toml(toml).expect_err(toml), "rules", NO_LIMIT);
    }
    for json in ["{}", " { } \n", r#"{"status": 429, "rules": []}"#] {
        names(&build_json(json).expect_err(json), "rules", NO_LIMIT);
    }
    // on purpose: it loads, and limits nothing
    build_toml("allow_no_limits = true\nexempt = [\"/health\"]\n").expect("no limits on purpose");
    build_json(r#"{"allow_no_limits": true}"#).expect("no limits on purpose");
    // false is the default: still refused
    names(
        &build_toml("allow_no_limits = false\n").unwrap_err(),
        "rules",
        NO_LIMIT,
    );
    // beside a limit, the key would let a cut-short copy load without one
    let says = &["must not be set in a file that sets limits", "cut short"];
    let toml = "allow_no_limits = true\n[global]\nrate = 100\n";
    names(&build_toml(toml).unwrap_err(), "allow_no_limits", says);
    let json = r#"{"allow_no_limits": true, "rules": [{"name": "a", "prefix": "/a", "rate": 1}]}"#;
    names(&build_json(json).unwrap_err(), "allow_no_limits", says);
    // a field's own error comes first
    names(
        &build_toml("status = 200\n").unwrap_err(),
        "status",
        &["400 to 599"],
    );
}

#[test]
fn a_json_rules_file_is_an_object_never_read_by_position() {
    // `[429, true]` was a document with status = 429 and
    // headers_on_success = true; `[]` one without limits
    for json in [
        "[]",
        "[429, true]",
        r#"[{"rules": []}]"#,
        "7",
        "\"rules\"",
        "null",
    ] {
        let err = LayerConfig::from_json(json).expect_err(json);
        assert!(matches!(err.kind(), ConfigErrorKind::Syntax(_)), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains("expected a JSON object: a rules file is an object of named settings"),
            "{json}: {text}"
        );
    }
    // a rule or a queue as an array: refused in both formats
    let says = "expected a rule: a table of named fields (an object in JSON), never an array";
    let err = LayerConfig::from_json(r#"{"global": [100, "1s"]}"#).unwrap_err();
    assert!(err.to_string().contains(says), "{err}");
    let err = LayerConfig::from_json(r#"{"rules": [["a", "/a"]]}"#).unwrap_err();
    assert!(err.to_string().contains(says), "{err}");
    let err = LayerConfig::from_toml("global = [\"g\"]\n").unwrap_err();
    assert!(err.to_string().contains(says), "{err}");
    let says = "expected a queue: a table of named fields";
    let toml = "[[rules]]\nname = \"a\"\nprefix = \"/a\"\nrate = 1\nqueue = [\"2s\", 10]\n";
    let err = LayerConfig::from_toml(toml).unwrap_err();
    assert!(err.to_string().contains(says), "{err}");
    assert!(err.to_string().contains("line 5"), "{err}");
    let json = r#"{"rules": [{"name": "a", "prefix": "/a", "rate": 1, "queue": ["2s", 10]}]}"#;
    let err = LayerConfig::from_json(json).unwrap_err();
    assert!(err.to_string().contains(says), "{err}");
    // the same settings by name load
    let toml = "[[rules]]\nname = \"a\"\nprefix = \"/a\"\nrate = 1\nqueue = { max_wait = \"2s\", limit = 10 }\n";
    build_toml(toml).expect("a queue by name");
}
