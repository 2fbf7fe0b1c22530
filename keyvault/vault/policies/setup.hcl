# The least a token needs to run scripts/vault-setup.sh (release custody, either auth method).
# An administrator writes it and hands out a short-lived token of it, instead of a root token:
#   scripts/vault-setup.sh --print-policy setup | vault policy write custody-setup-custody -
#   vault token create -policy=custody-setup-custody -no-default-policy -ttl=1h -field=token
# Written for the default names: where the operator sets other names the script substitutes exactly
# those, in quoted paths, and nothing else: TRANSIT_MOUNT (custody-transit), TRANSIT_KEY
# (custody-wallets), SERVICE_KEY (custody-service), KV_MOUNT (custody-kv), K8S_MOUNT
# (custody-kubernetes), APPROLE_MOUNT (custody-approle), ROLE (custody-keyvault), REWRAP_ROLE
# (custody-rewrap), POLICY (custody-keyvault-custody), REWRAP_POLICY (custody-rewrap-custody).
#
# It reaches only the signer's own mounts, policies and roles. It can still write those two
# policies as it likes, and issue AppRole secret ids of those roles: treat it as an admin token of
# this slice of Vault and keep its TTL short.

# Its own mounts: see whether each exists (and is ours), enable it once.
path "sys/mounts/custody-transit" { capabilities = ["create", "read", "update"] }
path "sys/mounts/custody-kv" { capabilities = ["create", "read", "update"] }
# Enabling an auth method is a sudo path in Vault and OpenBao.
path "sys/auth/custody-kubernetes" { capabilities = ["create", "read", "update", "sudo"] }
path "sys/auth/custody-approle" { capabilities = ["create", "read", "update", "sudo"] }

# Transit: the wallet key and the service key, their settings (deletion_allowed=false), and the
# mount's disable_upsert. No rotate, export, backup or delete.
path "custody-transit/keys/custody-wallets" { capabilities = ["create", "read", "update"] }
path "custody-transit/keys/custody-wallets/config" { capabilities = ["update"] }
path "custody-transit/keys/custody-service" { capabilities = ["create", "read", "update"] }
path "custody-transit/keys/custody-service/config" { capabilities = ["update"] }
path "custody-transit/config/keys" { capabilities = ["update"] }

# KV v2: the retention settings only; never a record.
path "custody-kv/config" { capabilities = ["update"] }

# The two policies it writes.
path "sys/policies/acl/custody-keyvault-custody" { capabilities = ["create", "read", "update"] }
path "sys/policies/acl/custody-rewrap-custody" { capabilities = ["create", "read", "update"] }

# Kubernetes auth: its config and the signer's and the rewrap job's roles.
path "auth/custody-kubernetes/config" { capabilities = ["create", "update"] }
path "auth/custody-kubernetes/role/custody-keyvault" { capabilities = ["create", "update"] }
path "auth/custody-kubernetes/role/custody-rewrap" { capabilities = ["create", "update"] }

# AppRole: the two roles, a new secret id (--print-approle), the earlier ids revoked, the role id.
path "auth/custody-approle/role/custody-keyvault" { capabilities = ["create", "update"] }
path "auth/custody-approle/role/custody-keyvault/secret-id" { capabilities = ["list", "update"] }
path "auth/custody-approle/role/custody-keyvault/secret-id-accessor/destroy" { capabilities = ["update"] }
path "auth/custody-approle/role/custody-keyvault/role-id" { capabilities = ["read"] }
path "auth/custody-approle/role/custody-rewrap" { capabilities = ["create", "update"] }
path "auth/custody-approle/role/custody-rewrap/secret-id" { capabilities = ["list", "update"] }
path "auth/custody-approle/role/custody-rewrap/secret-id-accessor/destroy" { capabilities = ["update"] }
path "auth/custody-approle/role/custody-rewrap/role-id" { capabilities = ["read"] }
