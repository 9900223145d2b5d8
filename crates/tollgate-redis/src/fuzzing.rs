//! Entry points for the cargo-fuzz targets in `fuzz/`: thin wrappers over
//! crate-private code, so that the targets reach it without making it
//! public. It exists only in a build with `--cfg fuzzing` (which
//! `cargo fuzz` sets), never in a user's build or in the docs.

use core::time::Duration;

use crate::{RemoteAlgorithm, StoreError, StoreReply};

/// The decision a Redis store running `algorithm` takes from the script's
/// raw reply `value`.
///
/// # Errors
/// The [`StoreError`] the store would report.
pub fn redis_reply(
    algorithm: RemoteAlgorithm,
    value: ::redis::Value,
) -> Result<StoreReply, StoreError> {
    let (gcra, capacity) = redis_parts(algorithm);
    let reply = crate::store::decode_reply(value)?;
    crate::store::reply_to_decision(gcra, capacity, reply.fields)
}

/// The wait a Redis store running `algorithm` reads from a peek's reply
/// for `n` permits.
///
/// # Errors
/// The [`StoreError`] the store would report.
pub fn redis_wait(
    algorithm: RemoteAlgorithm,
    n: u32,
    reply: [i64; 5],
) -> Result<Duration, StoreError> {
    let (gcra, capacity) = redis_parts(algorithm);
    crate::store::wait_from_peek(gcra, capacity, n, reply)
}

fn redis_parts(algorithm: RemoteAlgorithm) -> (Option<tollgate_core::gcra::Gcra>, u32) {
    use tollgate_core::limiter::Algorithm;
    match algorithm {
        RemoteAlgorithm::Gcra(g) => (Some(g), g.capacity()),
        RemoteAlgorithm::FixedWindow(q) => (None, q.permits()),
    }
}
