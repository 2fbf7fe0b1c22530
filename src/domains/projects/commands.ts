import type { Clock } from '../../platform/runtime/clock.js';
import type { Static } from '@sinclair/typebox';
import type { AppEnv } from '../../platform/config/config.js';
import type { Executor } from '../../platform/db/knex.js';
import { hashSecret, type SecretBox } from '../../platform/crypto/secrets.js';
import { NotFoundError, ValidationError, type FieldProblem } from '../../platform/http/errors.js';
import { bindingOf, checkIssuerBinding, tokenClaimOf } from './issuer-binding.js';
import { issuerProblem, webhookSecretProblem, webhookUrlProblem } from '../../platform/net/url-rules.js';
import { targetProblem, type EgressPolicy } from '../../platform/net/egress.js';
import type { OrganisationScope, ProjectScope } from '../../access/tenancy/scope.js';
import { newProjectKey, newWebhookSecret } from './keys.js';
import { walletSecretAad } from '../webhooks/secrets.js';
import type { Page } from '../../platform/http/pagination.js';
import {
  expireProjectKeys,
  findWalletWebhook,
  listProjects,
  lockProject,
  insertProject,
  insertProjectKey,
  nextProjectId,
  updateProject,
  type ProjectRow,
  type WalletWebhook,
  findProjectById,
} from './repository.js';
import type { CreateProjectBody, UpdateProjectBody } from './schemas.js';

const PREVIOUS_SECRET_OVERLAP_S = 86_400;

const notFound = () => new NotFoundError('No such project.');

/** URL rules, and the egress rule on the issuer and the wallet webhook URL, as subscriptions have it. */
async function checkFields(deps: ProjectDeps, body: { issuer?: string; walletWebhookUrl?: string | null; walletWebhookSecret?: string }): Promise<void> {
  const problems: FieldProblem[] = [];
  const add = (path: string, message: string | undefined) => message && problems.push({ in: 'body', path, message });
  if (body.issuer !== undefined) add('/issuer', issuerProblem(body.issuer) ?? (await targetProblem(deps.egress, new URL(body.issuer).hostname)));
  if (typeof body.walletWebhookUrl === 'string') {
    const url = body.walletWebhookUrl;
    add('/walletWebhookUrl', webhookUrlProblem(url, deps.env) ?? (await targetProblem(deps.egress, new URL(url).hostname)));
  }
  if (body.walletWebhookSecret !== undefined) add('/walletWebhookSecret', webhookSecretProblem(body.walletWebhookSecret));
  if (problems.length > 0) throw new ValidationError('The request is invalid; see errors.', problems);
}

export interface ProjectDeps {
  env: AppEnv;
  egress: EgressPolicy;
}

export interface CreatedProject {
  project: ProjectRow;
  projectKey: string;
  /** Only when the service generated it: shown once. */
  generatedSecret: string | undefined;
}

export async function createProject(
  db: Executor,
  scope: OrganisationScope,
  deps: ProjectDeps & { secretBox: SecretBox },
  body: Static<typeof CreateProjectBody>,
): Promise<CreatedProject> {
  // Names are resolved before the transaction: no lock is held over a DNS look-up.
  await checkFields(deps, body);
  return db.transaction(async (tx) => {
    const id = await nextProjectId(tx);
    const generatedSecret = body.walletWebhookSecret === undefined ? newWebhookSecret() : undefined;
    await checkIssuerBinding(tx, {
      id: undefined,
      organisationId: scope.organisationId,
      issuer: body.issuer,
      claim: bindingOf(body.tokenClaim ?? null, body.audience ?? null),
    });
    const project = await insertProject(tx, {
      id,
      organisation_id: scope.organisationId,
      name: body.name,
      environment: deps.env,
      issuer: body.issuer,
      wallet_webhook_url: body.walletWebhookUrl ?? null,
      wallet_webhook_secret_enc: deps.secretBox.seal(body.walletWebhookSecret ?? generatedSecret ?? '', walletSecretAad(id)),
      wallet_webhook_secret_prev_enc: null,
      wallet_webhook_secret_prev_expires_at: null,
      require_verified_email: body.requireVerifiedEmail ?? true,
      token_claim_name: body.tokenClaim?.name ?? null,
      token_claim_value: body.tokenClaim?.value ?? null,
      audience: body.audience ?? null,
    });
    const projectKey = newProjectKey(deps.env);
    await insertProjectKey(tx, id, hashSecret(projectKey));
    return { project, projectKey, generatedSecret };
  });
}

