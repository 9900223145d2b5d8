//! Config mistakes that used to start a server with a silently wrong limit
//! are errors naming the field (issue 19, item 2): one case per mistake
//! the issue lists, in TOML and, where the shape differs, in JSON.

use tollgate::http::{ConfigErrorKind, LayerConfig};

fn err_toml(doc: &str) -> tollgate::http::ConfigError {
    LayerConfig::from_toml(doc)
        .and_then(LayerConfig::build)
        .expect_err(doc)
}

fn err_json(doc: &str) -> tollgate::http::ConfigError {
    LayerConfig::from_json(doc)
        .and_then(LayerConfig::build)
        .expect_err(doc)
}

/// `err`'s location is `field` and its text starts with `field: want`.
fn names(err: &tollgate::http::ConfigError, field: &str, want: &str) {
    assert_eq!(err.location(), field, "{err}");
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("{field}: {want}")),
        "want `{field}: {want}…`, got `{text}`"
    );
}

const API: &str = "[[rules]]\nname = \"api\"\nprefix = \"/api\"\nrate = 10\n";

#[test]
fn prefixes_equal_after_normalisation_are_a_conflict() {
    // "/API/" is "/api" once case and the trailing '/' are normalised away
    let doc = format!("{API}[[rules]]\nname = \"shout\"\nprefix = \"/API/\"\nrate = 1\n");
    let e = err_toml(&doc);
    assert!(matches!(e.kind(), ConfigErrorKind::Conflict(_)), "{e:?}");
    names(&e, "rules[1].prefix", "the same path as rules[0].prefix");
    // disjoint methods on the same path are two real rules, not a mistake
    let doc = "[[rules]]\nname = \"r\"\nprefix = \"/api\"\nrate = 10\nmethods = [\"GET\"]\n\
               [[rules]]\nname = \"w\"\nprefix = \"/API/\"\nrate = 1\nmethods = [\"POST\"]\n";
    LayerConfig::from_toml(doc)
        .and_then(LayerConfig::build)
        .expect("disjoint methods build");
    // overlapping methods do not
    let doc = "[[rules]]\nname = \"r\"\nprefix = \"/api\"\nrate = 10\nmethods = [\"GET\", \"POST\"]\n\
               [[rules]]\nname = \"w\"\nprefix = \"/api\"\nrate = 1\nmethods = [\"post\"]\n";
    names(
        &err_toml(doc),
        "rules[1].prefix",
        "the same path as rules[0].prefix for the same methods",
    );
    // a rule under an exempt path would never apply
    let doc = format!("exempt = [\"/API\"]\n{API}");
    names(&err_toml(&doc), "rules[0].prefix", "lies under exempt[0]");
    // JSON reports the same
    let json = r#"{"rules": [
        {"name": "api", "prefix": "/api", "rate": 10},
        {"name": "shout", "prefix": "/API/", "rate": 1}]}"#;
    names(
        &err_json(json),
        "rules[1].prefix",
        "the same path as rules[0].prefix",
    );
}

#[test]
fn unknown_methods_are_refused() {
    for bad in ["PSOT", "GETS", "FETCH"] {
        let doc = format!("{API}methods = [\"GET\", \"{bad}\"]\n");
        names(
            &err_toml(&doc),
            "rules[0].methods[1]",
            "must be an HTTP method",
        );
    }
    let doc = format!("{API}methods = [\"GET\", \"get\"]\n");
    names(&err_toml(&doc), "rules[0].methods[1]", "is listed twice");
    // lower case is accepted
    let doc = format!("{API}methods = [\"post\"]\n");
    LayerConfig::from_toml(&doc)
        .and_then(LayerConfig::build)
        .expect("lower-case method");
}

#[test]
fn stray_whitespace_is_refused() {
    let doc = "[[rules]]\nname = \"login\"\nprefix = \"/api/login \"\nrate = 1\n";
    names(
        &err_toml(doc),
        "rules[0].prefix",
        "has leading or trailing whitespace",
    );
    let doc = format!("{API}methods = [\" GET\"]\n");
    names(
        &err_toml(&doc),
        "rules[0].methods[0]",
        "has leading or trailing whitespace",
    );
    let doc = format!("{API}key = \"header\"\nheader = \"x-api-key \"\n");
    names(
        &err_toml(&doc),
        "rules[0].header",
        "has leading or trailing whitespace",
    );
    let doc = format!("{API}period = \"1s \"\n");
    names(
        &err_toml(&doc),
        "rules[0].period",
        "has leading or trailing whitespace",
    );
    let doc = format!("trusted_proxies = [\" 10.0.0.0/8\"]\n{API}key = \"client_ip\"\n");
    names(
        &err_toml(&doc),
        "trusted_proxies[0]",
        "has leading or trailing whitespace",
    );
    // inside a prefix, whitespace can never match a request path
    let doc = "[[rules]]\nname = \"a\"\nprefix = \"/a b\"\nrate = 1\n";
    names(&err_toml(doc), "rules[0].prefix", "must be a path");
}

