#!/usr/bin/env bash
# Prints the path of a docker-compose for checking docker-compose.yml: $DOCKER_COMPOSE_BIN, one
# already installed, or Debian's package installed on first use (apt-get, as root; about a minute).
set -euo pipefail
. "$(dirname "$0")/apt-tool.sh"
apt_tool docker-compose.sh DOCKER_COMPOSE_BIN docker-compose docker-compose --no-install-recommends
