/** Example records for the OpenAPI document; the openapi test checks each against its schema. */
const at = '2026-11-22T10:00:00.000Z';
const address = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed';

export const organisation = { id: 12, name: 'Acme Gyms', createdAt: at, updatedAt: at, deletedAt: null };
export const project = {
  id: 34,
  uid: '3f1c9a52-7d0e-4b6a-9e21-5c8d4f7a0b13',
  organisationId: 12,
  name: 'Members app',
  environment: 'testnet',
  issuer: 'https://login.example.com',
  walletWebhookUrl: 'https://api.example.com/hooks/wallets',
  requireVerifiedEmail: true,
  tokenClaim: null,
  audience: null,
  createdAt: at,
  updatedAt: at,
  deletedAt: null,
};
export const projectKey = 'pk_test_4bq1ZtV0X9mR3cL8eW2yN6hK5sJ7aQ0uD1fG';
export const token = { id: 56, name: 'ci', role: 'admin', scope: 'organisation', organisationId: 12, projectId: null, createdAt: at, revokedAt: null };
export const wallet = { walletId: 78, walletAddress: address, emailAddress: 'ada@example.com', createdAt: at };
export const membership = {
  tokenId: '901',
  membershipType: 'gym:gold',
  walletAddress: address,
  expiration: 1_830_297_600,
  transferable: true,
  status: 'active',
  issuedAt: at,
  updatedAt: at,
  revokedAt: null,
};
export const subscription = {
  id: 7,
  projectId: 34,
  url: 'https://api.example.com/hooks/custody',
  events: ['membership.issued', 'membership.revoked'],
  createdAt: at,
  updatedAt: at,
  deletedAt: null,
  disabledAt: null,
  disabledReason: null,
};
export const failedDelivery = {
  id: 321,
  kind: 'wallet',
  webhookId: null,
  event: 'wallet.created',
  url: 'https://api.example.com/hooks/wallets',
  payload: { walletId: 78, walletAddress: address, emailAddress: 'ada@example.com' },
  attempts: 3,
  lastStatus: 502,
  lastError: 'HTTP 502',
  lastResponseBody: 'Bad Gateway',
  lastAttemptAt: at,
  createdAt: at,
};
export const auditEntry = {
  id: 1001,
  at,
  organisationId: 12,
  projectId: 34,
  actor: 'token:56',
  action: 'POST /api/v1/organisations/:id/projects',
  target: 'project:34',
  status: 201,
  requestId: '0b6d3f6e-1c1e-4f7e-9a55-2f8f3f4a6c11',
  details: { params: { id: '12' } },
};
export const exampleAddress = address;
export const exampleAt = at;
