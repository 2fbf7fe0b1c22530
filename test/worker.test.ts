import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { Webhook } from 'standardwebhooks';
import { Client, required } from './support/http.js';
import { freePort, spawnService } from './support/process.js';
import { startSigner } from './support/signer.js';
import { startStack } from './support/stack.js';

describe('roles: api, worker and keyvault as separate processes', function () {
  this.timeout(120_000);

  it('creates a wallet accepted by ROLE=api in ROLE=worker and delivers its webhook', async () => {
    const stack = await startStack('roles');
    const { idp, receiver } = stack;
    const signer = await startSigner();
    const common = {
      DATABASE_URL: stack.db.url,
      EGRESS_ALLOW_PRIVATE: '127.0.0.0/8,::1/128',
      DATA_DIR: stack.dir,
      KEYVAULT_URL: signer.url,
      KEYVAULT_TOKEN: signer.token,
      OPERATOR_TOKEN: stack.operatorToken,
      DATA_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      OIDC_CA_FILE: stack.caFile,
      RELAY_POLL_MS: '100',
    };
    const migrate = spawnService({ ...common, ROLE: 'migrate' });
    expect(await migrate.exited, migrate.output()).to.equal(0);
    const port = await freePort();
    const api = spawnService({ ...common, ROLE: 'api', PORT: String(port) });
    const workerPort = await freePort();
    const worker = spawnService({ ...common, ROLE: 'worker', PORT: String(workerPort) });
    try {
      await api.waitFor(/listening on http/);
      await worker.waitFor(/outbox relay running/);
      expect(api.output()).not.to.include('outbox relay running');
      const client = new Client(`http://127.0.0.1:${port}`, common.OPERATOR_TOKEN);
      const iss = await idp.issuer();
      const org = await client.post('/api/v1/organisations', { name: 'Roles' });
      const project = await client.post(`/api/v1/organisations/${org.body.id}/projects`, { name: 'p', issuer: iss.issuer, walletWebhookUrl: receiver.url });
      const res = await client.post(
        '/api/v1/wallets/createasync',
        { key: project.body.projectKey },
        { token: await iss.sign({ email: 'roles@example.com' }, { audience: 'urn:custody:testnet' }) },
      );
      expect(res.status).to.equal(202);
      const [delivery] = await receiver.waitFor(1, 30_000);
      const payload = new Webhook(required(project.body.walletWebhookSecret)).verify(delivery!.body, delivery!.headers as Record<string, string>) as {
        emailAddress: string;
      };
      expect(payload.emailAddress).to.equal('roles@example.com');
      // The worker's own listener: health for the orchestrator, metrics for the scraper.
      const workerUrl = `http://127.0.0.1:${workerPort}`;
      expect((await fetch(`${workerUrl}/healthz`)).status).to.equal(200);
      expect((await fetch(`${workerUrl}/readyz`)).status).to.equal(200);
      const metrics = await (await fetch(`${workerUrl}/metrics`)).text();
      expect(metrics).to.match(/^custody_webhook_deliveries_total\{kind="wallet",outcome="delivered"\} 1$/m);
      expect(metrics).to.match(/^custody_outbox_rows_total\{kind="wallet.create",outcome="done"\} 1$/m);
      expect(metrics).to.match(/^custody_signer_calls_total\{operation="create_key",outcome="ok"\} 1$/m);
      expect(metrics).to.include('custody_outbox_depth');
      const apiMetrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(apiMetrics).to.match(/^custody_http_requests_total\{method="POST",route="\/api\/v1\/wallets\/createasync",status="202"\} 1$/m);
      expect(apiMetrics).to.match(/^custody_jwt_key_cache_total\{result="miss"\} 1$/m);
      expect(apiMetrics).to.include('custody_process_cpu_seconds_total');
      expect(apiMetrics).to.match(/^custody_idp_fetches_total\{document="discovery",outcome="ok"\} 1$/m);
      // The gauges read at scrape time, bound where each process is assembled (src/programs/assembly.ts).
      for (const text of [metrics, apiMetrics]) {
        expect(text).to.match(/^custody_signer_up 1$/m);
        expect(text).to.match(/^custody_signer_key_store_up 1$/m);
        expect(text).to.match(/^custody_db_pool_connections_max 10$/m);
        expect(text).to.match(/^custody_db_pool_acquires_pending 0$/m);
        expect(text).to.match(/^custody_db_pool_connections_in_use \d+$/m);
      }
      worker.proc.kill('SIGTERM');
      expect(await worker.exited).to.equal(0);
    } finally {
      api.proc.kill('SIGKILL');
      worker.proc.kill('SIGKILL');
      await signer.destroy();
      await stack.teardown();
    }
  });
});
