//! A request over a policy that queues ([`Policy::queue`](crate::Policy::queue)):
//! it waits in its key's line of the policy's
//! [`Queue`](tollgate_queue::Queue), in arrival order, and is served when
//! the policy admits it — a rate's line by its timer at the exact turn,
//! an in-flight limit's line when a running request's response body ends
//! (its permit drops and wakes the waiter it admits). A full line refuses
//! at once, as does a wait the queue estimates past the policy's
//! `max_wait`; a request still waiting at `max_wait` is refused then. A
//! waiter that goes away (its client disconnected) leaves its line and
//! holds nothing, so the requests behind it move up and nobody is
//! admitted twice. The global limiter's line comes first (the route
//! policy is charged after it); while a request waits in a route policy's
//! line it holds what the global limiter granted.

use std::sync::Arc;

use http::{Request, Response};
use tower_service::Service;

use super::body::BodyMode;
use super::decide::{Charge, InLine, NoKey, Remote, wait_of};
use super::gate::{Admitted, Gate, Permit};
use super::pending::Pending;
use super::remote::serve_remote;
use super::{Compiled, Shared};
use crate::headers::ChargedKey;
use crate::key::TableKey;
use core::time::Duration;
use tollgate_core::clock::Clock;
use tollgate_core::concurrency::DEFAULT_RETRY_HINT;

/// Waits in `key`'s line of policy `c`'s queue; the refusal's wait
/// otherwise.
async fn wait_in_line(shared: &Shared, c: &Compiled, key: TableKey) -> Result<Admitted, Duration> {
    let Some(gate @ Gate::Queued(queue)) = c.gate.as_ref() else {
        return Err(DEFAULT_RETRY_HINT); // never: only such policies queue
    };
    match queue.acquire(&key, 1).await {
        Ok(permit) => Ok(Admitted {
            snapshot: shared
                .headers_on_success
                .then(|| gate.snapshot(&key, shared.clock.now())),
            permit: Permit::Queued(permit),
            key,
            overflow: false,
        }),
        Err(e) => Err(wait_of(&e)),
    }
}

/// Serves a request that waits in a policy's line (see the [module
/// documentation](self)).
pub(super) async fn serve_in_line<S, B, R, M>(
    shared: Arc<Shared>,
    line: InLine,
    mut inner: S,
    req: Request<B>,
) -> Result<Response<M::Body>, S::Error>
where
    S: Service<Request<B>, Response = Response<R>>,
    M: BodyMode<R>,
{
    let InLine {
        global_line,
        key,
        status,
        route,
        global,
    } = line;
    let mut pending = Pending::new(Arc::clone(&shared), global);
    let m = shared.metrics_of(route);
    m.queued.increment(1.0);
    pending.waiting = Some(route);
    // time in the line on the layer's clock (tokio's paused time in tests)
    let started = shared.clock.now();
    let elapsed = || shared.clock.now().saturating_duration_since(started);
    // refused while queued: out of the queue gauge, every permit back
    let leave = |pending: &mut Pending| {
        pending.waiting = None;
        m.queued.decrement(1.0);
        pending.cancel();
    };
    let mut route_line = (!global_line).then_some((key, status));
    if global_line {
        let Some(g) = shared.global.as_ref() else {
            leave(&mut pending);
            return Ok(super::rejection::status_only::<M, R>(
                shared.status,
                req.headers(),
            ));
        };
        match wait_in_line(&shared, g, key).await {
            Ok(a) => pending.global = Some(a),
            Err(wait) => {
                leave(&mut pending);
                m.global_limiter.increment(1);
                let key = Some(ChargedKey::Table(&key));
                return Ok(shared.reject::<M, R>(g, true, wait, status, key, req.headers()));
            }
        }
        // then the route policy, as for a request the global limiter
        // admitted at once
        if let Some(i) = route {
            let c = &shared.policies[i];
            let head = Shared::head_of(&req);
            let now = shared.clock.now();
            let charge = if c.policy.backend.is_some() {
                match shared.key_of(c, &head, now) {
                    Ok((k, status)) => {
                        let remote = Remote {
                            policy: i,
                            key: k.backend_key(c.policy.ipv6_prefix),
                            status,
                            global: pending.global.take(),
                        };
                        pending.waiting = None;
                        m.queued.decrement(1.0);
                        m.time_in_queue.record(elapsed().as_secs_f64());
                        drop(pending);
                        return serve_remote::<S, B, R, M>(shared, remote, inner, req).await;
                    }
                    Err(NoKey::Allow) => Charge::Admitted(None),
                    Err(NoKey::Reject(status)) => Charge::NoKey(status),
                }
            } else {
                shared.charge(c, &head, now)
            };
            match charge {
                Charge::Admitted(a) => pending.route = a.map(|a| (i, a)),
                Charge::Line(k, status) => route_line = Some((k, status)),
                Charge::Refused(wait, status, key) => {
                    leave(&mut pending);
                    m.endpoint_limiter.increment(1);
                    let key = Some(ChargedKey::Table(&key));
                    return Ok(shared.reject::<M, R>(c, false, wait, status, key, req.headers()));
                }
                Charge::NoKey(status) => {
                    leave(&mut pending);
                    return Ok(super::rejection::status_only::<M, R>(status, req.headers()));
                }
            }
        }
    }
    if let (Some((key, status)), Some(i)) = (route_line, route) {
        let c = &shared.policies[i];
        match wait_in_line(&shared, c, key).await {
            Ok(a) => pending.route = Some((i, a)),
            Err(wait) => {
                leave(&mut pending);
                m.endpoint_limiter.increment(1);
                let key = Some(ChargedKey::Table(&key));
                return Ok(shared.reject::<M, R>(c, false, wait, status, key, req.headers()));
            }
        }
    }
    pending.waiting = None;
    m.queued.decrement(1.0);
    m.time_in_queue.record(elapsed().as_secs_f64());
    m.acquired.increment(1);
    let headers = if shared.headers_on_success {
        shared.success_headers(
            shared
                .global
                .as_ref()
                .zip(pending.global.as_ref())
                .and_then(Compiled::charged),
            pending
                .route
                .as_ref()
                .and_then(|(i, a)| Compiled::charged((&shared.policies[*i], a))),
        )
    } else {
        None
    };
    let held = pending.admit();
    drop(pending);
    let mut res = inner.call(req).await?;
    if let Some(h) = headers {
        h.add_to(&mut res);
    }
    Ok(res.map(|b| M::admitted(b, held)))
}
