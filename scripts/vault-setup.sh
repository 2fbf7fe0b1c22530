#!/usr/bin/env bash
# The one-time Vault (or OpenBao) setup for the custody signer, safe on a Vault that serves other
# teams: everything it creates lives on mounts of its own, which it marks as the signer's and
# refuses to reuse when they were not (it never changes a mount, auth method or config it did
# not create). Idempotent: run it again after a change of settings.
#
# Needs VAULT_ADDR and an admin VAULT_TOKEN in the environment; the CLI in $VAULT_BIN (default:
# vault, then bao). Settings, all by environment (defaults after the colon):
#   AUTH: kubernetes          kubernetes, approle, or both
#   RELEASE: custody          the Helm release (names the ServiceAccount and the key prefix)
#   NAMESPACE: custody        the release's namespace
#   SERVICE_ACCOUNT           the signer's ServiceAccount; default: the name the chart gives it
#   TRANSIT_MOUNT: custody-transit   KV_MOUNT: custody-kv   TRANSIT_KEY: custody-wallets
#   SERVICE_KEY: custody-service      the service key (ecdsa-p256): attestations and audit checkpoints
#   KV_PREFIX: custody/<RELEASE>/keys   POLICY: custody-keyvault-<RELEASE>   ROLE: custody-keyvault
#   REWRAP_POLICY: custody-rewrap-<RELEASE>   REWRAP_ROLE: custody-rewrap (the rewrap job's identity)
#   REWRAP_SERVICE_ACCOUNT     the rewrap job's ServiceAccount; default: the name the chart gives it
#   K8S_MOUNT: custody-kubernetes    K8S_AUDIENCE: vault
#   K8S_HOST: https://kubernetes.default.svc   (in-cluster Vault: nothing else needed)
#   K8S_CA_CERT, TOKEN_REVIEWER_JWT   files, for a Vault outside the cluster
#   APPROLE_MOUNT: custody-approle   APPROLE_BOUND_CIDRS (required for approle)   SECRET_ID_TTL: 720h
# The policies are the files in keyvault/vault/policies/, written verbatim for the default names;
# other names are substituted in their quoted paths and nothing else (the files' headers list them).
# Flags: --print-approle [rewrap] prints VAULT_ROLE_ID=… and VAULT_SECRET_ID=… (a fresh secret id)
# of the signer's role (or the rewrap job's) on stdout and revokes every earlier secret id of that
# role (a rotation leaves one live id); --service-account-name prints the ServiceAccount name the
# role binds, and exits; --print-policy signer|rewrap|setup prints a policy as it would be written
# (setup: the least an administrator's token for this script needs), and exits.
# A second release in the same Vault: give it its own mounts (TRANSIT_MOUNT, KV_MOUNT, K8S_MOUNT,
# APPROLE_MOUNT, e.g. custody-<release>-transit) here and the same names in its values.
set -euo pipefail

