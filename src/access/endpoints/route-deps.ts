import type { Config } from '../../platform/config/config.js';
import type { SecretBox } from '../../platform/crypto/secrets.js';
import type { AppMiddleware } from '../../platform/http/context.js';
import type { AuditTarget, Route } from './declare.js';
import type { Cursors } from '../../platform/http/pagination.js';

/** What route modules need: the shared middlewares and services, built once in app.ts. */
export interface RouteDeps {
  config: Config;
  authenticate: AppMiddleware;
  /** Runs a management write in a transaction with its audit entry. */
  audited: (route: Route, target: AuditTarget) => AppMiddleware;
  /** Idempotency-Key handling for management POSTs (docs/interface.md section 2b). */
  idempotent: AppMiddleware;
  /** First on the routes that change organisations, projects or keys: drops the project-key cache when the request is over. */
  projectChange: AppMiddleware;
  cursors: Cursors;
  secretBox: SecretBox;
  /** The clock (ms since the epoch); tests inject one. */
  now: () => number;
}
