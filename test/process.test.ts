import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { Client, required } from './support/http.js';
import { freePort, scratchDatabase, spawnService } from './support/process.js';

/** A data directory the embedded PostgreSQL's `postgres` user can traverse (mkdtemp makes 0700). */
function dataDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'custody-data-'));
  chmodSync(dir, 0o755);
  return dir;
}

describe('the service as a process', function () {
  this.timeout(120_000);

  it('lists every configuration problem in one message and exits non-zero', async () => {
    const svc = spawnService({ APP_ENV: 'production', PORT: 'eighty', ROLE: 'api', DATA_ENCRYPTION_KEY: 'short', LOG_LEVEL: 'loud' });
    expect(await svc.exited).to.equal(1);
    const out = svc.output();
    for (const name of ['PORT', 'DATABASE_URL', 'SERVICE_AUDIENCE', 'OPERATOR_TOKEN', 'DATA_ENCRYPTION_KEY', 'LOG_LEVEL']) {
      expect(out, name).to.include(name);
    }
    expect(out).to.match(/^Invalid configuration:/);
  });

  it('refuses an unknown role, naming the roles there are', async () => {
    const svc = spawnService({ ROLE: 'web' });
    expect(await svc.exited).to.equal(1);
    expect(svc.output()).to.include('ROLE must be one of all, api, worker, keyvault, migrate');
  });

  it('ROLE=api refuses a database that is not migrated; ROLE=migrate migrates it', async () => {
    const db = await scratchDatabase();
    try {
      const dir = dataDir();
      const api = spawnService({
        ROLE: 'api',
        DATABASE_URL: db.url,
        DATA_DIR: dir,
        PORT: String(await freePort()),
        KEYVAULT_URL: 'unix:/nonexistent.sock',
        KEYVAULT_TOKEN: 'k'.repeat(32),
      });
      expect(await api.exited).to.equal(1);
      expect(api.output()).to.include('run ROLE=migrate first');
      const migrate = spawnService({ ROLE: 'migrate', DATABASE_URL: db.url, DATA_DIR: dir });
      expect(await migrate.exited, migrate.output()).to.equal(0);
      expect(migrate.output()).to.match(/applied \d+ migration/);
      rmSync(dir, { recursive: true, force: true });
    } finally {
      await db.drop();
    }
  });

  it('serves with DATABASE_URL, never logs a secret, and drains on SIGTERM: readyz 503, in-flight request finished, exit 0', async () => {
    const db = await scratchDatabase();
    const dir = dataDir();
    const operatorToken = `op_${randomBytes(24).toString('hex')}`;
    const tokenFile = path.join(dir, 'operator-token-secret');
    writeFileSync(tokenFile, `${operatorToken}\n`, { mode: 0o600 });
    const port = await freePort();
    const svc = spawnService({
      ROLE: 'all',
      DATABASE_URL: db.url,
      EGRESS_ALLOW_PRIVATE: '127.0.0.0/8,::1/128',
      DATA_DIR: dir,
      PORT: String(port),
      OPERATOR_TOKEN_FILE: tokenFile,
      LOG_LEVEL: 'trace',
      SHUTDOWN_DELAY_MS: '3000',
    });
    try {
      await svc.waitFor(/listening on http:\/\/localhost:\d+/);
      const client = new Client(`http://127.0.0.1:${port}`, operatorToken);
      const secrets: string[] = [operatorToken];
      const org = await client.post('/api/v1/organisations', { name: 'Secretive' });
      expect(org.status).to.equal(201);
      const project = await client.post(`/api/v1/organisations/${org.body.id}/projects`, { name: 'p', issuer: 'https://idp.example.com' });
      secrets.push(project.body.projectKey, required(project.body.walletWebhookSecret));
      const given = await client.post(`/api/v1/organisations/${org.body.id}/projects`, {
        name: 'q',
        issuer: 'https://idp.example.com',
        walletWebhookSecret: 'my-own-shared-secret-value',
      });
      secrets.push('my-own-shared-secret-value', given.body.projectKey);
      const token = await client.post(`/api/v1/organisations/${org.body.id}/tokens`, { name: 't', role: 'admin' }, { headers: { 'idempotency-key': 'k1' } });
      secrets.push(token.body.token);
      const rotated = await client.post(`/api/v1/project/${project.body.id}/keys`, { graceSeconds: 0 });
      secrets.push(rotated.body.projectKey);
      const secret = await client.post(`/api/v1/project/${project.body.id}/walletWebhook/secret`);
      secrets.push(secret.body.walletWebhookSecret);
      expect((await client.withToken(token.body.token).get(`/api/v1/organisations/${org.body.id}`)).status).to.equal(200);
      const wrong = `sk_test_${randomBytes(32).toString('base64url')}`;
      secrets.push(wrong);
      expect((await client.withToken(wrong).get('/api/v1/organisations')).status).to.equal(401);
      expect((await client.post('/api/v1/organisations', { name: 'bad', token: token.body.token })).status).to.equal(400);

      // A request in flight when SIGTERM arrives: its body is still being sent.
      const inFlight = new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request(
          {
            host: '127.0.0.1',
            port,
            method: 'POST',
            path: '/api/v1/organisations',
            headers: { authorization: `Bearer ${operatorToken}`, 'content-type': 'application/json' },
          },
          (res) => {
            let body = '';
            res.on('data', (c: Buffer) => (body += c.toString()));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          },
        );
        req.on('error', reject);
        req.write('{"name":');
        setTimeout(() => {
          svc.proc.kill('SIGTERM');
          void svc.waitFor(/draining/).then(async () => {
            const ready = await client.get('/readyz', { token: null });
            expect(ready.status).to.equal(503);
            req.end('"finished during drain"}');
          }, reject);
        }, 200);
      });
      const finished = await inFlight;
      expect(finished.status, finished.body).to.equal(201);
      expect(JSON.parse(finished.body)).to.include({ name: 'finished during drain' });
      expect(await svc.exited).to.equal(0);

      const out = svc.output();
      expect(out).to.include('"msg":"request"');
      for (const s of secrets) {
        expect(s).to.be.a('string').with.length.greaterThan(15);
        expect(out.includes(s), `a secret appears in the logs`).to.equal(false);
      }
    } finally {
      svc.proc.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
      await db.drop();
    }
  });

  it('ROLE=all starts the signer beside the API; the signer dies with its parent, even on SIGKILL', async () => {
    const db = await scratchDatabase();
    const dir = dataDir();
    const port = await freePort();
    const svc = spawnService({ ROLE: 'all', DATABASE_URL: db.url, DATA_DIR: dir, PORT: String(port) });
    try {
      await svc.waitFor(/listening on http:\/\/localhost:\d+/);
      expect(svc.output()).to.include('keyvault listening on unix:');
      const ready = await new Client(`http://127.0.0.1:${port}`, null).get('/readyz');
      expect(ready.status).to.equal(200);
      expect(ready.body.checks).to.deep.equal({ database: 'ok', signer: 'ok', keyStore: 'ok' });
      const children = execFileSync('pgrep', ['-P', String(svc.proc.pid)], { encoding: 'utf8' })
        .trim()
        .split('\n')
        .map(Number);
      expect(children).to.have.length(1);
      const alive = (pid: number) => {
        try {
          process.kill(pid, 0);
          return true;
        } catch {
          return false;
        }
      };
      expect(alive(children[0]!)).to.equal(true);
      svc.proc.kill('SIGKILL');
      await svc.exited;
      for (let i = 0; i < 50 && alive(children[0]!); i++) await new Promise((r) => setTimeout(r, 100));
      expect(alive(children[0]!)).to.equal(false);
    } finally {
      svc.proc.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
      await db.drop();
    }
  });

  it('starts an embedded PostgreSQL with no environment, prints the URL and the token file, and reuses the data on a second start', async () => {
    const dir = dataDir();
    const env = { DATA_DIR: dir, PORT: String(await freePort()), EMBEDDED_PG_PORT: String(await freePort()) };
    try {
      const first = spawnService(env);
      await first.waitFor(/listening on http:\/\/localhost:\d+/, 90_000);
      const tokenFile = path.join(dir, 'operator-token');
      expect(first.output()).to.include(`is in ${tokenFile}`);
      expect(statSync(tokenFile).mode & 0o777).to.equal(0o600);
      const token = readFileSync(tokenFile, 'utf8').trim();
      expect(first.output()).not.to.include(token);
      const client = new Client(`http://127.0.0.1:${env.PORT}`, token);
      const org = await client.post('/api/v1/organisations', { name: 'Persistent' });
      expect(org.status).to.equal(201);
      first.proc.kill('SIGTERM');
      expect(await first.exited).to.equal(0);

      const second = spawnService(env);
      await second.waitFor(/listening on http:\/\/localhost:\d+/, 90_000);
      expect(second.output()).not.to.include('first start');
      expect(readFileSync(tokenFile, 'utf8').trim()).to.equal(token);
      const again = await client.get(`/api/v1/organisations/${org.body.id}`);
      expect(again.status).to.equal(200);
      expect(again.body.name).to.equal('Persistent');
      second.proc.kill('SIGTERM');
      expect(await second.exited).to.equal(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
