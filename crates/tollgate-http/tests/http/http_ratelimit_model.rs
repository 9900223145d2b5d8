//! The meaning of `RateLimit`'s `r` and `t` (draft-ietf-httpapi-ratelimit-
//! headers-11: `r` the available quota, `t` its effective window), checked
//! against the layer for every algorithm: a client that reads `r` and `t`
//! from a response and then spends at most `r` within the next `t`
//! seconds, at any pace (all at once, evenly spread, all at the end,
//! random), is never refused; at the end of the window it has quota
//! again (`t` is never too short); and `r` is not understated (one more at
//! once is refused). The layer is called as a tower service, the way a
//! user's server calls it, on a manual clock.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::support::http::EmptyOk;
use http::{Request, Response};
use tollgate::http::{KeySource, Policy, RateLimitLayer};
use tollgate::{ManualClock, Quota, Timestamp};
use tower_layer::Layer;
use tower_service::Service;

use crate::support::http::Resp;

/// One client's requests through the layer, at the manual clock's time.
struct Client<S> {
    svc: S,
}

impl<S, B> Client<S>
where
    S: Service<Request<()>, Response = Response<B>>,
    S::Error: core::fmt::Debug,
{
    /// Sends a request; the response's status and headers as a [`Resp`]
    /// (its body, and any in-flight permit it holds, dropped).
    fn send(&mut self) -> Resp {
        resp(&self.start())
    }

    /// Sends a request and returns the response, its body unread (an
    /// in-flight permit is held until it is dropped).
    fn start(&mut self) -> Response<B> {
        let mut req = Request::builder().uri("/api").body(()).unwrap();
        req.extensions_mut()
            .insert(SocketAddr::from(([192, 0, 2, 7], 40_000)));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(self.svc.poll_ready(&mut cx).is_ready());
        let mut fut = pin!(self.svc.call(req));
        let Poll::Ready(res) = fut.as_mut().poll(&mut cx) else {
            panic!("a policy that does not queue answers at once");
        };
        res.unwrap()
    }
}

fn resp<B>(res: &Response<B>) -> Resp {
    Resp {
        status: res.status().as_u16(),
        headers: res
            .headers()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_string()))
            .collect(),
        body: String::new(),
    }
}

/// `(r, t in seconds)` of `policy` in a response.
fn r_and_t(res: &Resp, policy: &str) -> (u64, u64) {
    let params = res
        .sf_list("ratelimit")
        .into_iter()
        .find(|(n, _)| n == policy)
        .unwrap_or_else(|| panic!("no {policy} in {:?}", res.header("ratelimit")))
        .1;
    let get = |k: &str| {
        let v = params.iter().find(|(p, _)| p == k).map(|(_, v)| *v);
        u64::try_from(v.unwrap_or_else(|| panic!("no {k} in {params:?}"))).unwrap()
    };
    (get("r"), get("t"))
}

/// How a client spreads `r` requests over a window of `t`.
#[derive(Debug, Clone, Copy)]
enum Pace {
    AllAtOnce,
    Even,
    AllAtTheEnd,
    Random(u64),
}

impl Pace {
    /// The offsets (ns, within `0..=window`, ascending) of `r` requests.
    fn offsets(self, r: u64, window: u64, round: u64) -> Vec<u64> {
        let mut v: Vec<u64> = match self {
            Self::AllAtOnce => vec![0; r as usize],
            Self::AllAtTheEnd => vec![window; r as usize],
            Self::Even => (1..=r).map(|i| window * i / (r + 1)).collect(),
            Self::Random(seed) => {
                // a small LCG: reproducible, no dependency
                let mut x = seed ^ round.wrapping_mul(0x9e37_79b9_7f4a_7c15);
                (0..r)
                    .map(|_| {
                        x = x
                            .wrapping_mul(6_364_136_223_846_793_005)
                            .wrapping_add(1_442_695_040_888_963_407);
                        (x >> 11) % (window + 1)
                    })
                    .collect()
            }
        };
        v.sort_unstable();
        v
    }
}

const PACES: [Pace; 5] = [
    Pace::AllAtOnce,
    Pace::Even,
    Pace::AllAtTheEnd,
    Pace::Random(7),
    Pace::Random(0xdead_beef),
];

