#!/usr/bin/env bash
# cargo runner (and run-qemu.sh's, and scripts/readme-firmware.sh's): boots
# an ELF in QEMU on the machine that fits the target named in its path,
# with virtual time counted in instructions and semihosting on.
set -euo pipefail
elf="$1"
case "$elf" in
  *thumbv7em-none-eabihf*) machine=(-cpu cortex-m4 -machine mps2-an386) ;;
  *thumbv6m-none-eabi*) machine=(-machine microbit) ;;
  *) machine=(-cpu cortex-m3 -machine lm3s6965evb) ;;
esac
exec qemu-system-arm "${machine[@]}" -icount shift=1,align=off,sleep=off \
  -semihosting-config enable=on,target=native -nographic -kernel "$elf"
