//! Host tests of tollgate's embassy layer (`tests/embassy_wait.rs`, waiting
//! on buckets; `tests/tick_bucket_acquire.rs`, on a tick bucket;
//! `tests/duty_cycle_wait.rs`, for a slot of the radio duty cycle), run on
//! embassy-time's mock driver. This crate has no code of its own.
#![no_std]
