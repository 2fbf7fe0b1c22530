#!/usr/bin/env bash
# Prints the path of a Chromium for the browser tests: $CHROMIUM_BIN, one already installed, or
# Debian's package installed on first use (apt-get, as root; about a minute and 100 MB).
# One line on stderr when it installs (apt-get's output goes to a log under ~/.cache); stdout is
# only the path.
set -euo pipefail
say() { printf 'chromium.sh: %s\n' "$*" >&2; }
if [ -n "${CHROMIUM_BIN:-}" ] && [ -x "$CHROMIUM_BIN" ]; then echo "$CHROMIUM_BIN"; exit 0; fi
for c in chromium chromium-browser; do
  if p=$(command -v "$c"); then echo "$p"; exit 0; fi
done
if [ "$(id -u)" != 0 ]; then
  say "Chromium is not installed: run 'sudo apt-get install chromium' (Debian) or set CHROMIUM_BIN"
  exit 1
fi
log="${XDG_CACHE_HOME:-$HOME/.cache}/custody-chromium/install.log"
mkdir -p "$(dirname "$log")"
echo "installing Debian's chromium package (first use, ~1 min); log: $log" >&2
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update -qq && apt-get install -y -qq chromium; } >"$log" 2>&1; then
  say "apt-get failed; the end of $log:"
  tail -n 20 "$log" >&2
  exit 1
fi
command -v chromium
