#!/usr/bin/env bash
# Runs the whole test suite (`cargo test --workspace --all-features`) N
# times in a row (default 20) while CPU-burning processes (default 2) load
# the machine, the way a busy 2-core CI runner does. Reports each run's
# result, time and failing tests, then a summary; exits non-zero if any run
# failed.
#
#   scripts/stress-tests.sh            # 20 runs, 2 burners
#   scripts/stress-tests.sh 5          # 5 runs
#   STRESS_BURNERS=4 scripts/stress-tests.sh 3
#   scripts/stress-tests.sh 10 -p tollgate-http --test http -- http_queueing::
#                                            # extra args go to cargo test; with
#                                            # -p/--package, only those packages
#                                            # (no --workspace): a test binary
#                                            # lives in its crate's package
#   scripts/stress-tests.sh 5 -p tollgate --test core -p tollgate-http --test http -- clocks:: http_queueing::
#                                            # several packages: each --test names
#                                            # a binary of one of them, the filters
#                                            # after -- apply to all
#   STRESS_NICE=15 scripts/stress-tests.sh   # suite and burners under nice -n 15
#                                            # (a machine shared with other work)
#   STRESS_DEADLINE=15:00 scripts/stress-tests.sh   # start no run after 15:00
#                                            # (date -d syntax); the summary says
#                                            # how many ran
#
# Logs: target/stress/run-<k>.log. A run that takes longer than
# STRESS_RUN_TIMEOUT seconds (default 1800) is killed and counted as failed
# (a hung test).
set -uo pipefail
cd "$(dirname "$0")/.."

runs="${1:-20}"
shift || true
burners="${STRESS_BURNERS:-2}"
run_timeout="${STRESS_RUN_TIMEOUT:-1800}"
# niceness of the suite and the burners alike (their contest is unchanged)
niceness="${STRESS_NICE:-0}"
deadline=
if [ -n "${STRESS_DEADLINE:-}" ]; then
  deadline=$(date -d "$STRESS_DEADLINE" +%s) || exit 2
fi
logs=target/stress
mkdir -p "$logs"

# the packages: the whole workspace, or those the arguments name (cargo
# refuses -p beside --workspace)
scope=(--workspace)
for arg in "$@"; do
  case "$arg" in
    --) break ;;
    -p | --package | -p?* | --package=*) scope=() ;;
  esac
done

echo "building the test binaries first (not timed)"
cargo test "${scope[@]}" --all-features --no-run "$@" >"$logs/build.log" 2>&1 || {
  tail -50 "$logs/build.log" >&2
  echo "build failed" >&2
  exit 2
}

burner_pids=()
run_pid=
stop_burners() {
  # the running suite: `timeout` leads its own process group (cargo and the
  # test binaries)
  if [ -n "$run_pid" ]; then
    kill -TERM -- "-$run_pid" 2>/dev/null || true
    wait "$run_pid" 2>/dev/null || true
    run_pid=
  fi
  for pid in "${burner_pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${burner_pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  burner_pids=()
}
trap stop_burners EXIT
trap 'stop_burners; exit 130' INT TERM

for _ in $(seq "$burners"); do
  # a busy loop in its own shell: one CPU's worth of load each
  nice -n "$niceness" bash -c 'while :; do :; done' &
  burner_pids+=("$!")
done
echo "$burners CPU burners running (pids ${burner_pids[*]}); $runs runs; suite and burners at nice $niceness"

failed_runs=0
done_runs=0
declare -A failures_by_test=()
suite_start=$SECONDS
for k in $(seq "$runs"); do
  if [ -n "$deadline" ] && [ "$(date +%s)" -ge "$deadline" ]; then
    echo "deadline $STRESS_DEADLINE reached: no run $k"
    break
  fi
  done_runs=$k
  log="$logs/run-$k.log"
  start=$SECONDS
  timeout --signal=KILL "$run_timeout" nice -n "$niceness" \
    cargo test "${scope[@]}" --all-features --no-fail-fast "$@" >"$log" 2>&1 &
  run_pid=$!
  wait "$run_pid"
  rc=$?
  run_pid=
  took=$((SECONDS - start))
  if [ "$rc" -eq 0 ]; then
    printf 'run %2d/%d: ok      %4ds\n' "$k" "$runs" "$took"
    continue
  fi
  failed_runs=$((failed_runs + 1))
  # "test some::name ... FAILED" lines; a killed run may have none
  mapfile -t failed < <(sed -n 's/^test \(.*\) \.\.\. FAILED$/\1/p' "$log" | sort -u)
  if [ "$rc" -eq 137 ]; then
    failed+=("(run killed after ${run_timeout}s: a test hung)")
  elif [ "${#failed[@]}" -eq 0 ]; then
    failed+=("(exit $rc without a failing test line: see $log)")
  fi
  printf 'run %2d/%d: FAILED  %4ds  %s\n' "$k" "$runs" "$took" "${failed[*]}"
  for t in "${failed[@]}"; do
    failures_by_test["$t"]=$((${failures_by_test["$t"]:-0} + 1))
  done
done
total=$((SECONDS - suite_start))

stop_burners
echo
echo "summary: $done_runs of $runs runs done, $failed_runs failed, ${total}s in all ($((total / (done_runs > 0 ? done_runs : 1)))s a run), $burners burners at nice $niceness"
for t in "${!failures_by_test[@]}"; do
  printf '  %3d x %s\n' "${failures_by_test[$t]}" "$t"
done | sort -rn
[ "$failed_runs" -eq 0 ] && [ "$done_runs" -eq "$runs" ]
