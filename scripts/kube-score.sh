#!/usr/bin/env bash
# Prints the path of a `kube-score` binary, building it once from the Go module proxy
# (`go install github.com/zegl/kube-score/cmd/kube-score@<version>`) and caching it under ~/.cache.
# Progress goes to stderr; stdout is only the path.
set -euo pipefail
VERSION="${KUBE_SCORE_VERSION:-v1.20.0}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/custody-kube-score/$VERSION"
BIN="$CACHE/kube-score"
if [ -x "$BIN" ]; then
  echo "$BIN"
  exit 0
fi
command -v go >/dev/null || { echo "kube-score.sh: Go is needed to build kube-score $VERSION" >&2; exit 1; }
mkdir -p "$CACHE"
echo "kube-score.sh: building kube-score $VERSION from the Go module proxy (first use only, about a minute)" >&2
start=$(date +%s)
( while sleep 60; do echo "kube-score.sh: still building ($(( ($(date +%s) - start) / 60 )) min)" >&2; done ) &
beat=$!
trap 'kill "$beat" 2>/dev/null || true' EXIT
GOBIN="$CACHE" CGO_ENABLED=0 go install "github.com/zegl/kube-score/cmd/kube-score@$VERSION" >&2
echo "kube-score.sh: built in $(( $(date +%s) - start )) s" >&2
echo "$BIN"