/// Runs the model for `policy` (named "api"), starting `offset` into the
/// clock's time (windows start at multiples of their length).
/// `ceiling` is the most the policy admits in a given time.
fn model(policy: impl Fn() -> Policy, offset: Duration, ceiling: impl Fn(Duration) -> u64) {
    for pace in PACES {
        let clock = Arc::new(ManualClock::starting_at(Timestamp::from_secs(1_000_000)));
        clock.advance(offset);
        let layer = RateLimitLayer::builder()
            .clock(Arc::clone(&clock))
            .headers_on_success(true)
            .policy(policy().prefix("/api"))
            .build()
            .unwrap();
        let started = clock_now(&clock);
        let mut client = Client {
            svc: layer.layer(EmptyOk),
        };
        let mut res = client.send();
        assert_eq!(res.status, 200, "{pace:?}: the first request");
        let mut admitted = 1;
        for round in 0..40 {
            let (r, t) = r_and_t(&res, "api");
            assert!(t >= 1, "{pace:?}: t = {t}");
            let start = Timestamp::from_nanos(clock_now(&clock));
            let window = Duration::from_secs(t).as_nanos() as u64;
            for off in pace.offsets(r, window, round) {
                clock.set(Timestamp::from_nanos(start.as_nanos() + off));
                let got = client.send();
                assert_eq!(
                    got.status, 200,
                    "{pace:?}, round {round}: r={r} t={t}, a request {off} ns into the window was refused"
                );
                admitted += 1;
            }
            if matches!(pace, Pace::AllAtOnce) {
                // r is all there is at once: one more is refused, and the
                // refusal's t is not later than its Retry-After
                let over = client.send();
                assert_eq!(over.status, 429, "round {round}: r={r} understated");
                let (r0, t0) = r_and_t(&over, "api");
                let retry: u64 = over.header("retry-after").unwrap().parse().unwrap();
                assert_eq!((r0, t0), (0, retry));
            }
            // at the end of the window there is quota again
            clock.set(Timestamp::from_nanos(start.as_nanos() + window));
            res = client.send();
            admitted += 1;
            assert_eq!(
                res.status, 200,
                "{pace:?}, round {round}: r={r} t={t}: no quota at the end of the window"
            );
        }
        // and r and t let it use at least half of what the policy grants
        // over the whole run (they are not so cautious as to be useless)
        let elapsed = Duration::from_nanos(clock_now(&clock) - started);
        let most = ceiling(elapsed);
        assert!(
            2 * admitted >= most,
            "{pace:?}: {admitted} admitted in {elapsed:?}, where the policy grants {most}"
        );
    }
}

fn clock_now(clock: &ManualClock) -> u64 {
    use tollgate::Clock;
    clock.now().as_nanos()
}

#[test]
fn token_bucket_r_within_t_is_never_refused() {
    // burst 4, one per 6 s
    model(
        || {
            Policy::token_bucket("api", Quota::per_minute(10).unwrap().with_burst(4).unwrap())
                .key(KeySource::PeerIp)
        },
        Duration::from_millis(1_234),
        |e| 4 + e.as_secs() / 6,
    );
}

#[test]
fn fast_token_bucket_r_within_t_is_never_refused() {
    // one per 200 ms: t rounds up to a whole second
    model(
        || Policy::token_bucket("api", Quota::per_second(5).unwrap()),
        Duration::from_millis(77),
        |e| 5 + e.as_millis() as u64 / 200,
    );
}

#[test]
fn leaky_bucket_r_within_t_is_never_refused() {
    model(
        || Policy::leaky_bucket("api", Quota::per_minute(20).unwrap()).key(KeySource::PeerIp),
        Duration::from_millis(500),
        |e| 1 + e.as_secs() / 3,
    );
}

#[test]
fn fixed_window_r_within_t_is_never_refused() {
    model(
        || Policy::fixed_window("api", 5, Duration::from_secs(10)).key(KeySource::PeerIp),
        Duration::from_millis(3_700),
        |e| 5 * (e.as_secs() / 10 + 2),
    );
}

#[test]
fn sliding_window_r_within_t_is_never_refused() {
    model(
        || Policy::sliding_window("api", 6, Duration::from_secs(20)),
        Duration::from_millis(900),
        |e| 6 * (e.as_secs() / 20 + 2),
    );
}

#[test]
fn in_flight_r_is_the_requests_that_may_run_beside_the_held_ones() {
    // an in-flight limit's r counts free permits (no t: none come back
    // with time): a client holding its responses open may start r more,
    // at any moment, and the one after them is refused
    let clock = Arc::new(ManualClock::starting_at(Timestamp::from_secs(1_000)));
    let layer = RateLimitLayer::builder()
        .clock(Arc::clone(&clock))
        .headers_on_success(true)
        .policy(
            Policy::concurrency("api", 5)
                .prefix("/api")
                .key(KeySource::PeerIp),
        )
        .build()
        .unwrap();
    let mut client = Client {
        svc: layer.layer(EmptyOk),
    };
    for round in 0..4 {
        let mut held = vec![client.start()];
        let first = resp(&held[0]);
        assert_eq!(first.status, 200);
        let state = first.sf_list("ratelimit");
        assert_eq!(state.len(), 1, "{state:?}");
        let params = &state[0].1;
        assert!(params.iter().all(|(k, _)| k != "t"), "{params:?}");
        let r = params.iter().find(|(k, _)| k == "r").unwrap().1;
        assert_eq!(r, 4);
        for i in 0..r {
            clock.advance(Duration::from_millis(100 * (round + 1)));
            let res = client.start();
            let got = resp(&res);
            assert_eq!(got.status, 200, "round {round}: request {i} of r={r}");
            assert_eq!(r_of(&got), r - 1 - i);
            held.push(res);
        }
        let over = client.send();
        assert_eq!(over.status, 429, "round {round}: r={r} understated");
        assert_eq!(r_of(&over), 0);
        // every held response ends: all of r is free again
        drop(held);
    }
}

fn r_of(res: &Resp) -> i64 {
    res.sf_list("ratelimit")[0]
        .1
        .iter()
        .find(|(k, _)| k == "r")
        .unwrap()
        .1
}
