#!/usr/bin/env bash
# Runs the suites that exercise SQL (the database, outbox and rate-limit platform, access,
# every domain, secrets at rest, the data-key rotation) against each supported PostgreSQL major
# other than the machine's, each a throwaway server from scripts/postgres.sh on its own port.
# Left out: the chain-behaviour suite of transactions (reorgs, load, a flaky RPC: minutes of a
# node's behaviour over the same statements send.test.ts runs). `npm test` runs every suite
# against the machine's PostgreSQL. Build first (npm run build).
#   MAJORS="14 16 17 18" (default)   SUITES: the test files or folders to run (default above)
set -euo pipefail
cd "$(dirname "$0")/.."
MAJORS=${MAJORS:-14 16 17 18}
SUITES=${SUITES:-test/platform/db test/platform/outbox test/platform/ratelimit test/access test/domains test/secrets-at-rest.test.ts test/data-key-rotation.test.ts}
EXCLUDE=${EXCLUDE:-test/domains/transactions/chain.test.ts}
say() { printf 'test-postgres-majors: %s\n' "$*" >&2; }
as_postgres=()
[ "$(id -u)" = 0 ] && as_postgres=(setpriv --reuid=postgres --regid=postgres --init-groups --)
files=()
for s in $SUITES; do
  if [ -d "$s" ]; then mapfile -t -O "${#files[@]}" files < <(find "$s" -name '*.test.ts' | sort); else files+=("$s"); fi
done
for x in $EXCLUDE; do
  for i in "${!files[@]}"; do [ "${files[$i]}" = "$x" ] && unset 'files[i]'; done
done
files=("${files[@]}")
# Starts the server of $bin on $dir/data on a port the kernel gives as free (a fixed one can be
# taken: the machine's ephemeral range holds every outgoing connection's port), sets $port and
# $server; another port when the server does not come up on one.
start_server() {
  local attempt
  for attempt in 1 2 3 4 5; do
    port=$(node -e "const s = require('node:net').createServer(); s.listen(0, '127.0.0.1', () => { console.log(s.address().port); s.close(); });")
    [[ "$port" =~ ^[0-9]+$ ]] || { say "no free port for PostgreSQL $major"; return 1; }
    "${as_postgres[@]}" "$bin/postgres" -D "$dir/data" -h 127.0.0.1 -p "$port" -k "$dir" -c fsync=off -c max_connections=300 >"$dir/server.log" 2>&1 &
    server=$!
    for _ in $(seq 1 60); do
      kill -0 "$server" 2>/dev/null || break
      # Through its own socket directory: an answer on the port could be another server's.
      pg_isready -q -h "$dir" -p "$port" && return 0
      sleep 0.5
    done
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    say "PostgreSQL $major did not start on port $port (attempt $attempt): $(grep -m1 -E 'FATAL|ERROR' "$dir/server.log" || tail -n 1 "$dir/server.log")"
  done
  return 1
}
failed=()
for major in $MAJORS; do
  bin=$(bash scripts/postgres.sh "$major")
  dir=$(mktemp -d)
  chmod 755 "$dir"
  [ "$(id -u)" = 0 ] && chown postgres "$dir"
  "${as_postgres[@]}" "$bin/initdb" -D "$dir/data" -U postgres --auth=trust >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
  if ! start_server; then
    say "PostgreSQL $major: FAILED to start (server log: $dir/server.log)"
    failed+=("$major")
    continue
  fi
  say "PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on port $port: $SUITES"
  if TEST_ADMIN_DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres" node dist/scripts/test-only.js "${files[@]}"; then
    say "PostgreSQL $major: passed"
  else
    say "PostgreSQL $major: FAILED (server log: $dir/server.log)"
    failed+=("$major")
  fi
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  [ ${#failed[@]} -gt 0 ] && [ "${failed[-1]}" = "$major" ] || rm -rf "$dir"
done
if [ ${#failed[@]} -gt 0 ]; then say "failed on PostgreSQL ${failed[*]}"; exit 1; fi
say "passed on PostgreSQL $MAJORS"
