//! A request over an in-flight policy that queues
//! ([`Policy::queue`](crate::http::Policy::queue) on
//! [`Policy::concurrency`](crate::http::Policy::concurrency)): it waits in
//! its key's line of the policy's store
//! ([`Partitioned::acquire_key_in_line`](crate::partitioned::Partitioned::acquire_key_in_line))
//! and is served when a running request's response body ends (its lease
//! drops and hands the permit to the front of the line). A full line
//! refuses at once; a request still waiting at the policy's `max_wait` is
//! refused then. The global limiter's line comes first (the route policy
//! is charged after it); while a request waits in a route policy's line it
//! holds what the global limiter granted.

use core::time::Duration;
use std::sync::Arc;

use http::{Request, Response};
use tower_service::Service;

use super::{
    serve_remote, Admitted, Charge, Compiled, InLine, NoKey, Pending, Remote, Shared, Stores,
};
use crate::clock::Clock;
use crate::concurrency::DEFAULT_RETRY_HINT;
use crate::http::body::LayerBody;
use crate::http::key::TableKey;

/// Waits in `key`'s line of in-flight policy `c` in `stores`, at most the
/// policy's `max_wait`; the refusal's wait otherwise.
async fn wait_in_line(
    shared: &Shared,
    stores: &Stores,
    c: &Compiled,
    key: TableKey,
) -> Result<Admitted, Duration> {
    let (Some(mode), Some(slot)) = (c.policy.queue, c.slot) else {
        return Err(DEFAULT_RETRY_HINT); // never: only such policies queue
    };
    let limit = usize::try_from(mode.queue_limit).unwrap_or(usize::MAX);
    let line = stores.acquire_key_in_line(slot, key, 1, limit, shared.clock.now());
    match tokio::time::timeout(mode.max_wait, line).await {
        Ok(Ok(a)) => Ok(Admitted {
            delay: a.delay(),
            lease: a,
            snapshot: shared
                .headers_on_success
                .then(|| stores.snapshot_key(Some(slot), &key, shared.clock.now())),
        }),
        Ok(Err(refusal)) => Err(refusal.retry_after()),
        // waited `max_wait`: it left the line (its future was dropped)
        Err(_) => Err(DEFAULT_RETRY_HINT),
    }
}

/// Serves a request that waits in an in-flight policy's line (see the
/// [module documentation](self)).
pub(super) async fn serve_in_line<S, B, R, O>(
    shared: Arc<Shared>,
    line: InLine,
    mut inner: S,
    req: Request<B>,
) -> Result<Response<O>, S::Error>
where
    S: Service<Request<B>, Response = Response<R>>,
    O: LayerBody<R>,
{
    let InLine {
        global_line,
        key,
        route,
        global,
    } = line;
    let (global_lease, mut global_snapshot, mut global_delay) = match global {
        Some(a) => (Some(a.lease), a.snapshot, a.delay),
        None => (None, None, Duration::ZERO),
    };
    let mut pending = Pending::new(Arc::clone(&shared), global_lease, None);
    let m = shared.metrics_of(route);
    m.queued.increment(1.0);
    pending.waiting = Some(route);
    // time in the line on the layer's clock (tokio's paused time in tests),
    // as the layer's other queue measures it
    let started = shared.clock.now();
    let elapsed = || shared.clock.now().saturating_duration_since(started);
    // refused while queued: out of the queue gauge, every permit back
    let leave = |pending: &mut Pending| {
        pending.waiting = None;
        m.queued.decrement(1.0);
        pending.cancel();
    };
    let mut route_line = (!global_line).then_some(key);
    let mut route_snapshot = None;
    let mut route_delay = Duration::ZERO;
    if global_line {
        let Some(g) = shared.global.as_ref() else {
            leave(&mut pending);
            return Ok(super::super::rejection::status_only::<O, R>(shared.status));
        };
        match wait_in_line(&shared, &shared.global_store, g, key).await {
            Ok(a) => {
                global_snapshot = a.snapshot;
                global_delay = a.delay;
                pending.global = Some(a.lease);
            }
            Err(wait) => {
                leave(&mut pending);
                m.global_limiter.increment(1);
                return Ok(shared.reject::<O, R>(g, true, wait));
            }
        }
        // then the route policy, as for a request the global limiter
        // admitted at once
        if let Some(i) = route {
            let c = &shared.policies[i];
            let head = Shared::head_of(&req);
            let now = shared.clock.now();
            let charge = if c.policy.backend.is_some() {
                match shared.key_of(c, &head) {
                    Ok(k) => {
                        let remote = Remote {
                            policy: i,
                            key: k.backend_key(c.policy.ipv6_prefix),
                            global: pending.global.take().map(|lease| Admitted {
                                lease,
                                delay: global_delay.saturating_sub(elapsed()),
                                snapshot: global_snapshot,
                            }),
                        };
                        pending.waiting = None;
                        m.queued.decrement(1.0);
                        m.time_in_queue.record(elapsed().as_secs_f64());
                        drop(pending);
                        return serve_remote::<S, B, R, O>(shared, remote, inner, req).await;
                    }
                    Err(NoKey::Allow) => Charge::Admitted(None),
                    Err(NoKey::Reject(status)) => Charge::NoKey(status),
                }
            } else {
                shared.charge(c, &shared.route_store, &head, now)
            };
            match charge {
                Charge::Admitted(a) => {
                    if let Some(a) = a {
                        route_snapshot = a.snapshot;
                        route_delay = a.delay;
                        pending.route = Some(a.lease);
                    }
                }
                Charge::Line(k) => route_line = Some(k),
                Charge::Refused(wait) => {
                    leave(&mut pending);
                    m.endpoint_limiter.increment(1);
                    return Ok(shared.reject::<O, R>(c, false, wait));
                }
                Charge::NoKey(status) => {
                    leave(&mut pending);
                    return Ok(super::super::rejection::status_only::<O, R>(status));
                }
            }
        }
    }
    if let (Some(key), Some(i)) = (route_line, route) {
        let c = &shared.policies[i];
        match wait_in_line(&shared, &shared.route_store, c, key).await {
            Ok(a) => {
                route_snapshot = a.snapshot;
                pending.route = Some(a.lease);
            }
            Err(wait) => {
                leave(&mut pending);
                m.endpoint_limiter.increment(1);
                return Ok(shared.reject::<O, R>(c, false, wait));
            }
        }
    }
    // a queueing bucket's turn, if one was reserved on the way
    let delay = global_delay.max(route_delay).saturating_sub(elapsed());
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    pending.waiting = None;
    m.queued.decrement(1.0);
    m.time_in_queue.record(elapsed().as_secs_f64());
    m.acquired.increment(1);
    let headers = if shared.headers_on_success {
        shared.success_headers(
            shared.global.as_ref().zip(global_snapshot.as_ref()),
            route
                .map(|i| &shared.policies[i])
                .zip(route_snapshot.as_ref()),
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
    Ok(res.map(|b| O::admitted(b, held)))
}
