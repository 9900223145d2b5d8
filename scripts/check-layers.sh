#!/usr/bin/env bash
# Layers meet only through public APIs: the core's algorithm, table and
# limiter files compile the same whatever upper layer is turned on. This
# fails, naming file and line, when one of them mentions a feature of an
# upper layer in code (a `cfg`, `cfg_attr` or `cfg!`), so that an upper
# layer's need becomes a public seam instead of a gated item in the core.
# The core's own features (std, quanta, critical-section, ...) are fine.
#
#   scripts/check-layers.sh
set -euo pipefail
cd "$(dirname "$0")/.."

UPPER='http|redis|tokio|axum|config|metrics|tracing'
# every crate below tollgate: the core and the layers split from it
shopt -s globstar nullglob
CORE_FILES=(crates/*/src/**/*.rs)

status=0
for f in "${CORE_FILES[@]}"; do
  [ -e "$f" ] || continue
  # code lines only: a comment may name a feature
  hits=$(grep -nE "feature[[:space:]]*=[[:space:]]*\"($UPPER)\"" "$f" |
    grep -vE '^[0-9]+:[[:space:]]*//' || true)
  if [ -n "$hits" ]; then
    while IFS= read -r hit; do
      echo "$f:${hit%%:*}: a feature of an upper layer in a core file: ${hit#*:}" >&2
    done <<<"$hits"
    status=1
  fi
done
# the embedded crates' docs and manifests speak to an embedded user: no word
# of the server layers (links to web pages are fine)
EMBEDDED=(crates/tollgate-core crates/tollgate-duty-cycle crates/tollgate-rtic crates/tollgate-embassy)
SERVER_WORDS='\b(tokio|redis|valkey|axum|tower|hyper|tonic)\b|\bhttp\b'
for d in "${EMBEDDED[@]}"; do
  hits=$(grep -rniE "$SERVER_WORDS" "$d/src" "$d/Cargo.toml" | grep -viE 'https?://' || true)
  if [ -n "$hits" ]; then
    while IFS= read -r hit; do
      echo "$hit: an embedded crate speaks of a server layer" >&2
    done <<<"$hits"
    status=1
  fi
done
if [ "$status" -ne 0 ]; then
  echo "check-layers: the core must not know its upper layers (http, redis, tokio, ...);" >&2
  echo "give the upper layer a public, documented seam, or move the item into its module." >&2
  exit 1
fi
echo "check-layers: no upper-layer feature in the core's files, no server layer in the embedded crates' docs"
