#!/usr/bin/env bash
# Soak test: N minutes (default 10) of HTTP load over loopback at 50
# keep-alive connections against the demo server (examples/server.rs),
# with key churn (a new generation of 1,000 client keys every 5 s, sent as
# X-Forwarded-For from a trusted loopback proxy) on an in-process rule and
# a Redis-backed rule, and the Redis server killed in the middle and
# started again (empty) after an outage of run/20 (4-30 s).
#
# The driver (examples/soak.rs) owns the redis-server and checks: the
# server's RSS stays flat (end and second-half peak within 25 % + 8 MiB of
# the post-warm-up figure); every key is admitted at most burst + rate·t by
# each rule (t stretched by 1e-4 for the server's TSC clock, whose rate
# differs slightly from the driver's; see CLOCK_RATE_TOLERANCE); during
# the outage the Redis rule answers as its failure policy says (fail-open:
# 200, fail-closed: 429 with Retry-After: 1), flagged; it answers from
# Redis again soon after the restart. Prints `SOAK name value`
# figures; exits non-zero if a check fails.
#
#   scripts/soak.sh                 # 10 minutes, fail-open
#   scripts/soak.sh 0.5             # 30 seconds (what .ci/run runs)
#   SOAK_FAILURE=closed scripts/soak.sh 2
#   SOAK_CONNECTIONS=50 (default)
#   SOAK_PROFILE=dev scripts/soak.sh 0.5   # a debug build (default: release)
#
# Needs redis-server on PATH. Logs: target/soak/.
set -euo pipefail
cd "$(dirname "$0")/.."

minutes="${1:-10}"
failure="${SOAK_FAILURE:-open}"
connections="${SOAK_CONNECTIONS:-50}"
seconds=$(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 }')
out=target/soak
mkdir -p "$out"

command -v redis-server >/dev/null || {
  echo "redis-server is not on PATH (apt-get install -y redis-server)" >&2
  exit 2
}

# release unless SOAK_PROFILE says otherwise (.ci/run: dev, the build its
# http example step already made, instead of a release build from scratch)
profile="${SOAK_PROFILE:-release}"
case "$profile" in
  dev) bin=target/debug/examples ;;
  *) bin="target/$profile/examples" ;;
esac
echo "building the demo server and the soak driver ($profile)"
cargo build --profile "$profile" --features axum,config,tracing,redis --example server --example soak >"$out/build.log" 2>&1 || {
  tail -40 "$out/build.log" >&2
  exit 2
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
server_port=$(free_port)
redis_port=$(free_port)

# The rules: kept in step with the constants of examples/soak.rs.
rules="$out/rules.toml"
cat >"$rules" <<EOF
status = 429
headers_on_success = false
# the soak driver is a proxy on loopback: its X-Forwarded-For is the client
trusted_proxies = ["127.0.0.1/32"]
exempt = ["/health"]

# key churn on in-process buckets: 5 per second per client, bursts of 5;
# 5,000 keys tracked, so generations of idle keys are swept out
[[rules]]
name = "churn"
prefix = "/api/hello"
rate = 5
period = "1s"
burst = 5
key = "client_ip"
max_keys = 5000

# buckets in Redis: 2 per second per client, bursts of 3
[[rules]]
name = "shared"
prefix = "/api/login"
rate = 2
period = "1s"
burst = 3
key = "client_ip"
backend = "redis"
redis_url = "redis://127.0.0.1:${redis_port}/"
redis_prefix = "soak:"
redis_timeout = "500ms"
redis_failure = "${failure}"
EOF

server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT

TOLLGATE_ADDR="127.0.0.1:$server_port" TOLLGATE_LOG=warn \
  "$bin/server" "$rules" >"$out/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$server_port") 2>/dev/null; then break; fi
  sleep 0.1
done

echo "soak: ${seconds}s, $connections connections, fail-$failure, server pid $server_pid on :$server_port, redis on :$redis_port"
status=0
"$bin/soak" \
  --addr "127.0.0.1:$server_port" \
  --server-pid "$server_pid" \
  --redis-port "$redis_port" \
  --seconds "$seconds" \
  --connections "$connections" \
  --failure "$failure" \
  --store-timeout 0.5 | tee "$out/report.txt" || status=$?
exit "$status"
