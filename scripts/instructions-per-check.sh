#!/usr/bin/env bash
# Instructions per direct check, tollgate against governor, counted by
# valgrind's callgrind (repeatable on a busy machine, unlike times): each
# case runs at 100,000 and 200,000 calls, and the difference of the two
# totals over 100,000 is the cost of one call, loop included.
#
#   scripts/instructions-per-check.sh
#
# Installs valgrind if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { apt-get update && apt-get install -y valgrind; }
cargo build --release --example instructions_per_check
BIN=target/release/examples/instructions_per_check
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
total() {
  valgrind --tool=callgrind --callgrind-out-file="$out/cg" "$BIN" "$@" >/dev/null 2>"$out/log"
  sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$out/log"
}
for path in allow deny; do
  for case in try_acquire check governor; do
    a=$(total "$case" 100000 "$path")
    b=$(total "$case" 200000 "$path")
    echo "$path $case: $(( (b - a) / 100000 )) instructions per call"
  done
done
