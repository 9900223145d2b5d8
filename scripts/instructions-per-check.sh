#!/usr/bin/env bash
# Instructions per direct check, tollgate against governor, and per HTTP
# request through an axum router (bare, tollgate's layer, tower_governor's),
# counted by valgrind's callgrind (repeatable on a busy machine, unlike
# times): each case runs at two loop lengths, and the difference of the two
# totals over the difference of the lengths is the cost of one call, loop
# included.
#
#   scripts/instructions-per-check.sh
#
# Installs valgrind if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { apt-get update && apt-get install -y valgrind; }
cargo build --release --features axum --example instructions_per_check \
  --example instructions_per_keyed_check --example instructions_per_request
BIN=target/release/examples/instructions_per_check
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
total() {
  valgrind --tool=callgrind --callgrind-out-file="$out/cg" $TOGGLE "$BIN" "$@" >/dev/null 2>"$out/log"
  sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$out/log"
}
TOGGLE=
# per_call CASE CALLS ARG: instructions per call of CASE, from runs of CALLS
# and 2 x CALLS calls
per_call() {
  local a b
  a=$(total "$1" "$2" "$3")
  b=$(total "$1" $(($2 * 2)) "$3")
  echo $(((b - a) / $2))
}
for path in allow deny; do
  for case in try_acquire check governor; do
    echo "$path $case: $(per_call "$case" 100000 "$path") instructions per call"
  done
done
# keyed: 10,000 u64 keys (a binary of its own, so that it does not change
# how the direct cases are compiled)
BIN=target/release/examples/instructions_per_keyed_check
for path in allow deny; do
  for case in sharded partitioned governor_keyed; do
    echo "$path $case: $(per_call "$case" 100000 "$path") instructions per call"
  done
done
# HTTP: the cost a layer adds is its count less the bare router's; only
# the requests are counted (not the set-up, nor the TSC clock's calibration,
# whose length varies from run to run)
BIN=target/release/examples/instructions_per_request
TOGGLE="--toggle-collect=*instructions_per_request::counted*"
for keying in global per_ip; do
  for case in bare tollgate tower_governor; do
    echo "http $keying $case: $(per_call "$case" 20000 "$keying") instructions per request"
  done
done
