//! Client IP behind proxies: forwarding headers are believed only from a
//! trusted peer, the key is the right-most untrusted address, malformed
//! headers never panic and never bypass. Clients connect from distinct
//! 127.0.0.0/8 source addresses.

use crate::support;

use support::http::{Req, Server, connect_info, hello, send, serve};
use tollgate::Quota;
use tollgate::http::{KeySource, Policy, RateLimitLayer};

const PROXY: [u8; 4] = [127, 0, 0, 2];
const STRANGER: [u8; 4] = [127, 0, 0, 3];

async fn server(key: KeySource) -> Server {
    let layer = RateLimitLayer::builder()
        .peer_addr(connect_info)
        .trusted_proxies([
            "127.0.0.2/32".parse().unwrap(),
            "10.0.0.0/8".parse().unwrap(),
        ])
        .policy(
            Policy::token_bucket("api", Quota::per_hour(1).unwrap())
                .prefix("/")
                .key(key),
        )
        .build()
        .unwrap();
    serve(hello(layer)).await
}

#[tokio::test]
async fn spoofed_xff_from_untrusted_peer_does_not_change_the_key() {
    let s = server(KeySource::ClientIp).await;
    let first = send(
        s.addr,
        Req::get("/")
            .from(STRANGER)
            .header("x-forwarded-for", "9.9.9.1"),
    )
    .await;
    assert_eq!(first.status, 200);
    for spoof in ["9.9.9.2", "1.2.3.4, 5.6.7.8", "127.0.0.9"] {
        let r = send(
            s.addr,
            Req::get("/")
                .from(STRANGER)
                .header("x-forwarded-for", spoof),
        )
        .await;
        assert_eq!(r.status, 429, "spoofed {spoof} changed the key");
    }
    // another untrusted peer is its own key
    assert_eq!(
        send(s.addr, Req::get("/").from([127, 0, 0, 4]))
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn behind_trusted_proxies_the_right_most_untrusted_address_is_the_key() {
    let s = server(KeySource::ClientIp).await;
    let r = send(
        s.addr,
        Req::get("/")
            .from(PROXY)
            .header("x-forwarded-for", "6.6.6.6, 1.1.1.1"),
    )
    .await;
    assert_eq!(r.status, 200);
    // a different (client-chosen) left-most entry is the same client
    let r = send(
        s.addr,
        Req::get("/")
            .from(PROXY)
            .header("x-forwarded-for", "7.7.7.7, 1.1.1.1"),
    )
    .await;
    assert_eq!(r.status, 429);
    // a chain through a second trusted hop (10/8) reaches the client
    let r = send(
        s.addr,
        Req::get("/")
            .from(PROXY)
            .header("x-forwarded-for", "1.1.1.1, 10.2.3.4"),
    )
    .await;
    assert_eq!(r.status, 429);
    // header split over two lines: entries in order
    let r = send(
        s.addr,
        Req::get("/")
            .from(PROXY)
            .header("x-forwarded-for", "1.1.1.2")
            .header("x-forwarded-for", "10.9.9.9"),
    )
    .await;
    assert_eq!(r.status, 200, "1.1.1.2 is a new client");
    // the proxy's own requests (no header) are keyed by the proxy
    assert_eq!(send(s.addr, Req::get("/").from(PROXY)).await.status, 200);
    assert_eq!(send(s.addr, Req::get("/").from(PROXY)).await.status, 429);
}

#[tokio::test]
async fn forwarded_header_rfc7239() {
    let s = server(KeySource::ForwardedClientIp).await;
    let fwd = "for=6.6.6.6, for=\"[2001:db8::7]:4711\";proto=https, for=10.0.0.1";
    assert_eq!(
        send(s.addr, Req::get("/").from(PROXY).header("forwarded", fwd))
            .await
            .status,
        200
    );
    let again = "For=\"[2001:db8::7]\"";
    assert_eq!(
        send(s.addr, Req::get("/").from(PROXY).header("forwarded", again))
            .await
            .status,
        429
    );
    // X-Forwarded-For is not read in this mode
    let r = send(
        s.addr,
        Req::get("/")
            .from(PROXY)
            .header("x-forwarded-for", "3.3.3.3"),
    )
    .await;
    assert_eq!(r.status, 200, "keyed by the proxy, first time");
}

#[tokio::test]
async fn malformed_headers_never_panic_and_never_bypass() {
    for (key, name) in [
        (KeySource::ClientIp, "x-forwarded-for"),
        (KeySource::ForwardedClientIp, "forwarded"),
    ] {
        let s = server(key).await;
        let long = "1.".repeat(4000);
        let malformed = [
            "garbage",
            "1.1.1.1, garbage",
            "",
            ",,,",
            " , ",
            "[::1",
            "999.1.1.1",
            "for=",
            "for=\"unterminated",
            "for=_hidden",
            "for=unknown",
            "for=1.1.1.1;for=2.2.2.2",
            "1.1.1.1:99999",
            "caf\u{e9}",
            long.as_str(),
        ];
        let mut admitted = 0;
        for m in malformed {
            let r = send(s.addr, Req::get("/").from(PROXY).header(name, m)).await;
            assert!(
                r.status == 200 || r.status == 429,
                "{name}: {m:?} gave {}",
                r.status
            );
            if r.status == 200 {
                admitted += 1;
            }
        }
        // Every malformed chain is charged to the proxy's own address: one
        // permit per hour in total, not one per distinct garbage string.
        assert_eq!(admitted, 1, "{name}");
        assert_eq!(send(s.addr, Req::get("/").from(PROXY)).await.status, 429);
    }
}
