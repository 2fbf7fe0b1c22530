import { expect } from 'chai';
import pg from 'pg';
import { GroupCommit } from '../../../src/platform/db/group-commit.js';
import { OUTBOX_CHANNEL } from '../../../src/platform/outbox/repository.js';
import { DecisionLog, type Decision } from '../../../src/domains/signing/decisions.js';
import { testDatabaseUrl, testDb } from '../../support/db.js';

describe('signing decisions: recorded together under load (domains/signing/decisions.ts, platform/db/group-commit.ts)', () => {
  it('writes a row at once when idle, then every row that waited in one statement; a failed statement fails exactly its own rows', async () => {
    const groups: number[][] = [];
    let fail = false;
    const gate: Array<() => void> = [];
    const group = new GroupCommit<number>(async (rows) => {
      groups.push(rows);
      await new Promise<void>((resolve) => gate.push(resolve));
      if (fail) throw new Error('statement failed');
    });
    const first = Array.from({ length: 20 }, (_, i) => group.add(i));
    // Two statements in flight (the default): rows 0 and 1 went at once, the other 18 wait together.
    expect(groups).to.deep.equal([[0], [1]]);
    gate.splice(0).forEach((open) => open());
    await Promise.all(first.slice(0, 2));
    expect(groups[2]).to.deep.equal(Array.from({ length: 18 }, (_, i) => i + 2));
    fail = true;
    gate.splice(0).forEach((open) => open());
    const outcomes = await Promise.allSettled(first);
    expect(outcomes.map((o) => o.status)).to.deep.equal([...Array<string>(2).fill('fulfilled'), ...Array<string>(18).fill('rejected')]);
    // The next statement runs as usual.
    fail = false;
    const later = group.add(99);
    gate.splice(0).forEach((open) => open());
    await later;
    expect(groups.at(-1)).to.deep.equal([99]);
  });

  it("answers each caller its own row's result, and when a group fails by one row's fault, writes its halves again down to that row so that only its caller fails", async () => {
    const statements: number[][] = [];
    const gate: Array<() => void> = [];
    // Row 0's and row 1's statements wait to be let go, so that the rows after them wait together.
    const group = new GroupCommit<number, string>(
      async (rows) => {
        statements.push(rows);
        if (rows[0] === 0 || rows[0] === 1) await new Promise<void>((resolve) => gate.push(resolve));
        if (rows.includes(13)) throw Object.assign(new Error('check violation'), { code: '23514' });
        if (rows.includes(66)) throw Object.assign(new Error('connection lost'), { code: '08006' });
        return rows.map((r) => `row ${r}`);
      },
      { parallel: 1, rowFault: (err) => (err as { code?: string }).code?.startsWith('23') === true },
    );
    const held = group.add(0);
    const rows = [10, 11, 13, 12].map((r) => group.add(r));
    gate.splice(0).forEach((open) => open());
    expect(await held).to.equal('row 0');
    const outcomes = await Promise.allSettled(rows);
    expect(outcomes.map((o) => (o.status === 'fulfilled' ? o.value : (o.reason as Error).message))).to.deep.equal([
      'row 10',
      'row 11',
      'check violation',
      'row 12',
    ]);
    // Together first, then by halves down to the row at fault.
    expect(statements).to.deep.equal([[0], [10, 11, 13, 12], [10, 11], [13, 12], [13], [12]]);
    // A failure that is no row's (the database lost) is every caller's, with no statement again.
    statements.length = 0;
    // The last statement's slot is free a turn of the event loop after its callers are answered.
    await new Promise((r) => setImmediate(r));
    const blocker = group.add(1);
    const lost = [65, 66].map((r) => group.add(r));
    gate.splice(0).forEach((open) => open());
    await blocker;
    expect((await Promise.allSettled(lost)).map((o) => o.status)).to.deep.equal(['rejected', 'rejected']);
    expect(statements).to.deep.equal([[1], [65, 66]]);
  });

  /** An organisation with a project subscribing to denials and a quiet one, with `count` wallets each. */
  async function tenant(count: number) {
    const db = testDb();
    const [org] = await db('organisations')
      .insert({ name: `decisions ${Date.now()}` })
      .returning<Array<{ id: number }>>('id');
    const organisationId = org?.id ?? 0;
    const project = async (events: string[] | null) => {
      const [p] = await db('projects')
        .insert({ organisation_id: organisationId, name: 'p', environment: 'testnet', issuer: 'https://idp.example.com', wallet_webhook_secret_enc: 'x' })
        .returning<Array<{ id: number }>>('id');
      const id = p?.id ?? 0;
      if (events) await db('webhook_subscriptions').insert({ project_id: id, url: 'http://127.0.0.1:9/', events, secret_enc: 'x' });
      const wallets = await db('wallets')
        .insert(Array.from({ length: count }, (_, i) => ({ project_id: id, email: `u${i}@example.com`, email_lower: `u${i}@example.com` })))
        .returning<Array<{ id: number }>>('id');
      return { id, wallets: wallets.map((w) => w.id) };
    };
    const subscribed = await project(['wallet.signature.denied']);
    const quiet = await project(null);
    /** Decision i: the even ones in the subscribing project, every fourth a denial. */
    const decision = (i: number): Decision => {
      const walletId = (i % 2 === 0 ? subscribed : quiet).wallets[Math.floor(i / 2)] ?? 0;
      return {
        organisationId,
        projectId: i % 2 === 0 ? subscribed.id : quiet.id,
        walletId,
        actor: `token:${i}`,
        requestId: `req-${i}`,
        type: i % 4 === 0 ? 'wallet.signature.denied' : 'wallet.signature.created',
        details: { walletId, digest: `0x${i.toString(16).padStart(64, '0')}`, rule: i % 4 === 0 ? 'no' : 'yes' },
        at: new Date(),
      };
    };
    const audit = () => db('audit_log').whereIn('project_id', [subscribed.id, quiet.id]).orderBy('id');
    const events = () => db('outbox').whereIn('project_id', [subscribed.id, quiet.id]).where({ kind: 'event' }).orderBy('id');
    // Nothing left for a later suite's relay to deliver.
    const cleanUp = async () => {
      await db('outbox').whereIn('project_id', [subscribed.id, quiet.id]).delete();
      await db('webhook_subscriptions').where({ project_id: subscribed.id }).update({ deleted_at: db.fn.now() });
    };
    return { db, organisationId, subscribed, decision, audit, events, cleanUp };
  }

  it('records each decision as its audit entry, and its event where a subscription names it, with one wake-up of the relays per statement', async () => {
    const t = await tenant(10);
    const listener = new pg.Client({ connectionString: testDatabaseUrl() });
    await listener.connect();
    const notices: string[] = [];
    listener.on('notification', (n) => notices.push(n.channel));
    await listener.query(`LISTEN ${OUTBOX_CHANNEL}`);
    try {
      const log = new DecisionLog(t.db);
      await Promise.all(Array.from({ length: 20 }, (_, i) => log.record(t.decision(i))));

      const audit = await t.audit();
      expect(audit).to.have.length(20);
      for (const row of audit) {
        const d = t.decision(Number(String(row.request_id).slice(4)));
        expect(row).to.include({ organisation_id: t.organisationId, project_id: d.projectId, actor: d.actor, action: d.type, target: `wallet:${d.walletId}` });
        expect(row.status).to.equal(d.type === 'wallet.signature.denied' ? 403 : 200);
        expect(row.details).to.deep.equal(d.details);
      }
      // Written by fewer statements than decisions (1, 1, then 18): a statement's rows share its transaction's time.
      expect(new Set(audit.map((r) => (r.at as Date).getTime())).size).to.be.at.most(3);

      // Events only in the project subscribing, only of the type it names: decisions 0, 4, 8, 12, 16.
      const events = await t.events();
      const denials = [0, 4, 8, 12, 16].map(t.decision);
      expect(events.map((e) => [e.project_id, e.event, e.wallet_id]).sort()).to.deep.equal(
        denials.map((d) => [t.subscribed.id, 'wallet.signature.denied', d.walletId]).sort(),
      );
      expect(new Set(events.map((e) => e.message_id)).size).to.equal(5);
      for (const e of events) {
        const [envelope] = JSON.parse(String(e.payload)) as Array<{ type: string; projectId: number; data: unknown }>;
        expect(envelope).to.include({ type: 'wallet.signature.denied', projectId: t.subscribed.id });
        expect(envelope?.data).to.deep.equal(denials.find((d) => d.walletId === e.wallet_id)?.details);
      }
      await new Promise((r) => setTimeout(r, 100));
      expect(notices.length).to.be.within(1, 3);
    } finally {
      await listener.end();
      await t.cleanUp();
    }
  });

  it('fails every decision of a statement that fails and records none of them, the statements before it unaffected', async () => {
    const t = await tenant(4);
    try {
      const log = new DecisionLog(t.db);
      // Decisions 0 and 1 go at once; 2, 3 and 4 wait and go together, 4 naming a wallet that does not exist.
      const decisions = [0, 1, 2, 3, 4].map(t.decision);
      const missing = { ...t.decision(4), walletId: 2 ** 52 };
      const outcomes = await Promise.allSettled([...decisions.slice(0, 4), missing].map((d) => log.record(d)));
      expect(outcomes.map((o) => (o.status === 'rejected' ? (o.reason as { code?: string }).code : 'recorded'))).to.deep.equal([
        'recorded',
        'recorded',
        '23503',
        '23503',
        '23503',
      ]);
      expect((await t.audit()).map((r) => r.request_id)).to.have.members(['req-0', 'req-1']);
      expect((await t.events()).map((e) => e.wallet_id)).to.deep.equal([decisions[0]?.walletId]);
    } finally {
      await t.cleanUp();
    }
  });
});
