//! The check path of a [`RedisStore`]: taking, refunding and peeking at
//! permits through the refusal cache, one script call within the timeout
//! (two for a new key when the new-key budget is spent: the key's, which
//! writes nothing, then the overflow key's).

use core::time::Duration;

use ::redis::Value;

use super::{
    Connection, KeyWas, RedisStore, Reply, StoreError, StorePermit, StoreReply, decode_reply,
    reply_to_decision, wait_from_peek,
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
    /// refusal cache and the failure policy: never returns a store error,
    /// and each store call waits at most the timeout (one call, or for a
    /// new key past the new-key budget up to three: the key's, its retry
    /// and the overflow key's). A request of more permits
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
                // an overflow refusal holds for the overflow key, not for
                // this key (which gets its own bucket once the budget has
                // refilled): not cached
                if let (Some(cache), Err(denied), KeyedPath::Own) =
                    (&self.cache, reply.result, reply.path)
                {
                    cache.insert(key, n, denied, self.clock.now().as_nanos());
                }
                reply.result.map(|snapshot| StorePermit {
                    snapshot,
                    path: reply.path,
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
    /// timeout (per call).
    ///
    /// A check (`n > 0`) takes one token of the
    /// [new-key budget](crate::RedisConfig::new_keys_per_second) if it can,
    /// given back if the key turns out to exist. Without one, an absent key
    /// is not created: a second call asks it again if a token is free by
    /// then (checks in flight had held them), else asks the rule's
    /// overflow key, and the reply's path is [`KeyedPath::SharedOverflow`].
    ///
    /// # Errors
    /// [`StoreError`] ([`StoreError::is_out_of_memory`] when the server is
    /// at its `maxmemory`).
    pub async fn try_check_n(&self, key: &[u8], n: u32) -> Result<StoreReply, StoreError> {
        if n > self.capacity {
            return Err(StoreError::Capacity(self.exceeded(n)));
        }
        let redis_key = self.config.redis_key(key);
        let took = n > 0 && self.new_keys.check(self.clock.now()).is_ok();
        let mut reply = self.call_with_token(&redis_key, n, took).await?;
        // Every check in flight holds a token until its reply (it may
        // create its key), so the budget can look spent while only checks
        // of existing keys hold it; they give it back within a round trip.
        // A token now is a real one: ask again, allowed to create.
        if reply.key == KeyWas::NotCreated && self.new_keys.check(self.clock.now()).is_ok() {
            reply = self.call_with_token(&redis_key, n, true).await?;
        }
        if reply.key != KeyWas::NotCreated {
            return self.reply_to_decision(reply);
        }
        // the budget is spent: the rule's one overflow key answers
        let overflow = self.call("c", &self.overflow_key, n, true).await?;
        let mut decision = self.reply_to_decision(overflow)?;
        decision.path = KeyedPath::SharedOverflow;
        decision.result = decision
            .result
            .map_err(|refusal| refusal.on_path(KeyedPath::SharedOverflow));
        Ok(decision)
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
        let reply = self
            .call(
                "r",
                &self.config.redis_key(key),
                n.min(self.capacity),
                false,
            )
            .await?;
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
        let reply = self
            .call("c", &self.config.redis_key(key), 0, false)
            .await?;
        wait_from_peek(self.gcra, self.capacity, n, reply.fields)
    }

    /// One check of `n` on `redis_key`, allowed to create it if `took` (a
    /// token of the new-key budget was taken for it): the token is given
    /// back unless the call created the key.
    async fn call_with_token(
        &self,
        redis_key: &[u8],
        n: u32,
        took: bool,
    ) -> Result<Reply, StoreError> {
        let reply = self.call("c", redis_key, n, took).await;
        let created = match &reply {
            Ok(r) => r.key == KeyWas::Absent,
            // the script stopped at its first write, or never ran
            Err(e) => !(e.is_out_of_memory() || matches!(e, StoreError::CircuitOpen)),
        };
        if took && !created {
            self.new_keys.refund(1, self.clock.now());
        }
        reply
    }

    /// Runs the script once for `op` on the Redis key `redis_key`, within
    /// the timeout; at once [`StoreError::CircuitOpen`] while the breaker
    /// is open. `may_create`: whether a check may create an absent key.
    async fn call(
        &self,
        op: &str,
        redis_key: &[u8],
        n: u32,
        may_create: bool,
    ) -> Result<Reply, StoreError> {
        if self.breaker.is_open() {
            return Err(StoreError::CircuitOpen);
        }
        let mut invocation = self.script.key(redis_key);
        invocation.arg(op).arg(n).arg(u8::from(may_create));
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

    fn reply_to_decision(&self, reply: Reply) -> Result<StoreReply, StoreError> {
        reply_to_decision(self.gcra, self.capacity, reply.fields)
    }
}
