//! When the server cannot answer: the failure policy's answer, the
//! failure counters and the circuit breaker with its probe task.

use ::redis::{ErrorKind, RedisError, Value};

use std::time::Instant;

use super::{Connection, RedisStore, StoreError, StorePermit};
use crate::breaker::BreakerState;
use crate::config::{CircuitBreaker, FailurePolicy};
use tollgate_core::clock::Clock;
use tollgate_core::keyed::KeyedPath;
use tollgate_core::limiter::Limiter;
use tollgate_core::refusal::Refusal;
use tollgate_core::snapshot::Snapshot;
use tollgate_core::sync::Ordering;

/// True when `e` means the server could not be reached (connection
/// refused, dropped, not ready, I/O), as opposed to an error the server
/// itself answered (which proves it reachable) or a reply of the wrong
/// type.
fn unreachable(e: &RedisError) -> bool {
    !matches!(
        e.kind(),
        ErrorKind::Server(_)
            | ErrorKind::Extension
            | ErrorKind::Parse
            | ErrorKind::UnexpectedReturnType
            | ErrorKind::AuthenticationFailed
    )
}

impl RedisStore {
    /// How many calls so far the store failed to answer (error or timeout)
    /// and the failure policy answered instead: a counter for metrics and
    /// alerts. [`try_check_n`](Self::try_check_n) gives the errors
    /// themselves.
    #[must_use]
    pub fn store_failures(&self) -> u64 {
        self.breaker.failures.load(Ordering::Relaxed)
    }

    /// True while the circuit breaker is open: calls are answered by the
    /// failure policy at once (see
    /// [`RedisConfig::circuit_breaker`](crate::RedisConfig::circuit_breaker)).
    #[must_use]
    pub fn circuit_open(&self) -> bool {
        self.breaker.is_open()
    }

    /// How many times the circuit breaker has opened.
    #[must_use]
    pub fn circuit_openings(&self) -> u64 {
        self.breaker.opened.load(Ordering::Relaxed)
    }

    /// How many times the circuit breaker has closed again (a probe was
    /// answered): [`circuit_openings`](Self::circuit_openings) less this is
    /// 1 while it is open, 0 otherwise.
    #[must_use]
    pub fn circuit_closings(&self) -> u64 {
        self.breaker.closed.load(Ordering::Relaxed)
    }

    /// How many calls so far the server refused because it was at its
    /// `maxmemory` (`OOM command not allowed when used memory >
    /// 'maxmemory'`): memory pressure, a counter for metrics and alerts
    /// beside [`store_failures`](Self::store_failures). A check refused so
    /// is answered by the failure policy and counted there too; the server
    /// being reachable, the circuit breaker does not count it. With feature
    /// `tracing`, logged at WARN at most once per 10 s with the number of
    /// refusals since the last line. See [Memory](crate::guide#memory).
    #[must_use]
    pub fn memory_pressure(&self) -> u64 {
        self.pressure.events.load(Ordering::Relaxed)
    }

    /// Records the outcome of one call in the breaker (opens it, and
    /// starts its probe, after enough consecutive failures) and the memory
    /// pressure counter.
    pub(super) fn record(&self, result: &Result<Value, StoreError>) {
        if let Err(StoreError::Redis(e)) = result
            && crate::pressure::is_out_of_memory(e)
        {
            let _ = self
                .pressure
                .record(&self.config.prefix, self.clock.now().as_nanos(), e);
        }
        let Some(config) = self.config.breaker else {
            return;
        };
        let failed = match result {
            Err(StoreError::Timeout(_)) => true,
            Err(StoreError::Redis(e)) => unreachable(e),
            _ => false,
        };
        if !failed {
            self.breaker.consecutive.store(0, Ordering::Relaxed);
        } else if self.breaker.fail(config.failures) {
            log_opened(&self.config.prefix, config.failures, result);
            self.spawn_probe(config);
        }
    }

