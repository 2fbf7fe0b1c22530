#!/usr/bin/env bash
# Prints the path of a Chromium for the browser tests: $CHROMIUM_BIN, one already installed, or
# Debian's package installed on first use (apt-get, as root; about a minute and 100 MB).
set -euo pipefail
. "$(dirname "$0")/apt-tool.sh"
apt_tool chromium.sh CHROMIUM_BIN chromium "chromium chromium-browser"
