//! A reload applies a whole rules file or nothing (issue 28, item 4): a
//! file the layer refuses changes nothing, every bucket keeps its state;
//! a file caught halfway through being written — every byte prefix of a
//! real rules file — is refused, or, where the cut happens to leave a
//! valid file, never applied by a reloader that waits for the file to
//! settle ([`SettledText`], as `examples/server.rs` does). Real server on
//! loopback, on tokio's paused time: no bucket refills while a test runs.

use crate::support;

use support::http::{Req, Resp, connect_info, hello, paused_clock, send_paused, serve};
use tollgate::Inheritance;
use tollgate::http::config::SettledText;
use tollgate::http::{ConfigError, LayerConfig, RateLimitLayer, ReloadReport};

/// A small real rules file: a global limit, and two nested rules whose
/// cut-short copies include valid, looser files (`rate = 10` cut to
/// `rate = 1` with no key: one bucket for everyone, starting fresh).
const RULES: &str = r#"# the demo's rules, small
headers_on_success = true
exempt = ["/health"]

[global]
rate = 100000
period = "1h"

[[rules]]
name = "api"
prefix = "/api"
rate = 10
period = "1m"
burst = 2
key = "peer_ip"

[[rules]]
name = "login"
prefix = "/api/login"
rate = 3
period = "1m"
burst = 1
key = "peer_ip"
"#;

/// The rules of `text` given to `layer.reload`, the path a reloader
/// takes; `Inheritance::Reset`, so that a rule applied anew would start
/// with a full bucket (and show it).
fn reload(layer: &RateLimitLayer, text: &str) -> Result<ReloadReport, ConfigError> {
    let builder = LayerConfig::from_toml(text)?
        .into_builder()?
        .clock(paused_clock())
        .peer_addr(connect_info);
    layer.reload(builder, Inheritance::Reset)
}

fn layer() -> RateLimitLayer {
    LayerConfig::from_toml(RULES)
        .unwrap()
        .into_builder()
        .unwrap()
        .clock(paused_clock())
        .peer_addr(connect_info)
        .build()
        .unwrap()
}

/// The layer still runs every limit of [`RULES`] with the state it had:
/// the client's `api` and `login` buckets empty (refused, by that rule,
/// at that quota), and the global bucket one permit lower than `global`
/// said last time (not refilled, not reset). Returns the global bucket's
/// remaining permits.
async fn intact(addr: std::net::SocketAddr, global: i64, what: &str) -> i64 {
    let refused = |r: &Resp, policy: &str| {
        assert_eq!(r.status, 429, "{what}: {policy} no longer refuses");
        r.header("ratelimit-policy").map(str::to_string)
    };
    let r = send_paused(addr, Req::get("/api/login").method("POST")).await;
    assert_eq!(
        refused(&r, "login").as_deref(),
        Some("\"login\";q=3;w=60"),
        "{what}"
    );
    let r = send_paused(addr, Req::get("/api/items")).await;
    assert_eq!(
        refused(&r, "api").as_deref(),
        Some("\"api\";q=10;w=60"),
        "{what}"
    );
    let r = send_paused(addr, Req::get("/")).await;
    assert_eq!(r.status, 200, "{what}");
    assert_eq!(
        r.header("ratelimit-policy"),
        Some("\"global\";q=100000;w=3600"),
        "{what}"
    );
    let left = r.remaining("global").expect("the global limit's RateLimit");
    assert_eq!(left, global - 1, "{what}: the global bucket was reset");
    left
}

/// A server on [`RULES`] whose client has emptied its `api` and `login`
/// buckets; the global bucket's remaining permits.
async fn throttled() -> (RateLimitLayer, support::http::Server, i64) {
    let layer = layer();
    let s = serve(hello(layer.clone())).await;
    for _ in 0..2 {
        assert_eq!(
            send_paused(s.addr, Req::get("/api/items")).await.status,
            200
        );
    }
    assert_eq!(
        send_paused(s.addr, Req::get("/api/login").method("POST"))
            .await
            .status,
        200
    );
    let r = send_paused(s.addr, Req::get("/")).await;
    let global = r.remaining("global").unwrap();
    let global = intact(s.addr, global, "before any reload").await;
    (layer, s, global)
}

