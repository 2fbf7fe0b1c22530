import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { createDb } from '../../../src/platform/db/knex.js';
import { startApp, type TestApp } from '../../support/app.js';
import { testDatabaseUrl } from '../../support/db.js';
import { createOrganisation, createProject, createToken } from '../../support/factories.js';
import type { Reply } from '../../support/http.js';
import { startAnvil, type Anvil } from '../../support/anvil.js';
import { chainConfig } from '../../support/chain.js';
import { TestIdp } from '../../support/idp.js';
import { Receiver } from '../../support/receiver.js';
import { fixtures, WRITE_CALLS, writeTenant } from '../../support/write-fixtures.js';

/** The API's pool in this suite; every write endpoint is called this many times twice over, at once. */
const POOL = 4;
const CONCURRENCY = 2 * POOL;
if (CONCURRENCY > WRITE_CALLS) throw new Error('the write fixtures make fewer distinct calls than this suite sends');
/** How long another tenant's read may take while a write endpoint is under that load. */
const BYSTANDER_MS = 100;

describe('every write endpoint with Idempotency-Key at twice the pool size: no 503, other tenants unaffected', function () {
  this.timeout(300_000);
  let app: TestApp;
  let db: Knex;
  let idp: TestIdp;
  let dir: string;
  let receiver: Receiver;
  // The chain the send fixtures use; it does not mine, so the cancel and speed-up fixtures' sends stay submitted.
  let anvil: Anvil;

  before(async () => {
    idp = await TestIdp.start();
    receiver = await Receiver.start();
    dir = mkdtempSync(path.join(tmpdir(), 'custody-pool-'));
    writeFileSync(path.join(dir, 'ca.pem'), idp.caPem);
    db = createDb({ url: testDatabaseUrl(), poolMax: POOL });
    anvil = await startAnvil({ args: ['--no-mining'] });
    app = await startApp({ OIDC_CA_FILE: path.join(dir, 'ca.pem'), CHAINS: JSON.stringify([chainConfig(anvil)]) }, db);
  });
  after(async () => {
    await app.close();
    await db.destroy();
    await receiver.close();
    await anvil.stop();
    await idp.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('has a way to call every declared write endpoint', () => {
    const writes = app.endpoints.filter((d) => d.route.write !== undefined).map((d) => `${d.route.method} ${d.route.path}`);
    expect(writes.length).to.be.greaterThan(20);
    expect(Object.keys(fixtures).sort()).to.deep.equal([...writes].sort());
  });

  it('answers every call without a 5xx while a read of another tenant stays under 100 ms', async () => {
    // The bystander: a read token of another organisation, reading its project's wallets.
    const bystanderOrg = await createOrganisation(app.client);
    const bystanderProject = await createProject(app.client, bystanderOrg.id);
    const bystander = app.client.withToken((await createToken(app.client, bystanderOrg.id, 'read', bystanderProject.id)).token);
    const read = () => bystander.get(`/api/v1/project/${bystanderProject.id}/wallets`);
    expect((await read()).status).to.equal(200);

    const writes = app.endpoints.filter((d) => d.route.write !== undefined);
    // Every endpoint is driven, and what went wrong with each is said at the end.
    const problems: string[] = [];
    for (const { route } of writes) {
      const name = `${route.method} ${route.path}`;
      const fixture = fixtures[name];
      if (!fixture) throw new Error(`no fixture for ${name}`);
      // A read slowed by one pause of the machine is tried again (up to three storms, each on a
      // fresh tenant); a pool taken by the storm slows every one of them.
      let slowest = Number.POSITIVE_INFINITY;
      for (let trial = 0; trial < 3 && slowest >= BYSTANDER_MS; trial++) {
        const t = await writeTenant(app, idp, receiver, anvil);
        await fixture.prepare?.(t);
        const calls = await Promise.all(Array.from({ length: CONCURRENCY }, async (_, i) => fixture.call(t, i)));
        let over = false;
        const storm = Promise.all(
          calls.map((c, i) =>
            c.client.request(route.method, c.path, {
              ...(c.body === undefined ? {} : { json: c.body }),
              headers: { 'idempotency-key': `storm-${name}-${trial}-${i}` },
            }),
          ),
        ).finally(() => (over = true));
        // Another tenant reads, one read after another, for as long as the calls run.
        slowest = 0;
        do {
          const started = performance.now();
          const res = await read();
          const ms = performance.now() - started;
          slowest = Math.max(slowest, ms);
          if (res.status !== 200) problems.push(`${name}: another tenant's read answered ${res.status} after ${ms.toFixed(0)} ms`);
        } while (!over);
        const answers: Array<Reply<unknown>> = await storm;
        for (const a of answers) if (a.status >= 500) problems.push(`${name}: ${a.status} ${a.text.slice(0, 160)}`);
        // A refusal of every call would not have reached the code under load.
        if (!answers.some((a) => a.status < 300)) problems.push(`${name}: no call succeeded (${answers.map((a) => a.status).join(', ')})`);
      }
      if (slowest >= BYSTANDER_MS) problems.push(`${name}: another tenant's read took ${slowest.toFixed(1)} ms in each of three storms`);
    }
    expect(problems).to.deep.equal([]);
  });
});
