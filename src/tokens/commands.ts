import type { Static } from '@sinclair/typebox';
import type { AppEnv } from '../config.js';
import type { Executor } from '../db/knex.js';
import { principalKey, type Principal } from '../auth/principal.js';
import { requireAdmin } from '../auth/access.js';
import { hashSecret, newSecret } from '../crypto/secrets.js';
import { NotFoundError } from '../errors.js';
import { findOrganisation } from '../organisations/repository.js';
import { apiTokenPrefix } from '../projects/keys.js';
import { findProject } from '../projects/repository.js';
import type { Page } from '../http/pagination.js';
import { insertToken, listTokens, revokeToken, type ApiTokenRow } from './repository.js';
import type { CreateTokenBody } from './schemas.js';

async function requireOrganisation(db: Executor, p: Principal, organisationId: number): Promise<void> {
  if (!(await findOrganisation(db, p, organisationId, { includeDeleted: false }))) throw new NotFoundError('No such organisation.');
}

/**
 * A new organisation- or project-scoped token. Only the operator and organisation tokens reach
 * this (project tokens do not see the organisation), so nobody can mint above their own scope.
 */
export async function createToken(
  db: Executor,
  p: Principal,
  env: AppEnv,
  organisationId: number,
  body: Static<typeof CreateTokenBody>,
): Promise<{ row: ApiTokenRow; token: string }> {
  return db.transaction(async (tx) => {
    await requireOrganisation(tx, p, organisationId);
    requireAdmin(p);
    const projectId = body.projectId ?? null;
    if (projectId !== null) {
      const project = await findProject(tx, p, projectId);
      if (!project || project.organisation_id !== organisationId) throw new NotFoundError('No such project in this organisation.');
    }
    const token = newSecret(apiTokenPrefix(env));
    const row = await insertToken(tx, {
      organisationId,
      projectId,
      name: body.name,
      role: body.role,
      hash: hashSecret(token),
      createdBy: principalKey(p),
    });
    return { row, token };
  });
}

export async function listOrganisationTokens(db: Executor, p: Principal, organisationId: number, page: Page, showRevoked: boolean): Promise<ApiTokenRow[]> {
  await requireOrganisation(db, p, organisationId);
  return listTokens(db, organisationId, page, showRevoked);
}

export async function revokeOrganisationToken(db: Executor, p: Principal, organisationId: number, tokenId: number): Promise<void> {
  await db.transaction(async (tx) => {
    await requireOrganisation(tx, p, organisationId);
    requireAdmin(p);
    if (!(await revokeToken(tx, organisationId, tokenId))) throw new NotFoundError('No such token.');
  });
}
