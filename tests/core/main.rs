//! Integration tests of buckets, windows, clocks, chains and in-flight limits: one test binary, one module per
//! file (each file was a test binary of its own; its name is kept as the
//! module's, so `cargo test --test core <file>::` runs one of them).

mod chain_refund;
mod clock_backwards;
mod clocks;
mod concurrency_limiter;
mod config_errors_keep_their_source;
mod exact_rates_at_period_boundaries;
mod exact_rates_match_a_rational_model;
mod fixed_window;
mod gcra_fails_closed_at_the_clock_horizon;
mod leaky_bucket;
mod model;
mod sliding_window;
mod statistics_counts;
mod stress_threads;
mod tick_bucket;
mod token_bucket;
mod windows_under_stale_clocks;
