//! The Redis store, part by part: failure policies, memory, what is and
//! is not guaranteed, Valkey and Redis Cluster, and how it is tested. The
//! [crate root](crate) has the overview, the example and the types.
//!
//! # Fail-open or fail-closed
//!
//!  Every call waits at most the timeout (50 ms
//! by default). If Redis errs (a server at its `maxmemory` too: see
//! [Memory](#memory)), is unreachable or does not answer in time
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
//! # Memory
//!
//! Every key a store writes carries an expiry: a bucket's key expires when
//! the bucket is full again (at most `capacity × T` after its last
//! admission: `burst × T` for a token bucket, the largest weight × `T` for a
//! leaky bucket), a window's key when its window ends. That alone does not
//! bound memory: one client inventing a new key per request (a counter, a
//! random API key, an IPv6 /64 of addresses) creates keys as fast as it can
//! send. Measured before the budget below: a `maxmemory 64mb` server was full
//! in 8 s (450,000 keys, one client, 64 checks in flight, a rule of 60 per
//! hour whose keys live 60 s after one check); then every write was refused,
//! so the fail-open rule admitted every new client without limit and the
//! fail-closed rule refused every new client.
//!
//! ## The new-key budget and the overflow key
//!
//! Each store instance (each replica) holds a local token bucket of new keys,
//! [`RedisConfig::new_keys_per_second`](crate::RedisConfig::new_keys_per_second)
//! (default 1,000 per second, burst one second's worth). A check of a key
//! that exists never needs it (the token it took is given back). A check of
//! an absent key creates it only with a token; without one, nothing is
//! written and the rule's one overflow key
//! ([`RedisConfig::overflow_key`](crate::RedisConfig::overflow_key),
//! `prefix ++ {tag}? ++ "overflow"`, the same algorithm and quota) answers,
//! the answer's path being `KeyedPath::SharedOverflow`: the Redis
//! counterpart of an in-process table's `OverflowPolicy::SharedBucket`.
//! Overflowing traffic as a whole gets one key's quota; clients whose keys
//! exist are not affected; a legitimate new client arriving during a flood
//! shares the overflow key with the flood (and may be refused: count
//! `SharedOverflow` answers). An overflow refusal is not put in the refusal
//! cache: the key gets its own bucket as soon as the budget has a token.
//!
//! One round trip per decision as before while the key exists or the budget
//! has a token; two when it has none (the key's script, which writes
//! nothing, then the overflow key's). Every check in flight holds a token
//! until its reply (it might create its key) and gives it back if its key
//! existed; so that checks of existing keys in flight do not send a new
//! key to the overflow key, a new key refused for want of a token is asked
//! again, with a token, if one is free when the reply arrives. The
//! overflow key is one more key, so a cluster routes it like any other.
//!
//! Legitimate clients spend the budget too: with their first request, when
//! they come back after their bucket has refilled (their key expired), and,
//! for a fixed window, with their first request of each window. Set the
//! budget above that rate per replica; in normal traffic no answer should
//! come from `SharedOverflow`.
//!
//! ## The bound, and what it costs
//!
//! Keys one rule makes live at once:
//!
//! ```text
//! live keys ≤ replicas × (burst + rate × L) + 1 (the overflow key)
//! ```
//!
//! with `rate` and `burst` the budget's and `L` the longest a key lives
//! ([`RedisConfig::max_key_lifetime`](crate::RedisConfig::max_key_lifetime)):
//! `capacity × T` for a bucket (60 per hour with burst 10: `T` = 60 s, `L` =
//! 600 s), the window for a fixed window.
//! [`RedisConfig::max_live_keys_per_replica`](crate::RedisConfig::max_live_keys_per_replica)
//! computes `burst + rate × L`. This bounds what a flood of new keys can
//! store. A key outlives `L` only by being admitted again (each admission
//! moves its expiry by `T`): keeping `k` keys alive past `L` takes `k` times
//! the rule's rate in admitted requests, every key using its full quota.
//! Such keys still enter at most at the budget's rate, but a client that
//! keeps re-using every key it made can grow the count beyond the bound,
//! by `rate` keys per second, for as long as it sustains that traffic;
//! `maxmemory` with `volatile-ttl` (below) is the safety net for that case.
//!
//! Bytes per key (Redis 7.0, jemalloc, the default 9-byte prefix: 41-byte
//! key names), measured as the `used_memory` increase over 100,000 keys made
//! by the store (test `redis_key_costs_what_the_docs_say`): **149 B** for a
//! token or leaky bucket (the TAT, a 19-digit integer, is stored as an
//! integer) and **181 B** for a fixed window (`k:count` is a string);
//! `MEMORY USAGE` says 88 and 120 B, leaving out the main and expiry hash
//! tables' slots. Each extra prefix byte adds about one byte, and just after
//! Redis doubles its hash tables a key costs up to about 30 B more: plan
//! with **200 B per key**.
//!
//! Worked example: a 64 MB server (`maxmemory 64mb`; an empty Redis uses
//! about 1 MB), 4 replicas, tollgate keys kept under 48 MB (240,000 keys at
//! 200 B):
//!
//! | rule | `L` | budget per replica | live keys at most | memory |
//! |---|---|---|---|---|
//! | `api`: 60 per hour, burst 10 | 600 s | 50/s | 4 × (50 + 50 × 600) + 1 = 120,201 | 24 MB |
//! | `login`: 10/s, burst 20 | 2 s | 1,000/s (default) | 4 × (1,000 + 1,000 × 2) + 1 = 12,001 | 2.4 MB |
//! | together | | | 132,202 | 26.4 MB |
//!
//! With the default budget, `api` could hold 4 × 601,000 keys (480 MB):
//! a rule whose keys live long needs a small budget. Measured on that
//! server with `volatile-ttl` (test
//! `redis_flood_of_new_keys_stays_within_its_share`): one client flooding
//! new keys at full speed for 60 s (about 21,500 checks per second, 64 in
//! flight) against a rule of 60 per hour with a budget of 100/s left at most
//! 6,010 keys and 2.1 MB used, nothing evicted, and legitimate clients on
//! that rule and another one were decided exactly as one in-process bucket
//! decides.
//!
//! ## `maxmemory` and the eviction policy
//!
//! Run the server with `maxmemory` set and **`maxmemory-policy
//! volatile-ttl`**. Every key the store writes has a TTL equal to the time
//! until its bucket is full again (or its window ends), so when Redis must
//! evict, `volatile-ttl` evicts (among a sample, `maxmemory-samples`) the
//! key closest to expiring: the bucket closest to full, whose loss (a lost
//! key is a full bucket) changes least. That is the Redis counterpart of the
//! lossless eviction of in-process tables: close to lossless, not exactly,
//! as the evicted bucket had not quite refilled. Other policies:
//!
//! - `noeviction` (Redis's default): once full, every write is refused
//!   (`OOM command not allowed when used memory > 'maxmemory'`). A check
//!   that would write (any admission, a new key) is answered by the failure
//!   policy: fail-open admits without limit, fail-closed refuses. Refusals
//!   still come from Redis (the script's refusal path writes nothing, and
//!   Redis 7 runs a script without flags until its first write), so a
//!   throttled client stays throttled.
//! - `allkeys-lru`, `allkeys-lfu`, `volatile-lru`, `volatile-lfu`, the
//!   `random` ones: may evict a key that is throttled right now (a client
//!   refused for an hour is the least recently used key), giving it a full
//!   bucket: rotating through new keys would then reset one's own limit.
//!   The `allkeys-*` ones also evict data without a TTL.
//! - Sharing the server with other data that carries TTLs (a cache) makes
//!   `volatile-ttl` weigh both by expiry; a server of its own is simplest.
//!
//! ## Under memory pressure
//!
//! When Redis answers `OOM` (error code), the store answers as when it is
//! unavailable: the failure policy decides, the permit says
//! `store_unavailable()` and a refusal's path is `KeyedPath::Fallback`. The
//! call is counted by [`RedisStore::memory_pressure`](crate::RedisStore::memory_pressure)
//! (and, when the failure policy answered, by `store_failures`), logged at
//! WARN (feature `tracing`) at most once per 10 s with the number of such
//! calls since the last line, and does **not** open the circuit breaker: the
//! server answers. [`StoreError::is_out_of_memory`](crate::StoreError::is_out_of_memory)
//! tells it from `try_check_n`. A key's own refusal still comes from Redis,
//! and a key whose refund empties its bucket is deleted (Redis allows `DEL`
//! when full). Alert on `memory_pressure` rising: it means the server is
//! smaller than the rules' bounds, or other data fills it.
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
//! - Memory: a flood of new keys stores at most `replicas × (burst + rate ×
//!   L) + 1` keys of a rule ([Memory](#memory)); new keys past the budget
//!   share the overflow key's quota. A server at its `maxmemory` is
//!   reported like an unavailable one, but a throttled client stays
//!   throttled.
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
