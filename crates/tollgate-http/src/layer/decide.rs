//! The decision path: routing a request (exemptions, path prefix, method
//! filter), charging the global limiter and then the route policy
//! in-process (the key, the store or its queue, dry runs), and the
//! [`Verdict`] saying how the request goes on.

use core::time::Duration;
use std::boxed::Box;

use http::{Request, Response, StatusCode};

use super::body::{BodyMode, Held};
use super::gate::{Admitted, Gate, Permit};
use super::rejection::{self, SuccessHeaders};
use super::{Compiled, Shared};
use crate::backend::BackendKey;
use crate::headers::ChargedKey;
use crate::key::{self, Extracted, RequestHead, TableKey};
use crate::policy::MissingKey;
use tollgate_core::clock::Clock;
use tollgate_core::concurrency::DEFAULT_RETRY_HINT;
use tollgate_core::keyed::KeyedPath;
use tollgate_core::limiter::Limiter;
use tollgate_core::time::Timestamp;
use tollgate_queue::WaitError;

/// What the checks decided: three words, whatever the variant (the rare
/// ones are boxed), so that the admitted path moves nothing large.
pub(super) enum Verdict<O> {
    /// Admitted now: headers to add, in-flight permits to hold.
    Pass(Option<Box<SuccessHeaders>>, Held),
    Respond(Box<Response<O>>),
    /// Ask a route policy's remote backend for this key.
    Remote(Box<Remote>),
    /// Wait in a key's line of a policy that queues.
    Line(Box<InLine>),
}

/// A request over a policy that queues: it waits in `key`'s line of the
/// global limiter's queue (`route` is charged after it) or of route policy
/// `route`'s (holding the global admission meanwhile).
pub(super) struct InLine {
    pub(super) global_line: bool,
    pub(super) key: TableKey,
    /// The status a refusal of `key` gets.
    pub(super) status: StatusCode,
    pub(super) route: Option<usize>,
    pub(super) global: Option<Admitted>,
}

/// A request for a route policy's remote backend: policy `policy`, for
/// `key`; the global admission (if any) is given back if the backend
/// refuses.
pub(super) struct Remote {
    pub(super) policy: usize,
    pub(super) key: BackendKey,
    /// The status a refusal of `key` gets.
    pub(super) status: StatusCode,
    pub(super) global: Option<Admitted>,
}

/// Outcome of charging one in-process policy.
pub(super) enum Charge {
    /// Admitted; `None` when the policy took nothing (its key was missing
    /// and allowed, or a dry run that would have refused or waited).
    Admitted(Option<Admitted>),
    /// Refused: the wait, the status to answer with and the key charged.
    Refused(Duration, StatusCode, TableKey),
    NoKey(StatusCode),
    /// Over a policy that queues: wait in this key's line (refused with
    /// this status).
    Line(TableKey, StatusCode),
}

/// A policy's key could not be extracted.
pub(super) enum NoKey {
    Allow,
    Reject(StatusCode),
}

/// The wait a refusal by `c`'s queue reports (`Retry-After`): the
/// queue's estimate where it has one, past the policy's `max_wait` for a
/// wait refused for being too long; a short hint otherwise (a full line
/// of an in-flight limit, a wait that reached `max_wait`).
pub(super) fn wait_of(e: &WaitError) -> Duration {
    match *e {
        WaitError::CapacityExceeded(refusal) => refusal.retry_after(),
        WaitError::MaxWaitExceeded {
            estimated_wait: Some(wait),
            max_wait,
        } => wait.saturating_sub(max_wait).max(Duration::from_nanos(1)),
        _ => e
            .retry_after()
            .filter(|w| !w.is_zero())
            .unwrap_or(DEFAULT_RETRY_HINT),
    }
}

