#!/usr/bin/env bash
# Layers meet only through public APIs. That a crate names only its own
# features (no `cfg(feature = "http")` of an upper layer in a lower crate)
# is checked, per crate, by scripts/check-structure.py. This checks what
# a reader sees: the embedded crates' docs and manifests speak to an
# embedded user, with no word of the server layers (tokio, HTTP, Redis,
# ...). Links to web pages are fine. Fails naming file and line.
#
#   scripts/check-layers.sh
set -euo pipefail
cd "$(dirname "$0")/.."

EMBEDDED=(crates/tollgate-core crates/tollgate-duty-cycle crates/tollgate-rtic crates/tollgate-embassy)
SERVER_WORDS='\b(tokio|redis|valkey|axum|tower|hyper|tonic)\b|\bhttp\b'

hits=$(grep -rniE "$SERVER_WORDS" "${EMBEDDED[@]/%//src}" "${EMBEDDED[@]/%//Cargo.toml}" |
  grep -viE 'https?://' || true)
if [ -n "$hits" ]; then
  while IFS= read -r hit; do
    echo "$hit: an embedded crate speaks of a server layer" >&2
  done <<<"$hits"
  echo "check-layers: the embedded crates' docs speak to an embedded user; say it in general terms" >&2
  echo "(an upper layer, a caller that ...), or move the text to the layer's crate." >&2
  exit 1
fi
echo "check-layers: no word of the server layers in the embedded crates (${EMBEDDED[*]##*/})"