/** Locks the scope's project for a change; one deleted since the scope was resolved is gone (404). */
async function lockLive(tx: Executor, scope: ProjectScope): Promise<ProjectRow> {
  const project = await lockProject(tx, scope.projectId);
  if (!project || project.deleted_at !== null) throw notFound();
  return project;
}

export async function changeProject(db: Executor, scope: ProjectScope, deps: ProjectDeps, body: Static<typeof UpdateProjectBody>): Promise<ProjectRow> {
  await checkFields(deps, body);
  return db.transaction(async (tx) => {
    const current = await lockLive(tx, scope);
    const values: Partial<ProjectRow> = {};
    if (body.issuer !== undefined || body.tokenClaim !== undefined || body.audience !== undefined) {
      const claim = body.tokenClaim !== undefined ? body.tokenClaim : tokenClaimOf(current);
      const audience = body.audience !== undefined ? body.audience : current.audience;
      await checkIssuerBinding(tx, {
        id: current.id,
        organisationId: current.organisation_id,
        issuer: body.issuer ?? current.issuer,
        claim: bindingOf(claim, audience),
      });
      values.token_claim_name = claim?.name ?? null;
      values.token_claim_value = claim?.value ?? null;
      values.audience = audience;
    }
    if (body.name !== undefined) values.name = body.name;
    if (body.issuer !== undefined) values.issuer = body.issuer;
    if (body.walletWebhookUrl !== undefined) values.wallet_webhook_url = body.walletWebhookUrl;
    if (body.requireVerifiedEmail !== undefined) values.require_verified_email = body.requireVerifiedEmail;
    return updateProject(tx, scope.projectId, values);
  });
}

export async function deleteProject(db: Executor, scope: ProjectScope, now: Clock): Promise<void> {
  await db.transaction(async (tx) => {
    await lockLive(tx, scope);
    await updateProject(tx, scope.projectId, { deleted_at: new Date(now()) });
  });
}

export async function rotateProjectKey(
  db: Executor,
  scope: ProjectScope,
  env: AppEnv,
  graceSeconds: number,
): Promise<{ projectKey: string; previousKeysExpireAt: Date }> {
  return db.transaction(async (tx) => {
    await lockLive(tx, scope);
    const previousKeysExpireAt = await expireProjectKeys(tx, scope.projectId, graceSeconds);
    const projectKey = newProjectKey(env);
    await insertProjectKey(tx, scope.projectId, hashSecret(projectKey));
    return { projectKey, previousKeysExpireAt };
  });
}

/** A new wallet webhook secret; the old one keeps signing beside it for 24 h (docs/interface.md section 8). */
export async function rotateWalletWebhookSecret(
  db: Executor,
  scope: ProjectScope,
  secretBox: SecretBox,
  now: Clock,
): Promise<{ walletWebhookSecret: string; previousSecretExpiresAt: Date }> {
  const id = scope.projectId;
  return db.transaction(async (tx) => {
    const project = await lockLive(tx, scope);
    const walletWebhookSecret = newWebhookSecret();
    const previousSecretExpiresAt = new Date(now() + PREVIOUS_SECRET_OVERLAP_S * 1000);
    await updateProject(tx, id, {
      wallet_webhook_secret_enc: secretBox.seal(walletWebhookSecret, walletSecretAad(id)),
      wallet_webhook_secret_prev_enc: project.wallet_webhook_secret_enc,
      wallet_webhook_secret_prev_expires_at: previousSecretExpiresAt,
    });
    return { walletWebhookSecret, previousSecretExpiresAt };
  });
}

export async function listOrganisationProjects(db: Executor, scope: OrganisationScope, page: Page, showDeleted: boolean): Promise<ProjectRow[]> {
  return listProjects(db, scope.organisationId, page, showDeleted);
}

/** Where a project's wallet-created deliveries go and the secrets that sign them (deleted projects too, so the delivery can tell). */
export async function walletWebhookOf(db: Executor, projectId: number): Promise<WalletWebhook | undefined> {
  return findWalletWebhook(db, projectId);
}

/** A project by id, for background work done on its behalf (a send's fee bump, a gap fill): its identity for the signer. */
export function projectById(db: Executor, projectId: number): Promise<ProjectRow | undefined> {
  return findProjectById(db, projectId);
}