AUTH=${AUTH:-kubernetes}
RELEASE=${RELEASE:-custody}
NAMESPACE=${NAMESPACE:-custody}
TRANSIT_MOUNT=${TRANSIT_MOUNT:-custody-transit}
TRANSIT_KEY=${TRANSIT_KEY:-custody-wallets}
SERVICE_KEY=${SERVICE_KEY:-custody-service}
KV_MOUNT=${KV_MOUNT:-custody-kv}
KV_PREFIX=${KV_PREFIX:-custody/$RELEASE/keys}
POLICY=${POLICY:-custody-keyvault-$RELEASE}
ROLE=${ROLE:-custody-keyvault}
K8S_MOUNT=${K8S_MOUNT:-custody-kubernetes}
K8S_AUDIENCE=${K8S_AUDIENCE:-vault}
K8S_HOST=${K8S_HOST:-https://kubernetes.default.svc}
APPROLE_MOUNT=${APPROLE_MOUNT:-custody-approle}
SECRET_ID_TTL=${SECRET_ID_TTL:-720h}
REWRAP_POLICY=${REWRAP_POLICY:-custody-rewrap-$RELEASE}
REWRAP_ROLE=${REWRAP_ROLE:-custody-rewrap}
# Beside this script in the repository (followed through a symlink to scripts/).
POLICIES="$(dirname "$(dirname "$(readlink -f "$0")")")/keyvault/vault/policies"
MARK="custody signer (release $RELEASE)"

say() { printf 'vault-setup: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

# The chart's naming: <release> when it contains "custody", else <release>-custody, cut to 50
# characters, then "-keyvault" (cut to 63); the chart's fullnameOverride is SERVICE_ACCOUNT here.
chart_service_account() {
  local full=$RELEASE
  [[ "$RELEASE" == *custody* ]] || full="$RELEASE-custody"
  full=${full:0:50}; full=${full%-}
  local sa="$full-keyvault"
  sa=${sa:0:63}; echo "${sa%-}"
}
SERVICE_ACCOUNT=${SERVICE_ACCOUNT:-$(chart_service_account)}
# The chart's rewrap Job runs as <fullname>-rewrap.
REWRAP_SERVICE_ACCOUNT=${REWRAP_SERVICE_ACCOUNT:-${SERVICE_ACCOUNT%-keyvault}-rewrap}
if [ "${1:-}" = "--service-account-name" ]; then echo "$SERVICE_ACCOUNT"; exit 0; fi

# Names go into policy paths: nothing that could end a quoted HCL string or start a glob.
for name in TRANSIT_MOUNT TRANSIT_KEY SERVICE_KEY KV_MOUNT KV_PREFIX POLICY ROLE K8S_MOUNT APPROLE_MOUNT REWRAP_POLICY REWRAP_ROLE; do
  [[ "${!name}" =~ ^[A-Za-z0-9][A-Za-z0-9._/-]*$ ]] && [[ "${!name}" != */ ]] && [[ "${!name}" != *..* ]] ||
    die "$name must be letters, digits, '.', '_', '-' and '/' (got ${!name})"
done

# A policy file with the operator's names: each default replaced where it is a whole segment of
# a quoted path ("custody-kv/…", "…/custody-kv" or "…/custody-kv/…"), never inside another name.
policy_text() {
  local file="$POLICIES/$1.hcl" text line out=""
  [ -r "$file" ] || die "no policy $1 ($file)"
  text=$(<"$file")
  local -a from=(custody-transit custody-wallets custody-service custody-kv custody/custody/keys
    custody-kubernetes custody-approle custody-keyvault-custody custody-rewrap-custody custody-keyvault custody-rewrap)
  local -a to=("$TRANSIT_MOUNT" "$TRANSIT_KEY" "$SERVICE_KEY" "$KV_MOUNT" "$KV_PREFIX"
    "$K8S_MOUNT" "$APPROLE_MOUNT" "$POLICY" "$REWRAP_POLICY" "$ROLE" "$REWRAP_ROLE")
  while IFS= read -r line; do
    if [[ "$line" =~ ^path\ \"([^\"]*)\"(.*)$ ]]; then
      local p="/${BASH_REMATCH[1]}/" rest=${BASH_REMATCH[2]} i
      # Placeholders first, so that a new name holding a default is not replaced again.
      for i in "${!from[@]}"; do p=${p//"/${from[$i]}/"/"/@$i@/"}; done
      for i in "${!from[@]}"; do p=${p//"/@$i@/"/"/${to[$i]}/"}; done
      p=${p#/}; p=${p%/}
      line="path \"$p\"$rest"
    fi
    out+="$line"$'\n'
  done <<<"$text"
  printf '%s' "$out"
}
if [ "${1:-}" = "--print-policy" ]; then
  case "${2:-}" in signer | rewrap | setup) policy_text "$2"; exit 0 ;; *) die "--print-policy signer|rewrap|setup" ;; esac
fi

case "$AUTH" in kubernetes | approle | both) ;; *) die "AUTH must be kubernetes, approle or both (got $AUTH)" ;; esac
if [ "$AUTH" != kubernetes ] && [ -z "${APPROLE_BOUND_CIDRS:-}" ]; then
  die "AppRole needs APPROLE_BOUND_CIDRS: the addresses the signer's pods log in from (e.g. the pod CIDR)"
fi
BIN=${VAULT_BIN:-$(command -v vault || command -v bao || true)}
[ -n "$BIN" ] || die "set VAULT_BIN to a vault or bao binary"
[ -n "${VAULT_ADDR:-}" ] || die "set VAULT_ADDR (and an admin VAULT_TOKEN)"
v() { "$BIN" "$@"; }

# "<type>\t<description>" of the mount at <path>/ (kind: secrets or auth), or "<none>".
describe_mount() {
  local api=sys/mounts
  [ "$1" = auth ] && api=sys/auth
  local type
  type=$(v read -field=type "$api/$2" 2>/dev/null) || { echo "<none>"; return; }
  printf '%s\t%s' "$type" "$(v read -field=description "$api/$2" 2>/dev/null || true)"
}

# Enables <type> at <path> with our mark, or accepts it when it already carries our mark.
own_mount() {
  local kind=$1 path=$2 type=$3 found
  shift 3
  found=$(describe_mount "$kind" "$path")
  if [ "$found" = "<none>" ]; then
    v "$kind" enable -path="$path" -description="$MARK" "$@" "$type" >&2
    say "enabled $type at $path/"
  elif [ "$found" = "$type	$MARK" ]; then
    say "$path/ is this release's $type mount already"
  else
    die "$path/ exists and is not this release's (${found/	/, description: }): refusing to touch it; choose another path (for a second release: TRANSIT_MOUNT, KV_MOUNT, K8S_MOUNT, APPROLE_MOUNT of its own, e.g. custody-$RELEASE-${type}, and the same in its values: signer.vault.transitMount, kvMount, kubernetes.mountPath, approle.mountPath)"
  fi
}

# 1. Transit on its own mount: a derived, non-exportable key that cannot be deleted, and no
#    implicit key creation (disable_upsert is mount-wide, hence the dedicated mount).
own_mount secrets "$TRANSIT_MOUNT" transit
v read "$TRANSIT_MOUNT/keys/$TRANSIT_KEY" >/dev/null 2>&1 ||
  v write -f "$TRANSIT_MOUNT/keys/$TRANSIT_KEY" type=aes256-gcm96 derived=true exportable=false allow_plaintext_backup=false >&2
v write "$TRANSIT_MOUNT/keys/$TRANSIT_KEY/config" deletion_allowed=false >&2
#    The service key: P-256, never exportable, never deletable; rotated by an admin, never by the signer.
v read "$TRANSIT_MOUNT/keys/$SERVICE_KEY" >/dev/null 2>&1 ||
  v write -f "$TRANSIT_MOUNT/keys/$SERVICE_KEY" type=ecdsa-p256 exportable=false allow_plaintext_backup=false >&2
v write "$TRANSIT_MOUNT/keys/$SERVICE_KEY/config" deletion_allowed=false >&2
v write "$TRANSIT_MOUNT/config/keys" disable_upsert=true >&2

# 2. KV version 2 on its own mount, keeping every version of every record for ever.
own_mount secrets "$KV_MOUNT" kv -version=2
v write "$KV_MOUNT/config" max_versions=0 delete_version_after=0s >&2

# 3. The policies, from keyvault/vault/policies/: the signer's (encrypt/decrypt with its one key,
#    create + read of its records, sign with the service key) and the rewrap job's (rewrap, decrypt
#    to check, read + update of the records). Each file says what it grants and why.
policy_text signer | v policy write "$POLICY" - >&2
policy_text rewrap | v policy write "$REWRAP_POLICY" - >&2

# 4. Kubernetes auth on its own mount: the signer's ServiceAccount (the name the chart creates),
#    tokens with our audience only.
if [ "$AUTH" != approle ]; then
  own_mount auth "$K8S_MOUNT" kubernetes
  config=(kubernetes_host="$K8S_HOST")
  if [ -n "${K8S_CA_CERT:-}" ]; then config+=(kubernetes_ca_cert=@"$K8S_CA_CERT"); fi
  # Outside the cluster Vault needs a reviewer token; inside, it uses its own pod's.
  if [ -n "${TOKEN_REVIEWER_JWT:-}" ]; then config+=(token_reviewer_jwt=@"$TOKEN_REVIEWER_JWT"); fi
  v write "auth/$K8S_MOUNT/config" "${config[@]}" >&2
  v write "auth/$K8S_MOUNT/role/$ROLE" bound_service_account_names="$SERVICE_ACCOUNT" \
    bound_service_account_namespaces="$NAMESPACE" audience="$K8S_AUDIENCE" \
    token_policies="$POLICY" token_ttl=1h token_max_ttl=24h >&2
  say "Kubernetes auth: role $ROLE at auth/$K8S_MOUNT binds $NAMESPACE/$SERVICE_ACCOUNT (audience $K8S_AUDIENCE)"
  # The rewrap job: its own ServiceAccount, its own policy, short tokens (a run, not a service).
  v write "auth/$K8S_MOUNT/role/$REWRAP_ROLE" bound_service_account_names="$REWRAP_SERVICE_ACCOUNT" \
    bound_service_account_namespaces="$NAMESPACE" audience="$K8S_AUDIENCE" \
    token_policies="$REWRAP_POLICY" token_ttl=1h token_max_ttl=4h >&2
  say "Kubernetes auth: role $REWRAP_ROLE binds $NAMESPACE/$REWRAP_SERVICE_ACCOUNT (the rewrap job)"
fi

# 5. AppRole on its own mount: secret ids that expire and work only from the given addresses.
if [ "$AUTH" != kubernetes ]; then
  own_mount auth "$APPROLE_MOUNT" approle
  v write "auth/$APPROLE_MOUNT/role/$ROLE" token_policies="$POLICY" token_ttl=1h token_max_ttl=24h \
    secret_id_ttl="$SECRET_ID_TTL" secret_id_bound_cidrs="$APPROLE_BOUND_CIDRS" token_bound_cidrs="$APPROLE_BOUND_CIDRS" >&2
  say "AppRole: role $ROLE at auth/$APPROLE_MOUNT (secret ids live $SECRET_ID_TTL, bound to $APPROLE_BOUND_CIDRS)"
  v write "auth/$APPROLE_MOUNT/role/$REWRAP_ROLE" token_policies="$REWRAP_POLICY" token_ttl=1h token_max_ttl=4h \
    secret_id_ttl="$SECRET_ID_TTL" secret_id_bound_cidrs="$APPROLE_BOUND_CIDRS" token_bound_cidrs="$APPROLE_BOUND_CIDRS" >&2
  say "AppRole: role $REWRAP_ROLE (the rewrap job), same bounds"
  if [ "${1:-}" = "--print-approle" ]; then
    role=$ROLE
    [ "${2:-}" = rewrap ] && role=$REWRAP_ROLE
    # A new secret id, then every earlier one revoked: a rotation leaves exactly one live id, and a
    # leaked old id stops working now rather than when it would have expired.
    # None listed is fine (a new role); a refusal is not: the earlier ids would stay live.
    listing=$(v list -format=json "auth/$APPROLE_MOUNT/role/$role/secret-id" 2>&1) ||
      { [[ "$listing" != *"permission denied"* ]] || die "cannot list the secret ids of $role: $listing"; }
    earlier=$(printf '%s' "$listing" | grep -oE '[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}' || true)
    created=$(v write -f -format=json "auth/$APPROLE_MOUNT/role/$role/secret-id")
    secret_id=$(printf '%s' "$created" | sed -n 's/.*"secret_id": *"\([^"]*\)".*/\1/p')
    accessor=$(printf '%s' "$created" | sed -n 's/.*"secret_id_accessor": *"\([^"]*\)".*/\1/p')
    [ -n "$secret_id" ] && [ -n "$accessor" ] || die "Vault returned no secret id"
    revoked=0
    for a in $earlier; do
      [ "$a" = "$accessor" ] && continue
      v write "auth/$APPROLE_MOUNT/role/$role/secret-id-accessor/destroy" secret_id_accessor="$a" >/dev/null
      revoked=$((revoked + 1))
    done
    say "AppRole: new secret id of $role (accessor $accessor); $revoked earlier one(s) revoked"
    # Assigned first: a failed read inside `echo "…$(…)"` would not stop the script.
    role_id=$(v read -field=role_id "auth/$APPROLE_MOUNT/role/$role/role-id")
    [ -n "$role_id" ] || die "Vault returned no role id"
    echo "VAULT_ROLE_ID=$role_id"
    echo "VAULT_SECRET_ID=$secret_id"
  fi
fi
say "done: transit $TRANSIT_MOUNT/keys/$TRANSIT_KEY, service key $TRANSIT_MOUNT/keys/$SERVICE_KEY, records in $KV_MOUNT/$KV_PREFIX, policies $POLICY and $REWRAP_POLICY"
