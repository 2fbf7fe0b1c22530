import type { Clock } from '../../platform/runtime/clock.js';
import type { Static } from '@sinclair/typebox';
import type { AppEnv } from '../../platform/config/config.js';
import type { SecretBox } from '../../platform/crypto/secrets.js';
import type { Executor } from '../../platform/db/knex.js';
import { ConflictError, NotFoundError, ValidationError, type FieldProblem } from '../../platform/http/errors.js';
import { newEventId } from './record.js';
import type { Page } from '../../platform/http/pagination.js';
import { targetProblem, type EgressPolicy } from '../../platform/net/egress.js';
import { webhookSecretProblem, webhookUrlProblem } from '../../platform/net/url-rules.js';
import { dueForManualRetry, enqueue, failedDeliveriesOf as failedDeliveriesOfProject, lockDelivery, type OutboxRow } from '../../platform/outbox/repository.js';
import { newWebhookSecret } from '../projects/keys.js';
import type { ProjectRow } from '../projects/repository.js';
import type { ProjectScope } from '../../access/tenancy/scope.js';
import { subscriptionSecretAad } from './secrets.js';
import { hostOf } from './deliver.js';
import {
  countLiveSubscriptionsLocked,
  findSubscription,
  insertSubscription,
  listSubscriptions,
  nextSubscriptionId,
  updateSubscription,
  type SubscriptionRow,
} from './repository.js';
import type { CreateWebhookBody, UpdateWebhookBody } from './schemas.js';

export interface WebhookDeps {
  env: AppEnv;
  egress: EgressPolicy;
  secretBox: SecretBox;
  /** Live subscriptions a project may have (WEBHOOK_SUBSCRIPTIONS_PER_PROJECT): each one multiplies its events' deliveries. */
  maxSubscriptions: number;
}

const PREVIOUS_SECRET_OVERLAP_MS = 86_400_000;

async function subscriptionFor(db: Executor, project: ProjectRow, id: number, options: { includeDeleted?: boolean; forUpdate?: boolean } = {}) {
  const sub = await findSubscription(db, project.id, id, options);
  if (!sub) throw new NotFoundError('No such webhook.');
  return sub;
}

/** URL and secret rules of section 8, and in production the SSRF rule at creation. */
async function checkFields(deps: WebhookDeps, body: { url?: string | undefined; secret?: string | undefined }): Promise<void> {
  const problems: FieldProblem[] = [];
  const add = (path: string, message: string | undefined) => message && problems.push({ in: 'body', path, message });
  if (body.url !== undefined) {
    const urlProblem = webhookUrlProblem(body.url, deps.env);
    add('/url', urlProblem ?? (await targetProblem(deps.egress, new URL(body.url).hostname)));
  }
  if (body.secret !== undefined) add('/secret', webhookSecretProblem(body.secret));
  if (problems.length > 0) throw new ValidationError('The request is invalid; see errors.', problems);
}

export async function createSubscription(
  db: Executor,
  scope: ProjectScope,
  deps: WebhookDeps,
  body: Static<typeof CreateWebhookBody>,
): Promise<{ subscription: SubscriptionRow; generatedSecret: string | undefined }> {
  const { project } = scope;
  await checkFields(deps, body);
  return db.transaction(async (tx) => {
    if ((await countLiveSubscriptionsLocked(tx, project.id)) >= deps.maxSubscriptions) {
      throw new ConflictError(
        `This project has ${deps.maxSubscriptions} webhook subscriptions, the most it may have; delete one, or name more events in one.`,
        'subscription_limit',
      );
    }
    const id = await nextSubscriptionId(tx);
    const generatedSecret = body.secret === undefined ? newWebhookSecret() : undefined;
    const subscription = await insertSubscription(tx, {
      id,
      project_id: project.id,
      url: body.url,
      events: body.events,
      secret_enc: deps.secretBox.seal(body.secret ?? generatedSecret ?? '', subscriptionSecretAad(id)),
    });
    return { subscription, generatedSecret };
  });
}

export async function listProjectSubscriptions(db: Executor, scope: ProjectScope, page: Page, showDeleted: boolean): Promise<SubscriptionRow[]> {
  const { project } = scope;
  return listSubscriptions(db, project.id, page, showDeleted);
}

