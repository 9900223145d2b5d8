//! The Redis store, part by part: failure policies, what is and is not
//! guaranteed, Valkey and Redis Cluster, and how it is tested. The
//! [crate root](crate) has the overview, the example and the types.
//!
//! # Fail-open or fail-closed
//!
//!  Every call waits at most the timeout (50 ms
//! by default). If Redis errs, is unreachable or does not answer in time
//! (including a hung server with the TCP connection still open), the failure
//! policy answers and the answer's path is `KeyedPath::Fallback`
//! (`permit.store_unavailable()` on an admission):
//!
//! | policy | during an outage |
//! |---|---|
//! | `FailurePolicy::fail_open()` (default) | every request is admitted: availability first |
//! | `FailurePolicy::fail_open_with_ceiling(q)` | admitted up to a local token bucket `q` per store instance (all keys together); use your per-replica share of the global quota |
//! | `FailurePolicy::fail_closed(retry_after)` | every request is refused with that `retry_after`: protection first |
//!
//! The connection is re-established in the background with exponential
//! backoff (10 ms to 1 s by default, `reconnect_backoff`); the store resumes
//! by itself when Redis is back, without restarting the application (tested
//! by killing and restarting `redis-server` on the same port). `connect`
//! succeeds even while Redis is down.
//!
//! # What is and is not guaranteed
//!
//! - While Redis answers: across the whole fleet, admissions for a key never
//!   exceed `burst + rate·t` over any interval `t` (tested with 4 instances on
//!   separate connections hammering one key for 3 s: within one permit).
//! - During an outage: only the failure policy holds. Fail-open admits without
//!   the shared limit (with a ceiling: at most replicas × ceiling);
//!   fail-closed refuses everything. Keys refused just before the outage stay
//!   refused locally until their `retry_after`.
//! - After a failover to a replica or a restart without persistence: buckets
//!   may be lost (a lost key is a full bucket), so clients can get up to one
//!   extra burst; writes not yet replicated are lost the same way (Redis
//!   replication is asynchronous). A new primary whose clock is behind is
//!   handled like a clock that went back: never extra capacity; leads beyond
//!   the heal threshold (1 s) are reset to "empty at now".
//! - A refund ([`RedisStore::refund`](crate::RedisStore::refund)) is best effort: if Redis is
//!   unreachable, the permits stay taken.
//!
//! # Valkey and Redis Cluster
//!
//!  The scripts use only `TIME`, `GET`, `SET PX`,
//! `DEL` and `PEXPIREAT` and touch exactly one key,
//! declared in `KEYS`, so they run unchanged on Valkey and on a cluster. For
//! a cluster use `RedisStore::connect_cluster([node urls], config)`: each call
//! goes to the shard owning its key, redirections are followed, and a
//! `SCRIPT FLUSH` on the shards is survived (tested on a real 3-shard
//! `redis-server` cluster). `hash_tag(b"...")` makes all of one limiter's keys
//! `prefix{tag}key`, putting them in one slot (one shard) when you need them
//! together, e.g. for `SCAN`-based inspection or a single-shard deployment.
//! Redis ≥ 5 is needed (effects replication of scripts that read `TIME`).
//! Tested against Redis 7.0; Valkey keeps the same scripting API but was not
//! available on the test machine.
//!
//! # Tests
//!
//! The store's tests run against a real `redis-server`: each starts its own
//! on an ephemeral port and fails, with a message saying so, if none is on
//! PATH (`scripts/test.sh` installs it). Figures: `cargo bench --bench
//! redis`, collected in the repository's BENCHMARKS.md.
