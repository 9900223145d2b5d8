//! The check path of a [`RedisStore`]: taking, refunding and peeking at
//! permits through the refusal cache, one script call within the timeout.

use core::time::Duration;

use ::redis::Value;

use super::{
    Connection, RedisStore, StoreError, StorePermit, StoreReply, decode_reply, reply_to_decision,
    wait_from_peek,
};
use tollgate_core::clock::Clock;
use tollgate_core::keyed::KeyedPath;
use tollgate_core::refusal::Refusal;
use tollgate_core::snapshot::Snapshot;

impl RedisStore {
    /// Tries to take one permit for `key` (see [`check_n`](Self::check_n)).
    ///
    /// # Errors
    /// The [`Refusal`].
    pub async fn check(&self, key: &[u8]) -> Result<StorePermit, Refusal<'static>> {
        self.check_n(key, 1).await
    }

    /// Tries to take `n` permits for `key` (`n = 0` peeks), through the
    /// refusal cache and the failure policy: never waits longer than the
    /// timeout and never returns a store error. A request of more permits
    /// than the capacity is refused [`never`](Refusal::is_never) without
    /// asking the store.
    ///
    /// # Errors
    /// The [`Refusal`]: the store's, the refusal cache's
    /// ([`KeyedPath::Cached`]) or the failure policy's
    /// ([`KeyedPath::Fallback`]).
    pub async fn check_n(&self, key: &[u8], n: u32) -> Result<StorePermit, Refusal<'static>> {
        if n > self.capacity {
            return Err(self.exceeded(n));
        }
        if n > 0
            && let Some(cache) = &self.cache
            && let Some(denied) = cache.lookup(key, n, self.clock.now().as_nanos())
        {
            return Err(denied.on_path(KeyedPath::Cached));
        }
        match self.try_check_n(key, n).await {
            Ok(reply) => {
                if let (Some(cache), Err(denied)) = (&self.cache, reply.result) {
                    cache.insert(key, n, denied, self.clock.now().as_nanos());
                }
                reply.result.map(|snapshot| StorePermit {
                    snapshot,
                    path: KeyedPath::Own,
                })
            }
            Err(StoreError::Capacity(e)) => Err(e),
            Err(_) => self.unavailable(n),
        }
    }

    /// The refusal of `n` permits, more than the capacity.
    fn exceeded(&self, n: u32) -> Refusal<'static> {
        Refusal::above(n, self.capacity)
    }

    /// One store call for `n` permits of `key`, without cache or failure
    /// policy: the raw answer or why there is none. Still bounded by the
    /// timeout.
    ///
    /// # Errors
    /// [`StoreError`].
    pub async fn try_check_n(&self, key: &[u8], n: u32) -> Result<StoreReply, StoreError> {
        if n > self.capacity {
            return Err(StoreError::Capacity(self.exceeded(n)));
        }
        let reply = self.call("c", key, n).await?;
        self.reply_to_decision(reply)
    }

    /// Gives back `n` permits of an earlier admission for `key` (never above
    /// the capacity), and forgets any cached refusal of `key`. The reply
    /// carries the bucket's snapshot after the refund (as an `Allowed`).
    ///
    /// # Errors
    /// [`StoreError`] if the store could not be reached in time.
    pub async fn refund(&self, key: &[u8], n: u32) -> Result<StoreReply, StoreError> {
        if let Some(cache) = &self.cache {
            cache.forget(key);
        }
        let reply = self.call("r", key, n.min(self.capacity)).await?;
        self.reply_to_decision(reply)
    }

    /// The state of `key`'s bucket now, taking nothing.
    ///
    /// # Errors
    /// [`StoreError`] if the store could not be reached in time.
    pub async fn snapshot(&self, key: &[u8]) -> Result<Snapshot, StoreError> {
        self.try_check_n(key, 0).await.map(|r| match r.result {
            Ok(s) => s,
            Err(refusal) => *refusal.snapshot(),
        })
    }

    /// How long until `n` permits of `key` would be granted, taking nothing.
    ///
    /// # Errors
    /// [`StoreError`] if `n` can never be granted or the store could not be
    /// reached in time.
    pub async fn time_until_ready(&self, key: &[u8], n: u32) -> Result<Duration, StoreError> {
        if n > self.capacity {
            return Err(StoreError::Capacity(self.exceeded(n)));
        }
        if n == 0 {
            return Ok(Duration::ZERO);
        }
        let reply = self.call("c", key, 0).await?;
        wait_from_peek(self.gcra, self.capacity, n, reply)
    }

    /// Runs the script once for `op` on `key`, within the timeout; at once
    /// [`StoreError::CircuitOpen`] while the breaker is open.
    async fn call(&self, op: &str, key: &[u8], n: u32) -> Result<[i64; 5], StoreError> {
        if self.breaker.is_open() {
            return Err(StoreError::CircuitOpen);
        }
        let redis_key = self.config.redis_key(key);
        let mut invocation = self.script.key(redis_key);
        invocation.arg(op).arg(n);
        for a in &self.args {
            invocation.arg(a.as_str());
        }
        let call = async {
            match self.connection.clone() {
                Connection::Single(mut c) => invocation.invoke_async::<Value>(&mut c).await,
                Connection::Cluster(mut c) => invocation.invoke_async::<Value>(&mut c).await,
            }
        };
        let result = match tokio::time::timeout(self.config.timeout, call).await {
            Err(_) => Err(StoreError::Timeout(self.config.timeout)),
            Ok(Err(e)) => Err(StoreError::Redis(e)),
            Ok(Ok(value)) => Ok(value),
        };
        self.record(&result);
        decode_reply(result?)
    }

    fn reply_to_decision(&self, reply: [i64; 5]) -> Result<StoreReply, StoreError> {
        reply_to_decision(self.gcra, self.capacity, reply)
    }
}
