import { defineDomain } from '../domain.js';
import { auditEndpoints } from './routes.js';
import { ServiceKeys } from '../attestations/service-keys.js';
import { checkpointAuditLog, sealAuditLog } from './seal.js';

export const auditDomain = defineDomain({
  name: 'audit',
  endpoints: (deps) => auditEndpoints(deps, new ServiceKeys(deps.signer, deps.config.serviceKeysCacheMs, deps.now)),
  periodic: (deps) => [
    // One sealer across processes (an advisory lock), single-flight in this one (the Scheduler).
    { name: 'audit-seal', role: 'worker', everyMs: deps.config.auditSealIntervalMs, atStart: true, run: () => sealAuditLog(deps.db) },
    {
      name: 'audit-checkpoint',
      role: 'worker',
      everyMs: deps.config.auditCheckpointIntervalMs,
      run: () => checkpointAuditLog(deps.db, deps.signer, deps.now),
    },
  ],
});
