#!/usr/bin/env bash
# Builds the firmware images for three Cortex-M targets and runs each under
# QEMU:
#   thumbv7m-none-eabi    on -cpu cortex-m3 -machine lm3s6965evb
#   thumbv6m-none-eabi    on -machine microbit (an nRF51822: Cortex-M0, 16 KiB RAM)
#   thumbv7em-none-eabihf on -cpu cortex-m4 -machine mps2-an386
# Images per target: `tollgate-firmware` (embassy: token, leaky and keyed
# buckets), `irq-hammer` twice (SysTick and thread mode hammer one 32-bit
# tick bucket, then one 64-bit `Gcra` bucket; each must finish with the
# exact count) and `duty-cycle`.
# Fails if a build fails, QEMU exits non-zero (the firmware's own checks or
# a panic), a run exceeds its timeout (a hang, e.g. a deadlock), or an
# expected line is missing from the output.
#
# QEMU runs with -icount (virtual time counted in instructions, sleep=off):
# the firmware's "within one tick" checks then measure the firmware, not
# how busy the host is or how long QEMU takes to translate code.
set -euo pipefail
cd "$(dirname "$0")"

TIMEOUT=${QEMU_TIMEOUT:-60}
expected=(
  "TICK_HZ=32768"
  "token-bucket: admitted=30 tasks=3 per-task=10/10/10 burst=5 interval_us=5000"
  "leaky-bucket: admitted=20 tasks=2 per-task=10/10 interval_us=3250.000"
  "capacity: acquire(6) on burst 5 -> CapacityExceeded PASS"
  "deadline 1 tick early -> Timeout PASS; deadline on the due tick -> served on it PASS"
  "keyed: capacity=4 peers=8 tasks=3 per-peer=12/12/12/6/6/12/6/6 admitted=72 throttled-evicted=0 overflow-path=0/"
  "keyed-overflow: table full of 4 throttled keys; 16 new keys -> shared-overflow 16/16, admitted 2 (shared burst 2); throttled kept 4/4, still refused 4/4 PASS"
  "keyed-refill: throttled keys refilled -> new key gets its own slot, 4/4 refilled keys evicted, len 1 PASS"
  "ALL PASS"
)
# irq-hammer: the count is checked inside the firmware; here, that the line
# is there, says PASS and that its admitted count equals its expectation
hammer_ok() {
  local line admitted expected
  line=$(grep -E '^irq-hammer: admitted=' <<<"$1") || return 1
  [[ "$line" =~ ^irq-hammer:\ admitted=([0-9]+)\  ]] || return 1
  admitted=${BASH_REMATCH[1]}
  [[ "$line" =~ expected=burst\+floor\(\(t1-t0\)/T\)=[^\ ]*=([0-9]+)\  ]] || return 1
  expected=${BASH_REMATCH[1]}
  [ "$admitted" = "$expected" ] && [[ "$line" == *" PASS" ]]
}

status=0

# run <target> <elf>: prints the output into $out, returns QEMU's status
# (qemu-runner.sh picks the machine for the target)
run() {
  local target=$1 elf=$2
  echo "--- $target: $(basename "$elf")"
  set +e
  out=$(timeout "$TIMEOUT" ./qemu-runner.sh "$elf" 2>&1)
  rc=$?
  set -e
  echo "$out"
  return "$rc"
}

