# The signer's Vault policy (custody-keyvault-<release>), applied verbatim by scripts/vault-setup.sh.
# Written for the default names (release custody): where the operator sets other names the script
# substitutes exactly those, in quoted paths, and nothing else: TRANSIT_MOUNT (custody-transit),
# TRANSIT_KEY (custody-wallets), SERVICE_KEY (custody-service), KV_MOUNT (custody-kv), KV_PREFIX
# (custody/custody/keys), APPROLE_MOUNT (custody-approle), ROLE (custody-keyvault).
# `scripts/vault-setup.sh --print-policy signer` prints it as it will be written.
#
# Nothing here exports, rotates, reconfigures or deletes a key, lists or changes a record, or
# reaches another mount: Vault refuses (403) every path not granted.

# Wallet keys: encrypt new ones, decrypt one to sign; read the key's settings (startup checks).
path "custody-transit/encrypt/custody-wallets" { capabilities = ["update"] }
path "custody-transit/decrypt/custody-wallets" { capabilities = ["update"] }
path "custody-transit/keys/custody-wallets" { capabilities = ["read"] }

# The service key (ecdsa-p256): sign attestations and audit checkpoints, read its public keys.
path "custody-transit/sign/custody-service" { capabilities = ["update"] }
path "custody-transit/keys/custody-service" { capabilities = ["read"] }

# Key records and documents: write once (create) and read; never update, delete or list.
path "custody-kv/data/custody/custody/keys/*" { capabilities = ["create", "read"] }
# The mount's retention (the signer refuses a mount that could drop a record) and its type.
path "custody-kv/config" { capabilities = ["read"] }
path "sys/internal/ui/mounts/custody-kv" { capabilities = ["read"] }

# With AppRole: the expiry of its own secret id (an alert fires days before it lapses).
# Grants nothing where the role or the mount does not exist (Kubernetes auth).
path "auth/custody-approle/role/custody-keyvault/secret-id/lookup" { capabilities = ["update"] }
