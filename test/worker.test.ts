import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { Webhook } from 'standardwebhooks';
import { Client } from './helpers/http.js';
import { TestIdp } from './helpers/idp.js';
import { freePort, scratchDatabase, spawnService } from './helpers/process.js';
import { Receiver } from './helpers/receiver.js';
import { startSigner } from './helpers/signer.js';

describe('roles: api, worker and keyvault as separate processes', function () {
  this.timeout(120_000);

  it('creates a wallet accepted by ROLE=api in ROLE=worker and delivers its webhook', async () => {
    const idp = await TestIdp.start();
    const receiver = await Receiver.start();
    const db = await scratchDatabase();
    const signer = await startSigner();
    const dir = mkdtempSync(path.join(tmpdir(), 'custody-roles-'));
    chmodSync(dir, 0o755);
    writeFileSync(path.join(dir, 'ca.pem'), idp.caPem);
    const common = {
      DATABASE_URL: db.url,
      DATA_DIR: dir,
      KEYVAULT_URL: signer.url,
      KEYVAULT_TOKEN: signer.token,
      OPERATOR_TOKEN: `op_${randomBytes(24).toString('hex')}`,
      DATA_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      OIDC_CA_FILE: path.join(dir, 'ca.pem'),
      RELAY_POLL_MS: '100',
    };
    const migrate = spawnService({ ...common, ROLE: 'migrate' });
    expect(await migrate.exited, migrate.output()).to.equal(0);
    const port = await freePort();
    const api = spawnService({ ...common, ROLE: 'api', PORT: String(port) });
    const worker = spawnService({ ...common, ROLE: 'worker' });
    try {
      await api.waitFor(/listening on http/);
      await worker.waitFor(/outbox relay running/);
      expect(api.output()).not.to.include('outbox relay running');
      const client = new Client(`http://127.0.0.1:${port}`, common.OPERATOR_TOKEN);
      const iss = await idp.issuer();
      const org = await client.post('/api/v1/organisations', { name: 'Roles' });
      const project = await client.post(`/api/v1/organisations/${org.body.id}/projects`, { name: 'p', issuer: iss.issuer, walletWebhookUrl: receiver.url });
      const res = await client.post('/api/v1/wallets/createasync', { key: project.body.projectKey }, { token: await iss.sign({ email: 'roles@example.com' }, { audience: 'urn:custody:testnet' }) });
      expect(res.status).to.equal(202);
      const [delivery] = await receiver.waitFor(1, 30_000);
      const payload = new Webhook(project.body.walletWebhookSecret).verify(delivery!.body, delivery!.headers as Record<string, string>) as { emailAddress: string };
      expect(payload.emailAddress).to.equal('roles@example.com');
      worker.proc.kill('SIGTERM');
      expect(await worker.exited).to.equal(0);
    } finally {
      api.proc.kill('SIGKILL');
      worker.proc.kill('SIGKILL');
      await signer.destroy();
      await receiver.close();
      await idp.close();
      rmSync(dir, { recursive: true, force: true });
      await db.drop();
    }
  });
});
