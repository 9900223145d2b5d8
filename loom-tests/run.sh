#!/usr/bin/env bash
# Runs tollgate's loom model checks: every atomic protocol, every
# interleaving up to LOOM_MAX_PREEMPTIONS preemptions (3 unless set).
# Release mode and a separate target dir, so switching RUSTFLAGS does not
# rebuild the normal target/. Extra arguments go to `cargo test`
# (e.g. `loom-tests/run.sh --test gcra_never_over_admits`).
set -euo pipefail
cd "$(dirname "$0")/.."

export RUSTFLAGS="--cfg loom ${RUSTFLAGS:-}"
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}"
exec cargo test -p loom-tests --release --target-dir target/loom "$@"
