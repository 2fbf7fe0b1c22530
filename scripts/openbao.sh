#!/usr/bin/env bash
# Prints the path of a real Vault-API server binary for tests and local use, building it from
# the Go module proxy on first use and caching it under ~/.cache keyed by version.
#
# OpenBao first: a tiny Go module of ours whose main calls OpenBao's own command package.
# If the module proxy does not serve OpenBao (this workplace's proxy answers 403 for
# github.com/openbao/openbao), HashiCorp Vault is built the same way: same API, same CLI.
# Progress goes to stderr; stdout is only the path.
set -euo pipefail

OPENBAO_VERSION=${OPENBAO_VERSION:-v2.4.1}
VAULT_VERSION=${VAULT_VERSION:-v1.21.4}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/custody-vault-api
mkdir -p "$cache"

say() { printf '%s\n' "$*" >&2; }
. "$(dirname "$0")/go-tool.sh"

# build <name> <module> <version> <command package> <binary> [patch function]
build() {
  local name=$1 module=$2 version=$3 pkg=$4 out=$5 patch=${6:-}
  local work
  work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  say "building $name $version from the Go module proxy (first use only; about 25 minutes on 2 cores)"
  (
    cd "$work"
    cat > go.mod <<MOD
module custody.local/vaultapi

go 1.25
MOD
    cat > main.go <<MAIN
package main

import (
	"os"

	"$pkg"
)

func main() {
	os.Exit(command.Run(os.Args[1:]))
}
MAIN
    go get "$module@$version" >&2
    if [ -n "$patch" ]; then "$patch" "$module" "$version" >&2; fi
    CGO_ENABLED=0 go build -mod=mod -trimpath -o "$out.tmp" . >&2
  ) || return 1
  mv "$out.tmp" "$out"
}

# Vault's release tags build against the sdk in their own repository (a `replace ./sdk`, which
# a dependent module cannot use); v1.21.4 differs from the published sdk v0.21.0 in two
# signatures. We build from a copy of the module with those three call sites adapted.
patch_vault() {
  local module=$1 version=$2
  local src
  src="$(go env GOMODCACHE)/$module@$version"
  cp -r "$src" vault-src
  chmod -R u+w vault-src
  sed -i 's/ActivationFunc: iStore.activateDeduplication,/ActivationFunc: func(ctx context.Context, req *logical.Request, _ string) error { return iStore.activateDeduplication(ctx, req) },/' \
    vault-src/vault/identity_store.go
  sed -i 's/b.idStoreBackend.ActivationFunc(ctx, nil)/b.idStoreBackend.ActivationFunc(ctx, nil, "")/' vault-src/vault/logical_system_activation_flags.go
  sed -i 's/restoredKeyName, err := b.lm.RestorePolicy(ctx, req.Storage, keyName, backupB64, force)/err := b.lm.RestorePolicy(ctx, req.Storage, keyName, backupB64, force); restoredKeyName := keyName/' \
    vault-src/builtin/logical/transit/path_restore.go
  go mod edit -replace "$module=./vault-src"
}

bao="$cache/openbao-$OPENBAO_VERSION/bao"
vault="$cache/vault-$VAULT_VERSION/vault"
if [ -x "$bao" ]; then echo "$bao"; exit 0; fi
if [ -x "$vault" ] && [ -z "${REQUIRE_OPENBAO:-}" ]; then echo "$vault"; exit 0; fi

mkdir -p "$(dirname "$bao")"
heartbeat openbao.sh
started=$(date +%s)
if build OpenBao github.com/openbao/openbao "$OPENBAO_VERSION" github.com/openbao/openbao/command "$bao"; then
  say "OpenBao built in $(( $(date +%s) - started )) s"
  echo "$bao"
  exit 0
fi
say "OpenBao $OPENBAO_VERSION is not available from the Go module proxy ($(( $(date +%s) - started )) s)"
[ -n "${REQUIRE_OPENBAO:-}" ] && exit 1

mkdir -p "$(dirname "$vault")"
started=$(date +%s)
build "HashiCorp Vault" github.com/hashicorp/vault "$VAULT_VERSION" github.com/hashicorp/vault/command "$vault" patch_vault
say "Vault built in $(( $(date +%s) - started )) s"
echo "$vault"
