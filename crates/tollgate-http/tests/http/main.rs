//! Integration tests of the HTTP layer, over real TCP: one test binary, one module per
//! file (each file was a test binary of its own; its name is kept as the
//! module's, so `cargo test -p tollgate-http --test http <file>::` runs one
//! of them).

use tollgate_test_support as support;

mod http_algorithms;
mod http_client_ip_trusted_proxies;
mod http_concurrency_queue;
mod http_concurrency_streaming;
mod http_config_files;
mod http_config_is_strict;
mod http_config_mistakes;
mod http_dry_run_never_delays;
mod http_global_refund;
mod http_grpc;
mod http_load_50_clients;
mod http_metrics_and_dry_run;
mod http_missing_key;
mod http_overflow_by_network;
mod http_paused_time;
mod http_prefix_routing;
mod http_problem_details;
mod http_queue_disconnect_waves;
mod http_queue_per_key;
mod http_queueing;
mod http_ratelimit_fields;
mod http_ratelimit_model;
mod http_redis_backend;
mod http_rejection_headers;
mod http_rejection_precedence;
mod http_reload_all_or_nothing;
mod http_reload_keeps_buckets;
mod http_route_layer_by_name;
