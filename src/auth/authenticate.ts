import type { Knex } from 'knex';
import { UnauthorizedError } from '../errors.js';
import { constantTimeEqual, hashSecret } from '../crypto/secrets.js';
import { findLiveTokenByHash } from '../tokens/repository.js';
import type { AppMiddleware } from '../http/context.js';
import type { Principal } from './principal.js';

const BEARER = /^Bearer ([\x21-\x7e]{1,512})$/i;

/**
 * Resolves `Authorization: Bearer <API token>` to a principal. The operator token is compared by
 * hash in constant time; other tokens are looked up by their SHA-256 (the table holds only hashes).
 */
export function authenticate(db: Knex, operatorTokenHash: Buffer): AppMiddleware {
  return async (ctx, next) => {
    const match = BEARER.exec(ctx.get('Authorization'));
    if (!match?.[1]) throw new UnauthorizedError();
    const hash = hashSecret(match[1]);
    let principal: Principal;
    if (constantTimeEqual(hash, operatorTokenHash)) {
      principal = { scope: 'operator', role: 'admin' };
    } else {
      const row = await findLiveTokenByHash(db, hash);
      if (!row) throw new UnauthorizedError('The API token is unknown or revoked.');
      principal =
        row.project_id === null
          ? { scope: 'organisation', role: row.role, tokenId: row.id, organisationId: row.organisation_id }
          : { scope: 'project', role: row.role, tokenId: row.id, organisationId: row.organisation_id, projectId: row.project_id };
    }
    ctx.state.principal = principal;
    await next();
  };
}
