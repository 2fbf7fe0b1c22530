import { ConflictError } from '../../platform/http/errors.js';
import type { Executor } from '../../platform/db/knex.js';

/** A claim the project's users' JWTs must carry with this value; null: none required. */
export interface TokenClaim {
  name: string;
  value: string;
}

/**
 * Who may trust an issuer (docs/security.md, "A user's token works only for the projects that trust
 * it"). The service's audience is one for the whole deployment, so a token names no project: a
 * project that requires no claim accepts every token of its issuer. Projects of one organisation
 * may share an issuer (one customer); projects of different organisations may only when each of
 * them requires a claim (or has its own audience: bindingOf), of different values, so that a
 * token minted for one cannot sign in to another. Checked under a transaction lock per issuer, so two registrations cannot race past it.
 */
export async function checkIssuerBinding(
  tx: Executor,
  project: { id: number | undefined; organisationId: number; issuer: string; claim: TokenClaim | null },
): Promise<void> {
  await tx.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 7))', [`issuer:${project.issuer}`]);
  const others = (await tx('projects')
    .where('issuer', project.issuer)
    .whereNot('organisation_id', project.organisationId)
    .modify((q) => {
      if (project.id !== undefined) q.whereNot('id', project.id);
    })
    .select('id', 'token_claim_name', 'token_claim_value', 'audience')
    .limit(1000)) as Array<{ id: number; token_claim_name: string | null; token_claim_value: string | null; audience: string | null }>;
  if (others.length === 0) return;
  const bindings = others.map((o) => bindingOf(tokenClaimOf(o), o.audience));
  const unbound = bindings.some((b) => b === null);
  if (project.claim === null || unbound) {
    throw new ConflictError(
      'Another organisation trusts this issuer. Projects of different organisations may share an issuer only when each requires a claim naming it (tokenClaim, e.g. azp = the application’s client id) or has its own audience (the client id), so that a token minted for one project cannot be used at another.',
      'issuer_in_use',
      [
        {
          path: '/issuer',
          message: unbound
            ? 'is trusted by another organisation’s project that requires no claim'
            : 'needs a tokenClaim or an audience of its own: another organisation trusts it',
        },
      ],
    );
  }
  const claim = project.claim;
  if (bindings.some((b) => b !== null && b.name === claim.name && b.value === claim.value)) {
    throw new ConflictError('Another organisation’s project of this issuer requires the same claim: its tokens would work here.', 'issuer_in_use', [
      { path: '/tokenClaim', message: 'is required by another organisation’s project of the same issuer' },
    ]);
  }
}

/**
 * What binds a project's tokens to it: its required claim, or else its own audience (a token's
 * `aud` naming the customer's application names the project as well as any claim would).
 */
export const bindingOf = (claim: TokenClaim | null, audience: string | null): TokenClaim | null =>
  claim ?? (audience === null ? null : { name: 'aud', value: audience });

/** A project row's required claim, or null. */
export const tokenClaimOf = (p: { token_claim_name: string | null; token_claim_value: string | null }): TokenClaim | null =>
  p.token_claim_name !== null && p.token_claim_value !== null ? { name: p.token_claim_name, value: p.token_claim_value } : null;

/** Whether a token's claims carry the required claim (a string equal to it, or a list holding it). */
export function carriesClaim(claims: Record<string, unknown>, claim: TokenClaim): boolean {
  const v = claims[claim.name];
  return v === claim.value || (Array.isArray(v) && v.includes(claim.value));
}
