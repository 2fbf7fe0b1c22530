import type { Knex } from 'knex';
import { UnauthorizedError } from '../../platform/http/errors.js';
import { constantTimeEqual, hashSecret } from '../../platform/crypto/secrets.js';
import { findLiveTokensByHash, type TokenLookup } from '../../domains/tokens/repository.js';
import type { ProjectRow } from '../../domains/projects/repository.js';
import { GroupCommit } from '../../platform/db/group-commit.js';
import type { AppContext, AppMiddleware } from '../../platform/http/context.js';
import type { Principal } from './principal.js';
import { requireCsrf, type ConsoleSessions } from './session.js';

const BEARER = /^Bearer ([\x21-\x7e]{1,512})$/i;
const ID = /^[1-9][0-9]{0,14}$/;

/**
 * The project a request names (`:projectId` in its path, or `?projectId`), read with the token in
 * one round trip; the tenant resolution uses it if it resolves that project (access/tenancy/resolve.ts).
 * Anything but a plain id is left to the route's validation.
 */
function namedProjectId(ctx: AppContext): number | null {
  const named = ctx.params['projectId'] ?? ctx.query['projectId'];
  return typeof named === 'string' && ID.test(named) ? Number(named) : null;
}

/** Who a token is, by its hash: the operator, a live API token (with the named project's row when it reaches it), or nobody. */
export type TokenResolver = (hash: Buffer, projectId: number | null) => Promise<{ principal: Principal; project: ProjectRow | null } | undefined>;

/**
 * The operator token is compared by hash in constant time; other tokens are looked up by their
 * SHA-256 (the table holds only hashes), live ones only.
 */
export function tokenResolver(db: Knex, operatorTokenHash: Buffer): TokenResolver {
  // Tokens of requests that arrive while earlier lookups are in flight are looked up together, in one statement.
  const lookups = new GroupCommit((all: TokenLookup[]) => findLiveTokensByHash(db, all));
  return async (hash, projectId) => {
    if (constantTimeEqual(hash, operatorTokenHash)) return { principal: { scope: 'operator', role: 'admin' }, project: null };
    const found = await lookups.add({ hash, projectId });
    if (!found) return undefined;
    const row = found.token;
    const principal: Principal =
      row.project_id === null
        ? { scope: 'organisation', role: row.role, tokenId: row.id, organisationId: row.organisation_id }
        : { scope: 'project', role: row.role, tokenId: row.id, organisationId: row.organisation_id, projectId: row.project_id };
    return { principal, project: found.project };
  };
}

/**
 * Resolves the caller to a principal: `Authorization: Bearer <API token>`, or, without that header,
 * a console session's cookie standing for a token (access/auth/session.ts; its writes carry the
 * CSRF token). Either way the token itself is looked up, so a revoked token's session is refused too.
 */
export function authenticate(resolve: TokenResolver, sessions?: ConsoleSessions): AppMiddleware {
  return async (ctx, next) => {
    const header = ctx.get('Authorization');
    let hash: Buffer;
    const secret = header === '' && sessions ? sessions.secretOf(ctx) : undefined;
    if (secret && sessions) {
      requireCsrf(ctx, secret);
      const session = await sessions.find(secret);
      if (!session) throw new UnauthorizedError('The console session is unknown, expired or ended: sign in again.');
      hash = session.tokenHash;
      // An answer to a browser's ambient credential is for that browser alone.
      ctx.set('Cache-Control', 'no-store');
    } else {
      const match = BEARER.exec(header);
      if (!match?.[1]) throw new UnauthorizedError();
      hash = hashSecret(match[1]);
    }
    const named = namedProjectId(ctx);
    const found = await resolve(hash, named);
    if (!found) throw new UnauthorizedError('The API token is unknown or revoked.');
    if (named !== null && found.principal.scope !== 'operator') ctx.state.namedProject = { id: named, row: found.project };
    ctx.state.principal = found.principal;
    await next();
  };
}
