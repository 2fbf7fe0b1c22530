import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import type { Knex } from 'knex';
import { loggableOrigin, type WarnOncePer } from '../../platform/logging/once.js';
import type { Config } from '../../platform/config/config.js';
import type { SecretBox } from '../../platform/crypto/secrets.js';
import { OutboundError, outboundRequest } from '../../platform/net/outbound.js';
import { signatureHeaders } from './signing.js';
import type { ClaimedRow, Outcome, OutboxRow } from '../../platform/outbox/repository.js';
import { subscriptionSecretAad, walletSecretAad } from './secrets.js';
import { walletWebhookOf } from '../projects/commands.js';
import {
  disableSubscription,
  findSubscriptionById,
  markSubscriptionFailing,
  markSubscriptionHealthy,
  settleStream,
  streamCursor,
  type SubscriptionRow,
} from './repository.js';

export const RESPONSE_BODY_LIMIT = 16 * 1024;

/**
 * Deliveries reuse connections to an endpoint (no TCP and TLS handshake per attempt). Sockets
 * idle for 4 s are closed, below the 5 s keep-alive of common servers, so a reused socket is
 * rarely one the endpoint has just closed. The per-endpoint concurrency of the relay bounds how
 * many sockets one endpoint gets.
 */
const deliveryAgents = {
  http: new HttpAgent({ keepAlive: true, timeout: 4_000, scheduling: 'lifo' }),
  https: new HttpsAgent({ keepAlive: true, timeout: 4_000, scheduling: 'lifo' }),
};
const USER_AGENT = 'custody-service-webhooks/1';

export interface DeliveryDeps {
  db: Knex;
  config: Config;
  secretBox: SecretBox;
  now: () => number;
  /** Failed attempts, at warn, once per receiver and cause per minute. */
  failures?: WarnOncePer;
}

/** The delay before attempt `n` (0-based) of the schedule, ±20% jitter; null past its end. */
export function scheduledDelay(schedule: number[], attempt: number, random: () => number = Math.random): number | null {
  const base = schedule[attempt];
  if (base === undefined) return null;
  return Math.round(base * (0.8 + 0.4 * random()));
}

// Parsed endpoint URLs (bounded): a subscription's URL is parsed once, not per attempt.
const urls = new Map<string, URL>();
function parsedUrl(text: string): URL {
  let url = urls.get(text);
  if (!url) {
    url = new URL(text);
    if (urls.size >= 1_000) urls.clear();
    urls.set(text, url);
  }
  return url;
}

/** The host (and port) a URL's attempts go to, for the relay's per-host bound; undefined when it does not parse. */
export function hostOf(url: string | null | undefined): string | undefined {
  if (!url) return undefined;
  try {
    return parsedUrl(url).host;
  } catch {
    return undefined;
  }
}

interface Attempt {
  ok: boolean;
  status: number | null;
  error: string | null;
  responseBody: string | null;
  /** From a 429/503 answer's Retry-After, in ms. */
  retryAfterMs: number | null;
}

