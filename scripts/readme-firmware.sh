#!/usr/bin/env bash
# Builds the README's firmware ("On a microcontroller") as a new user would:
# `cargo new`, then exactly the README's lines (the blocks after each
# `<!-- firmware: FILE -->` marker: the dependencies appended to Cargo.toml,
# .cargo/config.toml, memory.x, src/main.rs), and runs it under QEMU on
#   thumbv6m-none-eabi    -machine microbit (nRF51822, Cortex-M0)
#   thumbv7m-none-eabi    -cpu cortex-m3 -machine lm3s6965evb
#   thumbv7em-none-eabihf -cpu cortex-m4 -machine mps2-an386
# It fails if a build fails, the firmware exits non-zero (its own checks) or
# times out. The one line added to what the README shows is a
# `[patch.crates-io]` entry pointing `tollgate` at this checkout, which is
# what crates.io would serve once published.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target/readme-firmware}

# prints the fenced block that follows `<!-- firmware: $1 -->` in the README
block() {
  awk -v want="<!-- firmware: $1 -->" '
    $0 == want { found = 1; next }
    found && /^```/ { if (inside) exit; inside = 1; next }
    inside { print }
  ' "$root/README.md"
}

cd "$work"
cargo new --quiet --bin fw
cd fw
for f in Cargo.toml .cargo/config.toml memory.x src/main.rs; do
  [ -n "$(block "$f")" ] || { echo "README: no firmware block for $f" >&2; exit 1; }
done
block Cargo.toml >> Cargo.toml
mkdir -p .cargo
block .cargo/config.toml > .cargo/config.toml
block memory.x > memory.x
block src/main.rs > src/main.rs
printf '\n[patch.crates-io]\ntollgate = { path = "%s" }\n' "$root" >> Cargo.toml
echo "--- the firmware crate, as the README writes it:"
cat Cargo.toml

status=0
for target in thumbv6m-none-eabi thumbv7m-none-eabi thumbv7em-none-eabihf; do
  cargo build --release --quiet --target "$target"
  echo "--- $target"
  rc=0
  # the firmware examples' runner: the machine for the target, as above
  timeout "${QEMU_TIMEOUT:-60}" "$root/examples/firmware/qemu-runner.sh" \
    "$CARGO_TARGET_DIR/$target/release/fw" || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "FAIL $target: the README firmware exited with $rc (124: timed out)" >&2
    status=1
  fi
done
exit "$status"
