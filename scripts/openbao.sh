#!/usr/bin/env bash
# Prints the path of a real Vault-API server binary for tests and local use, building it from
# the Go module proxy on first use and caching it under ~/.cache keyed by version.
#
# OpenBao first: a tiny Go module of ours whose main calls OpenBao's own command package.
# If the module proxy does not serve OpenBao (this workplace's proxy answers 403 for
# github.com/openbao/openbao), HashiCorp Vault is built the same way: same API, same CLI.
# One line on stderr when it is built; the Go toolchain's output, the OpenBao attempt included,
# goes to build.log in the cache directory. stdout is only the path.
set -euo pipefail

OPENBAO_VERSION=${OPENBAO_VERSION:-v2.4.1}
VAULT_VERSION=${VAULT_VERSION:-v1.21.4}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/custody-vault-api
mkdir -p "$cache"

. "$(dirname "$0")/go-tool.sh"
log="$cache/build.log"
# A step of the build, for the log only.
note() { printf '== %s\n' "$*" >>"$log"; }

# build <name> <module> <version> <command package> <binary> [patch function]
build() {
  local name=$1 module=$2 version=$3 pkg=$4 out=$5 patch=${6:-}
  local work
  work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  note "building $name $version from the Go module proxy"
  (
    exec >>"$log" 2>&1
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
    # Chained: errexit does not hold inside a function called as a condition.
    go get "$module@$version" &&
      { [ -z "$patch" ] || "$patch" "$module" "$version"; } &&
      CGO_ENABLED=0 go build -mod=mod -trimpath -o "$out.tmp" .
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
  cp -r "$src" vault-src &&
  chmod -R u+w vault-src &&
  sed -i 's/ActivationFunc: iStore.activateDeduplication,/ActivationFunc: func(ctx context.Context, req *logical.Request, _ string) error { return iStore.activateDeduplication(ctx, req) },/' \
    vault-src/vault/identity_store.go &&
  sed -i 's/b.idStoreBackend.ActivationFunc(ctx, nil)/b.idStoreBackend.ActivationFunc(ctx, nil, "")/' vault-src/vault/logical_system_activation_flags.go &&
  sed -i 's/restoredKeyName, err := b.lm.RestorePolicy(ctx, req.Storage, keyName, backupB64, force)/err := b.lm.RestorePolicy(ctx, req.Storage, keyName, backupB64, force); restoredKeyName := keyName/' \
    vault-src/builtin/logical/transit/path_restore.go &&
  go mod edit -replace "$module=./vault-src"
}

bao="$cache/openbao-$OPENBAO_VERSION/bao"
vault="$cache/vault-$VAULT_VERSION/vault"
if [ -x "$bao" ]; then echo "$bao"; exit 0; fi
if [ -x "$vault" ] && [ -z "${REQUIRE_OPENBAO:-}" ]; then echo "$vault"; exit 0; fi

mkdir -p "$(dirname "$bao")"
: >"$log"
if [ -n "${REQUIRE_OPENBAO:-}" ]; then
  announce "OpenBao $OPENBAO_VERSION" 25 "$log"
else
  # This workplace's module proxy refuses OpenBao: then HashiCorp Vault, same API, is the plan.
  announce "the Vault-API server for the tests (OpenBao $OPENBAO_VERSION, else HashiCorp Vault $VAULT_VERSION)" 25 "$log"
fi
if build OpenBao github.com/openbao/openbao "$OPENBAO_VERSION" github.com/openbao/openbao/command "$bao"; then
  echo "$bao"
  exit 0
fi
if [ -n "${REQUIRE_OPENBAO:-}" ]; then
  failed "OpenBao $OPENBAO_VERSION" "$log"
  exit 1
fi
note "OpenBao $OPENBAO_VERSION is not served by the module proxy: building HashiCorp Vault $VAULT_VERSION (same API) instead"
mkdir -p "$(dirname "$vault")"
if ! build "HashiCorp Vault" github.com/hashicorp/vault "$VAULT_VERSION" github.com/hashicorp/vault/command "$vault" patch_vault; then
  failed "HashiCorp Vault $VAULT_VERSION" "$log"
  exit 1
fi
echo "$vault"
