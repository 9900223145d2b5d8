//! Decoding the script's replies: pure functions from its five integers
//! to a decision or a wait, which never panic (the fuzz targets drive them).

use core::time::Duration;
use std::vec::Vec;

use ::redis::{FromRedisValue, Value};

use super::{StoreError, StoreReply};
use crate::config::gcra_max_lead;
use tollgate_core::gcra::{BucketKind, Gcra};
use tollgate_core::refusal::Refusal;
use tollgate_core::snapshot::Snapshot;

/// The script's reply as its five integers: an array of exactly five
/// integers (or integer strings), as both scripts return. Anything else
/// (a shorter or longer array, nil, a status, text) is
/// [`StoreError::UnexpectedReply`]; never panics.
pub(crate) fn decode_reply(value: Value) -> Result<[i64; 5], StoreError> {
    let values = Vec::<i64>::from_redis_value(value).map_err(|_| StoreError::UnexpectedReply)?;
    values.try_into().map_err(|_| StoreError::UnexpectedReply)
}

/// The decision in a script's reply, for a store running `gcra` (a
/// bucket) or, for `None`, a fixed window of `capacity`. A pure function
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
