# Sourced by the scripts that build test tools from the Go module proxy (helm.sh, kube-score.sh,
# openbao.sh): a progress line a minute, and a cached `go install`.

# heartbeat <label>: in the background, a line a minute on stderr until the calling script exits,
# so that a first `npm test` shows it is working.
heartbeat() {
  local label=$1 t0
  t0=$(date +%s)
  ( while sleep 60; do echo "$label: still building ($(( ($(date +%s) - t0) / 60 )) min)" >&2; done ) &
  local beat=$!
  trap "kill $beat 2>/dev/null || true" EXIT
}

# go_tool <label> <cache dir> <binary> <package@version> [ldflags]: prints the binary's path,
# building it with `go install` into the cache dir on first use. Progress on stderr only.
go_tool() {
  local label=$1 cache=$2 binary=$3 package=$4 ldflags=${5:-}
  if [ -x "$cache/$binary" ]; then
    echo "$cache/$binary"
    return 0
  fi
  command -v go >/dev/null || { echo "$label: Go is needed to build $package" >&2; return 1; }
  mkdir -p "$cache"
  echo "$label: building $package from the Go module proxy (first use only)" >&2
  local start
  start=$(date +%s)
  heartbeat "$label"
  GOBIN="$cache" CGO_ENABLED=0 go install -ldflags "$ldflags" "$package" >&2
  echo "$label: built in $(( $(date +%s) - start )) s" >&2
  echo "$cache/$binary"
}
