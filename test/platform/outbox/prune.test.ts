import { expect } from 'chai';
import { pruneOutbox } from '../../../src/platform/outbox/prune.js';
import { startApp, type TestApp } from '../../support/app.js';
import { createTenant } from '../../support/factories.js';

describe('outbox retention', () => {
  let app: TestApp;
  before(async () => {
    app = await startApp();
  });
  after(() => app.close());

  it('deletes done rows older than the retention, never pending or failed ones, nor recent ones', async () => {
    const t = await createTenant(app.client);
    const row = (status: string, ageDays: number) => ({
      project_id: t.project.id,
      kind: 'delivery',
      delivery_kind: 'wallet',
      url: 'https://hooks.example.com',
      payload: '{}',
      message_id: `msg_prune_${status}_${ageDays}_${Math.random().toString(36).slice(2)}`,
      status,
      next_attempt_at: status === 'done' ? null : app.db.fn.now(),
      created_at: app.db.raw(`now() - make_interval(days => ?)`, [ageDays]),
    });
    const ids: Array<{ id: number }> = await app
      .db('outbox')
      .insert([row('done', 10), row('done', 2), row('failed', 30), row('pending', 30)])
      .returning('id');
    const deleted = await pruneOutbox(app.db, 7);
    expect(deleted).to.be.at.least(1);
    const left: Array<{ status: string }> = await app
      .db('outbox')
      .whereIn(
        'id',
        ids.map((r) => r.id),
      )
      .select('status');
    expect(left.map((r) => r.status).sort()).to.deep.equal(['done', 'failed', 'pending']);
  });
});
