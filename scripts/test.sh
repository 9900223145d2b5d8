#!/usr/bin/env bash
# Runs every test of tollgate: the README's test command, and the one CI runs.
#
#   scripts/test.sh
#
# On a fresh Debian or Ubuntu machine with only rustup, it first installs what
# the tests need and is missing, saying what and why before it does:
#   - a C toolchain (gcc, libc6-dev), which rustc needs to link programs;
#   - redis-server: the Redis tests (crates/tollgate-redis/tests, and
#     crates/tollgate-http/tests/http/http_redis_backend.rs) start their own
#     server on a free loopback port and stop it afterwards; they fail, never
#     skip, without one.
# It uses apt-get, through sudo when not run as root. Elsewhere it stops and
# says what to install.
#
# Then it runs, and sums up at the end:
#   1. cargo test --workspace --all-features: unit, integration, property,
#      HTTP over real TCP, Redis against a real server, doctests, and the
#      workspace crates embassy-tests and loom-tests' reference models (each
#      crate's integration tests are in its own tests/: the root's, and
#      crates/tollgate-{http,redis,queue,partitioned}/tests);
#   2. cargo test -p tollgate-core -p tollgate-duty-cycle -p tollgate-rtic
#      -p tollgate-embassy -p tollgate --no-default-features --lib
#      --tests: the core without std (test files that need std or a feature
#      are gated on it).
#
# The loom model checks (loom-tests/run.sh) and the firmware under QEMU
# (examples/firmware/run-qemu.sh) have their own scripts; CI runs them too.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\n[scripts/test.sh] %s\n' "$*"; }
die() {
  printf '\n[scripts/test.sh] error: %s\n' "$*" >&2
  exit 1
}

apt_install() {
  # apt_install <why> <package>...
  local why=$1
  shift
  command -v apt-get >/dev/null ||
    die "$why, but apt-get is not available: install $* with your package manager, then run this script again."
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null ||
      die "$why; installing $* needs root, and sudo is not available: run 'apt-get install -y $*' as root, then this script again."
    sudo=(sudo)
  fi
  say "$why. Installing it now: ${sudo[*]:+${sudo[*]} }apt-get install -y --no-install-recommends $*"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"
}

command -v cargo >/dev/null ||
  die "cargo is not on PATH: install Rust with rustup (https://rustup.rs), then run this script again."

if ! command -v cc >/dev/null; then
  apt_install "cc is not on PATH, and rustc needs a C toolchain to link test programs" gcc libc6-dev
fi

if ! command -v redis-server >/dev/null; then
  apt_install "redis-server is not on PATH; the Redis tests (crates/tollgate-redis/tests, crates/tollgate-http/tests/http/http_redis_backend.rs) start their own on a free loopback port and stop it afterwards (a system service the package may start is not used)" redis-server
  command -v redis-server >/dev/null || die "redis-server is still not on PATH after installing it."
fi
say "using $(command -v redis-server): $(redis-server --version)"

log=$(mktemp "${TMPDIR:-/tmp}/tollgate-test.XXXXXX")
trap 'rm -f "$log"' EXIT
start=$SECONDS

# Both passes run even when the first fails, so one report shows every
# failure; the script fails at the end if either did.
rc=0
say "1/2 cargo test --workspace --all-features"
cargo test --workspace --all-features --no-fail-fast 2>&1 | tee -a "$log" || rc=1

say "2/2 cargo test -p tollgate-core -p tollgate-duty-cycle -p tollgate-rtic -p tollgate-embassy -p tollgate --no-default-features --lib --tests (the core without std)"
cargo test -p tollgate-core -p tollgate-duty-cycle -p tollgate-rtic -p tollgate-embassy -p tollgate --no-default-features --lib --tests --no-fail-fast 2>&1 | tee -a "$log" || rc=1

# Every test binary and doctest run prints one "test result:" line.
summary=$(awk '/^test result:/ {
    for (i = 1; i <= NF; i++) {
      if ($(i + 1) ~ /^passed/) p += $i
      if ($(i + 1) ~ /^failed/) f += $i
      if ($(i + 1) ~ /^ignored/) g += $i
    }
    n++
  }
  END { printf "%d passed, %d failed, %d ignored in %d test runs", p, f, g, n }' "$log")
say "per crate (both passes):"
if command -v python3 >/dev/null; then python3 scripts/test-summary.py "$log" || true; else echo "(python3 is not installed: no per-crate table)"; fi
if [ "$rc" -ne 0 ]; then
  say "FAILED: $summary, $((SECONDS - start)) s (the failing tests are listed above under 'failures:')"
  exit 1
fi
say "all tests passed: $summary, $((SECONDS - start)) s"
