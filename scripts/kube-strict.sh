#!/usr/bin/env bash
# Prints a directory holding `kube-strict-<minor>` for each Kubernetes version the chart
# supports: scripts/kube-strict/main.go built against k8s.io/api of that version (from the Go
# module proxy, cached under ~/.cache; a few minutes each on first use). The chart's suite pipes
# every render through each of them: unknown fields are refused, offline. One line on stderr when
# they are built; the Go toolchain's output goes to build.log in the cache directory.
set -euo pipefail
. "$(dirname "$0")/go-tool.sh"
VERSIONS=${KUBE_STRICT_VERSIONS:-"1.31 1.33 1.36"}
MONITORING=${KUBE_STRICT_MONITORING:-v0.86.1}
src=$(cd "$(dirname "$0")/kube-strict" && pwd)
out="${XDG_CACHE_HOME:-$HOME/.cache}/custody-kube-strict/$(cat "$src"/*.go | sha256sum | cut -c1-12)"
newest=${VERSIONS##* }
mkdir -p "$out"
log="$out/build.log"
missing=
for v in $VERSIONS; do [ -x "$out/kube-strict-$v" ] || missing="$missing $v"; done
[ -z "$missing" ] || { : >"$log"; announce "kube-strict (Kubernetes${missing})" 5 "$log"; }
for v in $missing; do
  echo "== Kubernetes $v" >>"$log"
  work=$(mktemp -d)
  minor=${v#1.}
  # errexit holds in the subshell only outside a condition: run it, then look at its status.
  set +e
  (
    set -e
    exec >>"$log" 2>&1
    cd "$work"
    cp "$src/main.go" .
    printf 'module custody.local/kubestrict\n\ngo 1.24\n' > go.mod
    tags=""
    go get "k8s.io/api@v0.$minor" "k8s.io/apimachinery@v0.$minor" "sigs.k8s.io/yaml" "sigs.k8s.io/json"
    if [ "$v" = "$newest" ]; then
      # The prometheus-operator types (ServiceMonitor) need a recent k8s.io/api: the newest build only.
      tags=monitoring
      cp "$src/monitoring.go" .
      go get "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring@$MONITORING"
    fi
    go mod tidy
    grep -E '^\s*k8s.io/api ' go.mod
    if ! grep -qE "^\s*k8s.io/api v0\.$minor\." go.mod; then echo "k8s.io/api is not v0.$minor"; exit 1; fi
    CGO_ENABLED=0 go build -tags "$tags" -trimpath -o "$out/kube-strict-$v.tmp" .
  )
  status=$?
  set -e
  if [ "$status" != 0 ]; then
    failed "kube-strict $v" "$log"
    exit 1
  fi
  mv "$out/kube-strict-$v.tmp" "$out/kube-strict-$v"
  rm -rf "$work"
done
echo "$out"
