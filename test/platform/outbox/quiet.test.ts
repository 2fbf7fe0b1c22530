import { expect } from 'chai';
import { recordEvents } from '../../../src/domains/webhooks/record.js';
import { claimExpired } from '../../../src/domains/memberships/repository.js';
import { startApp, type TestApp } from '../../support/app.js';
import { createTenant } from '../../support/factories.js';
import { Receiver } from '../../support/receiver.js';
import { until } from '../../support/wait.js';

const address = () => `0x${Array.from({ length: 40 }, () => '0123456789abcdef'[Math.floor(Math.random() * 16)]).join('')}`;

describe('a soft-deleted organisation goes quiet, and resumes after undelete with nothing lost', function () {
  this.timeout(60_000);
  let app: TestApp;
  let receiver: Receiver;
  before(async () => {
    app = await startApp({ WEBHOOK_RETRY_SCHEDULE: '0,100,100,100,100', RELAY_POLL_MS: '50' }, undefined, { relay: true });
    receiver = await Receiver.start();
  });
  after(async () => {
    await app.close();
    await receiver.close();
  });

  it('deliveries, retries and new events wait while the organisation is deleted; undelete sends what was due', async () => {
    const t = await createTenant(app.client);
    const sub = await t.projectAdmin.post(`/api/v1/project/${t.project.id}/webhooks`, { url: `${receiver.url}?p=${t.project.id}`, events: ['*'] });
    expect(sub.status, sub.text).to.equal(201);
    const mine = () => receiver.received.filter((r) => (JSON.parse(r.body) as { projectId: number }).projectId === t.project.id);
    // A first attempt that fails: its retry is due 100 ms later.
    receiver.status = 500;
    const issued = await t.projectAdmin.post('/api/v1/membership/issue', [{ membershipType: 'gym:gold', walletAddress: address() }]);
    expect(issued.status, issued.text).to.equal(201);
    await until('the first attempt', () => Promise.resolve(mine().length >= 1));
    const deleted = await app.client.delete(`/api/v1/organisations/${t.org.id}`);
    expect(deleted.status, deleted.text).to.be.oneOf([200, 204]);
    receiver.status = 204;
    // An event its project committed just before the deletion, not yet fanned out.
    await recordEvents(app.db, t.project.id, [{ type: 'membership.revoked', data: { note: 'committed before the delete' } }], new Date());
    // Many poll intervals and retry delays go by: nothing is sent for this organisation.
    const before = mine().length;
    await new Promise((r) => setTimeout(r, 1_500));
    expect(mine().length, 'requests while deleted').to.equal(before);
    const { rows } = await app.db.raw<{ rows: Array<{ n: number }> }>(
      `SELECT count(*)::int AS n FROM outbox WHERE project_id = ? AND status IN ('pending', 'failed')`,
      [t.project.id],
    );
    expect(rows[0]?.n, 'work kept for later').to.be.greaterThan(0);

    const undeleted = await app.client.post(`/api/v1/organisations/${t.org.id}/undelete`);
    expect(undeleted.status, undeleted.text).to.equal(200);
    // The three events and the held one are all due; their order among each other is not.
    const typesSince = () =>
      mine()
        .slice(before)
        .map((r) => (JSON.parse(r.body) as { type: string }).type);
    const due = ['membership.issued', 'membership.revoked'];
    await until('the retry and the held event after undelete', () => Promise.resolve(due.every((d) => typesSince().includes(d))));
    expect(typesSince()).to.include.members(due);
  });

  it("the expiry scheduler passes over a deleted organisation's memberships until undelete", async () => {
    const t = await createTenant(app.client);
    const expiration = Math.floor(Date.now() / 1000) + 3_600;
    const issued = await t.projectAdmin.post('/api/v1/membership/issue', [{ membershipType: 'gym:gold', walletAddress: address(), expiration }]);
    expect(issued.status, issued.text).to.equal(201);
    const tokenId = issued.body.memberships[0]?.tokenId;
    expect((await app.client.delete(`/api/v1/organisations/${t.org.id}`)).status).to.be.oneOf([200, 204]);
    const later = expiration + 60;
    const mineOf = (rows: Array<{ project_id: number | string }>) => rows.filter((r) => Number(r.project_id) === t.project.id);
    // Claimed in a transaction that is rolled back: the scheduler's step, seen without its effect.
    const claimRolledBack = async () => {
      const tx = await app.db.transaction();
      try {
        return mineOf(await claimExpired(tx, later, 10_000));
      } finally {
        await tx.rollback();
      }
    };
    expect(await claimRolledBack()).to.deep.equal([]);
    expect((await app.client.post(`/api/v1/organisations/${t.org.id}/undelete`)).status).to.equal(200);
    expect(tokenId).to.be.a('string');
    expect(await claimRolledBack()).to.have.length(1);
  });
});
