#!/usr/bin/env bash
# Prints the path of a docker-compose for checking docker-compose.yml: $DOCKER_COMPOSE_BIN, one
# already installed, or Debian's package installed on first use (apt-get, as root; about a
# minute). One line on stderr when it installs; stdout is only the path.
set -euo pipefail
say() { printf 'docker-compose.sh: %s\n' "$*" >&2; }
if [ -n "${DOCKER_COMPOSE_BIN:-}" ] && [ -x "$DOCKER_COMPOSE_BIN" ]; then echo "$DOCKER_COMPOSE_BIN"; exit 0; fi
if p=$(command -v docker-compose); then echo "$p"; exit 0; fi
if [ "$(id -u)" != 0 ]; then
  say "docker-compose is not installed: run 'sudo apt-get install docker-compose' (Debian) or set DOCKER_COMPOSE_BIN"
  exit 1
fi
log="${XDG_CACHE_HOME:-$HOME/.cache}/custody-docker-compose/install.log"
mkdir -p "$(dirname "$log")"
echo "installing Debian's docker-compose package (first use, ~1 min); log: $log" >&2
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends docker-compose; } >"$log" 2>&1; then
  say "apt-get failed; the end of $log:"
  tail -n 20 "$log" >&2
  exit 1
fi
command -v docker-compose
