//! Integration tests of the partitioned limiters: one test binary, one module per
//! file (each file was a test binary of its own; its name is kept as the
//! module's, so `cargo test -p tollgate-partitioned --test partitioned <file>::` runs one
//! of them).

use tollgate_test_support as support;

mod partitioned_async_per_key_queue;
mod partitioned_cancelled_waiters_never_share_a_slot;
mod partitioned_chain_with_a_user_limiter;
mod partitioned_in_flight_release_wakes;
mod partitioned_policies;
mod partitioned_queue_matches_nginx;
