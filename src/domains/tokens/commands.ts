import type { Static } from '@sinclair/typebox';
import type { AppEnv } from '../../platform/config/config.js';
import type { Executor } from '../../platform/db/knex.js';
import { principalKey } from '../../access/auth/principal.js';
import { hashSecret, newSecret } from '../../platform/crypto/secrets.js';
import { NotFoundError, ValidationError } from '../../platform/http/errors.js';
import { apiTokenPrefix } from '../projects/keys.js';
import type { OrganisationScope } from '../../access/tenancy/scope.js';
import { findVisibleProject } from '../../access/tenancy/visible.js';
import { insertToken, listTokens, revokeToken, type ApiTokenRow } from './repository.js';
import type { Page } from '../../platform/http/pagination.js';
import type { CreateTokenBody } from './schemas.js';

/**
 * A new organisation- or project-scoped token. Only the operator and organisation tokens reach
 * this (project tokens do not see the organisation), so nobody can mint above their own scope.
 */
export async function createToken(
  db: Executor,
  scope: OrganisationScope,
  env: AppEnv,
  body: Static<typeof CreateTokenBody>,
): Promise<{ row: ApiTokenRow; token: string }> {
  const { organisationId, principal } = scope;
  return db.transaction(async (tx) => {
    const projectId = body.projectId ?? null;
    if (body.role === 'signer' && projectId === null)
      throw new ValidationError('A signer token acts for one project: give its projectId.', [
        { in: 'body', path: '/projectId', message: 'is required for the signer role' },
      ]);
    if (projectId !== null) {
      const project = await findVisibleProject(tx, principal, projectId);
      if (!project || project.organisation_id !== organisationId) throw new NotFoundError('No such project in this organisation.');
    }
    const token = newSecret(apiTokenPrefix(env));
    const row = await insertToken(tx, {
      organisationId,
      projectId,
      name: body.name,
      role: body.role,
      hash: hashSecret(token),
      createdBy: principalKey(principal),
    });
    return { row, token };
  });
}

export async function listOrganisationTokens(db: Executor, scope: OrganisationScope, page: Page, showRevoked: boolean): Promise<ApiTokenRow[]> {
  return listTokens(db, scope.organisationId, page, showRevoked);
}

export async function revokeOrganisationToken(db: Executor, scope: OrganisationScope, tokenId: number): Promise<void> {
  if (!(await revokeToken(db, scope.organisationId, tokenId))) throw new NotFoundError('No such token.');
}
