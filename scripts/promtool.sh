#!/usr/bin/env bash
# Prints the path of a `promtool` binary (checks and unit-tests Prometheus rules), building it once
# from the Go module proxy (`go install github.com/prometheus/prometheus/cmd/promtool@<version>`:
# Prometheus 3.x's Go module versions are v0.3xx.y; 26 min on two cores shared with another build,
# most of it the service discovery packages promtool links) and caching it under ~/.cache. One
# line on stderr when it is built (the build's output goes to a log beside it); stdout is only the path.
set -euo pipefail
. "$(dirname "$0")/go-tool.sh"
VERSION="${PROMTOOL_VERSION:-v0.316.0}"
# `promtool --version` reports the Prometheus release the module version stands for (v0.316.0: 3.16.0).
release="${VERSION#v0.}"
release="3.$((10#${release%%.*} - 300)).${release#*.}"
go_tool "promtool $VERSION" "${XDG_CACHE_HOME:-$HOME/.cache}/custody-promtool/$VERSION" promtool \
  "github.com/prometheus/prometheus/cmd/promtool@$VERSION" 25 "-X github.com/prometheus/common/version.Version=$release"
