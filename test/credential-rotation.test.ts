import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { startApp, type TestApp } from './support/app.js';
import { createOrganisation, createProject } from './support/factories.js';
import type { Reply } from './support/http.js';
import { TestIdp } from './support/idp.js';
import { until } from './support/wait.js';

const AUDIENCE = 'urn:custody:testnet';
const LOOPS = 6;

/**
 * A project key and an API token rotated under load, in the documented order (docs/operations.md,
 * section 8), across two instances of the API: no request fails. The data encryption
 * key, the signer's token, transit keys and webhook secrets have their own suites
 * (data-key-rotation, keyvault/token-rotation, keyvault/rewrap).
 */
describe('project keys and API tokens rotate under load with no failed request', function () {
  this.timeout(180_000);
  let idp: TestIdp;
  let dir: string;
  const apps: TestApp[] = [];

  before(async () => {
    idp = await TestIdp.start();
    dir = mkdtempSync(path.join(tmpdir(), 'custody-rotation-'));
    writeFileSync(path.join(dir, 'ca.pem'), idp.caPem);
    for (let i = 0; i < 2; i++) apps.push(await startApp({ OIDC_CA_FILE: path.join(dir, 'ca.pem') }));
  });
  after(async () => {
    for (const app of apps) await app.close();
    await idp.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a new project key and a new token take over while the old ones still work; the old token is then revoked, and refused', async () => {
    const [a, b] = apps as [TestApp, TestApp];
    const iss = await idp.issuer('rotation');
    const org = await createOrganisation(a.client);
    const project = await createProject(a.client, org.id, { issuer: iss.issuer });
    const mint = async (name: string) => {
      const res = await a.client.post(`/api/v1/organisations/${org.id}/tokens`, { name, role: 'admin', projectId: project.id });
      expect(res.status, res.text).to.equal(201);
      return res.body as { id: number; token: string };
    };

    // What the clients use: the newest key and token they were given. Each request goes to the next instance.
    const keys = [project.projectKey];
    const tokens = [await mint('backend-1')];
    const inFlight = new Map<string, number>();
    const failures: string[] = [];
    let done = 0;
    let stop = false;
    let turn = 0;
    const track = async (credential: string, what: string, p: Promise<Reply<unknown>>, ok: number) => {
      inFlight.set(credential, (inFlight.get(credential) ?? 0) + 1);
      try {
        const res = await p;
        if (res.status !== ok) failures.push(`${what}: ${res.status} ${res.text.slice(0, 200)}`);
        done++;
      } finally {
        inFlight.set(credential, (inFlight.get(credential) ?? 1) - 1);
      }
    };
    const loop = async (n: number) => {
      for (let i = 0; !stop; i++) {
        const app = turn++ % 2 === 0 ? a : b;
        const key = keys[keys.length - 1] ?? '';
        const jwt = await iss.sign({ email: `user${n}-${i % 5}@example.com` }, { audience: AUDIENCE });
        await track(key, 'sign-in', app.client.post('/api/v1/signin', { key }, { token: jwt }), 200);
        const token = tokens[tokens.length - 1]?.token ?? '';
        await track(token, 'read', app.client.withToken(token).get(`/api/v1/project/${project.id}/wallets?limit=5`), 200);
      }
    };
    const load = Array.from({ length: LOOPS }, (_, n) => loop(n));
    const after = async (requests: number) => {
      const target = done + requests;
      await until(`${requests} more requests`, () => (done >= target ? true : undefined));
    };
    try {
      await after(150);

      // 1. A new project key, the old one kept for an hour: clients move over as they hear of it.
      const rotated = await a.client.post(`/api/v1/project/${project.id}/keys`, { graceSeconds: 3600 });
      expect(rotated.status, rotated.text).to.equal(200);
      keys.push((rotated.body as { projectKey: string }).projectKey);
      await after(150);
      // The old key still signs users in, on either instance, within its grace.
      for (const app of apps) {
        const old = await app.client.post('/api/v1/signin', { key: keys[0] }, { token: await iss.sign({ email: 'late@example.com' }, { audience: AUDIENCE }) });
        expect(old.status, old.text).to.equal(200);
      }

      // 2. A new token; clients move over; the old one is revoked once nothing uses it.
      tokens.push(await mint('backend-2'));
      const old = tokens[0] ?? { id: 0, token: '' };
      await until('nothing in flight with the old token', () => ((inFlight.get(old.token) ?? 0) === 0 ? true : undefined));
      const revoked = await a.client.delete(`/api/v1/organisations/${org.id}/tokens/${old.id}`);
      expect(revoked.status, revoked.text).to.equal(204);
      await after(150);
      // Refused at once, by both instances.
      for (const app of apps) expect((await app.client.withToken(old.token).get(`/api/v1/project/${project.id}/wallets`)).status).to.equal(401);
    } finally {
      stop = true;
      await Promise.all(load);
    }
    expect(failures, `${failures.length} of ${done} requests failed`).to.deep.equal([]);
    expect(done).to.be.at.least(450);
  });
});
