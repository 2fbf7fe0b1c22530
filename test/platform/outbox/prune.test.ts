import { expect } from 'chai';
import { deleteInBatches } from '../../../src/platform/db/batches.js';
import { deleteExpiredKeys } from '../../../src/platform/idempotency/repository.js';
import { pruneOutbox } from '../../../src/platform/outbox/prune.js';
import { pruneSignatures } from '../../../src/domains/signing/policies/limits.js';
import { startApp, type TestApp } from '../../support/app.js';
import { createTenant } from '../../support/factories.js';

describe('outbox retention, and every prune', () => {
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

  it('each prune deletes everything due in one run, a batch at a time (one batch a run fell behind for good past a batch every run)', async () => {
    const t = await createTenant(app.client);
    const [wallet] = await app
      .db('wallets')
      .insert({ project_id: t.project.id, email: 'prune@example.com', email_lower: 'prune@example.com' })
      .returning<Array<{ id: number }>>('id');
    const old = app.db.raw(`now() - interval '400 days'`);
    await app.db('outbox').insert(
      Array.from({ length: 5 }, (_, i) => ({
        project_id: t.project.id,
        kind: 'delivery',
        delivery_kind: 'wallet',
        url: 'https://hooks.example.com',
        payload: '{}',
        message_id: `msg_prune_batches_${i}_${Math.random().toString(36).slice(2)}`,
        status: 'done',
        created_at: old,
      })),
    );
    await app
      .db('wallet_signatures')
      .insert(Array.from({ length: 5 }, () => ({ project_id: t.project.id, wallet_id: wallet!.id, method: 'personal_sign', created_at: old })));
    await app
      .db('idempotency_keys')
      .insert(
        Array.from({ length: 5 }, (_, i) => ({ principal: `prune-${t.project.id}`, key: `k${i}`, fingerprint: 'f', response_status: 200, expires_at: old })),
      );
    const left = async () => [
      Number((await app.db('outbox').where({ project_id: t.project.id, status: 'done' }).count<Array<{ count: string }>>('id as count'))[0]?.count),
      Number((await app.db('wallet_signatures').where({ wallet_id: wallet!.id }).count<Array<{ count: string }>>('id as count'))[0]?.count),
      Number(
        (
          await app
            .db('idempotency_keys')
            .where({ principal: `prune-${t.project.id}` })
            .count<Array<{ count: string }>>('key as count')
        )[0]?.count,
      ),
    ];
    expect(await left()).to.deep.equal([5, 5, 5]);
    expect(await pruneOutbox(app.db, 7, 2)).to.be.at.least(5);
    expect(await pruneSignatures(app.db, 2)).to.be.at.least(5);
    expect(await deleteExpiredKeys(app.db, 2)).to.be.at.least(5);
    expect(await left()).to.deep.equal([0, 0, 0]);
  });

  it('deleteInBatches stops at a short batch, and after its most batches', async () => {
    const sizes: number[] = [];
    let due = 7;
    const batch = (n: number) => {
      const deleted = Math.min(n, due);
      due -= deleted;
      sizes.push(deleted);
      return Promise.resolve(deleted);
    };
    expect(await deleteInBatches(batch, 3)).to.equal(7);
    expect(sizes).to.deep.equal([3, 3, 1]);
    due = 100;
    expect(await deleteInBatches(batch, 3, 2), 'two batches at most').to.equal(6);
    due = 6;
    sizes.length = 0;
    expect(await deleteInBatches(batch, 3)).to.equal(6);
    expect(sizes, 'a batch that finds nothing ends it').to.deep.equal([3, 3, 0]);
  });
});
