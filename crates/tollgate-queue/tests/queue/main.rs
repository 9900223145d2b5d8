//! Integration tests of the tokio queue: one test binary, one module per
//! file (each file was a test binary of its own; its name is kept as the
//! module's, so `cargo test -p tollgate-queue --test queue <file>::` runs one
//! of them).

use tollgate_test_support as support;

mod queue_across_runtimes;
mod queue_bounds;
mod queue_cancellation;
mod queue_close;
mod queue_far_future_clock;
mod queue_fifo_order;
mod queue_lifo_eviction;
mod queue_matches_fifo_model;
mod queue_matches_lifo_model;
mod queue_per_key;
mod queue_realtime;
mod queue_release_wakes;
mod queue_survives_a_panicking_limiter;
mod queue_windows_say_when_to_retry;
mod tokio_clock_paused_before_origin;
mod wait_estimate_behind_queue;
