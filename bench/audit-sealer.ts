import { createDb } from '../src/platform/db/knex.js';
import { sealAuditLog } from '../src/domains/audit/seal.js';
import { Scheduler } from '../src/platform/runtime/scheduler.js';
import { createLogger } from '../src/platform/logging/logger.js';

/**
 * The sealer alone, as the worker runs it (its own process, the Scheduler at AUDIT_SEAL_INTERVAL_MS),
 * for bench/audit.ts: argv[2] the database URL, argv[3] the interval. Stops on SIGTERM.
 */
const db = createDb({ url: process.argv[2] ?? '', poolMax: 2 });
const scheduler = new Scheduler(
  [{ name: 'audit-seal', role: 'worker', everyMs: Number(process.argv[3] ?? 500), atStart: true, run: () => sealAuditLog(db) }],
  createLogger('warn'),
);
scheduler.start();
process.stdout.write('sealer running\n');
process.on('SIGTERM', () => {
  void scheduler
    .stop()
    .then(() => db.destroy())
    .then(() => process.exit(0));
});
