import path from 'node:path';
import { expect } from 'chai';
import pg from 'pg';
import { Client } from './support/http.js';
import { freePort, spawnService } from './support/process.js';
import { localKeyRecords } from './support/signer.js';
import { startStack } from './support/stack.js';

const AUDIENCE = 'urn:custody:testnet';

describe('crash safety: the API killed with SIGKILL during a burst of createasync', function () {
  this.timeout(240_000);

  it('ends every accepted request with exactly one wallet and a delivered webhook, no duplicate wallet, no orphan key', async () => {
    const stack = await startStack('crash');
    const { idp, receiver, db, dir, operatorToken } = stack;
    const port = await freePort();
    const env = {
      ...stack.serviceEnv(port),
      WEBHOOK_TIMEOUT_MS: '3000',
      KEYVAULT_TIMEOUT_MS: '3000',
      RELAY_POLL_MS: '100',
    };
    const sql = new pg.Client({ connectionString: db.url });
    let svc = spawnService(env);
    try {
      await svc.waitFor(/listening on http/, 60_000);
      const api = new Client(`http://127.0.0.1:${port}`, operatorToken);
      const iss = await idp.issuer();
      const org = await api.post('/api/v1/organisations', { name: 'Crash' });
      const project = await api.post(`/api/v1/organisations/${org.body.id}/projects`, { name: 'p', issuer: iss.issuer, walletWebhookUrl: receiver.url });
      expect(project.status).to.equal(201);
      const users = Array.from({ length: 200 }, (_, i) => `user${i}@crash.example.com`);
      const jwts = await Promise.all(users.map((email) => iss.sign({ email }, { audience: AUDIENCE })));

      let answered = 0;
      const outcomes = await Promise.all(
        users.map(async (email, i) => {
          try {
            const res = await api.post('/api/v1/wallets/createasync', { key: project.body.projectKey, token: `t${i}` }, { token: jwts[i]! });
            if (++answered === 60) svc.proc.kill('SIGKILL');
            return { email, status: res.status };
          } catch {
            return { email, status: 0 };
          }
        }),
      );
      await svc.exited;
      const accepted = outcomes.filter((o) => o.status === 202).map((o) => o.email);
      expect(accepted.length).to.be.at.least(60);
      expect(
        outcomes.every((o) => o.status === 202 || o.status === 0),
        JSON.stringify(outcomes.filter((o) => o.status !== 202 && o.status !== 0)),
      ).to.equal(true);

      svc = spawnService(env);
      await svc.waitFor(/listening on http/, 60_000);
      await sql.connect();
      // Wait for the relay to finish everything that was committed.
      const deadline = Date.now() + 120_000;
      for (;;) {
        const { rows } = await sql.query(`SELECT count(*)::int AS n FROM outbox WHERE kind <> 'event' AND status <> 'done'`);
        const pendingWallets = await sql.query(`SELECT count(*)::int AS n FROM wallets WHERE address IS NULL`);
        if (rows[0].n === 0 && pendingWallets.rows[0].n === 0) break;
        if (Date.now() > deadline) expect.fail(`still pending: ${rows[0].n} outbox rows, ${pendingWallets.rows[0].n} wallets`);
        await new Promise((r) => setTimeout(r, 250));
      }

      const wallets = (await sql.query(`SELECT id, email, email_lower, address FROM wallets WHERE project_id = $1`, [project.body.id])).rows as Array<{
        id: number;
        email: string;
        address: string;
      }>;
      // One wallet per identity (the unique constraint), and one for every accepted request.
      expect(new Set(wallets.map((w) => w.email)).size).to.equal(wallets.length);
      const byEmail = new Map(wallets.map((w) => [w.email, w]));
      for (const email of accepted) expect(byEmail.get(email)?.address, email).to.match(/^0x[0-9a-fA-F]{40}$/);

      // At least one delivered webhook per wallet; any duplicate carries the same webhook-id.
      const deliveries = new Map<number, Set<string>>();
      for (const r of receiver.received) {
        const body = JSON.parse(r.body) as { walletId: number };
        deliveries.set(body.walletId, (deliveries.get(body.walletId) ?? new Set<string>()).add(String(r.headers['webhook-id'])));
      }
      for (const w of wallets) {
        expect(deliveries.get(w.id)?.size, `wallet ${w.id}`).to.equal(1);
      }

      // No orphan key: the signer holds exactly the keys of the wallets.
      const keyRecords = localKeyRecords(path.join(dir, 'keyvault'));
      const keyAddresses = new Set(keyRecords.map((r) => r.address));
      expect(keyAddresses).to.deep.equal(new Set(wallets.map((w) => w.address)));
      expect(keyRecords).to.have.length(keyAddresses.size);
    } finally {
      svc.proc.kill('SIGKILL');
      await sql.end().catch(() => undefined);
      await stack.teardown();
    }
  });
});
