import { expect } from 'chai';
import pg from 'pg';
import { recordEvents } from '../../../src/domains/webhooks/record.js';
import { notifyOutbox } from '../../../src/platform/outbox/repository.js';
import { testDatabaseUrl, testDb } from '../../support/db.js';

/** The statements that sent a notice while `fn` ran. */
async function noticesDuring(fn: () => Promise<void>): Promise<number> {
  let n = 0;
  const count = (q: { sql: string }) => {
    if (q.sql.includes('pg_notify')) n++;
  };
  testDb().on('query', count);
  try {
    await fn();
  } finally {
    testDb().off('query', count);
  }
  return n;
}

describe('Notices: one per transaction', () => {
  let projectId = 0;

  before(async () => {
    const db = testDb();
    const [org] = await db('organisations').insert({ name: 'notify' }).returning('id');
    const [project] = await db('projects')
      .insert({ organisation_id: org.id, name: 'notify', environment: 'testnet', issuer: 'https://issuer.invalid', wallet_webhook_secret_enc: 'unused' })
      .returning('id');
    projectId = Number(project.id);
  });

  const event = { type: 'membership.issued' as const, data: {} };

  it('a transaction that queues several rows wakes the relays once; on the pool each statement does', async () => {
    const db = testDb();
    expect(
      await noticesDuring(() =>
        db.transaction(async (tx) => {
          for (let i = 0; i < 3; i++) await recordEvents(tx, projectId, [event], new Date());
        }),
      ),
    ).to.equal(1);
    expect(
      await noticesDuring(async () => {
        await notifyOutbox(db);
        await notifyOutbox(db);
      }),
    ).to.equal(2);
  });

  it('a savepoint rolled back takes its notice with it: the enclosing transaction notifies again', async () => {
    const db = testDb();
    const n = await noticesDuring(() =>
      db.transaction(async (tx) => {
        await tx
          .transaction(async (sp) => {
            await recordEvents(sp, projectId, [event], new Date());
            throw new Error('rolled back');
          })
          .catch(() => undefined);
        await recordEvents(tx, projectId, [event], new Date());
        await recordEvents(tx, projectId, [event], new Date());
      }),
    );
    expect(n).to.equal(2);
  });

  it('a transaction that writes an organisation and a project sends one custody_projects notice', async () => {
    const listener = new pg.Client({ connectionString: testDatabaseUrl() });
    await listener.connect();
    try {
      const heard: string[] = [];
      listener.on('notification', (m) => heard.push(m.payload ?? ''));
      await listener.query('LISTEN custody_projects');
      const db = testDb();
      await db.transaction(async (tx) => {
        const [org] = await tx('organisations').insert({ name: 'notify-once' }).returning('id');
        await tx('projects').insert({
          organisation_id: org.id,
          name: 'notify-once',
          environment: 'testnet',
          issuer: 'https://issuer.invalid',
          wallet_webhook_secret_enc: 'unused',
        });
        await tx('organisations').where({ id: org.id }).update({ name: 'notify-once, renamed' });
      });
      await db('organisations').insert({ name: 'notify-twice' });
      await new Promise((r) => setTimeout(r, 300));
      expect(heard).to.deep.equal(['organisations', 'organisations']);
    } finally {
      await listener.end();
    }
  });
});
