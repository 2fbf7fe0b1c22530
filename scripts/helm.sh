#!/usr/bin/env bash
# Prints the path of a real `helm` binary, building it once from the Go module proxy
# (`go install helm.sh/helm/v3/cmd/helm@<version>`) and caching it under ~/.cache by version.
# Progress goes to stderr; stdout is only the path.
set -euo pipefail
VERSION="${HELM_VERSION:-v3.19.5}"
# The Kubernetes version helm assumes without a cluster (`helm template`, `--dry-run=client`):
# release builds set it from their client-go (v0.34 for v3.19), a bare `go install` leaves 1.20.
K8S_MINOR="${HELM_K8S_MINOR:-34}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/custody-helm/$VERSION-k8s1.$K8S_MINOR"
BIN="$CACHE/helm"
if [ -x "$BIN" ]; then
  echo "$BIN"
  exit 0
fi
command -v go >/dev/null || { echo "helm.sh: Go is needed to build helm $VERSION" >&2; exit 1; }
mkdir -p "$CACHE"
echo "helm.sh: building helm $VERSION from the Go module proxy (first use only, a few minutes)" >&2
start=$(date +%s)
# A line a minute while the build runs, so a first `npm test` shows it is working.
( while sleep 60; do echo "helm.sh: still building ($(( ($(date +%s) - start) / 60 )) min)" >&2; done ) &
beat=$!
trap 'kill "$beat" 2>/dev/null || true' EXIT
flags="-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$K8S_MINOR"
flags="$flags -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$K8S_MINOR"
GOBIN="$CACHE" CGO_ENABLED=0 go install -ldflags "$flags" "helm.sh/helm/v3/cmd/helm@$VERSION" >&2
echo "helm.sh: built in $(( $(date +%s) - start )) s" >&2
"$BIN" version --short >&2
echo "$BIN"
