#!/usr/bin/env bash
# Prints the path of a real `helm` binary, building it once from the Go module proxy
# (`go install helm.sh/helm/v3/cmd/helm@<version>`) and caching it under ~/.cache by version.
# Progress goes to stderr; stdout is only the path.
set -euo pipefail
VERSION="${HELM_VERSION:-v3.19.5}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/custody-helm/$VERSION"
BIN="$CACHE/helm"
if [ -x "$BIN" ]; then
  echo "$BIN"
  exit 0
fi
command -v go >/dev/null || { echo "helm.sh: Go is needed to build helm $VERSION" >&2; exit 1; }
mkdir -p "$CACHE"
echo "helm.sh: building helm $VERSION from the Go module proxy (first use only, a few minutes)" >&2
start=$(date +%s)
GOBIN="$CACHE" CGO_ENABLED=0 go install "helm.sh/helm/v3/cmd/helm@$VERSION" >&2
echo "helm.sh: built in $(( $(date +%s) - start )) s" >&2
"$BIN" version --short >&2
echo "$BIN"
