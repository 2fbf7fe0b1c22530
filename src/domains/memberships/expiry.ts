import { systemClock } from '../../platform/runtime/clock.js';
import type { Knex } from 'knex';
import { recordEvents, type NewEvent } from '../webhooks/record.js';
import { presentMembership } from './presenter.js';
import { claimExpired, type MembershipRow } from './repository.js';

/**
 * One pass of the membership expiry (periodic work of this domain): records `membership.expired`
 * and `membership.updated` (`change: "expired"`) for each membership whose expiration has passed,
 * once per membership. The mark and the events commit in one transaction and rows are claimed with
 * SKIP LOCKED, so any number of passes may run side by side. Resolves to how many expired.
 */
export async function expireMemberships(db: Knex, now: () => number = systemClock, batchSize = 500): Promise<number> {
  let total = 0;
  for (;;) {
    const at = now();
    const nowS = Math.floor(at / 1000);
    const count = await db.transaction(async (tx) => {
      const rows = await claimExpired(tx, nowS, batchSize);
      const byProject = new Map<number, MembershipRow[]>();
      for (const row of rows) byProject.set(row.project_id, [...(byProject.get(row.project_id) ?? []), row]);
      for (const [projectId, list] of byProject) {
        const events = list.flatMap((m): NewEvent[] => {
          const record = presentMembership(m, nowS);
          return [
            { type: 'membership.expired', data: record },
            { type: 'membership.updated', data: { ...record, change: 'expired' } },
          ];
        });
        await recordEvents(tx, projectId, events, new Date(at));
      }
      return rows.length;
    });
    total += count;
    if (count < batchSize) return total;
  }
}
