#!/usr/bin/env bash
# Without feature `metrics` the HTTP layer records nothing, so the names of
# its counters must not exist: code reading them fails to compile instead
# of reading zeros (issue 29, item 4). Builds a throwaway crate that reads
# `tollgate::http::metrics::REQUESTS`, once with `features = ["http"]`
# (must fail, naming the missing value) and once with `["http", "metrics"]`
# (must build, so this check can fail).
#
#   scripts/no-silent-zeros.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
dir=$(mktemp -d "${TMPDIR:-/tmp}/tollgate-no-silent-zeros.XXXXXX")
trap 'rm -rf "$dir"' EXIT
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}/no-silent-zeros"
mkdir -p "$dir/src"
# the workspace's versions of every dependency
cp Cargo.lock "$dir/"
cat >"$dir/src/main.rs" <<'RS'
fn main() {
    println!("{}", tollgate::http::metrics::REQUESTS);
}
RS
manifest() {
  cat >"$dir/Cargo.toml" <<TOML
[package]
name = "no-silent-zeros"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
tollgate = { path = "$root", features = [$1] }

[workspace]
TOML
}
manifest '"http"'
if out=$(cargo check --quiet --manifest-path "$dir/Cargo.toml" 2>&1); then
  echo "no-silent-zeros: FAILED: without feature metrics, tollgate::http::metrics::REQUESTS exists (a reader would get zeros)" >&2
  exit 1
fi
if ! grep -q "cannot find value \`REQUESTS\` in module" <<<"$out"; then
  echo "no-silent-zeros: FAILED: the build without metrics failed for another reason:" >&2
  echo "$out" >&2
  exit 1
fi
manifest '"http", "metrics"'
if ! out=$(cargo check --quiet --manifest-path "$dir/Cargo.toml" 2>&1); then
  echo "no-silent-zeros: FAILED: with feature metrics the name does not build:" >&2
  echo "$out" >&2
  exit 1
fi
echo "no-silent-zeros: ok (without metrics: 'cannot find value REQUESTS'; with metrics: builds)"
