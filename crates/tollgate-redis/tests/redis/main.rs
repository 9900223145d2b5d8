//! Integration tests of the Redis store, against a real redis-server: one test binary, one module per
//! file (each file was a test binary of its own; its name is kept as the
//! module's, so `cargo test -p tollgate-redis --test redis <file>::` runs one
//! of them).

use tollgate_test_support as support;

mod redis_cluster_routes_each_key;
mod redis_failure_policy;
mod redis_fixed_window_matches_model;
mod redis_fleet_shares_one_quota;
mod redis_flood_of_new_keys_stays_within_its_share;
mod redis_key_costs_what_the_docs_say;
mod redis_keys_expire_and_stay_apart;
mod redis_matches_in_process_bucket;
mod redis_memory_pressure;
mod redis_new_keys_are_budgeted;
mod redis_one_round_trip_per_decision;
mod redis_servers_die_with_the_test;
