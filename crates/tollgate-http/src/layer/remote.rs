//! The remote path: a route policy whose buckets live in a backend (a
//! store shared by replicas) is asked for the request's key, then the
//! request is served or refused; a backend that could not answer is
//! noted in the response's extensions ([`StoreUnavailable`]).

use core::time::Duration;
use std::sync::Arc;

use http::{Request, Response};
use tower_service::Service;

use super::Shared;
use super::body::BodyMode;
use super::decide::Remote;
use super::pending::Pending;
use crate::backend::StoreUnavailable;
use crate::headers::ChargedKey;

/// Asks route policy `remote.policy`'s backend, then serves `req` with
/// `inner` or answers the refusal.
pub(super) async fn serve_remote<S, B, R, M>(
    shared: Arc<Shared>,
    remote: Remote,
    mut inner: S,
    req: Request<B>,
) -> Result<Response<M::Body>, S::Error>
where
    S: Service<Request<B>, Response = Response<R>>,
    M: BodyMode<R>,
{
    let Remote {
        policy,
        key,
        status,
        global,
    } = remote;
    let global_charged = global.as_ref().and_then(|a| Some((a.snapshot?, a.key)));
    let mut pending = Pending::new(shared, global);
    let shared = Arc::clone(&pending.shared);
    let c = &shared.policies[policy];
    let result = match c.policy.backend.as_ref() {
        Some(b) => Some(b.check_n(key.as_bytes(), 1).await),
        None => None,
    };
    let unavailable = result.as_ref().is_some_and(|a| a.unavailable);
    let never = || {
        c.policy
            .quota()
            .map_or(Duration::from_secs(1), |q| q.interval())
    };
    let admitted = match result.map(|a| a.result) {
        Some(Ok(s)) => Ok(Some(s)),
        // n = 1 exceeds only a zero capacity: never admissible
        Some(Err(denied)) if denied.is_never() => Err(never()),
        Some(Err(denied)) if c.policy.dry_run => {
            #[cfg(feature = "tracing")]
            tracing::info!(policy = %c.name, retry_after_ms = denied.retry_after().as_millis() as u64, "dry run: would refuse");
            #[cfg(not(feature = "tracing"))]
            let _ = denied;
            c.metrics.dry_run.increment(1);
            Ok(None)
        }
        Some(Err(denied)) => Err(denied.retry_after()),
        None => Err(never()),
    };
    let mut res = match admitted {
        Ok(route_snapshot) => {
            c.metrics.acquired.increment(1);
            let headers = if shared.headers_on_success {
                let global = shared.global.as_ref().zip(global_charged.as_ref());
                shared.success_headers(
                    global.map(|(g, (s, k))| (g, s, Some(ChargedKey::Table(k)))),
                    route_snapshot
                        .as_ref()
                        .map(|s| (c, s, Some(ChargedKey::Backend(key.as_bytes())))),
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
            res.map(|b| M::admitted(b, held))
        }
        Err(wait) => {
            pending.cancel();
            c.metrics.endpoint_limiter.increment(1);
            let wait = wait.max(Duration::from_nanos(1));
            let key = Some(ChargedKey::Backend(key.as_bytes()));
            shared.reject::<M, R>(c, false, wait, status, key, req.headers())
        }
    };
    if unavailable {
        res.extensions_mut().insert(StoreUnavailable {
            policy: c.name.clone(),
        });
    }
    Ok(res)
}
