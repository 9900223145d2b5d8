//! Configuration documents: the example TOML file loads and behaves as it
//! says on a real server; the same rules in JSON; every kind of bad
//! document gives an error naming the rule and the field.

use crate::support;

use support::http::{Req, connect_info, hello, send, serve};
use tollgate::http::{ConfigErrorKind, LayerConfig};

const EXAMPLE: &str = include_str!("../../../../examples/tollgate.toml");

#[tokio::test]
async fn the_example_file_loads_and_limits_as_documented() {
    let layer = LayerConfig::from_toml(EXAMPLE)
        .unwrap()
        .into_builder()
        .unwrap()
        .peer_addr(connect_info)
        .build()
        .unwrap();
    let s = serve(hello(layer)).await;
    // /api/login: burst 2 per client, then 429
    for _ in 0..2 {
        let r = send(s.addr, Req::get("/api/login").method("POST")).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.policies(), ["global", "login"]);
    }
    let r = send(s.addr, Req::get("/api/login").method("POST")).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.header("ratelimit-policy"), Some("\"login\";q=3;w=60"));
    assert_eq!(r.header("retry-after"), Some("20"));
    // /api has its own budget of 5 per client, another client is separate
    for _ in 0..5 {
        assert_eq!(send(s.addr, Req::get("/api/hello")).await.status, 200);
    }
    assert_eq!(send(s.addr, Req::get("/api/hello")).await.status, 429);
    assert_eq!(
        send(s.addr, Req::get("/api/hello").from([127, 0, 0, 5]))
            .await
            .status,
        200
    );
    // exempt
    for _ in 0..20 {
        let r = send(s.addr, Req::get("/health")).await;
        assert_eq!(r.status, 200);
        assert!(r.header("ratelimit").is_none());
    }
}

#[tokio::test]
async fn json_documents_load_too() {
    let json = r#"{
        "status": 503,
        "global": { "rate": 2, "period": "1h" },
        "rules": [ { "name": "api", "prefix": "/api", "rate": 1, "period": "1h", "key": "header", "header": "x-api-key" } ]
    }"#;
    let layer = LayerConfig::from_json(json)
        .unwrap()
        .into_builder()
        .unwrap()
        .peer_addr(connect_info)
        .build()
        .unwrap();
    let s = serve(hello(layer)).await;
    let key = |k| Req::get("/api").header("x-api-key", k);
    assert_eq!(send(s.addr, key("a")).await.status, 200);
    assert_eq!(send(s.addr, key("a")).await.status, 503);
    assert_eq!(send(s.addr, key("b")).await.status, 200);
    // global (2 per hour, refunded on the route refusal) is now spent
    let r = send(s.addr, Req::get("/other")).await;
    assert_eq!(r.status, 503);
    assert_eq!(r.policies(), ["global"]);
}

fn err_toml(doc: &str) -> String {
    LayerConfig::from_toml(doc)
        .and_then(LayerConfig::build)
        .expect_err(doc)
        .to_string()
}