export async function getSubscription(db: Executor, scope: ProjectScope, id: number): Promise<SubscriptionRow> {
  return subscriptionFor(db, scope.project, id, { includeDeleted: true });
}

/** PUT: new url and/or events; any PUT re-enables a disabled subscription and forgets its failures. */
export async function changeSubscription(
  db: Executor,
  scope: ProjectScope,
  deps: WebhookDeps,
  id: number,
  body: Static<typeof UpdateWebhookBody>,
): Promise<SubscriptionRow> {
  const { project } = scope;
  await checkFields(deps, body);
  return db.transaction(async (tx) => {
    await subscriptionFor(tx, project, id, { forUpdate: true });
    return updateSubscription(tx, id, {
      ...(body.url === undefined ? {} : { url: body.url }),
      ...(body.events === undefined ? {} : { events: body.events }),
      disabled_at: null,
      disabled_reason: null,
      failing_since: null,
    });
  });
}

/** Soft delete: no more deliveries (pending ones are dropped when their turn comes). */
export async function deleteSubscription(db: Executor, scope: ProjectScope, id: number, now: Clock): Promise<void> {
  const { project } = scope;
  await db.transaction(async (tx) => {
    await subscriptionFor(tx, project, id, { forUpdate: true });
    await updateSubscription(tx, id, { deleted_at: new Date(now()) });
  });
}

/** A new secret; the previous one keeps signing (as a second signature) for 24 hours. */
export async function rotateSubscriptionSecret(
  db: Executor,
  scope: ProjectScope,
  deps: WebhookDeps,
  id: number,
  body: { secret?: string | undefined },
  nowMs: number,
): Promise<string> {
  const { project } = scope;
  await checkFields(deps, body);
  return db.transaction(async (tx) => {
    const sub = await subscriptionFor(tx, project, id, { forUpdate: true });
    const secret = body.secret ?? newWebhookSecret();
    await updateSubscription(tx, id, {
      secret_enc: deps.secretBox.seal(secret, subscriptionSecretAad(id)),
      secret_prev_enc: sub.secret_enc,
      secret_prev_expires_at: new Date(nowMs + PREVIOUS_SECRET_OVERLAP_MS),
    });
    return secret;
  });
}

/** `POST …/{webhookId}/test`: a `webhook.test` event delivered to this subscription only. */
export async function testSubscription(db: Executor, scope: ProjectScope, id: number, nowMs: number): Promise<{ deliveryId: number; webhookId: string }> {
  const { project } = scope;
  return db.transaction(async (tx) => {
    const sub = await subscriptionFor(tx, project, id);
    const eventId = newEventId();
    const payload = JSON.stringify({ id: eventId, type: 'webhook.test', createdAt: new Date(nowMs).toISOString(), projectId: project.id, data: {} });
    const row = await enqueue(tx, {
      project_id: project.id,
      kind: 'delivery',
      delivery_kind: 'subscription',
      subscription_id: sub.id,
      event: 'webhook.test',
      event_id: eventId,
      url: sub.url,
      payload,
      destination: hostOf(sub.url) ?? null,
    });
    if (!row) throw new Error('test delivery not recorded');
    return { deliveryId: row.id, webhookId: row.message_id };
  });
}

export async function failedDeliveriesOf(db: Executor, scope: ProjectScope, page: Page): Promise<OutboxRow[]> {
  return failedDeliveriesOfProject(db, scope.projectId, page);
}

/** `POST …/failedDeliveries/{id}/retry`: one attempt now; if it fails, the delivery is failed again. */
export async function retryFailedDelivery(db: Executor, scope: ProjectScope, deliveryId: number): Promise<OutboxRow> {
  const { project } = scope;
  return db.transaction(async (tx) => {
    const row = await lockDelivery(tx, project.id, deliveryId);
    if (!row) throw new NotFoundError('No such delivery.');
    if (row.status !== 'failed')
      throw new ConflictError(`The delivery is ${row.status === 'done' ? 'delivered' : 'pending'}; only failed deliveries can be retried.`);
    const updated = await dueForManualRetry(tx, row.id);
    if (!updated) throw new Error('delivery vanished');
    return updated;
  });
}
