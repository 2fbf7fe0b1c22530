import { randomUUID } from 'node:crypto';
import type { Executor, Knex } from '../db/knex.js';
import { notifyOutbox } from '../outbox/repository.js';
import { mapInTurns } from '../turns.js';
import type { EventType } from './catalogue.js';

export interface NewEvent {
  type: EventType;
  data: unknown;
  walletId?: number;
}

export const newEventId = (): string => `evt_${randomUUID().replace(/-/g, '')}`;

/**
 * Records events in the outbox inside the caller's transaction, so they commit (or vanish) with
 * the change they describe. Each event's envelope (section 9) is serialised once, here; the events
 * of one change go into one outbox row as a JSON array of those envelopes (one row for a
 * 1,000-item issue instead of 3,000). The fan-out splits it with `json_array_elements`, which
 * returns each element's original text, so every delivery sends exactly these bytes.
 */
export async function recordEvents(tx: Executor, projectId: number, events: readonly NewEvent[], at: Date): Promise<void> {
  if (events.length === 0) return;
  await tx.raw(`INSERT INTO ${EVENT_ROW} VALUES (${EVENT_VALUES})`, (await outboxRowOf(projectId, events, at)) as Knex.RawBinding[]);
  await notifyOutbox(tx);
}

/** The outbox row's values for `events` (not empty): their envelopes serialised once, in turns; the event type second (`bundle` for several). */
export async function outboxRowOf(projectId: number, events: readonly NewEvent[], at: Date): Promise<unknown[]> {
  const createdAt = at.toISOString();
  const envelopes = await mapInTurns(events, (e) => JSON.stringify({ id: newEventId(), type: e.type, createdAt, projectId, data: e.data }));
  const single = events.length === 1 ? events[0] : undefined;
  return [
    projectId,
    single ? single.type : 'bundle',
    `[${envelopes.join(',')}]`,
    envelopes.length,
    `evb_${randomUUID().replace(/-/g, '')}`,
    single?.walletId ?? null,
  ];
}

/** An event row's columns; its values are outboxRowOf's, in this order. */
const EVENT_ROW = 'outbox (project_id, kind, event, payload, event_count, message_id, wallet_id, next_attempt_at)';
const EVENT_VALUES = "?::bigint, 'event', ?, ?, ?, ?, ?, NULL";

/** The columns of outboxRowOf's values, in its order, as a source of SubscribedEventsFrom names them. */
export const EVENT_SOURCE_COLUMNS = ['project_id', 'event', 'payload', 'event_count', 'message_id', 'wallet_id'] as const;

/**
 * SQL inserting the outbox row of each row of `source` (a CTE with EVENT_SOURCE_COLUMNS, values as
 * outboxRowOf makes them) only if a subscription of its project names its type (or `*`),
 * returning a row for each it inserted; for a statement that composes it. A project that
 * subscribes to nothing costs the relay nothing.
 */
export const subscribedEventsFrom = (source: string): string =>
  `INSERT INTO ${EVENT_ROW} SELECT e.project_id, 'event', ${EVENT_SOURCE_COLUMNS.slice(1)
    .map((c) => `e.${c}`)
    .join(', ')}, NULL FROM ${source} e
    WHERE EXISTS (SELECT 1 FROM webhook_subscriptions s
                   WHERE s.project_id = e.project_id AND s.deleted_at IS NULL AND (s.events @> ARRAY[e.event] OR s.events @> ARRAY['*']::text[]))
   RETURNING 1`;
