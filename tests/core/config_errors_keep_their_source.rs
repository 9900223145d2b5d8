//! A rules-file error made from another error keeps it as its
//! `source()` (a TOML or JSON parser's error, the core's, the Redis
//! store's), not flattened to text; its `Display` stays the one-line
//! message it always was. An error of tollgate's own (a duration) has
//! nothing underneath.
#![cfg(feature = "config")]

use std::error::Error;

use tollgate::http::{ConfigError, ConfigErrorKind, LayerConfig};

fn err_toml(doc: &str) -> ConfigError {
    LayerConfig::from_toml(doc)
        .and_then(LayerConfig::build)
        .expect_err(doc)
}

const API: &str = "[[rules]]\nname = \"api\"\nprefix = \"/api\"\nrate = 10\n";

#[test]
fn a_toml_syntax_error_keeps_the_toml_error_as_its_source() {
    let doc = "[[rules]]\nname = = \"api\"\n";
    let err = err_toml(doc);
    assert!(matches!(err.kind(), ConfigErrorKind::Syntax(_)));
    assert_eq!(
        err.to_string(),
        "TOML parse error at line 2, column 8\n  |\n2 | name = = \"api\"\n  |        ^\nextra `=`, expected nothing"
    );
    let toml = err
        .source()
        .and_then(|s| s.downcast_ref::<toml::de::Error>())
        .expect("the toml error as the source");
    assert_eq!(toml, &toml::from_str::<toml::Table>(doc).unwrap_err());
}

#[test]
fn a_json_syntax_error_keeps_the_serde_json_error_as_its_source() {
    let doc = r#"{"rules": [{"name": "api",}]}"#;
    let err = LayerConfig::from_json(doc).expect_err(doc);
    assert!(matches!(err.kind(), ConfigErrorKind::Syntax(_)));
    assert_eq!(err.to_string(), "trailing comma at line 1 column 27");
    let json = err
        .source()
        .and_then(|s| s.downcast_ref::<serde_json::Error>())
        .expect("the serde_json error as the source");
    assert_eq!((json.line(), json.column()), (1, 27));
    assert!(json.is_syntax());
}

#[test]
fn a_json_document_of_the_wrong_shape_keeps_the_serde_json_error_as_its_source() {
    let doc = r#"{"rules": [{"name": "api", "rate": "ten"}]}"#;
    let err = LayerConfig::from_json(doc).expect_err(doc);
    assert_eq!(
        err.to_string(),
        "invalid type: string \"ten\", expected u64 at line 1 column 40"
    );
    let json = err
        .source()
        .and_then(|s| s.downcast_ref::<serde_json::Error>())
        .expect("the serde_json error as the source");
    assert!(json.is_data());
}

#[test]
fn a_duration_that_does_not_parse_says_which_units_exist_with_nothing_underneath() {
    // the rules' own grammar: its message names the field and the units
    let err = err_toml(&format!("{API}period = \"1 fortnight\"\n"));
    assert_eq!(
        err.to_string(),
        "rules[0].period: must be a positive duration with its unit: a whole number of d, h, m (minutes), s or ms, lower case, or several largest first (\"500ms\", \"1s\", \"1m30s\", \"1d\"); a bare number, a fraction, a space and any other unit (\"1M\", \"1w\", \"1y\", \"1us\", \"1ns\") are refused"
    );
    assert!(err.source().is_none(), "{err}");

    // the queue's wait too
    let err = err_toml(&format!(
        "{API}queue = {{ max_wait = \"2 secs and a bit\", limit = 1 }}\n"
    ));
    assert_eq!(err.location(), "rules[0].queue.max_wait");
    assert!(err.source().is_none(), "{err}");

    // a bare number, a zero, a unit that reads two ways
    for period in ["50", "0s", "1M"] {
        let err = err_toml(&format!("{API}period = \"{period}\"\n"));
        assert_eq!(err.location(), "rules[0].period");
        assert!(err.source().is_none(), "{period}: {err}");
    }
}

#[test]
fn a_quota_the_core_refuses_keeps_the_core_error_as_its_source() {
    // 4,294,967,295 per second: an interval under a nanosecond
    let doc = "[[rules]]\nname = \"api\"\nprefix = \"/api\"\nrate = 4294967295\nperiod = \"1s\"\n";
    let err = err_toml(doc);
    assert_eq!(
        err.to_string(),
        "rules[0].rate: more than one permit per nanosecond"
    );
    let core = err
        .source()
        .and_then(|s| s.downcast_ref::<tollgate::ConfigError>())
        .expect("the core's error as the source");
    assert!(matches!(
        core,
        tollgate::ConfigError::IntervalTooShort {
            permits: 4_294_967_295,
            ..
        }
    ));
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn a_redis_url_the_client_refuses_keeps_the_store_error_as_its_source() {
    let err = err_toml(&format!(
        "{API}backend = \"redis\"\nredis_url = \"http://127.0.0.1/\"\n"
    ));
    assert_eq!(
        err.to_string(),
        "rules[0].redis_url: must be a redis:// URL"
    );
    let store = err
        .source()
        .and_then(|s| s.downcast_ref::<tollgate::redis::ConfigError>())
        .expect("the Redis store's error as the source");
    assert!(matches!(store, tollgate::redis::ConfigError::Connection(_)));
    // and the client's own error under it
    assert!(store.source().is_some_and(|s| s.is::<redis::RedisError>()));
}
