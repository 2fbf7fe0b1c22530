/** The prose of the OpenAPI document: the rules of docs/interface.md sections 1–12 as an integrator needs them. */
export const API_DESCRIPTION = (env: string): string => `
Self-hosted custody service: one EVM wallet per end user of a customer application, membership
tokens tied to wallet addresses, organisations, projects, API tokens and webhooks.
This deployment serves **${env}**.

## Environments (section 1)
One deployment serves one environment. Project keys say which: \`pk_test_…\` (testnet),
\`pk_live_…\` (production). A key of the other environment, an unknown key, a key of a deleted
project or organisation, or a key with extra whitespace → \`400 invalid_project_key\`.
Keys and API tokens are stored only as hashes and shown once.

## Errors (section 2)
Every error is RFC 9457 problem details (\`application/problem+json\`) with a stable \`code\` and
the \`requestId\`; field problems are listed in \`errors\` as \`{ in?, path, message }\`. Malformed
JSON, a wrong Content-Type, unknown or mistyped fields, a body nested deeper than 32 levels, a NUL
or an unpaired surrogate in any string → \`400\`; bodies over the endpoint's limit (8 KiB for the
wallet endpoints, 1 MiB for the others) → \`413\`. An unknown path is \`404\`, a known path with
another method \`405\` (with \`Allow\`); a wrong Content-Type is refused before routing, whatever the
path, and a body is read only once its endpoint is known and, for API-token endpoints, its token accepted.
A dependency that is down (database, signer, Vault) → \`503\` with \`Retry-After\`: treat any 5xx
as temporary. Every response carries \`X-Request-Id\`. Timestamps are ISO 8601 UTC, except
membership \`expiration\` (Unix seconds).

## Idempotent retries (section 2b)
Management \`POST\`s take an \`Idempotency-Key\` header: the first answer for (token, key) is
replayed for 24 h; the same key for a different request → \`422 idempotency_key_reused\`; while
the first is running → \`409 request_in_progress\`. 5xx answers are never stored.

## Management authentication (section 3)
\`Authorization: Bearer <API token>\`. Scopes: operator (the deployment), organisation, project;
roles: admin (read and write) and read (GET only; a write → \`403\`). Anything outside the
token's scope is \`404\`, never \`403\`, so tenants cannot probe each other. Membership
endpoints take \`?projectId=\` when the token is wider than one project.

## Projects (section 4)
A project has an OIDC \`issuer\` (https), an optional \`walletWebhookUrl\`, and
\`requireVerifiedEmail\` (default true). Rotating the key keeps the old one working for
\`graceSeconds\` (default 86400).

## Wallets (sections 5, 6, 11)
\`POST /api/v1/signin\` and \`POST /api/v1/wallets/createasync\` take the project key in the body
(\`key\`) and the end user's JWT as \`Authorization: Bearer\`. Checks run in this order: body
shape (400), project key (400), JWT (401). One identity (project, lower-cased email) has one
wallet whatever the concurrency. The JWT must be RS256 from the project's issuer (discovery
over HTTPS, \`jwks_uri\` https, no redirects), with \`aud\` = the service audience, a future
\`exp\`, an \`email\`, and \`email_verified\` not false when the project requires it; any failure →
\`401 invalid_token\` whose \`detail\` names the check. The wallet-created webhook
(\`{walletId, walletAddress, emailAddress, token?}\`) is signed as Standard Webhooks; a failed one is
listed under failed deliveries and re-sent on the user's next sign-in.

## Memberships (section 7)
\`membershipType\` is \`<a>:<b>\`, each part 1–64 of \`[A-Za-z0-9_.-]\`. One active membership per
wallet and type (\`409 already_member\` unless \`override\`). Addresses: all-lower or all-upper
as is, mixed case only with a valid EIP-55 checksum. \`status\` is computed: revoked, expired
(\`expiration > 0\` and past), else active. Issue is all-or-nothing (1–1,000 items). Revoke is
soft, or removes every trace with \`hardDelete\`. Transfer refusals: \`404\`, then
\`holder_mismatch\`, \`membership_inactive\`, \`not_transferable\`, \`already_member\` (409).

## Webhooks and events (sections 8, 9)
Subscriptions name events of \`GET /api/v1/webhooks/events\` (or \`*\`). Deliveries are signed
(\`webhook-id\`, \`webhook-timestamp\`, \`webhook-signature\`: Standard Webhooks, HMAC-SHA256 with the
\`whsec_\` secret); a rotated secret signs alongside the new one for 24 h. Any 2xx succeeds; other
answers, timeouts and refused connections are retried on the schedule, honouring
\`Retry-After\`; \`410\` disables the subscription at once, five days of failures disable it too;
any update re-enables it. URLs must be https in production and must not reach private,
loopback or metadata addresses (checked at creation and at connect time).

## Lists (section 10)
Every list pages by cursor: \`limit\` 1–1,000 (default 100), \`cursor\` opaque (a forged one →
\`400\`), stable order by id; the body is \`{ <items>: [...], nextCursor }\`.

## Running it (section 12)
\`GET /healthz\`, \`GET /readyz\` (\`503\` while draining or when a dependency is down) and
\`GET /metrics\` answer without authentication. Rate limits, when on, answer \`429 rate_limited\`
with \`Retry-After\` and \`RateLimit-*\` headers.
`;

export const GENERIC_ERRORS = {
  400: 'validation_failed (errors lists each field), malformed_json or unsupported_media_type; nothing changed.',
  401: 'unauthorized: no API token, or an unknown or revoked one.',
  403: 'forbidden: a read token tried to write, or the token may not do this.',
  404: 'not_found: no such resource within the token’s scope (another tenant’s resources are 404 too).',
  413: "payload_too_large: the body exceeds the endpoint's limit (8 KiB for the wallet endpoints, 1 MiB for the others).",
  429: 'rate_limited: over the limit for this token or project key; retry after Retry-After.',
  503: 'dependency_unavailable: the database, the signer or Vault is unavailable; retry after Retry-After. Nothing was lost.',
} as const;

const EXAMPLE_CODES: Record<number, [string, string, string]> = {
  400: ['validation_failed', 'Bad Request', 'The request is invalid; see errors.'],
  401: ['unauthorized', 'Unauthorized', 'A valid API token is required.'],
  403: ['forbidden', 'Forbidden', 'This token may only read.'],
  404: ['not_found', 'Not Found', 'No such organisation.'],
  405: ['method_not_allowed', 'Method Not Allowed', 'Allowed methods: GET.'],
  409: ['conflict', 'Conflict', 'The request conflicts with the current state.'],
  413: ['payload_too_large', 'Payload Too Large', "The request body exceeds the endpoint's limit: 8 KiB for the wallet endpoints, 1 MiB for the others."],
  422: ['idempotency_key_reused', 'Unprocessable Content', 'This Idempotency-Key was used for a different request.'],
  429: ['rate_limited', 'Too Many Requests', 'Too many requests; retry after 12 seconds.'],
  503: ['dependency_unavailable', 'Service Unavailable', 'The database is unavailable; retry later.'],
};

export function ERROR_EXAMPLES(status: number): Record<string, unknown> {
  const [code, title, detail] = EXAMPLE_CODES[status] ?? ['internal_error', 'Error', 'An error occurred.'];
  return {
    type: `urn:custody:problem:${code}`,
    title,
    status,
    detail,
    code,
    requestId: '0b6d3f6e-1c1e-4f7e-9a55-2f8f3f4a6c11',
    ...(status === 400 ? { errors: [{ in: 'body', path: '/name', message: 'is required' }] } : {}),
  };
}
