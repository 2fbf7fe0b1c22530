#!/usr/bin/env bash
# Prints the path of a real `helm` binary, building it once from the Go module proxy
# (`go install helm.sh/helm/v3/cmd/helm@<version>`, a few minutes) and caching it under ~/.cache.
# One line on stderr when it is built (the build's output goes to a log beside it); stdout is
# only the path.
set -euo pipefail
. "$(dirname "$0")/go-tool.sh"
VERSION="${HELM_VERSION:-v3.19.5}"
# The Kubernetes version helm assumes without a cluster (`helm template`, `--dry-run=client`):
# release builds set it from their client-go (v0.34 for v3.19), a bare `go install` leaves 1.20.
K8S_MINOR="${HELM_K8S_MINOR:-34}"
flags="-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$K8S_MINOR"
flags="$flags -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$K8S_MINOR"
go_tool "helm $VERSION" "${XDG_CACHE_HOME:-$HOME/.cache}/custody-helm/$VERSION-k8s1.$K8S_MINOR" helm "helm.sh/helm/v3/cmd/helm@$VERSION" 5 "$flags"
