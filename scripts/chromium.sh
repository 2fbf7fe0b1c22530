#!/usr/bin/env bash
# Prints the path of a Chromium for the browser tests: $CHROMIUM_BIN, one already installed, or
# Debian's package installed on first use (apt-get, as root; about a minute and 100 MB).
# Progress goes to stderr; stdout is only the path.
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
say "installing Debian's chromium package (first use only, about a minute)"
started=$(date +%s)
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq chromium >/dev/null
say "installed in $(( $(date +%s) - started )) s: $(chromium --version 2>/dev/null | head -n 1)"
command -v chromium
