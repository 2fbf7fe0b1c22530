import { randomBytes, randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { declaredEndpoints } from '../../src/programs/app.js';
import { assembleApi } from '../../src/programs/assembly.js';
import { loadConfig } from '../../src/platform/config/config.js';
import { hashSecret } from '../../src/platform/crypto/secrets.js';
import { DEFAULT_BODY_LIMIT } from '../../src/platform/http/body.js';
import type { AuthKind } from '../../src/access/endpoints/declare.js';
import { createDb } from '../../src/platform/db/knex.js';
import { createLogger } from '../../src/platform/logging/logger.js';
import { SignerClient } from '../../src/platform/signer/client.js';

/** An endpoint as a client of a running service sees it. */
export interface DeclaredRoute {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  auth: AuthKind;
  /** The largest body it reads. */
  bodyLimit: number;
}

/**
 * Every endpoint the API declares (src/access/endpoints/declare.ts), read off an app built as main.ts builds it
 * and never served, for a benchmark that drives the service as a separate process
 * (bench/hostile.ts): a new endpoint is in its list without anyone adding it.
 */
export async function declaredRoutes(databaseUrl: string): Promise<DeclaredRoute[]> {
  const config = loadConfig({
    DATABASE_URL: databaseUrl,
    ROLE: 'api',
    KEYVAULT_URL: 'http://127.0.0.1:9',
    KEYVAULT_TOKEN: randomBytes(24).toString('hex'),
    PROJECT_CACHE_TTL_MS: '0',
  });
  const db = createDb({ url: databaseUrl, poolMax: 1 });
  const log = createLogger('silent', new Writable({ write: (_c, _e, done) => done() }));
  const parts = assembleApi({
    config,
    db,
    databaseUrl,
    log,
    signer: new SignerClient('http://127.0.0.1:9', 'unused', 1_000, randomUUID()),
    operatorTokenHash: hashSecret(randomBytes(16).toString('hex')),
    dataEncryptionKey: randomBytes(32),
  });
  try {
    return declaredEndpoints(parts.app).map(({ route, schemas }) => ({
      method: route.method,
      path: route.path,
      auth: route.auth,
      bodyLimit: schemas.bodyLimit ?? DEFAULT_BODY_LIMIT,
    }));
  } finally {
    await parts.close();
    await db.destroy();
  }
}
