import type { Knex } from 'knex';
import { UnauthorizedError } from '../../platform/http/errors.js';
import { constantTimeEqual, hashSecret } from '../../platform/crypto/secrets.js';
import { findLiveTokensByHash, type TokenLookup } from '../../domains/tokens/repository.js';
import { GroupCommit } from '../../platform/db/group-commit.js';
import type { AppContext, AppMiddleware } from '../../platform/http/context.js';
import type { Principal } from './principal.js';

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

/**
 * Resolves `Authorization: Bearer <API token>` to a principal. The operator token is compared by
 * hash in constant time; other tokens are looked up by their SHA-256 (the table holds only hashes).
 */
export function authenticate(db: Knex, operatorTokenHash: Buffer): AppMiddleware {
  // Tokens of requests that arrive while earlier lookups are in flight are looked up together, in one statement.
  const lookups = new GroupCommit((all: TokenLookup[]) => findLiveTokensByHash(db, all));
  return async (ctx, next) => {
    const match = BEARER.exec(ctx.get('Authorization'));
    if (!match?.[1]) throw new UnauthorizedError();
    const hash = hashSecret(match[1]);
    let principal: Principal;
    if (constantTimeEqual(hash, operatorTokenHash)) {
      principal = { scope: 'operator', role: 'admin' };
    } else {
      const named = namedProjectId(ctx);
      const found = await lookups.add({ hash, projectId: named });
      if (!found) throw new UnauthorizedError('The API token is unknown or revoked.');
      if (named !== null) ctx.state.namedProject = { id: named, row: found.project };
      const row = found.token;
      principal =
        row.project_id === null
          ? { scope: 'organisation', role: row.role, tokenId: row.id, organisationId: row.organisation_id }
          : { scope: 'project', role: row.role, tokenId: row.id, organisationId: row.organisation_id, projectId: row.project_id };
    }
    ctx.state.principal = principal;
    await next();
  };
}
