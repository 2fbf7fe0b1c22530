#!/usr/bin/env bash
# The one-time Vault (or OpenBao) setup for the signer, as the operations guide gives it.
# Needs VAULT_ADDR and an admin VAULT_TOKEN; uses the CLI in $VAULT_BIN (default: vault, then bao).
# Idempotent: safe to run again. With --print-approle it prints VAULT_ROLE_ID=… and
# VAULT_SECRET_ID=… (a fresh secret id) for the signer on stdout.
set -euo pipefail

BIN=${VAULT_BIN:-$(command -v vault || command -v bao || true)}
[ -n "$BIN" ] || { echo "set VAULT_BIN to a vault or bao binary" >&2; exit 1; }
TRANSIT_MOUNT=${VAULT_TRANSIT_MOUNT:-transit}
TRANSIT_KEY=${VAULT_TRANSIT_KEY:-custody-wallets}
KV_MOUNT=${VAULT_KV_MOUNT:-secret}
KV_PREFIX=${VAULT_KV_PREFIX:-custody/keys}  # the chart default is custody/<release>/keys: set VAULT_KV_PREFIX to match
POLICY=${KEYVAULT_POLICY:-custody-keyvault}
ROLE=${KEYVAULT_APPROLE:-custody-keyvault}

v() { "$BIN" "$@"; }
# Whole outputs first: `grep -q` closing a pipe early would fail the listing under pipefail.
mounted() { local list; list=$(v secrets list -format=json); [[ "$list" == *"\"$1/\""* ]]; }
auth_enabled() { local list; list=$(v auth list -format=json); [[ "$list" == *"\"$1/\""* ]]; }

# 1. Transit, with a derived, non-exportable key that cannot be deleted; no implicit key creation.
mounted "$TRANSIT_MOUNT" || v secrets enable -path="$TRANSIT_MOUNT" transit >&2
v read "$TRANSIT_MOUNT/keys/$TRANSIT_KEY" >/dev/null 2>&1 ||
  v write -f "$TRANSIT_MOUNT/keys/$TRANSIT_KEY" type=aes256-gcm96 derived=true exportable=false allow_plaintext_backup=false >&2
v write "$TRANSIT_MOUNT/keys/$TRANSIT_KEY/config" deletion_allowed=false >&2
v write "$TRANSIT_MOUNT/config/keys" disable_upsert=true >&2

# 2. KV version 2 for the key records.
mounted "$KV_MOUNT" || v secrets enable -path="$KV_MOUNT" kv-v2 >&2

# 3. The signer's policy: encrypt/decrypt with its one key, read the key's settings, and
#    create + read (never update or delete) its records.
v policy write "$POLICY" - >&2 <<POLICY
path "$TRANSIT_MOUNT/encrypt/$TRANSIT_KEY" { capabilities = ["update"] }
path "$TRANSIT_MOUNT/decrypt/$TRANSIT_KEY" { capabilities = ["update"] }
path "$TRANSIT_MOUNT/keys/$TRANSIT_KEY" { capabilities = ["read"] }
path "$KV_MOUNT/data/$KV_PREFIX/*" { capabilities = ["create", "read"] }
path "sys/internal/ui/mounts/$KV_MOUNT" { capabilities = ["read"] }
POLICY

# 4. AppRole for the signer (the chart can use Kubernetes auth instead; see docs/operations.md).
auth_enabled approle || v auth enable approle >&2
v write "auth/approle/role/$ROLE" token_policies="$POLICY" token_ttl=1h token_max_ttl=24h secret_id_ttl=0 >&2

if [ "${1:-}" = "--print-approle" ]; then
  echo "VAULT_ROLE_ID=$(v read -field=role_id "auth/approle/role/$ROLE/role-id")"
  echo "VAULT_SECRET_ID=$(v write -f -field=secret_id "auth/approle/role/$ROLE/secret-id")"
fi
