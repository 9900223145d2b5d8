//! Decoding the script's replies: pure functions from its six integers
//! to a decision or a wait, which never panic (the fuzz targets drive them).

use core::time::Duration;
use std::vec::Vec;

use ::redis::{FromRedisValue, Value};

use super::{StoreError, StoreReply};
use crate::config::gcra_max_lead;
use tollgate_core::gcra::{BucketKind, Gcra};
use tollgate_core::keyed::KeyedPath;
use tollgate_core::refusal::Refusal;
use tollgate_core::snapshot::Snapshot;

/// What the script found at the key: the reply's sixth field (see the
/// [script docs](crate::script#new-keys)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyWas {
    /// The key existed.
    Present,
    /// The key was absent: a check created it.
    Absent,
    /// The key was absent and the check could not create it: nothing was
    /// written or decided.
    NotCreated,
}

/// The script's reply: its five decision fields and what the key was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reply {
    pub(crate) fields: [i64; 5],
    pub(crate) key: KeyWas,
}

/// The script's reply: an array of exactly six integers (or integer
/// strings), as both scripts return, the last one 0, 1 or 2. Anything else
/// (a shorter or longer array, nil, a status, text) is
/// [`StoreError::UnexpectedReply`]; never panics.
pub(crate) fn decode_reply(value: Value) -> Result<Reply, StoreError> {
    let values = Vec::<i64>::from_redis_value(value).map_err(|_| StoreError::UnexpectedReply)?;
    let [a, b, c, d, e, key]: [i64; 6] =
        values.try_into().map_err(|_| StoreError::UnexpectedReply)?;
    let key = match key {
        0 => KeyWas::Present,
        1 => KeyWas::Absent,
        2 => KeyWas::NotCreated,
        _ => return Err(StoreError::UnexpectedReply),
    };
    Ok(Reply {
        fields: [a, b, c, d, e],
        key,
    })
}

/// The decision in a script's reply's five decision fields, for a store
/// running `gcra` (a bucket) or, for `None`, a fixed window of `capacity`,
/// answered by the key's own state ([`KeyedPath::Own`]). A pure function
/// of the reply: negative fields are [`StoreError::UnexpectedReply`],
/// out-of-range ones saturate; never panics.
pub(crate) fn reply_to_decision(
    gcra: Option<Gcra>,
    capacity: u32,
    reply: [i64; 5],
) -> Result<StoreReply, StoreError> {
    // GCRA: {allowed, lead, retry_after, now_s, now_us}
    // fixed window: {allowed, count, until_end_us, now_s, now_us}
    let [allowed, level, wait, now_s, now_us] = reply;
    let server_time = non_negative(now_s)?
        .saturating_mul(1_000_000_000)
        .saturating_add(non_negative(now_us)?.saturating_mul(1_000));
    let decision = match gcra {
        Some(gcra) => {
            let snapshot = gcra.snapshot_for_lead(Duration::from_nanos(non_negative(level)?));
            if allowed == 1 {
                Ok(snapshot)
            } else {
                Err(Refusal::from_nanos(non_negative(wait)?, snapshot))
            }
        }
        None => {
            let count = u32::try_from(non_negative(level)?).unwrap_or(u32::MAX);
            let until_end = non_negative(wait)?.saturating_mul(1_000);
            // as in-process: a window with nothing taken is already full
            let reset = if count == 0 { 0 } else { until_end };
            let remaining = capacity.saturating_sub(count);
            let snapshot = Snapshot::from_nanos(capacity, remaining, reset);
            if allowed == 1 {
                Ok(snapshot)
            } else {
                Err(Refusal::from_nanos(until_end, snapshot))
            }
        }
    };
    Ok(StoreReply {
        result: decision,
        server_time_nanos: server_time,
        path: KeyedPath::Own,
    })
}

/// The wait until `n` permits would be granted, from a peek's reply (see
/// [`RedisStore::time_until_ready`]). Pure; never panics.
pub(crate) fn wait_from_peek(
    gcra: Option<Gcra>,
    capacity: u32,
    n: u32,
    reply: [i64; 5],
) -> Result<Duration, StoreError> {
    let [_, level, until_end_us, _, _] = reply;
    let wait = match gcra {
        Some(gcra) => {
            let lead = non_negative(level)?;
            let admit_lead = match gcra.kind() {
                BucketKind::TokenBucket => gcra_max_lead(&gcra)
                    .saturating_sub(u64::from(n).saturating_mul(gcra.interval_nanos())),
                BucketKind::LeakyBucket => 0,
            };
            lead.saturating_sub(admit_lead)
        }
        None => {
            let count = non_negative(level)?;
            if count.saturating_add(u64::from(n)) > u64::from(capacity) {
                non_negative(until_end_us)?.saturating_mul(1_000)
            } else {
                0
            }
        }
    };
    Ok(Duration::from_nanos(wait))
}

fn non_negative(v: i64) -> Result<u64, StoreError> {
    u64::try_from(v).map_err(|_| StoreError::UnexpectedReply)
}
