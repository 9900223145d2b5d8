//! Integration tests of the keyed tables: one test binary, one module per
//! file (each file was a test binary of its own; its name is kept as the
//! module's, so `cargo test --test keyed <file>::` runs one of them).

#[cfg(feature = "std")]
#[path = "../keyed_support/mod.rs"]
mod keyed_support;

mod keyed_eviction_is_lossless;
mod keyed_hash_seeding;
mod keyed_introspection;
mod keyed_overflow_policy_is_reported;
mod keyed_panicking_quota_leaves_table_consistent;
mod keyed_per_key_quota;
mod keyed_reconfigure;
mod keyed_reconfigure_matches_model;
mod keyed_reconfigure_under_threads;
mod keyed_retry_after_while_sweeping;
mod keyed_threads_keep_per_key_bound;
