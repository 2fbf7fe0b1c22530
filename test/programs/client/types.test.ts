import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { Static } from '@sinclair/typebox';
import { expect } from 'chai';
import { format, resolveConfig } from 'prettier';
import type { CLIENT_SCHEMAS } from '../../../src/programs/client-schemas.js';
import { clientTypes } from '../../../src/programs/client-schemas.js';
import type * as Types from '../../../src/programs/client/types.js';

// The client's published types are plain TypeScript written from the route schemas
// (src/programs/client/types.ts). These checks run at compile time: a written type that is not
// exactly what `Static<>` of its schema gives fails `npm run build`.
type Equal<A, B> = (<X>() => X extends A ? 1 : 2) extends <X>() => X extends B ? 1 : 2 ? true : false;
type Assert<X extends true> = X;
type Schemas = typeof CLIENT_SCHEMAS;

/** Every schema the client names, by its written type. */
interface Written {
  Problem: Types.Problem;
  OrganisationOut: Types.OrganisationOut;
  OrganisationList: Types.OrganisationList;
  ListOrganisationsQuery: Types.ListOrganisationsQuery;
  ProjectOut: Types.ProjectOut;
  ProjectCreated: Types.ProjectCreated;
  ProjectList: Types.ProjectList;
  ListProjectsQuery: Types.ListProjectsQuery;
  CreateProjectBody: Types.CreateProjectBody;
  UpdateProjectBody: Types.UpdateProjectBody;
  KeyRotated: Types.KeyRotated;
  WalletWebhookSecretRotated: Types.WalletWebhookSecretRotated;
  TokenCreated: Types.TokenCreated;
  TokenList: Types.TokenList;
  ListTokensQuery: Types.ListTokensQuery;
  CreateTokenBody: Types.CreateTokenBody;
  AuditEntryOut: Types.AuditEntryOut;
  AuditList: Types.AuditList;
  ListAuditQuery: Types.ListAuditQuery;
  AuditVerification: Types.AuditVerification;
  ServiceJwks: Types.ServiceJwks;
  MembershipCheck: Types.MembershipCheck;
  SignInOut: Types.SignInOut;
  Accepted: Types.Accepted;
  IssuerCheckOut: Types.IssuerCheckOut;
  WalletOut: Types.WalletOut;
  WalletList: Types.WalletList;
  ListWalletsQuery: Types.ListWalletsQuery;
  RpcBody: Types.RpcBody;
  RpcOut: Types.RpcOut;
  PutPolicyBody: Types.PutPolicyBody;
  PolicyVersionOut: Types.PolicyVersionOut;
  PolicyVersionList: Types.PolicyVersionList;
  PutOwnersBody: Types.PutOwnersBody;
  OwnersOut: Types.OwnersOut;
  EvaluateBody: Types.EvaluateBody;
  EvaluateOut: Types.EvaluateOut;
  MembershipOut: Types.MembershipOut;
  MembershipList: Types.MembershipList;
  IssueBody: Types.IssueBody;
  IssuedOut: Types.IssuedOut;
  RevokeBody: Types.RevokeBody;
  TransferBody: Types.TransferBody;
  ViewQuery: Types.ViewQuery;
  SubscriptionOut: Types.SubscriptionOut;
  SubscriptionCreated: Types.SubscriptionCreated;
  SubscriptionList: Types.SubscriptionList;
  ListWebhooksQuery: Types.ListWebhooksQuery;
  CreateWebhookBody: Types.CreateWebhookBody;
  UpdateWebhookBody: Types.UpdateWebhookBody;
  SecretOut: Types.SecretOut;
  TestSent: Types.TestSent;
  EventCatalogueOut: Types.EventCatalogueOut;
  FailedDeliveryList: Types.FailedDeliveryList;
  RetryAccepted: Types.RetryAccepted;
  SendBody: Types.SendBody;
  TransactionOut: Types.TransactionOut;
  TransactionList: Types.TransactionList;
  ListTransactionsQuery: Types.ListTransactionsQuery;
}

/** The list above holds every schema of CLIENT_SCHEMAS, and nothing else. */
export type SameNames = Assert<Equal<keyof Written, keyof Schemas>>;
/** Each written type is the schema's static type, property for property (optional, nullable, literal). */
export type EachIsItsSchema = Assert<Equal<{ [K in keyof Schemas]: Static<Schemas[K]> }, { [K in keyof Schemas]: Written[K] }>>;

describe("the typed client's types", () => {
  it('are the ones the route schemas give (npm run client:operations writes them)', async () => {
    const file = fileURLToPath(new URL('../../../../src/programs/client/types.ts', import.meta.url));
    const options = (await resolveConfig(file)) ?? {};
    expect(await format(clientTypes(), { ...options, parser: 'typescript' })).to.equal(await readFile(file, 'utf8'));
  });

  it('import nothing but each other: the client folder refers to nothing of the service', async () => {
    for (const name of ['index.ts', 'operations.ts', 'types.ts']) {
      const text = await readFile(fileURLToPath(new URL(`../../../../src/programs/client/${name}`, import.meta.url)), 'utf8');
      const imports = [...text.matchAll(/\bfrom '([^']+)'/g)].map((m) => m[1]);
      expect(
        imports.filter((i) => !/^\.\/[\w-]+\.js$/.test(i ?? '')),
        name,
      ).to.deep.equal([]);
    }
  });
});
