import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { TestIdp } from './idp.js';
import { scratchDatabase } from './process.js';
import { Receiver } from './receiver.js';

/** What a test or benchmark of the service as processes needs around it, made and removed together. */
export interface Stack {
  idp: TestIdp;
  receiver: Receiver;
  db: { url: string; drop(): Promise<void> };
  /** A data directory the embedded PostgreSQL's user could enter, holding the IdP's CA. */
  dir: string;
  caFile: string;
  operatorToken: string;
  /** The environment of `ROLE=all` on `port` against this stack. */
  serviceEnv(port: number): Record<string, string>;
  teardown(): Promise<void>;
}

export async function startStack(prefix: string): Promise<Stack> {
  const idp = await TestIdp.start();
  const receiver = await Receiver.start();
  const db = await scratchDatabase();
  const dir = mkdtempSync(path.join(tmpdir(), `custody-${prefix}-`));
  chmodSync(dir, 0o755);
  const caFile = path.join(dir, 'ca.pem');
  writeFileSync(caFile, idp.caPem);
  const operatorToken = `op_${randomBytes(24).toString('hex')}`;
  return {
    idp,
    receiver,
    db,
    dir,
    caFile,
    operatorToken,
    // The IdP and the receiver listen on loopback, which outbound requests may not reach otherwise.
    serviceEnv: (port) => ({
      ROLE: 'all',
      DATABASE_URL: db.url,
      DATA_DIR: dir,
      PORT: String(port),
      OPERATOR_TOKEN: operatorToken,
      OIDC_CA_FILE: caFile,
      EGRESS_ALLOW_PRIVATE: '127.0.0.0/8,::1/128',
    }),
    teardown: async () => {
      await receiver.close();
      await idp.close();
      rmSync(dir, { recursive: true, force: true });
      await db.drop();
    },
  };
}