#[tokio::test(start_paused = true)]
async fn a_refused_reload_keeps_every_bucket() {
    let (layer, s, mut global) = throttled().await;
    for (bad, at) in [
        // refused by the file's own checks (no reload is tried)
        ("", "rules"),
        ("# emptied, to be rewritten\n", "rules"),
        (
            &*RULES.replace("period = \"1m\"", "period = \"1M\""),
            "rules[0].period",
        ),
        (
            &*RULES.replace("\"/health\"", "\"/health/..\""),
            "exempt[0]",
        ),
        // refused by the layer's reload itself: nothing is swapped in
        (
            &*RULES.replace("\"/api/login\"", "\"/api/login*\""),
            "rules[1].prefix",
        ),
        (
            &*RULES.replace("\"/api/login\"", "\"//api/login\""),
            "rules[1].prefix",
        ),
        (
            &*RULES.replace("name = \"login\"", "name = \"api\""),
            "rules[1].name",
        ),
    ] {
        let err = reload(&layer, bad).expect_err(bad);
        assert_eq!(err.location(), at, "{err}");
        global = intact(s.addr, global, bad).await;
    }
    // the same file again: every rule kept, every bucket as it was
    let report = reload(&layer, RULES).unwrap();
    assert_eq!(report.kept, ["global", "api", "login"]);
    intact(s.addr, global, "the same file").await;
}

/// Every byte prefix of [`RULES`] — what a reader sees of a file being
/// written in place — is refused by the reload (the layer unchanged), or,
/// where the cut leaves a valid file, never given to the reload by a
/// reloader that waits until two reads are the same: the writer has moved
/// on by the next read.
#[tokio::test(start_paused = true)]
async fn a_cut_short_rules_file_is_refused_or_never_applied() {
    let (layer, s, mut global) = throttled().await;
    let mut valid_cuts = Vec::new();
    for cut in 0..RULES.len() {
        let part = &RULES[..cut];
        // the reload path given the part itself
        if LayerConfig::from_toml(part)
            .and_then(LayerConfig::into_builder)
            .and_then(|b| b.peer_addr(connect_info).build())
            .is_ok()
        {
            valid_cuts.push(part);
        } else {
            reload(&layer, part).expect_err(part);
            global = intact(s.addr, global, part).await;
        }
        // a reloader polling a file rewritten in place: it reads the
        // part, then the whole file, then the whole file again
        let mut file = SettledText::new(RULES);
        for read in [part, RULES, RULES] {
            if let Some(text) = file.observe(read.into()) {
                panic!("cut at {cut}: {text:?} would be applied");
            }
        }
        // a slower writer, a byte further at each read
        let mut file = SettledText::new(RULES);
        for read in [part, &RULES[..=cut], RULES] {
            assert_eq!(file.observe(read.into()), None, "cut at {cut}");
        }
    }
    // cuts that are valid files on their own exist (after the global
    // limit, the rules missing; inside `rate = 10`, `rate = 1` and no key:
    // one bucket for everyone), and none reached the layer
    let api_cut = RULES.find("rate = 10").unwrap() + "rate = 1".len();
    assert!(valid_cuts.contains(&&RULES[..api_cut]), "{valid_cuts:?}");
    intact(s.addr, global, "after every cut").await;
}

/// A reloader that waits for the file to settle applies the new file once
/// it has: a real change still goes through, keeping the buckets of the
/// rules it does not change.
#[tokio::test(start_paused = true)]
async fn a_settled_file_is_applied_once() {
    let (layer, s, global) = throttled().await;
    let next = RULES.replace("rate = 3\n", "rate = 6\n");
    let mut file = SettledText::new(RULES);
    let mut applied = Vec::new();
    for read in [&next[..40], &next[..200], &next, &next, &next] {
        if let Some(text) = file.observe(read.into()) {
            applied.push(reload(&layer, text).expect("the settled file"));
        }
    }
    assert_eq!(applied.len(), 1, "{applied:?}");
    assert_eq!(applied[0].kept, ["global", "api"]);
    assert_eq!(applied[0].reconfigured, ["login"]);
    // login's bucket was reset by Inheritance::Reset: a fresh burst of 1;
    // api's and the global's carry on
    let r = send_paused(s.addr, Req::get("/api/login").method("POST")).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        send_paused(s.addr, Req::get("/api/items")).await.status,
        429
    );
    let r = send_paused(s.addr, Req::get("/")).await;
    assert_eq!(r.remaining("global"), Some(global - 2));
}
