# Sourced by the scripts that build test tools from the Go module proxy (helm.sh, kube-score.sh,
# kube-strict.sh, openbao.sh): one line on stderr when a tool is built, the Go toolchain's own
# output in a log file beside the cached binary.

# announce <what> <minutes> <log>: the one line a first build prints.
announce() {
  echo "building $1 (first use, ~$2 min); log: $3" >&2
}

# failed <what> <log>: says a build failed and shows the end of its log.
failed() {
  echo "$1: the build failed; the end of $2:" >&2
  tail -n 20 "$2" >&2
}

# go_tool <label> <cache dir> <binary> <package@version> <minutes> [ldflags]: prints the binary's
# path, building it with `go install` into the cache dir on first use.
go_tool() {
  local label=$1 cache=$2 binary=$3 package=$4 minutes=$5 ldflags=${6:-}
  if [ -x "$cache/$binary" ]; then
    echo "$cache/$binary"
    return 0
  fi
  command -v go >/dev/null || { echo "$label: Go is needed to build $package" >&2; return 1; }
  mkdir -p "$cache"
  local log="$cache/build.log"
  announce "$label" "$minutes" "$log"
  if ! GOBIN="$cache" CGO_ENABLED=0 go install -ldflags "$ldflags" "$package" >"$log" 2>&1; then
    failed "$label" "$log"
    return 1
  fi
  echo "$cache/$binary"
}
