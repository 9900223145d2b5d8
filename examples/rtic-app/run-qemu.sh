#!/usr/bin/env bash
# Builds the RTIC application and runs it on QEMU's lm3s6965evb
# (thumbv7m-none-eabi, -cpu cortex-m3). The firmware checks every count
# itself against the exact formula and exits 0 only when all pass; this
# script fails if the build fails, QEMU exits non-zero (a failed check or
# a panic), the run exceeds its timeout (a hang), or an expected line is
# missing from the output.
#
# QEMU runs with -icount (virtual time counted in instructions, sleep=off):
# the figures are the same on every run, however busy the host is, so the
# lines below are checked whole.
#
#   examples/rtic-app/run-qemu.sh
set -euo pipefail
cd "$(dirname "$0")"

TIMEOUT=${QEMU_TIMEOUT:-60}
target=thumbv7m-none-eabi
expected=(
  "tollgate rtic-app on $target: rtic-monotonics SysTick at 1000 Hz, 32-bit ticks, from tick 4294965291 (2005 before the wrap)"
  "capacity: acquire(6) on burst 5 -> CapacityExceeded at once PASS"
  "coarse: a 500 us step on a 1 ms tick -> ClockTooCoarse at once PASS"
  "deadline: 1 tick early -> Timeout at once (ready_at +20 ms); on the due tick -> served on it PASS"
  "cancel: acquire dropped by Mono::timeout_after 6 ticks in took nothing; the next one served on its tick (+40) PASS"
  "token-bucket: 3 tasks, acquire_by(deadline t1), 100/s burst 5 (T=10 ticks): admitted=306 "
  "expected=burst+floor((t1-t0)/T)=5+floor((3010-0)/10)=306; first at t0=S+0, last at t1=S+3010; deadline Timeouts 3/3 PASS"
  "leaky-bucket: 2 tasks, acquire_by(deadline t1), 50/s (T=20 ticks): admitted=151 "
  "expected=1+floor((t1-t0)/T)=1+floor((3010-0)/20)=151; admission instants 20..20 ticks apart (exactly T) PASS"
  "clock: Mono::now() 4294965791 -> 1505 (3010 ticks, wrapped 1 time); RticClock 4294965791 ms -> 4294968801 ms, +1 ms per tick at every tick (bad steps 0); the tick count's own conversion went back 4294967295 ms at the wrap PASS"
  "hardware task: UART0 pended at each of 3011 ticks, TickGcra token bucket T=7 ticks burst 3 on Mono's u32 ticks: admitted=432 denied=2579 expected=burst+floor((t1-t0-nudge)/T)=3+floor((3010-0-1)/7)=432; nudge=1 (the TAT t0+215*T is 0 mod 2^32, stored as 1) PASS"
  "ALL PASS (8 checks)"
)

cargo build --release --target "$target" --target-dir target
elf="target/$target/release/tollgate-rtic-app"
echo "--- $target on lm3s6965evb: $(basename "$elf")"
set +e
# the firmware examples' runner (lm3s6965evb for thumbv7m)
out=$(timeout "$TIMEOUT" ../firmware/qemu-runner.sh "$elf" 2>&1)
rc=$?
set -e
echo "$out"

status=0
if [ "$rc" -eq 124 ]; then
  echo "FAIL rtic-app: QEMU timed out after ${TIMEOUT}s (a hang?)" >&2
  status=1
elif [ "$rc" -ne 0 ]; then
  echo "FAIL rtic-app: QEMU exited with $rc (a failed check or a panic)" >&2
  status=1
fi
for line in "${expected[@]}"; do
  if ! grep -qF -- "$line" <<<"$out"; then
    echo "FAIL rtic-app: missing output line: $line" >&2
    status=1
  fi
done
if grep -qE "FAIL|PANIC" <<<"$out"; then
  echo "FAIL rtic-app: a check failed" >&2
  status=1
fi
if [ "$status" -eq 0 ]; then
  echo "--- rtic-app: ok"
fi
exit "$status"
