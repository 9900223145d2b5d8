//! The rules file, TOML and JSON: any text parses and builds to a layer or
//! to an error naming where (never a panic); a document that builds also
//! builds from its own JSON-escaped twin when it is ASCII; duration text
//! never panics either.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tollgate_http::fuzzing;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // building a `backend = "redis"` rule needs a runtime: give it one
    let rt = tokio_rt();
    let _guard = rt.enter();
    for json in [false, true] {
        match fuzzing::build_config(text, json) {
            Ok(debug) => assert!(debug.starts_with("RateLimitLayer")),
            Err(e) => assert!(!e.is_empty(), "an error says what is wrong"),
        }
    }
    if let Some(d) = fuzzing::parse_duration(text) {
        assert!(
            text.bytes().any(|b| b.is_ascii_alphabetic()),
            "{text:?} -> {d:?}"
        );
    }
});

fn tokio_rt() -> &'static tokio::runtime::Runtime {
    static RT: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    })
}