impl Shared {
    pub(super) fn head_of<'a, B>(req: &'a Request<B>) -> RequestHead<'a> {
        RequestHead {
            method: req.method(),
            uri: req.uri(),
            headers: req.headers(),
            extensions: req.extensions(),
        }
    }

    /// The policy's key and the status its refusals get: the request's
    /// own (the layer's status), or the policy's [`MissingKey`] fallback
    /// (its status); else what to do without one.
    pub(super) fn key_of<'a>(
        &self,
        c: &Compiled,
        head: &RequestHead<'a>,
        now: Timestamp,
    ) -> Result<(Extracted<'a>, StatusCode), NoKey> {
        let e = match key::extract(&c.policy.key, head, self.peer, &self.trusted) {
            Ok(k) => return Ok((k, self.status)),
            Err(e) => e,
        };
        c.missing_log.note(&c.name, e, now);
        match c.missing_key {
            MissingKey::ClientIp(status) => {
                match key::client_address(&c.policy.key, head, self.peer, &self.trusted) {
                    Some(ip) => Ok((Extracted::Ip(ip), status)),
                    // no peer address: the server does not record it
                    None => Err(NoKey::Reject(StatusCode::INTERNAL_SERVER_ERROR)),
                }
            }
            MissingKey::SharedBucket(status) => Ok((Extracted::KeyLess, status)),
            MissingKey::Reject(status) => Err(NoKey::Reject(status)),
            MissingKey::Allow => Err(NoKey::Allow),
        }
    }

    /// Charges in-process policy `c`. A dry-run policy never refuses nor
    /// queues: it logs and counts what it would do and admits.
    pub(super) fn charge(&self, c: &Compiled, head: &RequestHead<'_>, now: Timestamp) -> Charge {
        let (key, status) = match self.key_of(c, head, now) {
            Ok((k, status)) => (k.table_key(&self.digest, c.policy.ipv6_prefix), status),
            Err(NoKey::Allow) => return Charge::Admitted(None),
            Err(NoKey::Reject(status)) => return Charge::NoKey(status),
        };
        let Some(gate) = c.gate.as_ref() else {
            return Charge::Admitted(None); // never: a remote policy is asked apart
        };
        let admitted = |permit| {
            Charge::Admitted(Some(Admitted {
                permit,
                key,
                overflow: false,
                snapshot: self.headers_on_success.then(|| gate.snapshot(&key, now)),
            }))
        };
        // the one public path of each: a limiter's acquire, or its queue's
        let (wait, queues) = match gate {
            Gate::Direct(store) => match store.try_acquire_n(&key, 1, now) {
                Ok(lease) => return admitted(Permit::Lease(lease)),
                // a new key without a slot, refused by the table's one
                // overflow bucket (a flood of new keys empties it): its
                // network's overflow bucket decides
                Err(refusal) => match (&c.networks, refusal.path()) {
                    (Some(networks), KeyedPath::SharedOverflow) => {
                        let net = self.network_of(c, &key, head);
                        match networks.try_acquire_n(&net, 1, now) {
                            Ok(lease) => {
                                return Charge::Admitted(Some(Admitted {
                                    permit: Permit::Lease(lease),
                                    key: net,
                                    overflow: true,
                                    snapshot: self
                                        .headers_on_success
                                        .then(|| networks.snapshot(&net, now)),
                                }));
                            }
                            Err(refusal) => (refusal.retry_after(), false),
                        }
                    }
                    _ => (refusal.retry_after(), false),
                },
            },
            Gate::Queued(queue) => match queue.try_acquire(&key, 1) {
                Ok(permit) => return admitted(Permit::Queued(permit)),
                Err(WaitError::WouldWait { retry_after }) => {
                    match (retry_after, queue.max_wait()) {
                        // too long a wait is refused now, as the queue would
                        (Some(wait), Some(max)) if wait > max => (
                            wait_of(&WaitError::MaxWaitExceeded {
                                estimated_wait: Some(wait),
                                max_wait: max,
                            }),
                            false,
                        ),
                        _ if c.policy.dry_run => (retry_after.unwrap_or_default(), true),
                        _ => return Charge::Line(key, status),
                    }
                }
                Err(e) => (wait_of(&e), false),
            },
        };
        if c.policy.dry_run {
            #[cfg(feature = "tracing")]
            if queues {
                tracing::info!(policy = %c.name, delay_ms = wait.as_millis() as u64, "dry run: would delay");
            } else {
                tracing::info!(policy = %c.name, retry_after_ms = wait.as_millis() as u64, "dry run: would refuse");
            }
            #[cfg(not(feature = "tracing"))]
            let _ = queues;
            c.metrics.dry_run.increment(1);
            Charge::Admitted(None)
        } else {
            Charge::Refused(wait, status, key)
        }
    }

    /// The network overflow key of a request charged to `key` under `c`:
    /// the network of its address key, else of its client's address (a
    /// header or custom key); one shared bucket without a peer address.
    fn network_of(&self, c: &Compiled, key: &TableKey, head: &RequestHead<'_>) -> TableKey {
        match key {
            TableKey::Ip(ip) => key::network_key(*ip),
            _ => key::client_address(&c.policy.key, head, self.peer, &self.trusted)
                .map_or(TableKey::Global, key::network_key),
        }
    }

    /// The route policy of `req` (`only`: a route layer's policy).
    pub(crate) fn route_of<B>(
        &self,
        req: &Request<B>,
        only: Option<&str>,
    ) -> Result<Option<usize>, ()> {
        let path = req.uri().path();
        // exempt wins over every policy, however it is attached
        if self.exempt.matches(path) {
            return Err(());
        }
        if let Some(name) = only {
            // a route layer whose policy a reload removed lets requests through
            return self
                .policies
                .iter()
                .position(|c| c.name == name)
                .map(Some)
                .ok_or(());
        }
        Ok(self
            .routes
            .longest(path, |&i| {
                self.policies[i]
                    .policy
                    .methods
                    .as_ref()
                    .is_none_or(|m| m.contains(req.method()))
            })
            .copied())
    }

    pub(super) fn decide<B, R, M: BodyMode<R>>(
        &self,
        req: &Request<B>,
        only: Option<&str>,
    ) -> Verdict<M::Body> {
        let Ok(route) = self.route_of(req, only) else {
            return Verdict::Pass(None, Held::default());
        };
        let global = if only.is_some() {
            None
        } else {
            self.global.as_ref()
        };
        let route_c = route.map(|i| &self.policies[i]);
        if global.is_none() && route_c.is_none() {
            return Verdict::Pass(None, Held::default());
        }
        let metrics = self.metrics_of(route);
        let head = Self::head_of(req);
        let now = self.clock.now();
        let mut global_adm = None;
        if let Some(g) = global {
            match self.charge(g, &head, now) {
                Charge::Admitted(a) => global_adm = a,
                Charge::Refused(wait, status, key) => {
                    metrics.global_limiter.increment(1);
                    let key = Some(ChargedKey::Table(&key));
                    return Verdict::Respond(Box::new(self.reject::<M, R>(
                        g,
                        true,
                        wait,
                        status,
                        key,
                        head.headers,
                    )));
                }
                Charge::NoKey(status) => {
                    return Verdict::Respond(Box::new(rejection::status_only::<M, R>(
                        status,
                        head.headers,
                    )));
                }
                Charge::Line(key, status) => {
                    return Verdict::Line(Box::new(InLine {
                        global_line: true,
                        key,
                        status,
                        route,
                        global: None,
                    }));
                }
            }
        }
        self.decide_route::<R, M>(&head, route, global, global_adm, now)
    }

    /// Gives the global limiter's admission back (a later policy refused).
    pub(crate) fn give_back_global(&self, a: Option<Admitted>, now: Timestamp) {
        if let Some(a) = a {
            let store = self.global.as_ref().and_then(|g| g.store_of(&a));
            a.permit.give_back(store, &a.key, now);
        }
    }

    /// The route policy's part of [`Shared::decide`], after the global
    /// limiter admitted (`global_adm`, if it charged anything).
    fn decide_route<R, M: BodyMode<R>>(
        &self,
        head: &RequestHead<'_>,
        route: Option<usize>,
        global: Option<&Compiled>,
        global_adm: Option<Admitted>,
        now: Timestamp,
    ) -> Verdict<M::Body> {
        let route_c = route.map(|i| &self.policies[i]);
        let metrics = self.metrics_of(route);
        let mut route_adm = None;
        if let (Some(i), Some(c)) = (route, route_c) {
            let charge = if c.policy.backend.is_some() {
                match self.key_of(c, head, now) {
                    Ok((k, status)) => {
                        return Verdict::Remote(Box::new(Remote {
                            policy: i,
                            key: k.backend_key(c.policy.ipv6_prefix),
                            status,
                            global: global_adm,
                        }));
                    }
                    Err(NoKey::Allow) => Charge::Admitted(None),
                    Err(NoKey::Reject(status)) => Charge::NoKey(status),
                }
            } else {
                self.charge(c, head, now)
            };
            match charge {
                Charge::Admitted(a) => route_adm = a,
                Charge::Line(key, status) => {
                    return Verdict::Line(Box::new(InLine {
                        global_line: false,
                        key,
                        status,
                        route,
                        global: global_adm,
                    }));
                }
                Charge::Refused(wait, status, key) => {
                    self.give_back_global(global_adm, now);
                    metrics.endpoint_limiter.increment(1);
                    let key = Some(ChargedKey::Table(&key));
                    return Verdict::Respond(Box::new(self.reject::<M, R>(
                        c,
                        false,
                        wait,
                        status,
                        key,
                        head.headers,
                    )));
                }
                Charge::NoKey(status) => {
                    self.give_back_global(global_adm, now);
                    return Verdict::Respond(Box::new(rejection::status_only::<M, R>(
                        status,
                        head.headers,
                    )));
                }
            }
        }
        let headers = if self.headers_on_success {
            self.success_headers(
                global.zip(global_adm.as_ref()).and_then(Compiled::charged),
                route_c.zip(route_adm.as_ref()).and_then(Compiled::charged),
            )
        } else {
            None
        };
        if global.is_some_and(Compiled::queues) || route_c.is_some_and(Compiled::queues) {
            // admitted at once under a queueing policy: no time in its queue
            metrics.time_in_queue.record(0.0);
        }
        metrics.acquired.increment(1);
        Verdict::Pass(
            headers.map(Box::new),
            Held::new(global_adm.map(|a| a.permit), route_adm.map(|a| a.permit)),
        )
    }
}
