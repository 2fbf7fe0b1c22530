#!/usr/bin/env bash
# Prints the path of a `kube-score` binary, building it once from the Go module proxy
# (`go install github.com/zegl/kube-score/cmd/kube-score@<version>`, about a minute) and caching
# it under ~/.cache. One line on stderr when it is built (the build's output goes to a log beside
# it); stdout is only the path.
set -euo pipefail
. "$(dirname "$0")/go-tool.sh"
VERSION="${KUBE_SCORE_VERSION:-v1.20.0}"
go_tool "kube-score $VERSION" "${XDG_CACHE_HOME:-$HOME/.cache}/custody-kube-score/$VERSION" kube-score "github.com/zegl/kube-score/cmd/kube-score@$VERSION" 1
