//! Building responses: refusals (handler precedence, `Retry-After`,
//! `RateLimit` headers) and the headers added to admitted responses.

use core::fmt::Write;
use std::string::String;

use http::{Response, StatusCode};

use super::headers::{self, StackText, RATELIMIT, RATELIMIT_POLICY};
use super::key::PartitionKey;
use super::layer::{Compiled, Shared, SuccessHeaders};
use super::policy::Rejection;
use crate::decision::Decision;

impl Shared {
    pub(crate) fn success_headers(
        &self,
        global: Option<(&Compiled, &(PartitionKey, Decision))>,
        route: Option<(&Compiled, &(PartitionKey, Decision))>,
    ) -> Option<SuccessHeaders> {
        let mut policy = StackText::new();
        let mut state = StackText::new();
        let mut first = true;
        for (c, (_, d)) in global.into_iter().chain(route) {
            if !first {
                policy.write_str(", ").ok()?;
                state.write_str(", ").ok()?;
            }
            first = false;
            headers::write_policy_item(&mut policy, &c.name, &c.policy.quota).ok()?;
            let s = d.snapshot();
            headers::write_state_item(&mut state, &c.name, s.remaining(), s.reset_after_nanos())
                .ok()?;
        }
        if first {
            return None;
        }
        Some(SuccessHeaders {
            policy: policy.header_value()?,
            state: state.header_value()?,
        })
    }

    /// The refusal response: the refusing policy's handler, else the
    /// route policy's, else the layer's, else an empty body with `status`.
    pub(crate) fn reject<R: Default + From<String>>(
        &self,
        refusing: &Compiled,
        route: Option<&Compiled>,
        global: bool,
        wait_nanos: u64,
    ) -> Response<R> {
        tracing::debug!(policy = %refusing.name, global, retry_after_ms = wait_nanos / 1_000_000, "request rate limited");
        let handler = refusing
            .policy
            .on_rejected
            .as_ref()
            .or_else(|| route.and_then(|r| r.policy.on_rejected.as_ref()))
            .or(self.on_rejected.as_ref());
        let mut res = match handler {
            Some(h) => {
                let rej = Rejection {
                    policy: &refusing.name,
                    global,
                    retry_after: core::time::Duration::from_nanos(wait_nanos),
                    status: self.status,
                };
                h(&rej).map(R::from)
            }
            None => {
                let mut r = Response::new(R::default());
                *r.status_mut() = self.status;
                r
            }
        };
        let map = res.headers_mut();
        if !map.contains_key(http::header::RETRY_AFTER) {
            headers::set_retry_after(map, wait_nanos);
        }
        if !map.contains_key(RATELIMIT_POLICY) {
            map.insert(RATELIMIT_POLICY, refusing.policy_item.clone());
        }
        if !map.contains_key(RATELIMIT) {
            let mut t = StackText::new();
            if headers::write_state_item(&mut t, &refusing.name, 0, wait_nanos).is_ok() {
                if let Some(v) = t.header_value() {
                    map.insert(RATELIMIT, v);
                }
            }
        }
        res
    }
}

pub(crate) fn status_only<R: Default>(status: StatusCode) -> Response<R> {
    let mut r = Response::new(R::default());
    *r.status_mut() = status;
    r
}
