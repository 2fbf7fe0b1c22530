import { randomUUID } from 'node:crypto';
import type { Executor } from '../../platform/db/knex.js';
import { eventRowsFrom, insertEventRow, type NewEventRow } from '../../platform/outbox/repository.js';
import { someSubscriptionNames } from './repository.js';
import { mapInTurns } from '../../platform/runtime/turns.js';
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
  await insertEventRow(tx, await eventRowOf(projectId, events, at));
}

/** The outbox row of `events` (not empty): their envelopes serialised once, in turns; the event type (`bundle` for several). */
export async function eventRowOf(projectId: number, events: readonly NewEvent[], at: Date): Promise<NewEventRow> {
  const createdAt = at.toISOString();
  const envelopes = await mapInTurns(events, (e) => JSON.stringify({ id: newEventId(), type: e.type, createdAt, projectId, data: e.data }));
  const single = events.length === 1 ? events[0] : undefined;
  return {
    project_id: projectId,
    event: single ? single.type : 'bundle',
    payload: `[${envelopes.join(',')}]`,
    event_count: envelopes.length,
    message_id: `evb_${randomUUID().replace(/-/g, '')}`,
    wallet_id: single?.walletId ?? null,
  };
}

/**
 * SQL inserting the outbox row of each row of `source` (a CTE with EVENT_ROW_COLUMNS, values as
 * eventRowOf makes them) only if a subscription of its project names its type (or `*`),
 * returning a row for each it inserted; for a statement that composes it. A project that
 * subscribes to nothing costs the relay nothing.
 */
export const subscribedEventsFrom = (source: string, orderBy?: string): string => eventRowsFrom(source, someSubscriptionNames, orderBy);