#[test]
fn options_that_do_nothing_are_refused() {
    // a header name without key = "header": one bucket for everyone
    let doc = format!("{API}header = \"x-api-key\"\n");
    names(
        &err_toml(&doc),
        "rules[0].header",
        "only applies with key = \"header\"",
    );
    let doc = format!("{API}key = \"client_ip\"\nheader = \"x-api-key\"\n");
    names(
        &err_toml(&doc),
        "rules[0].header",
        "only applies with key = \"header\"",
    );
    // methods under [global]: the global limiter applies to every method
    let doc = "[global]\nrate = 100\nmethods = [\"POST\"]\n";
    names(
        &err_toml(doc),
        "global.methods",
        "the global limiter applies to every method",
    );
    // max_keys with one bucket for everyone
    let doc = format!("{API}key = \"global\"\nmax_keys = 10\n");
    names(&err_toml(&doc), "rules[0].max_keys", "does nothing");
    // an IPv6 prefix on a key that is not an address
    let doc = format!("{API}key = \"header\"\nheader = \"x-api-key\"\nipv6_prefix = 48\n");
    names(
        &err_toml(&doc),
        "rules[0].ipv6_prefix",
        "only applies with key",
    );
    for bits in [0, 129, 300] {
        let doc = format!("{API}key = \"peer_ip\"\nipv6_prefix = {bits}\n");
        names(
            &err_toml(&doc),
            "rules[0].ipv6_prefix",
            "must be from 1 to 128",
        );
    }
    let doc = format!("{API}key = \"peer_ip\"\nipv6_prefix = 56\n");
    LayerConfig::from_toml(&doc)
        .and_then(LayerConfig::build)
        .expect("a /56 is a valid IPv6 key prefix");
    // trusted proxies when no rule reads forwarding headers
    let doc = format!("trusted_proxies = [\"10.0.0.0/8\"]\n{API}key = \"peer_ip\"\n");
    names(&err_toml(&doc), "trusted_proxies", "does nothing");
    // a status for missing keys that are allowed through
    let doc = format!("missing_key = \"allow\"\nmissing_key_status = 400\n{API}");
    names(&err_toml(&doc), "missing_key_status", "does nothing");
}

#[test]
fn durations_need_a_unit() {
    let doc = format!("{API}period = \"50\"\n");
    names(
        &err_toml(&doc),
        "rules[0].period",
        "must be a positive duration with its unit",
    );
    let doc = format!("{API}queue = {{ max_wait = \"2\" }}\n");
    names(
        &err_toml(&doc),
        "rules[0].queue.max_wait",
        "must be a positive duration with its unit",
    );
    let json = r#"{"rules": [{"name": "api", "prefix": "/api", "rate": 10, "period": "60"}]}"#;
    names(
        &err_json(json),
        "rules[0].period",
        "must be a positive duration with its unit",
    );
    let doc = format!("{API}period = \"1m30s\"\n");
    LayerConfig::from_toml(&doc)
        .and_then(LayerConfig::build)
        .expect("1m30s is a duration");
}

#[tokio::test]
async fn a_redis_timeout_without_unit_is_refused() {
    // building a Redis rule connects lazily: no server is needed to see
    // the error, but a runtime is
    let redis = "backend = \"redis\"\nredis_url = \"redis://127.0.0.1:1/\"\n";
    let doc = format!("{API}{redis}redis_timeout = \"50\"\n");
    names(
        &err_toml(&doc),
        "rules[0].redis_timeout",
        "must be a positive duration with its unit",
    );
    let doc = format!("{API}{redis}redis_timeout = \"50ms\"\n");
    LayerConfig::from_toml(&doc)
        .and_then(LayerConfig::build)
        .expect("50ms is a timeout");
    // two rules whose Redis keys would share a prefix
    let doc = format!(
        "{API}{redis}redis_prefix = \"app:\"\n[[rules]]\nname = \"b\"\nprefix = \"/b\"\nrate = 1\n{redis}redis_prefix = \"app:\"\n"
    );
    names(
        &err_toml(&doc),
        "rules[1].redis_prefix",
        "the same Redis key prefix as rules[0]",
    );
}

#[test]
fn statuses_must_be_client_or_server_errors() {
    for code in [100, 200, 204, 301, 304, 600, 999] {
        let e = err_toml(&format!("status = {code}\n{API}"));
        assert_eq!(e.location(), "status", "{code}: {e}");
        assert!(e.to_string().contains("400 to 599"), "{code}: {e}");
        let e = err_toml(&format!("missing_key_status = {code}\n{API}"));
        assert_eq!(e.location(), "missing_key_status", "{code}: {e}");
        assert!(e.to_string().contains("400 to 599"), "{code}: {e}");
        let e = err_json(&format!(
            r#"{{"status": {code}, "rules": [{{"name": "a", "prefix": "/a", "rate": 1}}]}}"#
        ));
        assert_eq!(e.location(), "status", "{code}: {e}");
    }
    for code in [400, 429, 499, 500, 503, 599] {
        LayerConfig::from_toml(&format!(
            "status = {code}\nmissing_key_status = {code}\n{API}"
        ))
        .and_then(LayerConfig::build)
        .unwrap_or_else(|e| panic!("{code}: {e}"));
    }
}
