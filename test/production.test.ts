import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { SIGNER_ENV } from '../src/platform/signer/child.js';
import { startApp } from './support/app.js';
import { freePort, scratchDatabase, spawnService } from './support/process.js';
import { startSigner } from './support/signer.js';
import { until } from './support/wait.js';

const PRODUCTION = {
  APP_ENV: 'production',
  SERVICE_AUDIENCE: 'urn:custody:production',
  OPERATOR_TOKEN: `sk_live_${'o'.repeat(43)}`,
  DATA_ENCRYPTION_KEY: Buffer.alloc(32, 9).toString('base64'),
};

describe('production means production end to end', function () {
  this.timeout(120_000);

  it('an API with APP_ENV=production refuses to start beside a signer on the development key store', async () => {
    const db = await scratchDatabase();
    const signer = await startSigner();
    try {
      const migrate = spawnService({ ROLE: 'migrate', DATABASE_URL: db.url });
      expect(await migrate.exited, migrate.output()).to.equal(0);
      const api = spawnService({
        ...PRODUCTION,
        ROLE: 'api',
        PORT: String(await freePort()),
        DATABASE_URL: db.url,
        KEYVAULT_URL: signer.url,
        KEYVAULT_TOKEN: signer.token,
      });
      expect(await api.exited, api.output()).to.equal(1);
      expect(api.output()).to.include('APP_ENV=production, but the signer uses the local development key store');
    } finally {
      await signer.destroy();
      await db.drop();
    }
  });

  it('and /readyz fails while its signer reports the development key store', async () => {
    const app = await startApp(PRODUCTION);
    try {
      const res = await app.client.get('/readyz', { token: null });
      expect(res.status).to.equal(503);
      expect(res.problem.code).to.equal('dependency_unavailable');
      expect(res.problem.detail).to.include('development key store');
      expect(res.headers.get('retry-after')).to.match(/^\d+$/);
    } finally {
      await app.close();
    }
  });

  it("the signer child sees an allow-list of the environment: nothing of the API's or the platform's secrets", async () => {
    const db = await scratchDatabase();
    const dir = mkdtempSync(path.join(tmpdir(), 'custody-allow-'));
    chmodSync(dir, 0o755);
    const svc = spawnService({
      ROLE: 'all',
      DATABASE_URL: db.url,
      DATA_DIR: dir,
      PORT: String(await freePort()),
      OPERATOR_TOKEN: `sk_test_${'s'.repeat(43)}`,
      AWS_SECRET_ACCESS_KEY: 'platform-secret',
      REDIS_URL: 'redis://:redis-password@127.0.0.1:1',
      SOMETHING_NOBODY_THOUGHT_OF: 'x',
      KEYVAULT_KEYGEN_THREADS: '1',
    });
    try {
      await svc.waitFor(/custody API listening/, 60_000);
      let childPid = 0;
      await until('the signer child is found', () => {
        const children = readFileSync(`/proc/${svc.proc.pid}/task/${svc.proc.pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
        childPid = children.find((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('keyvault')) ?? 0;
        return Promise.resolve(childPid > 0);
      });
      const names = readFileSync(`/proc/${childPid}/environ`, 'utf8')
        .split('\0')
        .filter(Boolean)
        .map((kv) => kv.slice(0, kv.indexOf('=')));
      // NODE_CHANNEL_* are the IPC channel fork() opens (the child exits when its parent does).
      for (const name of names)
        expect(SIGNER_ENV.test(name) || ['KEYVAULT_LISTEN', 'KEYVAULT_TOKEN'].includes(name) || name.startsWith('NODE_CHANNEL_'), name).to.equal(true);
      expect(names).to.include.members(['KEYVAULT_LISTEN', 'KEYVAULT_TOKEN', 'APP_ENV', 'KEYVAULT_KEYGEN_THREADS']);
      for (const absent of ['DATABASE_URL', 'OPERATOR_TOKEN', 'AWS_SECRET_ACCESS_KEY', 'REDIS_URL', 'SOMETHING_NOBODY_THOUGHT_OF', 'DATA_ENCRYPTION_KEY']) {
        expect(names, absent).not.to.include(absent);
      }
    } finally {
      svc.proc.kill('SIGTERM');
      await svc.exited;
      rmSync(dir, { recursive: true, force: true });
      await db.drop();
    }
  });

  it("the allow-list covers every variable the signer's configuration reads", () => {
    const source = readFileSync(fileURLToPath(new URL('../../keyvault/config.ts', import.meta.url)), 'utf8');
    const read = [...source.matchAll(/(?:plain|secret|int)\('([A-Z0-9_]+)'/g)].map((m) => m[1] ?? '');
    expect(read.length).to.be.greaterThan(15);
    for (const name of read) {
      // The API sets these two itself for the child it starts, and the child accepts no other token.
      if (name === 'KEYVAULT_LISTEN' || name === 'KEYVAULT_TOKEN') continue;
      if (name === 'KEYVAULT_TOKEN_PREVIOUS') {
        expect(SIGNER_ENV.test(name) || SIGNER_ENV.test(`${name}_FILE`), 'a previous token never reaches the child').to.equal(false);
        continue;
      }
      expect(SIGNER_ENV.test(name), name).to.equal(true);
      if (source.includes(`secret('${name}')`)) expect(SIGNER_ENV.test(`${name}_FILE`) || name === 'KEYVAULT_TOKEN', `${name}_FILE`).to.equal(true);
    }
  });
});