    /// A task that `PING`s the server every `probe_interval` while the
    /// breaker is open, and closes it at the first answer. It ends then, or
    /// when the store is dropped. Without a tokio runtime (cannot happen:
    /// the store needs one), the breaker closes at once and the next call
    /// probes.
    fn spawn_probe(&self, config: CircuitBreaker) {
        let weak = std::sync::Arc::downgrade(&self.breaker);
        let connection = self.connection.clone();
        let timeout = self.config.timeout;
        let opening = Opening::now(&self.config.prefix, &self.breaker);
        let probe = async move {
            loop {
                tokio::time::sleep(config.probe_interval).await;
                let Some(state) = weak.upgrade() else {
                    return; // the store is gone
                };
                if !state.is_open() {
                    return;
                }
                let ping = async {
                    let mut cmd = ::redis::cmd("PING");
                    let cmd = &mut cmd;
                    match connection.clone() {
                        Connection::Single(mut c) => cmd.query_async::<Value>(&mut c).await,
                        Connection::Cluster(mut c) => cmd.query_async::<Value>(&mut c).await,
                    }
                };
                if let Ok(Ok(_)) = tokio::time::timeout(timeout, ping).await {
                    opening.close(&state);
                    return;
                }
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => drop(handle.spawn(probe)),
            Err(_) => Opening::now(&self.config.prefix, &self.breaker).close(&self.breaker),
        }
    }

    /// The failure policy's answer.
    pub(super) fn unavailable(&self, n: u32) -> Result<StorePermit, Refusal<'static>> {
        self.breaker.failures.fetch_add(1, Ordering::Relaxed);
        let decision = match self.config.policy {
            FailurePolicy::FailClosed { retry_after } => {
                let retry = u64::try_from(retry_after.as_nanos()).unwrap_or(u64::MAX);
                Err(Refusal::from_nanos(
                    retry,
                    Snapshot::from_nanos(self.capacity, 0, retry),
                ))
            }
            FailurePolicy::FailOpen { .. } => match &self.ceiling {
                Some(bucket) => {
                    let n = n.min(bucket.capacity(&()));
                    let now = self.clock.now();
                    bucket.check_n(n, now).map(|()| bucket.snapshot(now))
                }
                None => Ok(Snapshot::from_nanos(self.capacity, self.capacity, 0)),
            },
        };
        decision
            .map(|snapshot| StorePermit {
                snapshot,
                path: KeyedPath::Fallback,
            })
            .map_err(|refusal| refusal.on_path(KeyedPath::Fallback))
    }
}

/// Logs the breaker opening (feature `tracing`): at WARN, with the
/// store's key prefix, the number of consecutive failed calls that opened
/// it and the last one's cause.
fn log_opened(prefix: &[u8], failures: u32, cause: &Result<Value, StoreError>) {
    #[cfg(feature = "tracing")]
    {
        // the connection's own error: `StoreError::Redis` says only "error"
        let cause: &dyn core::fmt::Display = match cause {
            Err(StoreError::Redis(e)) => e,
            Err(e) => e,
            Ok(_) => &"none",
        };
        tracing::warn!(
            prefix = %String::from_utf8_lossy(prefix),
            failures,
            cause = %cause,
            "rate-limit store unreachable: circuit breaker open, the failure policy answers until a probe succeeds"
        );
    }
    #[cfg(not(feature = "tracing"))]
    let _ = (prefix, failures, cause);
}

/// What the probe task remembers of the breaker's opening, for the
/// closing's log line.
struct Opening {
    at: Instant,
    /// [`BreakerState::failures`] when the breaker opened.
    failures: u64,
    #[cfg(feature = "tracing")]
    prefix: String,
}

impl Opening {
    fn now(prefix: &[u8], state: &BreakerState) -> Self {
        #[cfg(not(feature = "tracing"))]
        let _ = prefix;
        Self {
            at: Instant::now(),
            failures: state.failures.load(Ordering::Relaxed),
            #[cfg(feature = "tracing")]
            prefix: String::from_utf8_lossy(prefix).into_owned(),
        }
    }

    /// Closes the breaker and, if it was open, logs the closing (feature
    /// `tracing`): at INFO, with how long it was open and how many calls
    /// the failure policy answered meanwhile (from the opening, the call
    /// that opened it included).
    fn close(self, state: &BreakerState) {
        if !state.close() {
            return;
        }
        let open_for = self.at.elapsed();
        let answered = state
            .failures
            .load(Ordering::Relaxed)
            .saturating_sub(self.failures);
        #[cfg(feature = "tracing")]
        tracing::info!(
            prefix = %self.prefix,
            open_ms = u64::try_from(open_for.as_millis()).unwrap_or(u64::MAX),
            answered_by_failure_policy = answered,
            "rate-limit store reachable again: circuit breaker closed"
        );
        #[cfg(not(feature = "tracing"))]
        let _ = (open_for, answered);
    }
}
