#!/bin/sh
# Signs a user in and signs with their wallet, with curl: as the user present, then as the
# customer's backend. Needs CUSTODY_URL, PROJECT_KEY, USER_JWT, PROJECT_ID and SIGNER_TOKEN.
# Run it on your backend: the signer token is a secret (docs/client.md).
set -eu

# 1. Sign-in: the user's OIDC JWT as the bearer, the project key in the body. Creates the wallet
#    on the first call; answers { walletId, walletAddress, emailAddress, createdAt, isNew }.
signin=$(curl -sS --fail-with-body -X POST "$CUSTODY_URL/api/v1/signin" \
  -H "Authorization: Bearer $USER_JWT" -H 'Content-Type: application/json' \
  -d "{\"key\":\"$PROJECT_KEY\"}")
echo "$signin"
wallet_id=$(printf '%s' "$signin" | sed -n 's/.*"walletId":\([0-9]*\).*/\1/p')

# 2. The user present signs with their own wallet (the policy sees caller "user").
curl -sS --fail-with-body -X POST "$CUSTODY_URL/api/v1/wallets/rpc" \
  -H "Authorization: Bearer $USER_JWT" -H 'Content-Type: application/json' \
  -d "{\"key\":\"$PROJECT_KEY\",\"method\":\"personal_sign\",\"params\":{\"message\":\"Sign in to example.com\"}}"
echo

# 3. The backend signs with the same wallet: a signer token (caller "server"). Idempotency-Key
#    makes a retry answer the same signature instead of signing twice.
curl -sS --fail-with-body -X POST "$CUSTODY_URL/api/v1/project/$PROJECT_ID/wallets/$wallet_id/rpc" \
  -H "Authorization: Bearer $SIGNER_TOKEN" -H 'Content-Type: application/json' \
  -H "Idempotency-Key: order-4711-$wallet_id" \
  -d '{"method":"eth_signTypedData_v4","params":{"typedData":{"domain":{"name":"Shop","version":"1","chainId":8453},"types":{"Order":[{"name":"id","type":"uint256"},{"name":"buyer","type":"address"}]},"primaryType":"Order","message":{"id":"4711","buyer":"0x0000000000000000000000000000000000000B0b"}}}}'
echo
