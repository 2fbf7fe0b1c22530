/** `signer`: project tokens that may ask wallets to sign and read; `admin` does not imply it (docs/signing.md). */
export type TokenRole = 'admin' | 'read' | 'signer';

/** Who is calling a management endpoint, resolved from its API token. */
export type Principal =
  | { readonly scope: 'operator'; readonly role: 'admin' }
  | { readonly scope: 'organisation'; readonly role: TokenRole; readonly tokenId: number; readonly organisationId: number }
  | {
      readonly scope: 'project';
      readonly role: TokenRole;
      readonly tokenId: number;
      readonly organisationId: number;
      readonly projectId: number;
    };

/** A stable name for the caller: what idempotency keys and audit trails are scoped to. */
export const principalKey = (p: Principal): string => (p.scope === 'operator' ? 'operator' : `token:${p.tokenId}`);

/** The tenant whose share of the database pool a request counts against (platform/db/share.ts): its organisation, or the operator. */
export const tenantOf = (organisationId: number | 'operator'): string => (organisationId === 'operator' ? 'operator' : `organisation:${organisationId}`);
/** The tenant a principal's work runs as (its share of the database pool): its organisation's, or the operator's. */
export const tenantOfPrincipal = (principal: Principal): string => tenantOf(principal.scope === 'operator' ? 'operator' : principal.organisationId);
