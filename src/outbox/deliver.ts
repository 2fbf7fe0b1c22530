import type { Knex } from 'knex';
import type { Config } from '../config.js';
import type { SecretBox } from '../crypto/secrets.js';
import { OutboundError, outboundRequest } from '../net/outbound.js';
import { walletSecretAad } from '../projects/commands.js';
import { findProjectById, type ProjectRow } from '../projects/repository.js';
import { signatureHeaders } from '../webhooks/signing.js';
import type { Outcome, OutboxRow } from './repository.js';

export const RESPONSE_BODY_LIMIT = 16 * 1024;
const USER_AGENT = 'custody-service-webhooks/1';

export interface DeliveryDeps {
  db: Knex;
  config: Config;
  secretBox: SecretBox;
  now: () => number;
}

/** The delay before attempt `n` (0-based) of the schedule, ±20% jitter; null past its end. */
export function scheduledDelay(schedule: number[], attempt: number, random: () => number = Math.random): number | null {
  const base = schedule[attempt];
  if (base === undefined) return null;
  return Math.round(base * (0.8 + 0.4 * random()));
}

/** The project's live signing secrets: the current one, and the previous one during its 24 h overlap. */
function walletSecrets(project: ProjectRow, box: SecretBox, now: number): string[] {
  const aad = walletSecretAad(project.id);
  const secrets = [box.open(project.wallet_webhook_secret_enc, aad)];
  if (project.wallet_webhook_secret_prev_enc && project.wallet_webhook_secret_prev_expires_at && project.wallet_webhook_secret_prev_expires_at.getTime() > now) {
    secrets.push(box.open(project.wallet_webhook_secret_prev_enc, aad));
  }
  return secrets;
}

/**
 * One attempt of a wallet-created webhook (CONTRACT.md section 6): the stored bytes, signed
 * afresh, to the project's current wallet webhook URL. Any non-2xx, timeout or refused
 * connection marks it failed at once; background retries follow the schedule when enabled.
 */
export async function deliverWalletWebhook(row: OutboxRow, deps: DeliveryDeps): Promise<Outcome> {
  const project = await findProjectById(deps.db, row.project_id);
  const url = project?.wallet_webhook_url;
  if (!project || !url || project.deleted_at) {
    return { status: 'done', nextAttemptAt: null, attempted: false, lastError: 'no wallet webhook URL any more' };
  }
  const now = deps.now();
  const body = row.payload ?? '';
  const headers = { 'content-type': 'application/json', ...signatureHeaders(row.message_id, Math.floor(now / 1000), body, walletSecrets(project, deps.secretBox, now)) };
  const failed = (fields: Partial<Outcome>): Outcome => {
    const delay = deps.config.walletWebhookBackgroundRetry ? scheduledDelay(deps.config.webhookRetrySchedule, row.attempts + 1) : null;
    return { status: 'failed', nextAttemptAt: delay === null ? null : new Date(deps.now() + delay), attempted: true, url, ...fields };
  };
  try {
    const res = await outboundRequest(new URL(url), { method: 'POST', headers, body }, {
      policy: { restrict: deps.config.appEnv === 'production', allow: deps.config.egressAllowPrivate },
      connectTimeoutMs: deps.config.webhookConnectTimeoutMs,
      timeoutMs: deps.config.webhookTimeoutMs,
      maxBodyBytes: RESPONSE_BODY_LIMIT,
      rejectRedirects: false,
      userAgent: USER_AGENT,
    });
    const responseBody = res.body.toString('utf8');
    if (res.status >= 200 && res.status < 300) {
      return { status: 'done', nextAttemptAt: null, attempted: true, lastStatus: res.status, lastError: null, lastResponseBody: responseBody, url };
    }
    return failed({ lastStatus: res.status, lastError: 'http_status', lastResponseBody: responseBody });
  } catch (err) {
    const kind = err instanceof OutboundError ? err.kind : 'connection';
    return failed({ lastStatus: null, lastError: kind === 'redirect' || kind === 'too_large' ? 'http_status' : kind, lastResponseBody: null });
  }
}
