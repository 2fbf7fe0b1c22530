#!/usr/bin/env bash
# Prints the path of an ORY Hydra binary (a real OpenID provider, for the identity-provider suite),
# building it once from the Go module proxy and caching it under ~/.cache. Hydra's own go.mod
# replaces gobuffalo/pop with ORY's fork, which `go install pkg@version` cannot honour: a small
# module of ours names Hydra as a tool and repeats that replacement. Built with SQLite (cgo) for
# its in-memory store. One line on stderr when it builds; the Go toolchain's output goes to a log.
set -euo pipefail
VERSION=${HYDRA_VERSION:-v2.3.0}
POP=${HYDRA_POP:-github.com/ory/pop/v6@v6.2.1-0.20241121111754-e5dfc0f3344b}
cache="${XDG_CACHE_HOME:-$HOME/.cache}/custody-hydra/$VERSION"
if [ -x "$cache/hydra" ]; then
  echo "$cache/hydra"
  exit 0
fi
command -v go >/dev/null || { echo "hydra.sh: Go is needed to build ORY Hydra" >&2; exit 1; }
mkdir -p "$cache"
log="$cache/build.log"
echo "building ORY Hydra $VERSION (first use, ~6 min); log: $log" >&2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! (
  cd "$work"
  printf 'module custody.local/hydra\n\ngo 1.24\n' > go.mod
  go mod edit -replace "github.com/gobuffalo/pop/v6=$POP"
  go get -tool "github.com/ory/hydra/v2@$VERSION"
  go mod tidy
  CGO_ENABLED=1 go build -tags sqlite,sqlite_omit_load_extension -trimpath -o "$cache/hydra.tmp" github.com/ory/hydra/v2
) >"$log" 2>&1; then
  echo "hydra.sh: the build failed; the end of $log:" >&2
  tail -n 20 "$log" >&2
  exit 1
fi
mv "$cache/hydra.tmp" "$cache/hydra"
echo "$cache/hydra"
