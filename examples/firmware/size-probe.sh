#!/usr/bin/env bash
# Measures what one tollgate token bucket adds to a firmware image
# (release profile, opt-level "s", LTO): builds the size probe with the
# bucket and with feature `noop-limiter`, and prints .text and RAM
# (.data + .bss) of both and the difference.
#   ./size-probe.sh                  thumbv7em-none-eabihf (unsafe-assume-single-core)
#   ./size-probe.sh thumbv7m-none-eabi   (portable-atomic fallback lock table)
#   ./size-probe.sh thumbv7em-none-eabihf acquire   (price acquire(&bucket, &(), 1).await)
#   ./size-probe.sh thumbv7em-none-eabihf keyed     (price a HeaplessKeyedTable of 8 keys)
#   ./size-probe.sh thumbv7em-none-eabihf tick      (price the 32-bit tick bucket, check_ticks)
set -euo pipefail
cd "$(dirname "$0")"
T=${1:-thumbv7em-none-eabihf}
EXTRA=()
WHAT="token bucket"
case "${2:-}" in
  acquire) EXTRA=(--features probe-acquire) ;;
  keyed) EXTRA=(--features probe-keyed); WHAT="keyed table (8 keys)" ;;
  tick) EXTRA=(--features probe-tick); WHAT="tick bucket (32-bit)" ;;
  static) EXTRA=(--features probe-static); WHAT="static Bucket<Gcra>" ;;
esac

if command -v llvm-size >/dev/null; then SIZE=llvm-size
elif command -v arm-none-eabi-size >/dev/null; then SIZE=arm-none-eabi-size
else SIZE=""; fi

# prints: text data bss
sections() {
  if [ -n "$SIZE" ]; then
    "$SIZE" -A "$1" | awk '$1==".text"{t=$2} $1==".data"{d=$2} $1==".bss"{b=$2} END{print t+0, d+0, b+0}'
  else
    python3 - "$1" <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read()
shoff, = struct.unpack_from("<I", d, 0x20)
shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x2E)
def sh(i): return struct.unpack_from("<IIIIIIIIII", d, shoff + i * shentsize)
stroff = sh(shstrndx)[4]
sizes = {}
for i in range(shnum):
    name_off, _, _, _, _, size = sh(i)[:6]
    name = d[stroff + name_off:d.index(b"\0", stroff + name_off)].decode()
    sizes[name] = size
print(sizes.get(".text", 0), sizes.get(".data", 0), sizes.get(".bss", 0))
PY
  fi
}

cargo build --release --target "$T" --bin size-probe --target-dir target/size-with "${EXTRA[@]}"
cargo build --release --target "$T" --bin size-probe --target-dir target/size-without --features noop-limiter "${EXTRA[@]}"
read -r t1 d1 b1 < <(sections "target/size-with/$T/release/size-probe")
read -r t0 d0 b0 < <(sections "target/size-without/$T/release/size-probe")
echo "target $T ${2:-check}"
printf '%-28s %8s %8s %8s\n' "" ".text" ".data" ".bss"
printf '%-28s %8d %8d %8d\n' "with $WHAT" "$t1" "$d1" "$b1"
printf '%-28s %8d %8d %8d\n' "no-op limiter (baseline)" "$t0" "$d0" "$b0"
printf '%-28s %8d %8d %8d\n' "tollgate $WHAT" "$((t1 - t0))" "$((d1 - d0))" "$((b1 - b0))"
echo "RAM added (.data + .bss): $(( (d1 + b1) - (d0 + b0) )) bytes"
# the limiter's own statics (a section total can hide a small one in what
# was alignment padding)
if command -v llvm-nm >/dev/null; then
  llvm-nm -S -C "target/size-with/$T/release/size-probe" | while read -r _ size kind name; do
    case "$name" in
      size_probe::limiter::*)
        case "$kind" in b | B) where=.bss ;; d | D) where=.data ;; *) where=flash ;; esac
        echo "  $name: $((16#$size)) bytes ($where)" ;;
    esac
  done
fi
