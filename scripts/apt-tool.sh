# Sourced by the scripts that install a test tool from Debian's packages (chromium.sh,
# docker-compose.sh): one line on stderr when it installs, apt-get's own output in a log under
# ~/.cache; stdout is only the tool's path.

# apt_tool <script> <env var> <package> <commands> [apt-get install flags]: prints the path of
# $<env var> when set and executable, else of the first of <commands> (space-separated) on PATH,
# else installs <package> (as root, about a minute) and prints the first command's path.
apt_tool() {
  local script=$1 var=$2 package=$3 commands=$4 flags=${5:-} c p
  local given=${!var:-}
  if [ -n "$given" ] && [ -x "$given" ]; then echo "$given"; return 0; fi
  for c in $commands; do
    if p=$(command -v "$c"); then echo "$p"; return 0; fi
  done
  if [ "$(id -u)" != 0 ]; then
    echo "$script: $package is not installed: run 'sudo apt-get install $package' (Debian) or set $var" >&2
    return 1
  fi
  local log="${XDG_CACHE_HOME:-$HOME/.cache}/custody-$package/install.log"
  mkdir -p "$(dirname "$log")"
  echo "installing Debian's $package package (first use, ~1 min); log: $log" >&2
  # $flags is a list of apt-get options: split on purpose.
  # shellcheck disable=SC2086
  if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $flags "$package"; } >"$log" 2>&1; then
    echo "$script: apt-get failed; the end of $log:" >&2
    tail -n 20 "$log" >&2
    return 1
  fi
  command -v "${commands%% *}"
}
