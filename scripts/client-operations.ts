import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { buildApp, mountedEndpoints } from '../src/programs/app.js';
import { loadConfig } from '../src/platform/config/config.js';
import { createDb } from '../src/platform/db/knex.js';
import { createLogger } from '../src/platform/logging/logger.js';
import { operationTable } from '../src/platform/openapi/operations.js';
import { SignerClient } from '../src/platform/signer/client.js';
import { clientTypes } from '../src/programs/client-schemas.js';

/**
 * `npm run client:operations`: writes the typed client's operation table from the endpoint
 * declarations, and its types from the route schemas (plain TypeScript: the client, and the
 * package built from it, refer to nothing of the service). The app is built, never started:
 * nothing connects to the database or the signer.
 */
const db = createDb({ url: 'postgres://127.0.0.1:1/none', poolMax: 1, log: createLogger('silent'), preparedStatements: false });
const app = buildApp({
  config: loadConfig({ APP_ENV: 'testnet' }),
  db,
  log: createLogger('silent'),
  operatorTokenHash: Buffer.alloc(32),
  dataEncryptionKey: Buffer.alloc(32),
  lifecycle: { draining: false },
  signer: new SignerClient('http://127.0.0.1:1', 'none', 1_000, 'none'),
});
const out = fileURLToPath(new URL('../../src/programs/client/operations.ts', import.meta.url));
writeFileSync(out, operationTable(mountedEndpoints(app)));
const types = fileURLToPath(new URL('../../src/programs/client/types.ts', import.meta.url));
writeFileSync(types, clientTypes());
await db.destroy();
process.stdout.write(`wrote ${out} and ${types}\n`);
