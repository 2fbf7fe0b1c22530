#!/usr/bin/env bash
# Reproduces the container image's runtime layout without a Docker engine: the Dockerfile's
# install and build commands, into a fresh directory, then made read-only. Prints the directory.
# The image test (test/image.test.ts) starts every role from it as a non-root user.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out="${1:-$(mktemp -d -t custody-image-XXXXXX)}"
mkdir -p "$out/app" "$out/build"
# Stage 1 (build): dev dependencies, then compile contract/, src/, keyvault/ and migrations/ only,
# and bundle the operator console (dist/console).
cp "$root/package.json" "$root/package-lock.json" "$root/tsconfig.json" "$root/tsconfig.build.json" "$out/build/"
cp -r "$root/contract" "$root/src" "$root/keyvault" "$root/migrations" "$root/console" "$out/build/"
mkdir -p "$out/build/scripts" && cp "$root/scripts/build-console.ts" "$out/build/scripts/"
(cd "$out/build" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >&2 && npx tsc -p tsconfig.build.json >&2 && node dist/scripts/build-console.js >&2)
# Stage 2 (deps): production dependencies only, no optional ones.
cp "$root/package.json" "$root/package-lock.json" "$out/app/"
(cd "$out/app" && npm ci --omit=dev --omit=optional --no-audit --no-fund --ignore-scripts --loglevel=error >&2)
# Stage 3 (runtime): compiled code beside the production modules; read-only for everyone.
cp -r "$out/build/dist" "$out/app/dist"
rm -rf "$out/build"
chmod -R a-w "$out/app"
chmod 755 "$out"
echo "$out/app"
