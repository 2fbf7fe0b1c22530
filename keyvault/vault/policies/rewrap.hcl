# The rewrap job's Vault policy (custody-rewrap-<release>), applied verbatim by scripts/vault-setup.sh:
# `custody vault rewrap` moves every key record's ciphertext to the transit key's newest version.
# Written for the default names (release custody): where the operator sets other names the script
# substitutes exactly those, in quoted paths, and nothing else: TRANSIT_MOUNT (custody-transit),
# TRANSIT_KEY (custody-wallets), KV_MOUNT (custody-kv), KV_PREFIX (custody/custody/keys).
# `scripts/vault-setup.sh --print-policy rewrap` prints it as it will be written.
#
# Decrypt is granted so that each new ciphertext is checked (decrypted to the record's address)
# before it is written; the key never leaves the job. No create (it makes no record), no delete,
# no encrypt, no service key, no key rotation or configuration.

path "custody-transit/rewrap/custody-wallets" { capabilities = ["update"] }
path "custody-transit/decrypt/custody-wallets" { capabilities = ["update"] }
# The newest version and min_decryption_version.
path "custody-transit/keys/custody-wallets" { capabilities = ["read"] }

# Records: list them, read the newest version, write the next one with check-and-set.
path "custody-kv/metadata/custody/custody/keys/" { capabilities = ["list"] }
path "custody-kv/data/custody/custody/keys/*" { capabilities = ["read", "update"] }
