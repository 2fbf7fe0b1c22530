#!/usr/bin/env bash
# Prints a directory holding `kube-strict-<minor>` for each Kubernetes version the chart
# supports: scripts/kube-strict/main.go built against k8s.io/api of that version (from the Go
# module proxy, cached under ~/.cache; a few minutes each on first use). The chart's suite pipes
# every render through each of them: unknown fields are refused, offline.
set -euo pipefail
. "$(dirname "$0")/go-tool.sh"
VERSIONS=${KUBE_STRICT_VERSIONS:-"1.31 1.33 1.36"}
MONITORING=${KUBE_STRICT_MONITORING:-v0.86.1}
src=$(cd "$(dirname "$0")/kube-strict" && pwd)
out="${XDG_CACHE_HOME:-$HOME/.cache}/custody-kube-strict/$(cat "$src"/*.go | sha256sum | cut -c1-12)"
newest=${VERSIONS##* }
mkdir -p "$out"
beating=
for v in $VERSIONS; do
  [ -x "$out/kube-strict-$v" ] && continue
  echo "kube-strict.sh: building the strict decoder for Kubernetes $v (first use only)" >&2
  # One heartbeat for the whole run (each sets the EXIT trap that stops it).
  [ -n "$beating" ] || { heartbeat kube-strict.sh; beating=1; }
  work=$(mktemp -d)
  minor=${v#1.}
  (
    cd "$work"
    cp "$src/main.go" .
    printf 'module custody.local/kubestrict\n\ngo 1.24\n' > go.mod
    tags=""
    go get "k8s.io/api@v0.$minor" "k8s.io/apimachinery@v0.$minor" "sigs.k8s.io/yaml" "sigs.k8s.io/json" >&2
    if [ "$v" = "$newest" ]; then
      # The prometheus-operator types (ServiceMonitor) need a recent k8s.io/api: the newest build only.
      tags=monitoring
      cp "$src/monitoring.go" .
      go get "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring@$MONITORING" >&2
    fi
    go mod tidy >&2
    grep -E '^\s*k8s.io/api ' go.mod | sed "s/^/kube-strict.sh $v: /" >&2
    if ! grep -qE "^\s*k8s.io/api v0\.$minor\." go.mod; then echo "kube-strict.sh: k8s.io/api is not v0.$minor" >&2; exit 1; fi
    CGO_ENABLED=0 go build -tags "$tags" -trimpath -o "$out/kube-strict-$v.tmp" . >&2
  )
  mv "$out/kube-strict-$v.tmp" "$out/kube-strict-$v"
  rm -rf "$work"
done
echo "$out"