#[test]
fn each_kind_of_bad_document_names_rule_and_field() {
    let ok_rule = "[[rules]]\nname = \"a\"\nprefix = \"/a\"\nrate = 1\n";
    let ok_rule_b = "[[rules]]\nname = \"b\"\nprefix = \"/b\"\nrate = 1\n";
    let third = |body: &str| {
        format!("{ok_rule}{ok_rule_b}[[rules]]\nname = \"c\"\nprefix = \"/c\"\n{body}")
    };
    let cases: Vec<(String, &str)> = vec![
        (
            third("rate = 5\nburst = 0\n"),
            "rules[2].burst: must be at least 1",
        ),
        (third("rate = 0\n"), "rules[2].rate: must be at least 1"),
        (third(""), "rules[2].rate: is required"),
        (
            third("rate = 5000000000\n"),
            "rules[2].rate: must be at most 4294967295",
        ),
        (
            third("rate = 1\nperiod = \"soon\"\n"),
            "rules[2].period: must be a positive duration",
        ),
        (
            third("rate = 1\nperiod = \"0s\"\n"),
            "rules[2].period: must be a positive duration",
        ),
        (
            third("rate = 1\nalgorithm = \"fifo\"\n"),
            "rules[2].algorithm: must be one of \"token_bucket\", \"leaky_bucket\", \"fixed_window\", \"sliding_window\", \"concurrency\"",
        ),
        (
            third("rate = 1\nkey = \"cookie\"\n"),
            "rules[2].key: must be one of",
        ),
        (
            third("rate = 1\nkey = \"header\"\n"),
            "rules[2].header: is required with key = \"header\"",
        ),
        (
            third("rate = 1\nkey = \"header\"\nheader = \"bad header\"\n"),
            "rules[2].header: must be a header name",
        ),
        (
            third("rate = 1\nmethods = [\"GE T\"]\n"),
            "rules[2].methods[0]: must be an HTTP method",
        ),
        (
            third("rate = 1\nkey = \"peer_ip\"\nmax_keys = 0\n"),
            "rules[2].max_keys: must be at least 1",
        ),
        (
            third(
                "algorithm = \"concurrency\"\nlimit = 2\nqueue = { max_wait = \"1s\", limit = 0 }\n",
            ),
            "rules[2].queue.limit: must be at least 1",
        ),
        (
            third("algorithm = \"concurrency\"\n"),
            "rules[2].limit: is required with algorithm = \"concurrency\"",
        ),
        (
            third("algorithm = \"concurrency\"\nlimit = 0\n"),
            "rules[2].limit: must be at least 1",
        ),
        (
            third("algorithm = \"concurrency\"\nlimit = 2\nrate = 5\n"),
            "rules[2].rate: does not apply to algorithm = \"concurrency\"",
        ),
        (
            third("algorithm = \"concurrency\"\nlimit = 2\nperiod = \"1s\"\n"),
            "rules[2].period: does not apply to algorithm = \"concurrency\"",
        ),
        (
            third("rate = 5\nlimit = 2\n"),
            "rules[2].limit: only applies with algorithm = \"concurrency\"",
        ),
        (
            third("algorithm = \"sliding_window\"\nrate = 5\nburst = 2\n"),
            "rules[2].burst: windows have no burst",
        ),
        (
            third("algorithm = \"sliding_window\"\nrate = 5\nperiod = \"0s\"\n"),
            "rules[2].period: must be a positive duration",
        ),
        (
            third("algorithm = \"fixed_window\"\nrate = 0\n"),
            "rules[2].rate: must be at least 1",
        ),
        (
            third("rate = 1\nqueue = { max_wait = \"never\" }\n"),
            "rules[2].queue.max_wait: must be a positive duration",
        ),
        (
            third("rate = 1\nqueue = { max_wait = \"1s\", limit = 0 }\n"),
            "rules[2].queue.limit: must be at least 1",
        ),
        (
            format!("{ok_rule}{ok_rule}"),
            "rules[1].name: another rule has the same name",
        ),
        (
            "[[rules]]\nname = \"sp ace\"\nprefix = \"/a\"\nrate = 1\n".into(),
            "rules[0].name: must be 1 to 64 characters",
        ),
        (
            "[[rules]]\nprefix = \"/a\"\nrate = 1\n".into(),
            "rules[0].name: is required",
        ),
        (
            "[[rules]]\nname = \"a\"\nrate = 1\n".into(),
            "rules[0].prefix: is required",
        ),
        (
            "[[rules]]\nname = \"a\"\nprefix = \"a\"\nrate = 1\n".into(),
            "rules[0].prefix: must start with '/'",
        ),
        (
            "[global]\nrate = 1\nprefix = \"/x\"\n".into(),
            "global.prefix: the global limiter applies to every path",
        ),
        (
            "[global]\nrate = 1\nburst = 0\n".into(),
            "global.burst: must be at least 1",
        ),
        (
            "exempt = [\"health\"]\n".into(),
            "exempt[0]: must start with '/'",
        ),
        (
            "trusted_proxies = [\"10.0.0.0/40\"]\n".into(),
            "trusted_proxies[0]: must be an IP address or network",
        ),
        ("status = 42\n".into(), "status: must be an HTTP status"),
        (
            "missing_key = \"ignore\"\n".into(),
            "missing_key: must be \"client_ip\" (the default), \"shared_bucket\", \"reject\" or \"allow\"",
        ),
    ];
    for (doc, want) in &cases {
        let got = err_toml(doc);
        assert!(
            got.starts_with(want),
            "document:\n{doc}\nwant prefix: {want}\ngot: {got}"
        );
    }
}

#[test]
fn syntax_errors_and_unknown_fields_are_reported() {
    for doc in [
        "[[rules]\nname=",
        "bogus = 1\n",
        "[[rules]]\nname = \"a\"\nprefix = \"/a\"\nrate = 1\nburts = 3\n",
        "[[rules]]\nrate = \"ten\"\n",
    ] {
        let e = LayerConfig::from_toml(doc).expect_err(doc);
        assert!(matches!(e.kind(), ConfigErrorKind::Syntax(_)), "{doc}: {e}");
    }
    let e =
        LayerConfig::from_toml("[[rules]]\nname = \"a\"\nprefix = \"/a\"\nrate = 1\nburts = 3\n")
            .unwrap_err();
    assert!(e.to_string().contains("burts"), "{e}");
    let e = LayerConfig::from_json(r#"{"rules": [{"name": "a", "prefix": "/a", "rate": -1}]}"#)
        .unwrap_err();
    assert!(matches!(e.kind(), ConfigErrorKind::Syntax(_)), "{e}");
    let e = LayerConfig::from_json(
        r#"{"rules": [{"name": "a", "prefix": "/a", "rate": 1, "burst": 0}]}"#,
    )
    .and_then(LayerConfig::build)
    .unwrap_err();
    assert_eq!(e.to_string(), "rules[0].burst: must be at least 1");
    assert_eq!(e.location(), "rules[0].burst");
}
