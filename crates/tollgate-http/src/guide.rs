//! The HTTP layer, part by part: how a request is charged, the
//! algorithms, routing, keys, refusals and headers, queueing, metrics, a
//! shared store, reloading, rules files, and what a request costs. The
//! [crate root](crate) has the example and the map of types.
//!
//! # Two mechanisms, both must allow
//!
//! As in ASP.NET Core: the **global** limiter
//! ([`RateLimitLayerBuilder::global`](crate::RateLimitLayerBuilder::global)) charges every non-exempt request;
//! the **route policy** that matches charges it too. When the global
//! limiter admits and the route policy refuses, the global admission is
//! cancelled (its permit refunded, its in-flight slot freed), so refused
//! requests cost no global quota. A request under no policy with no global
//! limiter passes untouched (no headers added).
//!
//! The layer routes a request itself (exemptions, path prefix, method
//! filter, partition key) and charges the chosen policy's store, a
//! [`PolicyStore`](tollgate_partitioned::PolicyStore) — a [`Limiter`](tollgate_core::Limiter)
//! over the policy's keys — or, for a policy that queues, the
//! [`Queue`](tollgate_queue::Queue) in front of it.
//!
//! # Algorithms
//!
//! Every policy (the global limiter too) runs one algorithm per key:
//!
//! | constructor | config `algorithm` | limits | `RateLimit-Policy` |
//! |---|---|---|---|
//! | [`Policy::token_bucket`](crate::Policy::token_bucket) | `"token_bucket"` (default) | `rate` per `period`, bursts of `burst` | `q=<rate>;w=<period>` |
//! | [`Policy::leaky_bucket`](crate::Policy::leaky_bucket) | `"leaky_bucket"` | `rate` per `period`, strictly paced | `q=<rate>;w=<period>` |
//! | [`Policy::fixed_window`](crate::Policy::fixed_window) | `"fixed_window"` | `rate` per window of `period` | `q=<limit>;w=<window>` |
//! | [`Policy::sliding_window`](crate::Policy::sliding_window) | `"sliding_window"` | `rate` in any `period`, in [`SLIDING_WINDOW_SEGMENTS`](crate::SLIDING_WINDOW_SEGMENTS) (10) segments | `q=<limit>;w=<window>` |
//! | [`Policy::concurrency`](crate::Policy::concurrency) | `"concurrency"` (`limit = N`) | `N` requests in flight | `q=<N>;qu="concurrent-requests"` |
//!
//! (`w` is in whole seconds rounded up, and `q` is scaled to it when the
//! period is not a whole number of seconds.)
//!
//! **In-flight limits** (nginx `limit_conn`, ASP.NET's concurrency
//! limiter) hold a request's permit until its response **body** has been
//! sent: the layer's response body, [`RateLimitBody`](crate::RateLimitBody), carries the permit
//! and gives it back when the body's last frame has been read, when it
//! fails, or when it is dropped (a client that disconnects mid-stream).
//! A streaming response keeps its client's slot busy until the last chunk.
//! An in-flight limit has no rate: its `RateLimit-Policy` item gives its
//! quota in concurrent requests and no window, its `RateLimit` item the
//! permits free and no `t` (a refusal says `r=0` and `Retry-After: 1`, a
//! hint), and it cannot use a remote backend. It can queue (see [Queueing](#queueing-per-key)): a
//! request over the limit waits in its key's line and is served when a
//! running request's response body ends, as ASP.NET Core's concurrency
//! limiter serves its queue.
//!
//! # Routing
//!
//! - **Path prefixes** ([`Policy::prefix`](crate::Policy::prefix)) are segment-bounded and ASCII
//!   case-insensitive: `/test` matches `/test`, `/test/limiter`, `/Test/x`,
//!   not `/testxxx` or `/contest`; `/` matches every path. When several
//!   match, the **longest wins** whatever the registration order, only
//!   that policy is charged, and a refused request never falls back to a
//!   looser rule.
//! - **Method filter** ([`Policy::methods`](crate::Policy::methods)): a policy applies only to
//!   those methods; for other methods the next-longest matching prefix is
//!   chosen (a POST-only `/api/login` policy leaves `GET /api/login` to
//!   the `/api` policy).
//! - **Exemptions** ([`RateLimitLayerBuilder::exempt`](crate::RateLimitLayerBuilder::exempt)): neither the global
//!   limiter nor any policy applies, however it is attached (ASP.NET's
//!   `DisableRateLimiting`).
//!   Exemptions are by path prefix, because the outer layer runs before
//!   axum's router knows the route.
//! - **Attached to axum routes** by name: [`RateLimitLayer::policy`](crate::RateLimitLayer::policy) gives a
//!   layer applying only that policy (sharing its buckets), for
//!   `Router::route_layer`.
//!
//! # Partition keys
//!
//! [`KeySource`](crate::KeySource) per policy: [`Global`](crate::KeySource::Global) (one bucket),
//! [`PeerIp`](crate::KeySource::PeerIp), [`ClientIp`](crate::KeySource::ClientIp) (behind
//! proxies), [`Header`](crate::KeySource::Header) (an API key),
//! [`Custom`](crate::KeySource::custom). A global token or leaky bucket is one
//! bucket; other keys live in a
//! [`ShardedKeyedTable`](tollgate_core::keyed::ShardedKeyedTable) of
//! [`Policy::max_keys`](crate::Policy::max_keys) slots: memory is fixed, refilled keys are evicted
//! losslessly, throttled keys are never evicted, and when every slot is
//! busy new keys share one overflow bucket (an in-flight limit refuses
//! them instead: their permits could not be counted).
//!
//! **A flood of distinct keys does not starve newcomers.** The flood
//! keeps every slot busy and the shared overflow bucket empty, so a new
//! key that bucket refuses is charged to its **network's** bucket (an
//! IPv4 /24 or IPv6 /48 of the client's address) in a second table of
//! [`Policy::overflow_networks`](crate::Policy::overflow_networks)
//! networks, by default as many as `max_keys`: the flood exhausts its own
//! networks' buckets, and a client from another network is served within
//! its quota (measured: a million flooding IPv4 clients of 10.0.0.0/12, or
//! /64s of one IPv6 /44, and 366 of 366 newcomers from other networks each
//! served their 5 requests; with the network table off, 0 of 45). The
//! cost is a second table of the same size: about 20 bytes per network of
//! capacity, so the default doubles a keyed policy's memory (10,000 keys:
//! about 200 KB more). A flood from more networks than that table holds
//! (a botnet of more than `overflow_networks` /24s) ends in one shared
//! bucket again; policies that queue, in-flight limits and remote
//! backends keep the one shared bucket.
//!
//! **Fixed memory per key, whatever the client sends.** A slot never holds
//! the client's bytes: its key is at most 24 bytes (on 64-bit targets)
//! beside the algorithm's state, so a policy's memory is `max_keys` slots
//! however long or numerous the keys are. Header and custom keys are
//! stored as a 128-bit SipHash-2-4 digest under a secret drawn from the
//! operating system when the layer is built (kept across reloads): a
//! client cannot craft two values sharing a bucket, nor one sharing
//! another client's. IPv6 clients are keyed by their network prefix,
//! **by default the /64** ([`DEFAULT_IPV6_PREFIX`](crate::DEFAULT_IPV6_PREFIX); [`Policy::ipv6_prefix`](crate::Policy::ipv6_prefix),
//! `ipv6_prefix = 56` in a rules file; 128 keys each address), since one
//! host usually holds a whole /64 and could otherwise take a fresh key
//! per request and fill every table; IPv4 addresses are keyed whole. A
//! remote backend (Redis) gets the same fixed-size keys, hashed with
//! SHA-256 instead (no secret can be shared across a fleet).
//!
//! **Client IP behind proxies.** Forwarding headers (`X-Forwarded-For`, or
//! RFC 7239 `Forwarded` with [`KeySource::ForwardedClientIp`](crate::KeySource::ForwardedClientIp)) are read only
//! when the TCP peer is in [`RateLimitLayerBuilder::trusted_proxies`](crate::RateLimitLayerBuilder::trusted_proxies); then
//! the chain is walked from the right and the first address that is not a
//! trusted proxy is the key (never the left-most entry, which the client
//! writes). An entry that does not parse stops the walk at the trusted hop
//! that reported it, so garbage is charged to that proxy's address, never
//! to a fresh key.
//!
//! **Missing keys** (no key header, a custom function returning `None`, no
//! peer address) are limited, never a silent bypass unless
//! [`MissingKey::Allow`](crate::MissingKey::Allow) is chosen
//! ([`MissingKey`](crate::MissingKey), per layer or per policy). By default
//! such a request is charged to its client's address, as
//! [`KeySource::ClientIp`](crate::KeySource::ClientIp) finds it, under the
//! policy's quota and refused with 429 over it: a client that leaves its
//! API key out gets one client's quota. [`MissingKey::SharedBucket`](crate::MissingKey::SharedBucket)
//! charges every key-less request to one bucket and refuses with its own
//! status (401 asks for a key). A request without even a peer address (a
//! server that does not record it) is answered 500. With feature
//! `tracing`, each policy warns about missing keys at most once per
//! [`MISSING_KEY_LOG_INTERVAL`](crate::MISSING_KEY_LOG_INTERVAL) (10 s),
//! counting the requests since its previous warning, so a client cannot
//! flood the log.
//!
//! # Refusals and headers
//!
//! Status 429 by default ([`RateLimitLayerBuilder::status`](crate::RateLimitLayerBuilder::status), e.g. 503).
//! `Retry-After` is in whole seconds rounded **up** (a 300 ms wait sends
//! `1`, never `0`). The IETF fields of draft-ietf-httpapi-ratelimit-headers-11
//! (RFC 9651 structured-field lists, one member per policy) name the
//! refusing policy:
//! `RateLimit-Policy: "api";q=100;w=60` (the quota's permits per period,
//! the period in seconds rounded up; an in-flight limit's
//! `"conns";q=10;qu="concurrent-requests"`) and
//! `RateLimit: "api";r=0;t=5;pk=:2wI8xQ0bLmRa:` (nothing available, for
//! 5 s: `t` is the refusal's wait, the same as `Retry-After`).
//! [`RateLimitLayerBuilder::headers_on_success`](crate::RateLimitLayerBuilder::headers_on_success) adds both to admitted
//! responses, one member per limiter charged (`"global"…, "api"…`; a
//! queueing policy's `r` counts only the permits free at once, not its
//! queue's slots).
//!
//! **`r` and `t`.** `r` is the *available quota* and `t` its *effective
//! window* (draft-11): a client that sends at most `r` more requests
//! within the next `t` seconds, at any pace, is not refused by that
//! policy, and `t` is when it may have more than `r`. `t` is rounded up to
//! whole seconds (a longer window for the same `r` is still kept). Per
//! algorithm, after the request (`B` the burst, `T` the interval between
//! permits, `lead` the time until the bucket is full):
//!
//! | algorithm | `r` | `t` |
//! |---|---|---|
//! | token bucket | permits available at once | until permit `r + 1` is: `lead − (B − r − 1)·T`, at most `T` (`T` when full) |
//! | leaky bucket | 1 if a request would pass now, else 0 | `T` when `r = 1`; else the wait until the next admission |
//! | fixed window | the limit minus the window's count | until the window ends |
//! | sliding window | the limit minus the requests in the window | until all of them have left it (quota may come back sooner, segment by segment: `t` errs long, never short) |
//! | in-flight limit | permits free | none (permits come back when responses end, not with time) |
//!
//! A token bucket's permits only accumulate and a window's count only
//! falls while a client waits, so spending `r` early or late within `t`
//! makes no difference; a leaky bucket paces requests one per `T`, so it
//! never offers more than one at once.
//!
//! **`pk`**, the partition key, is sent by a partitioned policy (a key
//! other than [`KeySource::Global`](crate::KeySource::Global), and not the
//! bucket key-less requests share): 9 bytes of the layer's secret keyed
//! digest (SipHash-2-4-128, the one that keys header and custom keys) of
//! the key the request was charged to, as a byte sequence. Never the key
//! itself: a client cannot learn another's key from it, nor its own IP
//! address as the server sees it. It is the same for one key for the life
//! of the layer (reloads keep the secret) and differs between processes
//! and replicas; a client can compare two responses' `pk` to tell whether
//! they drew on the same quota. It is computed only when a field is sent.
//! A global policy, or one shared bucket, sends none (`RateLimit-Policy`
//! never carries `pk`: its members stay the same for every client).
//!
//! **Which rejection handler answers** (ASP.NET Core's precedence: an
//! endpoint policy's `OnRejected` is used only when that policy refused).
//! A handler is a policy's [`Policy::on_rejected`](crate::Policy::on_rejected) or the layer's
//! [`RateLimitLayerBuilder::on_rejected`](crate::RateLimitLayerBuilder::on_rejected):
//!
//! | who refused | route handler set? | layer handler set? | answered by |
//! |---|---|---|---|
//! | global limiter | yes | yes | the layer's handler |
//! | global limiter | yes | no | the default 429 |
//! | global limiter | no | yes | the layer's handler |
//! | global limiter | no | no | the default 429 |
//! | route policy | yes | yes | the route policy's handler |
//! | route policy | yes | no | the route policy's handler |
//! | route policy | no | yes | the layer's handler |
//! | route policy | no | no | the default 429 |
//!
//! A route policy's handler never answers a global refusal (a handler
//! answering 404 cannot turn a global refusal into a 404). The global
//! limiter's own [`Policy::on_rejected`](crate::Policy::on_rejected), if set, answers its refusals
//! before the layer's. The "default 429" is the configured status with an
//! empty body. Whoever answers, the layer adds the standard headers
//! (`Retry-After`, `RateLimit-Policy`, `RateLimit` of the refusing policy)
//! the response does not already have. The default path builds no
//! `String`: the header values are formatted on the stack. (The `http`
//! crate's `HeaderMap` and `HeaderValue` still allocate their own storage
//! when a header is inserted: that is outside tollgate's hands.)
//!
//! # gRPC (tonic)
//!
//! The layer sits in front of a tonic server as it does in front of axum
//! (`Server::builder().layer(...)`). A gRPC client maps HTTP 429 to
//! UNAVAILABLE, which retry policies and load balancers read as "try
//! again now, or elsewhere": so a request whose `content-type` is
//! `application/grpc` or `application/grpc+…` that the layer refuses is
//! answered as a gRPC server fails a call — the same refusal (the same
//! policy, the same wait), rendered for a gRPC client:
//!
//! - HTTP 200, **trailers-only** (the headers end the stream before any
//!   message; a server-streaming call fails before its first message),
//!   `content-type: application/grpc`;
//! - `grpc-status: 8` (RESOURCE_EXHAUSTED) for the default status 429 (a
//!   [status](crate::RateLimitLayerBuilder::status) of 503 becomes
//!   UNAVAILABLE, 500–599 INTERNAL, 400 INVALID_ARGUMENT, 401
//!   UNAUTHENTICATED, 403 PERMISSION_DENIED, 404 NOT_FOUND, any other
//!   UNKNOWN);
//! - `grpc-message: rate limited by policy "api"`, percent-encoded as the
//!   gRPC protocol says (bytes outside `0x20..=0x7E`, and `%`);
//! - with feature **`grpc`**, `grpc-status-details-bin`: a
//!   `google.rpc.Status` (base64, unpadded, as gRPC sends it) holding a
//!   `google.rpc.RetryInfo` whose `retry_delay` is the wait **to the
//!   nanosecond** (`Retry-After` is the same wait rounded up to whole
//!   seconds) and a `google.rpc.QuotaFailure` with one violation: `subject`
//!   the policy's name, `description` what it limits (e.g. `token bucket:
//!   2 requests per 60 s, bursts of 2`). The messages are encoded by
//!   `prost`. Without the feature the status and message are sent, no
//!   details (a client sees RESOURCE_EXHAUSTED, not when to retry, except
//!   from the `retry-after` metadata);
//! - `Retry-After`, `RateLimit-Policy` and `RateLimit` ride along as
//!   metadata, exactly as on an HTTP refusal.
//!
//! A request the layer refuses for want of a key
//! ([`MissingKey::Reject`](crate::MissingKey::Reject)) gets the same
//! trailers-only answer with the code of its status and no details.
//! Admitted calls are not touched (the service's own statuses pass as they
//! are), queued calls wait their turn as HTTP requests do, and non-gRPC
//! requests get the HTTP answer above, unchanged.
//!
//! **A rejection handler still wins**: if a
//! [handler](crate::RateLimitLayerBuilder::on_rejected) answers the
//! refusal (see the table above), its status and body are sent as they
//! are, for gRPC requests too — it can set `grpc-status` itself (the
//! [`Refusal`](tollgate_core::refusal::Refusal) it gets names the policy and
//! the wait); the gRPC rendering is the layer's answer when no handler
//! answers.
//!
//! Policies match a call's path, `/<package>.<Service>/<Method>`: prefix
//! `/grpc.health.v1.Health` covers a whole service. tonic records the
//! peer address as its `TcpConnectInfo`, not as a `SocketAddr`: tell the
//! layer where it is for [`KeySource::PeerIp`](crate::KeySource::PeerIp).
//!
//! ```no_run
//! use tollgate::http::{KeySource, Policy, RateLimitLayer};
//! use tollgate::Quota;
//! use tonic::transport::server::TcpConnectInfo;
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let layer = RateLimitLayer::builder()
//!     .peer_addr(|ext| ext.get::<TcpConnectInfo>()?.remote_addr())
//!     .global(Policy::token_bucket("global", Quota::per_second(1000)?))
//!     // every method of the health service: 2 per minute per peer IP
//!     .policy(
//!         Policy::token_bucket("health", Quota::per_minute(2)?)
//!             .prefix("/grpc.health.v1.Health")
//!             .key(KeySource::PeerIp),
//!     )
//!     .build()?;
//! let (_reporter, health) = tonic_health::server::health_reporter();
//! tonic::transport::Server::builder()
//!     .layer(layer)
//!     .add_service(health)
//!     .serve("127.0.0.1:50051".parse()?)
//!     .await?;
//! # Ok(())
//! # }
//! ```
//!
//! A tonic client reads the wait with `tonic-types`:
//!
//! ```no_run
//! use tonic_health::pb::{health_client::HealthClient, HealthCheckRequest};
//! use tonic_types::StatusExt;
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let channel = tonic::transport::Channel::from_static("http://127.0.0.1:50051");
//! let mut client = HealthClient::new(channel.connect().await?);
//! match client.check(HealthCheckRequest::default()).await {
//!     Ok(response) => println!("{:?}", response.into_inner().status),
//!     Err(status) if status.code() == tonic::Code::ResourceExhausted => {
//!         let wait = status.get_details_retry_info().and_then(|r| r.retry_delay);
//!         println!("{}: retry in {wait:?}", status.message());
//!     }
//!     Err(status) => return Err(status.into()),
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Problem details
//!
//! [`RateLimitLayerBuilder::problem_details`](crate::RateLimitLayerBuilder::problem_details)`(true)`
//! (`problem_details = true` in a rules file) makes the default refusal
//! body an RFC 9457 problem-details document, `content-type:
//! application/problem+json`, with the problem type draft-11 registers:
//!
//! ```json
//! {"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",
//!  "title":"Request cannot be satisfied as assigned quota has been exceeded",
//!  "status":429,"detail":"Policy \"api\" refused the request; retry in 5 s.",
//!  "retry-after":5,"violated-policies":["api"]}
//! ```
//!
//! `retry-after` is `Retry-After`'s value; `status` is the response's.
//! **`violated-policies`** names every policy that refused the request,
//! and that is always one: the layer charges the global limiter first and
//! the route policy only if it admitted, and stops at the first refusal
//! (nothing is spent on a refusal, and a policy that was not asked did not
//! refuse), so it is the global limiter or the route policy, never both.
//! The status and every header are the same with or without it (a client
//! that ignores bodies sees no change), and a rejection handler, where one
//! answers (see the table above), still writes the body. Without a
//! handler, off by default: an empty body. A gRPC request gets the gRPC
//! rendering above instead.
//!
//! # Queueing (per key)
//!
//! [`Policy::queue`](crate::Policy::queue)`(max_wait, queue_limit)` makes a request over the
//! limit wait instead of being refused, like nginx `limit_req` without
//! `nodelay` or ASP.NET Core's `QueueLimit`, **in its own key's line**: a
//! queueing policy keyed by client IP gives every client its own FIFO
//! line, so one client's flood never delays another. The policy's store
//! sits behind a [`Queue`](tollgate_queue::Queue), the same one a program
//! puts in front of any limiter: the limit itself does not change (a
//! token bucket of burst `B` admits `B` at once, then one per interval),
//! and up to `queue_limit` requests per key wait for their turn. A rate's
//! line is woken by its timer at the exact turn; an in-flight limit's line
//! ([`Policy::concurrency`](crate::Policy::concurrency)) when a running request of that key ends its
//! response body — the release wakes the waiter it admits, with no timer
//! and no retry. Every kind of policy queues: token and leaky buckets,
//! fixed and sliding windows, in-flight limits, the global limiter too.
//!
//! A request that finds its key's line full, or whose estimated wait is
//! past `max_wait`, is refused at once (with `Retry-After`); one still
//! waiting at `max_wait` is refused then. While a key's line waits, a
//! newcomer does not overtake it. Lines are bounded per key by
//! `queue_limit` and in total by the table's [`Policy::max_keys`](crate::Policy::max_keys). The
//! config file maps nginx's `limit_req` and ASP.NET Core's concurrency
//! limiter one to one (see [`config`](crate::config)).
//!
//! A waiter holds nothing while it waits: the permit is taken when its
//! turn comes. So a client that disconnects while waiting (its response
//! future dropped) simply leaves its line, the waiters behind it move up,
//! and nobody is admitted twice: the handler sees at most `burst + rate·t`
//! in every window of length `t`, and waiters are served in arrival order
//! however many disconnect. A waiter admitted but gone before it took the
//! permit hands it to the next one. The global limiter's line comes
//! first; a request waiting in a route policy's line holds what the global
//! limiter granted, and gives it back if it is refused or goes away.
//!
//! # Observability
//!
//! With feature `tracing`, `tracing` events: refusals at `debug`, dry-run
//! decisions at `info`, missing keys at `warn` (at most one line per policy
//! per 10 s, with a count). With
//! feature `metrics`, counters through the `metrics` facade, named like
//! ASP.NET Core's (see [`metrics`]), labelled with the policy name.
//!
//! **Dry run** ([`Policy::dry_run`](crate::Policy::dry_run)): a shadow policy never changes what a
//! client sees (nginx `limit_req_dry_run`, Envoy shadow mode). Where it
//! would refuse it logs "dry run: would refuse"; where its queue would
//! make it wait it logs "dry run: would delay"; both count
//! `result = "dry_run"`, and the request passes at once, taking nothing.
//! Its store counts only the requests it would have admitted at once.
//!
//! # Remote backends (Redis)
//!
//! `Policy::backend` (feature `redis`) keeps a route policy's buckets in a
//! shared `tollgate::redis::RedisStore`, as does `backend = "redis"`
//! with `redis_url` in a config file (token bucket, leaky bucket or fixed
//! window). The layer awaits the store's decision for the policy's key
//! (sent as `global`, `ip:<address>` or `k:<bytes>`), cancels the global
//! admission when it refuses, and marks a decision made by the store's
//! failure policy (store down or too slow) with the [`StoreUnavailable`](crate::StoreUnavailable)
//! **response extension**. The global limiter, queueing and in-flight
//! limits stay in process.
//!
//! # Reloading
//!
//! [`RateLimitLayer::reload`](crate::RateLimitLayer::reload) swaps the rules of a running layer: a rule
//! whose partitioning is unchanged keeps its store (its keys' buckets,
//! windows, queued turns and permits in flight), reconfigured when only
//! its limit changed; see [`ReloadReport`](crate::ReloadReport). A reload
//! is all or nothing: rules that are refused change nothing, every bucket
//! carries on. Replace a rules file by renaming a complete file over it;
//! a reloader of files edited in place waits until two reads agree
//! (`config::SettledText`, feature `config`; see
//! [Replacing a rules file](crate::config#replacing-a-rules-file)).
//!
//! # Configuration files
//!
//! With feature `config`, [`LayerConfig`](crate::LayerConfig) reads the same settings from TOML
//! or JSON; errors name the rule and the field (`rules[2].burst: must be at least 1`,
//! `rules[1].limit: is required with algorithm = "concurrency"`), and a
//! mistake that would load a looser limit than the one written is refused:
//! a duration in a unit other than `ms`, `s`, `m`, `h`, `d`, a prefix the
//! router could never match as written, a file that sets no limit (unless
//! it says `allow_no_limits = true`). See [`config`](crate::config) for the
//! format and the nginx mapping, and `examples/tollgate.toml`.
//!
//! # Every option, one example each
//!
//! Layer (`RateLimitLayer::builder()`):
//!
//! | option | example | default |
//! |---|---|---|
//! | global limiter | `.global(Policy::token_bucket("global", Quota::per_second(1000)?))` | none |
//! | a route policy | `.policy(Policy::token_bucket("api", Quota::per_minute(100)?).prefix("/api"))` | none |
//! | several policies | `.policies([api, login])` | |
//! | exempt prefix | `.exempt("/health")` | none |
//! | trusted proxies | `.trusted_proxies(["10.0.0.0/8".parse()?])` | none (forwarding headers ignored) |
//! | where the peer address is | `.peer_addr(\|ext\| ext.get::<ConnectInfo<SocketAddr>>().map(\|c\| c.0))` | a `SocketAddr` extension |
//! | refusal status | `.status(StatusCode::SERVICE_UNAVAILABLE)` | 429 |
//! | key cannot be extracted | `.missing_key(MissingKey::SharedBucket(StatusCode::UNAUTHORIZED))` | `MissingKey::ClientIp(429)` |
//! | rejection handler | `.on_rejected(\|r, status\| Response::builder().status(status).body(format!("slow down ({})", r.policy())).unwrap())` | empty body |
//! | headers on admitted responses | `.headers_on_success(true)` | refusals only |
//! | refusal bodies as problem details | `.problem_details(true)` | empty body |
//! | a policy for axum routes | `router.route_layer(layer.policy("writes").unwrap())` | |
//!
//! Policy (`Policy::token_bucket(name, quota)`, `Policy::leaky_bucket(name, quota)`,
//! `Policy::fixed_window(name, limit, window)`, `Policy::sliding_window(name, limit, window)`,
//! `Policy::concurrency(name, limit)`):
//!
//! | option | example | default |
//! |---|---|---|
//! | path prefix | `.prefix("/api/login")` | none (only by name) |
//! | methods | `.methods([Method::POST])` | all |
//! | key: shared | `.key(KeySource::Global)` | yes |
//! | key: peer IP | `.key(KeySource::PeerIp)` | |
//! | key: client IP behind proxies | `.key(KeySource::ClientIp)` | |
//! | key: header | `.key(KeySource::Header(HeaderName::from_static("x-api-key")))` | |
//! | key: closure | `.key(KeySource::custom(\|h\| Some(PartitionKey::Bytes(h.uri.path().as_bytes().into()))))` | |
//! | keys tracked | `.max_keys(50_000)` | 10 000 |
//! | queueing (per key; buckets and in-flight limits) | `.queue(Duration::from_secs(2), 20)` | refuse at once |
//! | dry run | `.dry_run(true)` | off |
//! | missing key for this policy | `.missing_key(MissingKey::SharedBucket(StatusCode::UNAUTHORIZED))` | the layer's |
//! | rejection handler for this policy | `.on_rejected(\|r, _\| Response::new(format!("retry in {:?}", r.retry_after())))` | the layer's |
//! | buckets in a shared store (Redis) | `.backend(Arc::new(RedisStore::connect(url, RedisConfig::token_bucket(quota)).await?))` | in process |
//!
//! # Service requirements and per-request cost
//!
//! The wrapped service must be `Clone + Send + 'static` (axum's `Router`
//! and tonic's services are). Its responses come back as
//! `Response<`[`RateLimitBody`](crate::RateLimitBody)`<B>>`, which implements
//! [`http_body::Body`] when `B` does and `B::Data: From<Bytes>` (axum's
//! `Body`, hyper's and tonic's bodies, `String`, `Full<Bytes>`): axum's
//! `Router::layer` and `route_layer` accept it. A refusal's body is the
//! handler's text, or empty. The layer and its services are `Clone` and
//! share one state: every clone and every connection draws from the same
//! buckets.
//!
//! An admitted request costs one clock read (by default a TSC read
//! through [`QuantaClock`](tollgate_core::QuantaClock), shared by every layer of
//! the process; the `http` feature enables `quanta`; limits hold on that
//! clock, whose rate differs from the OS clock's by a few parts in 10⁵, as
//! its docs say; [`RateLimitLayerBuilder::clock`](crate::RateLimitLayerBuilder::clock) gives the layer another,
//! such as a [`TokioClock`](tollgate_queue::TokioClock) for tests on tokio's paused
//! time), the routing (a walk down
//! a tree of path segments, whatever the number of prefixes), the key
//! extraction (a header or custom key copies its bytes; an IP or the
//! global key allocates nothing) and one store check per limiter: a
//! global token or leaky bucket is one bucket, not a keyed table. No heap
//! allocation, no boxed future and no `Arc` clone: the response future
//! and body are stack types, and an in-flight lease (which must outlive
//! the call) clones its store's `Arc`. Only a request that waits its turn
//! or asks a remote backend is boxed (and holds the configuration's
//! `Arc`). A refusal clones precomputed header values (`Retry-After` up
//! to 10 minutes, the `RateLimit` item of a policy with one shared bucket up to a minute;
//! a partitioned one formats its `pk` on the stack). A quota,
//! window or window segment finer than the clock's resolution is refused
//! when the layer is built.
//!
//! On axum, use [`RateLimitLayer::for_axum`](crate::RateLimitLayer::for_axum) (feature `axum`): axum's
//! `Router::layer` turns every response body that is not its own `Body`
//! into one by boxing it, so the default [`RateLimitBody`](crate::RateLimitBody) would cost an
//! allocation and a free per response (about 80 ns here, as much as the
//! layer's own work on an admitted request). The [`AxumBody`](crate::AxumBody) mode hands
//! the handler's `Body` through unchanged and builds refusals as `Body`s;
//! it boxes only a body that must hold a concurrency policy's in-flight
//! permit.
