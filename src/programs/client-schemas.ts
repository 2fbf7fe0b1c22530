import type { TSchema } from '@sinclair/typebox';
import { ServiceJwks, MembershipCheck } from '../domains/attestations/schemas.js';
import { AuditEntryOut, AuditList, AuditVerification, ListAuditQuery } from '../domains/audit/routes.js';
import { IssueBody, IssuedOut, MembershipList, MembershipOut, RevokeBody, TransferBody, ViewQuery } from '../domains/memberships/schemas.js';
import { ListOrganisationsQuery, OrganisationList, OrganisationOut } from '../domains/organisations/schemas.js';
import {
  CreateProjectBody,
  KeyRotated,
  ListProjectsQuery,
  ProjectCreated,
  ProjectList,
  ProjectOut,
  UpdateProjectBody,
  WalletWebhookSecretRotated,
} from '../domains/projects/schemas.js';
import {
  EvaluateBody,
  EvaluateOut,
  OwnersOut,
  PolicyVersionList,
  PolicyVersionOut,
  PutOwnersBody,
  PutPolicyBody,
} from '../domains/signing/policies/schemas.js';
import { CreateTokenBody, ListTokensQuery, TokenCreated, TokenList } from '../domains/tokens/schemas.js';
import { ListTransactionsQuery, SendBody, TransactionList, TransactionOut } from '../domains/transactions/schemas.js';
import { Accepted, IssuerCheckOut, ListWalletsQuery, RpcBody, RpcOut, SignInOut, WalletList, WalletOut } from '../domains/wallets/schemas.js';
import {
  CreateWebhookBody,
  EventCatalogueOut,
  FailedDeliveryList,
  ListWebhooksQuery,
  RetryAccepted,
  SecretOut,
  SubscriptionCreated,
  SubscriptionList,
  SubscriptionOut,
  TestSent,
  UpdateWebhookBody,
} from '../domains/webhooks/schemas.js';
import { Problem } from '../platform/http/schemas.js';
import { typeScriptTypes } from '../platform/openapi/typescript.js';

/**
 * The route schemas the typed client's published types are written from, by name: `npm run
 * client:operations` writes them as plain TypeScript into src/programs/client/types.ts, so that
 * the client (and its package) refers to nothing of the service. An object schema listed here is
 * written by its name wherever another one holds it.
 */
export const CLIENT_SCHEMAS = {
  Problem,
  // Organisations, projects, tokens, audit
  OrganisationOut,
  OrganisationList,
  ListOrganisationsQuery,
  ProjectOut,
  ProjectCreated,
  ProjectList,
  ListProjectsQuery,
  CreateProjectBody,
  UpdateProjectBody,
  KeyRotated,
  WalletWebhookSecretRotated,
  TokenCreated,
  TokenList,
  ListTokensQuery,
  CreateTokenBody,
  AuditEntryOut,
  AuditList,
  ListAuditQuery,
  AuditVerification,
  ServiceJwks,
  MembershipCheck,
  // Wallets and signing
  SignInOut,
  Accepted,
  IssuerCheckOut,
  WalletOut,
  WalletList,
  ListWalletsQuery,
  RpcBody,
  RpcOut,
  // Signing policies
  PutPolicyBody,
  PolicyVersionOut,
  PolicyVersionList,
  PutOwnersBody,
  OwnersOut,
  EvaluateBody,
  EvaluateOut,
  // Memberships
  MembershipOut,
  MembershipList,
  IssueBody,
  IssuedOut,
  RevokeBody,
  TransferBody,
  ViewQuery,
  // Webhooks
  SubscriptionOut,
  SubscriptionCreated,
  SubscriptionList,
  ListWebhooksQuery,
  CreateWebhookBody,
  UpdateWebhookBody,
  SecretOut,
  TestSent,
  EventCatalogueOut,
  FailedDeliveryList,
  RetryAccepted,
  // Transactions
  SendBody,
  TransactionOut,
  TransactionList,
  ListTransactionsQuery,
} satisfies Record<string, TSchema>;

/** The text of src/programs/client/types.ts. */
export function clientTypes(): string {
  return typeScriptTypes(
    CLIENT_SCHEMAS,
    `// Written by scripts/client-operations.ts from the service's route schemas (src/programs/client-schemas.ts): do not edit.
// Plain types, so that the client and its package need nothing of the service.
/* eslint-disable @typescript-eslint/no-empty-object-type -- a signing operation's \`params\` is any object, as its schema says */`,
  );
}
