import { AUDIT_COLUMNS, auditInsertFrom } from '../audit/record.js';
import { hotQuery, pgArray, type Knex } from '../../platform/db/knex.js';
import { GroupCommit } from '../../platform/db/group-commit.js';
import { eventRowOf, subscribedEventsFrom } from '../webhooks/record.js';
import type { EventType } from '../webhooks/catalogue.js';
import { EVENT_ROW_COLUMNS, wakeRelaysIfAny } from '../../platform/outbox/repository.js';

/** A signing decision as it is recorded: an audit entry, and an event for the subscriptions that name it. */
export interface Decision {
  organisationId: number;
  projectId: number;
  walletId: number;
  actor: string;
  requestId: string | null;
  type: Extract<EventType, 'wallet.signature.created' | 'wallet.signature.denied'>;
  /** Ids and digests only, never the payload: the audit entry's details and the event's data. */
  details: Record<string, unknown>;
  at: Date;
}

/** One array per column of the statement's source, in DECISION_COLUMNS' order. */
const DECISION_COLUMNS = [...AUDIT_COLUMNS, ...EVENT_ROW_COLUMNS.filter((c) => c !== 'project_id')] as const;
const TYPES: Record<(typeof DECISION_COLUMNS)[number], string> = {
  organisation_id: 'bigint',
  project_id: 'bigint',
  actor: 'text',
  action: 'text',
  target: 'text',
  status: 'int',
  request_id: 'text',
  details: 'jsonb',
  event: 'text',
  payload: 'text',
  event_count: 'int',
  message_id: 'text',
  wallet_id: 'bigint',
};

/**
 * Every decision in one statement whatever their number (a prepared statement, platform/db/knex.ts): the
 * rows as one array per column, their audit entries, their events, and the relays' wake-up when
 * an event was queued.
 */
const RECORD_DECISIONS = `WITH d AS (
  SELECT * FROM unnest(${DECISION_COLUMNS.map((c, i) => `$${i + 1}::${TYPES[c]}[]`).join(', ')}) AS d (${DECISION_COLUMNS.join(', ')})
), audit AS (${auditInsertFrom('d')}
), event AS (${subscribedEventsFrom('d')})
${wakeRelaysIfAny('event')}`;

/**
 * Records signing decisions (docs/signing.md: every decision, allowed or denied) before their answers
 * go out. Decisions made while earlier ones are being written go together in the next statement
 * (GroupCommit): one commit for many signatures under load, none waiting when idle.
 */
export class DecisionLog {
  readonly #group: GroupCommit<Record<(typeof DECISION_COLUMNS)[number], unknown>>;

  constructor(db: Knex) {
    this.#group = new GroupCommit(async (rows) => {
      const columns = DECISION_COLUMNS.map((c) => pgArray(rows.map((r) => r[c] as string | number | null)));
      await hotQuery(db, 'custody_record_decisions', RECORD_DECISIONS, columns);
    });
  }

  /** Resolves once `d` is committed. */
  async record(d: Decision): Promise<void> {
    const row = await eventRowOf(d.projectId, [{ type: d.type, data: d.details, walletId: d.walletId }], d.at);
    await this.#group.add({
      ...row,
      organisation_id: d.organisationId,
      project_id: d.projectId,
      actor: d.actor,
      action: d.type,
      target: `wallet:${d.walletId}`,
      status: d.type === 'wallet.signature.created' ? 200 : 403,
      request_id: d.requestId,
      details: JSON.stringify(d.details),
    });
  }
}
