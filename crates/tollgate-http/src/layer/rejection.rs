//! Building responses: refusals (handler precedence, `Retry-After`,
//! `RateLimit` headers) and the headers added to admitted responses.

use core::fmt::Write;
use core::time::Duration;

use bytes::Bytes;
use http::header::HeaderValue;
use http::{HeaderMap, Response, StatusCode};

use super::body::BodyMode;
use super::{ChargedPolicy, Compiled, Shared};
use crate::headers::{
    self, ChargedKey, PartitionTag, RATELIMIT, RATELIMIT_POLICY, ServiceLimit, StackText,
};
use tollgate_core::refusal::Refusal;
use tollgate_core::snapshot::Snapshot;
use tollgate_core::time::duration_to_nanos;

/// Headers to add to an admitted response.
#[derive(Debug)]
pub(crate) struct SuccessHeaders {
    pub(crate) policy: HeaderValue,
    pub(crate) state: HeaderValue,
}

impl SuccessHeaders {
    pub(super) fn add_to<B>(self, res: &mut Response<B>) {
        let map = res.headers_mut();
        map.insert(RATELIMIT_POLICY, self.policy);
        map.insert(RATELIMIT, self.state);
    }
}

impl Shared {
    /// `RateLimit-Policy` and `RateLimit` for an admitted request: one item
    /// per policy charged (see [`ServiceLimit`] for `r` and `t`; `pk` for
    /// a partitioned policy). A queueing policy's `r` counts the permits
    /// free at once.
    pub(crate) fn success_headers(
        &self,
        global: Option<ChargedPolicy<'_>>,
        route: Option<ChargedPolicy<'_>>,
    ) -> Option<SuccessHeaders> {
        let mut policy = StackText::new();
        let mut state = StackText::new();
        let mut first = true;
        for (c, s, key) in global.into_iter().chain(route) {
            let Some(item) = c.policy_item.as_ref() else {
                continue;
            };
            if !first {
                policy.write_str(", ").ok()?;
                state.write_str(", ").ok()?;
            }
            first = false;
            policy
                .write_str(core::str::from_utf8(item.as_bytes()).ok()?)
                .ok()?;
            let pk = key.and_then(|k| PartitionTag::of(&self.digest, k));
            let limit = ServiceLimit::of(&c.plan.alg, s);
            headers::write_state_item(&mut state, &c.name, limit, pk.as_ref()).ok()?;
        }
        if first {
            return None;
        }
        Some(SuccessHeaders {
            policy: policy.header_value()?,
            state: state.header_value()?,
        })
    }

    /// The refusal response of `refusing` (the global limiter when
    /// `global`) for a request charged to `key`: the refusing policy's own
    /// handler, else the layer's, else `status` (the layer's, or a missing
    /// key's fallback's: see [`MissingKey`](crate::MissingKey)) as a gRPC
    /// status when `request`'s headers make it a gRPC call (see
    /// [`grpc`](super::grpc)), else with an
    /// empty body or, with [`problem_details`](crate::RateLimitLayerBuilder::problem_details),
    /// a problem-details one. A route policy's handler never answers for
    /// the global limiter. The standard headers the handler did not set
    /// are added.
    pub(crate) fn reject<M: BodyMode<R>, R>(
        &self,
        refusing: &Compiled,
        global: bool,
        wait: Duration,
        status: StatusCode,
        key: Option<ChargedKey<'_>>,
        request: &HeaderMap,
    ) -> Response<M::Body> {
        let wait_nanos = duration_to_nanos(wait);
        #[cfg(feature = "tracing")]
        tracing::debug!(policy = %refusing.name, global, retry_after_ms = wait_nanos / 1_000_000, "request rate limited");
        let handler = refusing
            .policy
            .on_rejected
            .as_ref()
            .or(self.on_rejected.as_ref());
        let mut res = match handler {
            Some(h) => {
                let limit = refusing.plan.alg.limit();
                let snapshot = Snapshot::from_nanos(limit, 0, wait_nanos);
                let (limiter, stage) = if global { ("global", 0) } else { ("routes", 1) };
                let refusal = Refusal::from_nanos(wait_nanos, snapshot)
                    .by(limiter, &refusing.name)
                    .later_by(stage);
                h(&refusal, status).map(|text| M::built(Bytes::from(text)))
            }
            None if super::grpc::is_grpc(request) => {
                super::grpc::refusal::<M, R>(refusing, wait_nanos, status)
            }
            None if self.problem_details => {
                let body = crate::problem::quota_exceeded(&refusing.name, status, wait_nanos);
                let mut res = Response::new(M::built(body));
                *res.status_mut() = status;
                res.headers_mut()
                    .insert(http::header::CONTENT_TYPE, crate::problem::CONTENT_TYPE);
                res
            }
            None => empty::<M, R>(status),
        };
        let map = res.headers_mut();
        if !map.contains_key(http::header::RETRY_AFTER) {
            headers::set_retry_after(map, wait_nanos);
        }
        if let Some(item) = refusing.policy_item.as_ref() {
            if !map.contains_key(RATELIMIT_POLICY) {
                map.insert(RATELIMIT_POLICY, item.clone());
            }
            if !map.contains_key(RATELIMIT) {
                // a shared bucket's value is precomputed; a key's has its `pk`
                let pk = key.and_then(|k| PartitionTag::of(&self.digest, k));
                if pk.is_none()
                    && let Some(v) = refusing.refusal_state.get(headers::secs_ceil(wait_nanos))
                {
                    map.insert(RATELIMIT, v);
                    return res;
                }
                let limit = ServiceLimit::refused(&refusing.plan.alg, wait_nanos);
                let mut t = StackText::new();
                if headers::write_state_item(&mut t, &refusing.name, limit, pk.as_ref()).is_ok()
                    && let Some(v) = t.header_value()
                {
                    map.insert(RATELIMIT, v);
                }
            }
        }
        res
    }
}

/// A refusal with `status` and nothing more (no policy's wait): an empty
/// response, or a gRPC status when `request`'s headers make it a gRPC
/// call.
pub(crate) fn status_only<M: BodyMode<R>, R>(
    status: StatusCode,
    request: &HeaderMap,
) -> Response<M::Body> {
    if super::grpc::is_grpc(request) {
        return super::grpc::status_only::<M, R>(status);
    }
    empty::<M, R>(status)
}

/// An empty response with `status`.
fn empty<M: BodyMode<R>, R>(status: StatusCode) -> Response<M::Body> {
    let mut r = Response::new(M::built(Bytes::new()));
    *r.status_mut() = status;
    r
}