/** Retry-After as seconds or an HTTP date, in ms from now; null when absent or unreadable. */
export function retryAfterMs(value: string | string[] | undefined, now: number): number | null {
  const text = Array.isArray(value) ? value[0] : value;
  if (text === undefined) return null;
  if (/^\d{1,10}$/.test(text.trim())) return Number(text.trim()) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

/** One signed POST of the stored bytes (section 8: the exact bytes, a fresh timestamp, one signature per live secret). */
async function attempt(row: OutboxRow, url: string, secrets: string[], deps: DeliveryDeps): Promise<Attempt> {
  const now = deps.now();
  const body = row.payload ?? '';
  const headers = { 'content-type': 'application/json', ...signatureHeaders(row.message_id, Math.floor(now / 1000), body, secrets) };
  try {
    const res = await outboundRequest(
      parsedUrl(url),
      { method: 'POST', headers, body },
      {
        policy: { allow: deps.config.egressAllowPrivate },
        connectTimeoutMs: deps.config.webhookConnectTimeoutMs,
        timeoutMs: deps.config.webhookTimeoutMs,
        maxBodyBytes: RESPONSE_BODY_LIMIT,
        rejectRedirects: false,
        userAgent: USER_AGENT,
        agents: deliveryAgents,
        extraCa: deps.config.webhookCa,
      },
    );
    const responseBody = res.body.toString('utf8');
    const ok = res.status >= 200 && res.status < 300;
    const honoured = res.status === 429 || res.status === 503 ? retryAfterMs(res.headers['retry-after'], deps.now()) : null;
    if (!ok) warnFailed(deps, row, url, 'http_status', `answered HTTP ${res.status}`, res.status);
    return { ok, status: res.status, error: ok ? null : 'http_status', responseBody, retryAfterMs: honoured };
  } catch (err) {
    const kind = err instanceof OutboundError ? err.kind : 'connection';
    warnFailed(deps, row, url, kind, err instanceof Error ? err.message : kind, null);
    return { ok: false, status: null, error: kind === 'redirect' || kind === 'too_large' ? 'http_status' : kind, responseBody: null, retryAfterMs: null };
  }
}

/** The operator's view of a failed attempt: which receiver, why; never the payload, the URL's path or a secret. */
function warnFailed(deps: DeliveryDeps, row: OutboxRow, url: string, kind: string, reason: string, status: number | null): void {
  const target = loggableOrigin(url);
  deps.failures?.warn(
    `delivery:${row.delivery_kind ?? ''}:${row.subscription_id ?? -row.project_id}:${target}:${kind}:${status ?? ''}`,
    { target, kind, reason, ...(status === null ? {} : { status }), projectId: row.project_id, subscriptionId: row.subscription_id, deliveryId: row.id },
    `webhook delivery failed: ${target} (${kind})`,
  );
}

const attemptFields = (a: Attempt, url: string): Partial<Outcome> => ({ lastStatus: a.status, lastError: a.error, lastResponseBody: a.responseBody, url });

/**
 * One attempt of a wallet-created webhook (docs/interface.md section 6): the stored bytes, signed
 * afresh, to the project's current wallet webhook URL. Any non-2xx, timeout or refused
 * connection marks it failed at once; background retries follow the schedule when enabled.
 */
export async function deliverWalletWebhook(row: OutboxRow, deps: DeliveryDeps): Promise<Outcome> {
  const project = await walletWebhookOf(deps.db, row.project_id);
  const url = project?.wallet_webhook_url;
  if (!project || !url || project.deleted_at) {
    return { status: 'done', retryInMs: null, attempted: false, lastError: 'no wallet webhook URL any more' };
  }
  const result = await attempt(
    row,
    url,
    liveSecrets(
      deps.secretBox,
      walletSecretAad(project.id),
      project.wallet_webhook_secret_enc,
      project.wallet_webhook_secret_prev_enc,
      project.wallet_webhook_secret_prev_expires_at,
      deps.now(),
    ),
    deps,
  );
  if (result.ok) return { status: 'done', retryInMs: null, attempted: true, ...attemptFields(result, url) };
  const delay =
    deps.config.walletWebhookBackgroundRetry && !row.manual_retry ? nextDelay(deps.config.webhookRetrySchedule, row.attempts + 1, result.retryAfterMs) : null;
  return { status: 'failed', retryInMs: delay, attempted: true, ...attemptFields(result, url) };
}

/** Retry-After is honoured up to this (or the schedule's longest step, if longer): an endpoint cannot park a delivery for ever. */
const RETRY_AFTER_CAP_MS = 86_400_000;

/**
 * The delay before the next attempt: the schedule's (with jitter), or later when the endpoint
 * asked so with Retry-After (capped); the number of attempts stays the schedule's. Null: no
 * attempts left.
 */
export function nextDelay(schedule: number[], attempt: number, retryAfter: number | null): number | null {
  const scheduled = scheduledDelay(schedule, attempt);
  if (scheduled === null) return null;
  if (retryAfter === null) return scheduled;
  return Math.max(scheduled, Math.min(retryAfter, Math.max(RETRY_AFTER_CAP_MS, ...schedule)));
}

// Opened secrets by their ciphertext (a rotation changes the ciphertext, so it is never stale); bounded.
const opened = new Map<string, string>();
function openCached(box: SecretBox, sealed: string, aad: string): string {
  const key = `${aad}\n${sealed}`;
  let secret = opened.get(key);
  if (secret === undefined) {
    secret = box.open(sealed, aad);
    if (opened.size >= 1_000) opened.clear();
    opened.set(key, secret);
  }
  return secret;
}

/**
 * The live signing secrets of a webhook (a project's wallet webhook or a subscription): the
 * current one, and the previous one during its 24 h overlap after a rotation.
 */
function liveSecrets(box: SecretBox, aad: string, current: string, previous: string | null, previousExpiresAt: Date | null, now: number): string[] {
  const secrets = [openCached(box, current, aad)];
  if (previous && previousExpiresAt && previousExpiresAt.getTime() > now) secrets.push(openCached(box, previous, aad));
  return secrets;
}

/**
 * One attempt of a subscription delivery (section 8): to the subscription's current URL; retried
 * on the schedule (Retry-After honoured), failed after the last attempt; `410` disables the
 * subscription at once, and so does a run of failures as long as WEBHOOK_DISABLE_AFTER_MS.
 * A deleted subscription's deliveries are dropped; a disabled one's are failed unsent, so that
 * they can be retried once it is enabled again.
 */
export async function deliverSubscriptionWebhook(row: ClaimedRow, deps: DeliveryDeps): Promise<Outcome> {
  // The job kind's `prepare` loaded the subscription with the claim; other callers look it up.
  const sub =
    row.context !== undefined
      ? (row.context as SubscriptionRow | null)
      : row.subscription_id === null
        ? undefined
        : await findSubscriptionById(deps.db, row.subscription_id);
  if (!sub || sub.deleted_at) return { status: 'done', retryInMs: null, attempted: false };
  if (sub.disabled_at) return { status: 'failed', retryInMs: null, attempted: false, lastError: 'subscription_disabled' };
  const order = orderOf(row.payload);
  if (order) {
    // An earlier event of its stream that this subscription receives is not settled yet: this one waits its turn, no attempt counted.
    // A subscription made after the stream began may never have had the earlier events: only one older than the stream waits.
    const before = sub.created_at.getTime() <= order.startedAt ? previousFor(order, sub.events) : 0;
    if (before > 0 && (await streamCursor(deps.db, sub.id, order.stream)) < before)
      return { status: 'pending', retryInMs: orderWaitMs(deps.now() - row.created_at.getTime()), attempted: false };
  }
  const outcome = await attemptSubscription(row, sub, deps);
  if (order && outcome.status !== 'pending') await settleStream(deps.db, sub.id, order.stream, order.sequence);
  return outcome;
}

/**
 * How long a delivery waiting for an earlier event of its stream waits before it looks again:
 * 250 ms at first (the earlier one is usually in flight), then a quarter of its age, up to 1 s (the
 * earlier one is being retried on its schedule: a stream held up for hours by a failing endpoint is
 * looked at once a second, not four times, and goes on within a second of the endpoint's recovery).
 */
export const orderWaitMs = (ageMs: number): number => Math.min(1_000, Math.max(250, Math.round(ageMs / 4)));

/** A stream's place of an event: `data.stream`, `data.sequence` (1, 2, …), `data.events` (the stream's event types so far) and `data.createdAt` (when the stream began). */
interface Order {
  stream: string;
  sequence: number;
  events: string[];
  startedAt: number;
}

/** The order an event's envelope declares, if it belongs to a stream (a transaction's status changes). */
export function orderOf(payload: string | null): Order | undefined {
  if (payload === null || !payload.includes('"stream"')) return undefined;
  let data: unknown;
  try {
    data = (JSON.parse(payload) as { data?: unknown }).data;
  } catch {
    return undefined;
  }
  const d = data as Partial<Record<'stream' | 'sequence' | 'events' | 'createdAt', unknown>> | null;
  if (typeof d !== 'object' || d === null || typeof d.stream !== 'string' || typeof d.sequence !== 'number' || !Array.isArray(d.events)) return undefined;
  if (d.events.length !== d.sequence || !d.events.every((e): e is string => typeof e === 'string')) return undefined;
  const startedAt = typeof d.createdAt === 'string' ? Date.parse(d.createdAt) : Number.NaN;
  return { stream: d.stream, sequence: d.sequence, events: d.events, startedAt: Number.isNaN(startedAt) ? 0 : startedAt };
}

/** The sequence number of the newest earlier event of the stream that a subscription naming `events` receives (0: none). */
export function previousFor(order: Order, events: readonly string[]): number {
  for (let k = order.sequence - 1; k >= 1; k--) {
    const type = order.events[k - 1];
    if (type !== undefined && (events.includes('*') || events.includes(type))) return k;
  }
  return 0;
}

/** One attempt of a subscription delivery, once its turn has come. */
async function attemptSubscription(row: ClaimedRow, sub: SubscriptionRow, deps: DeliveryDeps): Promise<Outcome> {
  const result = await attempt(
    row,
    sub.url,
    liveSecrets(deps.secretBox, subscriptionSecretAad(sub.id), sub.secret_enc, sub.secret_prev_enc, sub.secret_prev_expires_at, deps.now()),
    deps,
  );
  const fields = attemptFields(result, sub.url);
  if (result.ok) {
    if (sub.failing_since !== null) await markSubscriptionHealthy(deps.db, sub.id);
    return { status: 'done', retryInMs: null, attempted: true, ...fields };
  }
  if (result.status === 410) {
    await disableSubscription(deps.db, sub.id, 'the endpoint answered 410 Gone');
    return { status: 'failed', retryInMs: null, attempted: true, ...fields };
  }
  const disabled = await markSubscriptionFailing(deps.db, sub.id, deps.now(), deps.config.webhookDisableAfterMs);
  const delay = disabled || row.manual_retry ? null : nextDelay(deps.config.webhookRetrySchedule, row.attempts + 1, result.retryAfterMs);
  return delay === null
    ? { status: 'failed', retryInMs: null, attempted: true, ...fields }
    : { status: 'pending', retryInMs: delay, attempted: true, ...fields };
}
