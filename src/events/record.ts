import { randomUUID } from 'node:crypto';
import { pgArray, type Executor } from '../db/knex.js';
import { notifyOutbox } from '../outbox/repository.js';
import type { EventType } from './catalogue.js';

export interface NewEvent {
  type: EventType;
  data: unknown;
  walletId?: number;
}

export const newEventId = (): string => `evt_${randomUUID().replace(/-/g, '')}`;

/**
 * Records events in the outbox inside the caller's transaction, so they commit (or vanish) with
 * the change they describe. Each row holds the envelope of section 9 serialised once: those exact
 * bytes are what every subscription delivery sends and signs.
 */
export async function recordEvents(tx: Executor, projectId: number, events: readonly NewEvent[], at: Date = new Date()): Promise<void> {
  if (events.length === 0) return;
  const createdAt = at.toISOString();
  const ids: string[] = [];
  const types: string[] = [];
  const payloads: string[] = [];
  const wallets: Array<number | null> = [];
  for (const e of events) {
    const id = newEventId();
    ids.push(id);
    types.push(e.type);
    payloads.push(JSON.stringify({ id, type: e.type, createdAt, projectId, data: e.data }));
    wallets.push(e.walletId ?? null);
  }
  await tx.raw(
    `INSERT INTO outbox (project_id, kind, event, payload, message_id, wallet_id)
     SELECT ?, 'event', e.type, e.payload, e.id, e.wallet FROM unnest(?::text[], ?::text[], ?::text[], ?::bigint[]) AS e(type, payload, id, wallet)`,
    [projectId, pgArray(types), pgArray(payloads), pgArray(ids), pgArray(wallets)],
  );
  await notifyOutbox(tx);
}
