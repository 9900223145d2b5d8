#!/usr/bin/env bash
# Requests per second of a release axum server over loopback, loaded by wrk
# (2 threads, 50 keep-alive connections), with and without tollgate's layer.
#
#   scripts/loopback-bench.sh [SECONDS_PER_RUN] [REPEATS]   (defaults 10, 3)
#
# Two comparisons, each run REPEATS times alternating so that drift on a
# shared machine hits both sides alike; the figure is the median of the
# per-pair ratios, with every run's req/s printed:
#   1. cost: `examples/loopback.rs limited` (a global limit and a per-IP
#      policy, never refusing) against `plain` (no layer), both on `/`;
#      target: the limiter costs <= 3 % of req/s.
#   2. flood: the `flood` server (one request per hour per IP on `/`) on `/`
#      (every request but the first refused, 429 with headers) against its
#      exempt `/health`; target: refusals served at >= 0.95x the exempt rate.
# Prints `FIGURE name value unit note` lines. Installs wrk if missing.
set -euo pipefail
cd "$(dirname "$0")/.."

SECS=${1:-10}
REPEATS=${2:-3}
ADDR=127.0.0.1:39281
URL=http://$ADDR

command -v wrk >/dev/null || { apt-get update && apt-get install -y wrk; }
# --all-features: the same build as `cargo test --release --all-features`
cargo build --release --all-features --example loopback
BIN=target/release/examples/loopback

server_pid=
stop() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true   # 143: ended by our SIGTERM
  fi
  server_pid=
}
trap stop EXIT

start() {
  stop
  "$BIN" "$1" "$ADDR" >/dev/null &
  server_pid=$!
  for _ in $(seq 100); do
    curl -s -o /dev/null "$URL/health" && return 0
    sleep 0.1
  done
  echo "server $1 did not start" >&2
  exit 1
}

# req/s of one wrk run on $1
load() {
  local out
  out=$(wrk -t2 -c50 -d"${SECS}s" "$1")
  echo "$out" >&2
  echo "$out" | awk '/^Requests\/sec:/ {print $2}'
}

status() { curl -s -o /dev/null -w '%{http_code}' "$1"; }

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min)"

cost_ratios=(); plain_rps=(); limited_rps=()
for r in $(seq "$REPEATS"); do
  if (( r % 2 )); then order="plain limited"; else order="limited plain"; fi
  for mode in $order; do
    start "$mode"
    [ "$(status "$URL/")" = 200 ] || { echo "$mode: / not 200" >&2; exit 1; }
    rps=$(load "$URL/")
    echo "run $r $mode /: $rps req/s"
    if [ "$mode" = plain ]; then plain_rps+=("$rps"); else limited_rps+=("$rps"); fi
  done
  cost_ratios+=("$(awk -v l="${limited_rps[-1]}" -v p="${plain_rps[-1]}" 'BEGIN {print l / p}')")
done

start flood
status "$URL/" >/dev/null   # the hour's only permit
[ "$(status "$URL/")" = 429 ] || { echo "flood: / not refused" >&2; exit 1; }
flood_ratios=(); exempt_rps=(); refused_rps=()
for r in $(seq "$REPEATS"); do
  if (( r % 2 )); then order="/health /"; else order="/ /health"; fi
  for path in $order; do
    rps=$(load "$URL$path")
    echo "run $r flood $path: $rps req/s"
    if [ "$path" = /health ]; then exempt_rps+=("$rps"); else refused_rps+=("$rps"); fi
  done
  flood_ratios+=("$(awk -v f="${refused_rps[-1]}" -v e="${exempt_rps[-1]}" 'BEGIN {print f / e}')")
done
[ "$(status "$URL/")" = 429 ] || { echo "flood: / no longer refused" >&2; exit 1; }
stop

echo "load after: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min)"
cost=$(printf '%s\n' "${cost_ratios[@]}" | median)
flood=$(printf '%s\n' "${flood_ratios[@]}" | median)
echo "FIGURE http_loopback_limiter_cost $(awk -v c="$cost" 'BEGIN {printf "%.1f", 100 * (1 - c)}') % req/s lost to the layer (global + per-IP, never refusing), median of $REPEATS alternating pairs of ${SECS}s wrk runs (-t2 -c50); plain ${plain_rps[*]}, limited ${limited_rps[*]} req/s; target <= 3"
echo "FIGURE http_loopback_refusal_vs_exempt $(awk -v f="$flood" 'BEGIN {printf "%.3f", f}') ratio refused / (exempt) req/s, median of $REPEATS alternating pairs of ${SECS}s wrk runs (-t2 -c50); refused ${refused_rps[*]}, exempt ${exempt_rps[*]} req/s; target >= 0.95"
