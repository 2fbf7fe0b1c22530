/**
 * The service's answers as the typed client publishes them: written from the route schemas
 * (`npm run client:operations`), so a field the console reads is a field the API sends.
 */
export type {
  AuditEntryOut,
  AuditVerification,
  EvaluateOut,
  FailedDeliveryList,
  IssuerCheckOut,
  MembershipOut,
  OrganisationOut,
  OwnersOut,
  PolicyVersionOut,
  ProjectOut,
  SubscriptionOut,
  TokenList,
  TransactionOut,
  WalletOut,
} from '../../src/programs/client/types.js';