for target in thumbv7m-none-eabi thumbv6m-none-eabi thumbv7em-none-eabihf; do
  cargo build --release --target "$target" --bin tollgate-firmware --bin irq-hammer

  rc=0
  run "$target" "target/$target/release/tollgate-firmware" || rc=$?
  if [ "$rc" -eq 124 ]; then
    echo "FAIL $target: QEMU timed out after ${TIMEOUT}s" >&2
    status=1
  elif [ "$rc" -ne 0 ]; then
    echo "FAIL $target: QEMU exited with $rc" >&2
    status=1
  else
    for line in "${expected[@]}" "tollgate firmware on $target:"; do
      if ! grep -qF -- "$line" <<<"$out"; then
        echo "FAIL $target: missing output line: $line" >&2
        status=1
      fi
    done
    if grep -q "PASS" <<<"$out" && ! grep -qE "FAIL|PANIC" <<<"$out"; then
      echo "--- $target: ok"
    else
      echo "FAIL $target: a check failed" >&2
      status=1
    fi
  fi

  # irq-hammer twice: on the 32-bit tick bucket, and (feature
  # hammer-gcra64) on the 64-bit Gcra bucket, whose AtomicU64 is a
  # critical section on these chips
  cargo build --release --target "$target" --bin irq-hammer --features hammer-gcra64 --target-dir target/gcra64
  for elf in "target/$target/release/irq-hammer" "target/gcra64/$target/release/irq-hammer"; do
    rc=0
    run "$target" "$elf" || rc=$?
    if [ "$rc" -eq 124 ]; then
      echo "FAIL $target irq-hammer: QEMU timed out after ${TIMEOUT}s (a deadlock?)" >&2
      status=1
    elif [ "$rc" -ne 0 ]; then
      echo "FAIL $target irq-hammer: QEMU exited with $rc" >&2
      status=1
    elif ! hammer_ok "$out" || ! grep -qF "irq-hammer on $target:" <<<"$out" \
      || ! grep -qF "IS_INTERRUPT_SAFE=true" <<<"$out"; then
      echo "FAIL $target irq-hammer: missing or failing count line" >&2
      status=1
    else
      echo "--- $target irq-hammer: ok"
    fi
  done
done

# The duty-cycle image (src/bin/duty-cycle.rs), on the same three machines:
# the EU868 duty-cycle limiter (the regulation's arithmetic on a manual
# clock, save -> reset -> restore, bad input, live frames, then the state
# across a real system reset of the core) and a
# WrappingClock on SysTick as a 16-bit counter, read from thread mode and
# from the SysTick handler across tens of wraps.
duty_expected=(
  "exact and monotonic PASS"
  "duty-cycle: 1% sub-band M: 36 frames of 1000 ms back to back in one hour = 36000 ms of airtime PASS"
  "duty-cycle: 0.1% sub-band N: 36 frames of 100 ms back to back in one hour = 3600 ms of airtime PASS"
  "duty-cycle: 10% sub-band P: 360 frames of 1000 ms back to back in one hour = 360000 ms of airtime PASS"
  "duty-cycle: save 36 bytes -> reset -> restore: M waits 150 s, N waits 2950 s, P free after 0 s PASS"
  "duty-cycle: bad input -> UnknownBand, AirtimeTooLong, NoSubBand, Checksum, Version PASS"
  "duty-cycle live: sub-band P (10%) 10 frames of 2 ms on the 16-bit SysTick clock, starts >= 20 ms apart"
  "duty-cycle: saved 36 bytes to .uninit RAM; resetting the core (SYSRESETREQ)"
  "booted again after the reset"
  "duty-cycle: after a real system reset: restored 36 bytes from .uninit RAM: M waits 150 s, N waits 2950 s, P free after 0 s PASS"
  "ALL PASS"
)
for target in thumbv7m-none-eabi thumbv6m-none-eabi thumbv7em-none-eabihf; do
  cargo build --release --target "$target" --bin duty-cycle
  rc=0
  run "$target" "target/$target/release/duty-cycle" || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "FAIL duty-cycle $target: QEMU exited with $rc (124: timed out)" >&2
    status=1
    continue
  fi
  for line in "${duty_expected[@]}" "tollgate duty-cycle firmware on $target:"; do
    if ! grep -qF -- "$line" <<<"$out"; then
      echo "FAIL duty-cycle $target: missing output line: $line" >&2
      status=1
    fi
  done
  if grep -qE "FAIL|PANIC" <<<"$out"; then
    echo "FAIL duty-cycle $target: a check failed" >&2
    status=1
  else
    echo "--- duty-cycle $target: ok"
  fi
done
exit "$status"
