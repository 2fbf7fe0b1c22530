import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { getAddress } from 'ethers';
import { createLogger } from '../../../src/platform/logging/logger.js';
import { expireMemberships } from '../../../src/domains/memberships/expiry.js';
import { Scheduler } from '../../../src/platform/runtime/scheduler.js';
import { startApp, type TestApp } from '../../support/app.js';
import { expectUnchanged as expectUnchangedIn, snapshot } from '../../support/db.js';
import { createTenant } from '../../support/factories.js';
import { required, type Client, type Reply } from '../../support/http.js';

/** A random address in its EIP-55 form. */
const address = () => getAddress(`0x${randomBytes(20).toString('hex')}`);
/**
 * The address with the case of one letter flipped: a broken checksum, still mixed case (an
 * all-lower or all-upper result would be a valid address). Addresses with too few letters of
 * either case are replaced by another random one.
 */
function badChecksum(a: string): string {
  for (let candidate = a; ; candidate = address()) {
    const hex = candidate.slice(2);
    if ((hex.match(/[A-F]/g) ?? []).length >= 2 && (hex.match(/[a-f]/g) ?? []).length >= 2) {
      const i = [...candidate].findIndex((c, n) => n > 1 && /[a-fA-F]/.test(c));
      const c = candidate[i] ?? '';
      return candidate.slice(0, i) + (c === c.toUpperCase() ? c.toLowerCase() : c.toUpperCase()) + candidate.slice(i + 1);
    }
  }
}
const type = () => `club:${randomBytes(4).toString('hex')}`;

describe('Memberships', () => {
  let app: TestApp;
  /** The app's clock runs `offsetMs` ahead of the real one: expirations pass without waiting. */
  let offsetMs = 0;
  const now = () => Date.now() + offsetMs;
  const nowS = () => Math.floor(now() / 1000);

  before(async () => {
    app = await startApp({}, undefined, { now });
  });
  after(() => app.close());
  afterEach(() => {
    offsetMs = 0;
  });

  /** A fresh tenant; `admin` is its project-scoped admin client. */
  async function tenant() {
    const t = await createTenant(app.client);
    return { ...t, admin: t.projectAdmin };
  }

  async function issue(client: Client, items: unknown, query: '' | `?${string}` = '') {
    return client.post(`/api/v1/membership/issue${query}`, items);
  }

  async function eventsOf(projectId: number): Promise<Array<{ type: string; data: Record<string, unknown> }>> {
    const rows = await app.db('outbox').where({ project_id: projectId, kind: 'event' }).orderBy('id');
    // Each row holds the events of one change, as an array of envelopes.
    return rows.flatMap((r: { payload: string }) => JSON.parse(r.payload) as Array<{ type: string; data: Record<string, unknown> }>);
  }

  const ledgerOf = (projectId: number) => app.db('membership_transactions').where({ project_id: projectId }).orderBy('id');

  const expectUnchanged = <T>(call: () => Promise<Reply<T>>, status: number, code: string) => expectUnchangedIn(app, call, status, code);

  describe('issue', () => {
    it('issues a batch (201, input order, EIP-55 addresses, decimal tokenIds) with a mint and the events of each item in the same transaction', async () => {
      const t = await tenant();
      const [a, b] = [address(), address()];
      const exp = nowS() + 3600;
      const res = await issue(t.admin, [
        { membershipType: 'gym:gold', walletAddress: a.toLowerCase(), expiration: exp, transferable: true },
        { membershipType: 'gym:silver', walletAddress: `0x${b.slice(2).toUpperCase()}` },
      ]);
      expect(res.status, res.text).to.equal(201);
      const [first, second] = [required(res.body.memberships[0]), required(res.body.memberships[1])];
      expect(first).to.include({ membershipType: 'gym:gold', walletAddress: a, expiration: exp, transferable: true, status: 'active', revokedAt: null });
      expect(second).to.include({ membershipType: 'gym:silver', walletAddress: b, expiration: 0, transferable: false, status: 'active' });
      expect(first).to.have.all.keys(
        'tokenId',
        'membershipType',
        'walletAddress',
        'expiration',
        'transferable',
        'status',
        'issuedAt',
        'updatedAt',
        'revokedAt',
      );
      expect(first.tokenId).to.match(/^[1-9][0-9]*$/);
      expect(first.tokenId).not.to.equal(second.tokenId);

      const ledger = await ledgerOf(t.project.id);
      expect(ledger.map((r) => [r.type, String(r.token_id), r.from_address, r.to_address])).to.deep.equal([
        ['mint', first.tokenId, null, a],
        ['mint', second.tokenId, null, b],
      ]);
      const events = await eventsOf(t.project.id);
      expect(events.map((e) => e.type)).to.deep.equal([
        'membership.issued',
        'membership.updated',
        'transaction.created',
        'membership.issued',
        'membership.updated',
        'transaction.created',
      ]);
      expect(events[0]?.data).to.deep.equal(first);
      expect(events[1]?.data).to.deep.equal({ ...first, change: 'issued' });
      expect(events[2]?.data).to.include({ type: 'mint', tokenId: first.tokenId, membershipType: 'gym:gold', from: null, to: a });
      expect(events[2]?.data['transactionId']).to.equal(String(ledger[0].id));
    });

    it('refuses invalid items with 400, per-item errors and no change at all', async () => {
      const t = await tenant();
      const a = address();
      const cases: Array<[unknown, string]> = [
        [[], '/'],
        [{ membershipType: 'gym:gold', walletAddress: a }, '/'],
        [Array.from({ length: 1001 }, () => ({ membershipType: 'gym:gold', walletAddress: address() })), '/'],
        [[{ membershipType: 'gold', walletAddress: a }], '/0/membershipType'],
        [[{ membershipType: 'gym:gold:plus', walletAddress: a }], '/0/membershipType'],
        [[{ membershipType: 'gym :gold', walletAddress: a }], '/0/membershipType'],
        [[{ membershipType: ':gold', walletAddress: a }], '/0/membershipType'],
        [[{ membershipType: `gym:${'g'.repeat(65)}`, walletAddress: a }], '/0/membershipType'],
        [[{ membershipType: 'gym:gold', walletAddress: badChecksum(a) }], '/0/walletAddress'],
        [[{ membershipType: 'gym:gold', walletAddress: a.slice(0, 41) }], '/0/walletAddress'],
        [[{ membershipType: 'gym:gold', walletAddress: a.slice(2) }], '/0/walletAddress'],
        [[{ membershipType: 'gym:gold', walletAddress: a, expiration: nowS() - 10 }], '/0/expiration'],
        [[{ membershipType: 'gym:gold', walletAddress: a, expiration: -1 }], '/0/expiration'],
        [[{ membershipType: 'gym:gold', walletAddress: a, expiration: 1.5 }], '/0/expiration'],
        [[{ membershipType: 'gym:gold', walletAddress: a, expiration: '0' }], '/0/expiration'],
        [[{ membershipType: 'gym:gold', walletAddress: a, transferable: 'false' }], '/0/transferable'],
        [[{ membershipType: 'gym:gold', walletAddress: a, override: 1 }], '/0/override'],
        [[{ membershipType: 'gym:gold', walletAddress: a, color: 'red' }], '/0/color'],
        [[{ walletAddress: a }], '/0/membershipType'],
        [
          [
            { membershipType: 'gym:gold', walletAddress: a },
            { membershipType: 'gym:gold', walletAddress: a.toLowerCase() },
          ],
          '/1',
        ],
      ];
      for (const [body, path] of cases) {
        const res = await expectUnchanged(() => issue(t.admin, body), 400, 'validation_failed');
        expect(
          (res.problem.errors ?? []).map((e: { path: string }) => e.path),
          JSON.stringify(body).slice(0, 200),
        ).to.include(path);
      }
      // Every problem of a batch is listed, item by item.
      const res = await issue(t.admin, [
        { membershipType: 'gym:gold', walletAddress: a },
        { membershipType: 'bad', walletAddress: a },
        { membershipType: 'gym:gold', walletAddress: '0x12' },
      ]);
      expect(res.status).to.equal(400);
      expect((res.problem.errors ?? []).map((e: { path: string }) => e.path)).to.have.members(['/1/membershipType', '/2/walletAddress']);
    });

    it('a conflicting batch changes nothing (409 already_member naming the item); override updates in place', async () => {
      const t = await tenant();
      const [a, b] = [address(), address()];
      const first = await issue(t.admin, [{ membershipType: 'gym:gold', walletAddress: a, expiration: nowS() + 100 }]);
      expect(first.status).to.equal(201);
      const tokenId = first.body.memberships[0]!.tokenId;

      const conflict = await expectUnchanged(
        () =>
          issue(t.admin, [
            { membershipType: 'gym:gold', walletAddress: b },
            { membershipType: 'gym:gold', walletAddress: a.toLowerCase() },
          ]),
        409,
        'already_member',
      );
      expect(conflict.problem.errors).to.have.length(1);
      expect(conflict.problem.errors?.[0]?.path).to.equal('/1');
      expect(conflict.problem.errors?.[0]?.message).to.include(tokenId);

      // The same wallet may hold another type, and another wallet the same type.
      const other = await issue(t.admin, [
        { membershipType: 'gym:silver', walletAddress: a },
        { membershipType: 'gym:gold', walletAddress: b },
      ]);
      expect(other.status).to.equal(201);

      const exp = nowS() + 7200;
      const over = await issue(t.admin, [{ membershipType: 'gym:gold', walletAddress: a, expiration: exp, transferable: true, override: true }]);
      expect(over.status, over.text).to.equal(201);
      expect(over.body.memberships[0]).to.include({ tokenId, expiration: exp, transferable: true, status: 'active', walletAddress: a });
      const rows = await app.db('memberships').where({ project_id: t.project.id, wallet_lower: a.toLowerCase(), membership_type: 'gym:gold' });
      expect(rows).to.have.length(1);
      const ledger = await ledgerOf(t.project.id);
      expect(ledger.at(-1)).to.include({ type: 'update', token_id: Number(tokenId), from_address: a, to_address: a });
      const events = await eventsOf(t.project.id);
      expect(events.slice(-2).map((e) => e.type)).to.deep.equal(['membership.updated', 'transaction.created']);
      expect(events.at(-2)?.data).to.include({ tokenId, change: 'overridden', expiration: exp });

      // override with nothing to override simply issues.
      const fresh = await issue(t.admin, [{ membershipType: 'gym:bronze', walletAddress: a, override: true }]);
      expect(fresh.status).to.equal(201);
      expect((await ledgerOf(t.project.id)).at(-1)).to.include({ type: 'mint' });
    });

    it('replays an issue sent again with the same Idempotency-Key', async () => {
      const t = await tenant();
      const body = [{ membershipType: type(), walletAddress: address() }];
      const headers = { 'idempotency-key': `issue-${randomBytes(4).toString('hex')}` };
      const one = await t.admin.post('/api/v1/membership/issue', body, { headers });
      const two = await t.admin.post('/api/v1/membership/issue', body, { headers });
      expect(one.status).to.equal(201);
      expect(two.status).to.equal(201);
      expect(two.body).to.deep.equal(one.body);
      expect(await app.db('memberships').where({ project_id: t.project.id })).to.have.length(1);
    });
  });

  describe('expiry', () => {
    it('a membership becomes expired by the clock alone: no write, hidden unless includeExpired, and its place is free again', async () => {
      const t = await tenant();
      const a = address();
      const exp = nowS() + 60;
      const res = await issue(t.admin, [{ membershipType: 'gym:gold', walletAddress: a, expiration: exp, transferable: true }]);
      const tokenId = res.body.memberships[0]!.tokenId;
      const view = (q = '') => t.admin.get(`/api/v1/membership/view?walletAddress=${a}${q}`);
      expect((await view()).body.memberships.map((m: { status: string }) => m.status)).to.deep.equal(['active']);

      const before = await snapshot(app.db);
      offsetMs = 61_000;
      expect((await view()).body.memberships).to.deep.equal([]);
      const withExpired = await view('&includeExpired=true');
      expect(withExpired.body.memberships).to.have.length(1);
      expect(withExpired.body.memberships[0]).to.include({ tokenId, status: 'expired' });
      expect(await snapshot(app.db)).to.deep.equal(before);

      // Expired: not transferable, and the wallet may be issued that type again.
      const transfer = await t.admin.post('/api/v1/membership/transfer', { from: a, to: address(), tokenId });
      expect(transfer.status).to.equal(409);
      expect(transfer.problem.code).to.equal('membership_inactive');
      const again = await issue(t.admin, [{ membershipType: 'gym:gold', walletAddress: a }]);
      expect(again.status, again.text).to.equal(201);
      expect(again.body.memberships[0]!.tokenId).not.to.equal(tokenId);
      const all = await view('&includeExpired=1');
      expect(all.body.memberships.map((m: { status: string }) => m.status)).to.deep.equal(['expired', 'active']);
    });

    it('the scheduler records membership.expired and membership.updated once per membership, with schedulers side by side', async () => {
      const t = await tenant();
      const exp = nowS() + 30;
      const items = Array.from({ length: 30 }, () => ({ membershipType: 'gym:day', walletAddress: address(), expiration: exp }));
      expect((await issue(t.admin, items)).status).to.equal(201);
      const revoked = await issue(t.admin, [{ membershipType: 'gym:day', walletAddress: address(), expiration: exp }]);
      await t.admin.post('/api/v1/membership/revoke', { tokenId: revoked.body.memberships[0]!.tokenId });
      const later = () => Date.now() + 31_000;
      const schedulers = [1, 2, 3].map(() => ({ runOnce: () => expireMemberships(app.db, later, 7) }));

      // Before the expiration passes, nothing.
      const early = { runOnce: () => expireMemberships(app.db, Date.now) };
      expect(await early.runOnce()).to.equal(0);

      const counts = await Promise.all(schedulers.map((s) => s.runOnce()));
      expect(counts.reduce((x, y) => x + y, 0)).to.be.at.least(30);
      expect(await schedulers[0]?.runOnce()).to.equal(0);

      const events = (await eventsOf(t.project.id)).filter((e) => e.type === 'membership.expired' || e.data['change'] === 'expired');
      expect(events).to.have.length(60);
      const expiredIds = events.filter((e) => e.type === 'membership.expired').map((e) => e.data['tokenId']);
      expect(new Set(expiredIds).size).to.equal(30);
      expect(expiredIds).not.to.include(revoked.body.memberships[0]!.tokenId);
      expect(events[0]?.data).to.include({ status: 'expired', expiration: exp });
    });

    it('the scheduler started on an interval finds expirations by itself', async () => {
      const t = await tenant();
      const res = await issue(t.admin, [{ membershipType: 'gym:hour', walletAddress: address(), expiration: nowS() + 30 }]);
      const tokenId = res.body.memberships[0]!.tokenId;
      const expiry = { name: 'membership-expiry', role: 'worker' as const, everyMs: 20, run: () => expireMemberships(app.db, () => Date.now() + 31_000) };
      const scheduler = new Scheduler([expiry], createLogger('silent'));
      scheduler.start();
      try {
        let found = 0;
        for (let i = 0; i < 200 && found === 0; i++) {
          await new Promise((r) => setTimeout(r, 25));
          found = (await eventsOf(t.project.id)).filter((e) => e.type === 'membership.expired' && e.data['tokenId'] === tokenId).length;
        }
        expect(found).to.equal(1);
      } finally {
        await scheduler.stop();
      }
    });
  });

  describe('revoke', () => {
    it('soft revoke: 200 with the record, idempotent (nothing recorded twice), hidden unless includeRevoked, place freed', async () => {
      const t = await tenant();
      const a = address();
      const tokenId = (await issue(t.admin, [{ membershipType: 'gym:gold', walletAddress: a }])).body.memberships[0]!.tokenId;
      const res = await t.admin.post('/api/v1/membership/revoke', { tokenId, hardDelete: false });
      expect(res.status, res.text).to.equal(200);
      expect(res.body).to.include({ tokenId, status: 'revoked' });
      expect(res.body?.revokedAt).to.be.a('string');

      // The repeated request is audited (it is a management write); nothing else changes.
      const before = await snapshot(app.db, { except: ['audit_log'] });
      const again = await t.admin.post('/api/v1/membership/revoke', { tokenId });
      expect(again.status).to.equal(200);
      expect(again.body).to.deep.equal(res.body);
      expect(await snapshot(app.db, { except: ['audit_log'] })).to.deep.equal(before);

      expect((await ledgerOf(t.project.id)).map((r) => r.type)).to.deep.equal(['mint', 'burn']);
      const events = (await eventsOf(t.project.id)).slice(3);
      expect(events.map((e) => e.type)).to.deep.equal(['membership.revoked', 'membership.updated', 'transaction.created']);
      expect(events[1]?.data).to.include({ change: 'revoked', status: 'revoked' });
      expect(events[2]?.data).to.include({ type: 'burn', from: a, to: null });

      expect((await t.admin.get(`/api/v1/membership/view?walletAddress=${a}`)).body.memberships).to.deep.equal([]);
      const shown = await t.admin.get(`/api/v1/membership/view?walletAddress=${a}&includeRevoked=true`);
      expect(shown.body.memberships.map((m: { tokenId: string }) => m.tokenId)).to.deep.equal([tokenId]);
      expect((await issue(t.admin, [{ membershipType: 'gym:gold', walletAddress: a }])).status).to.equal(201);
    });

    it('hard delete: 204, gone from every view, a delete transaction, then 404', async () => {
      const t = await tenant();
      const a = address();
      const tokenId = (await issue(t.admin, [{ membershipType: 'gym:gold', walletAddress: a }])).body.memberships[0]!.tokenId;
      const res = await t.admin.post('/api/v1/membership/revoke', { tokenId, hardDelete: true });
      expect(res.status).to.equal(204);
      expect(res.text).to.equal('');
      for (const q of ['', '&includeRevoked=true', '&includeExpired=true', '&includeRevoked=true&includeExpired=true']) {
        expect((await t.admin.get(`/api/v1/membership/view?walletAddress=${a}${q}`)).body.memberships).to.deep.equal([]);
      }
      expect((await t.admin.get('/api/v1/membership/view?includeRevoked=1&includeExpired=1')).body.memberships).to.deep.equal([]);
      expect((await ledgerOf(t.project.id)).map((r) => r.type)).to.deep.equal(['mint', 'delete']);
      const events = (await eventsOf(t.project.id)).slice(3);
      expect(events.map((e) => [e.type, e.data['change']])).to.deep.equal([
        ['membership.updated', 'deleted'],
        ['transaction.created', undefined],
      ]);
      await expectUnchanged(() => t.admin.post('/api/v1/membership/revoke', { tokenId, hardDelete: true }), 404, 'not_found');
      await expectUnchanged(() => t.admin.post('/api/v1/membership/revoke', { tokenId }), 404, 'not_found');
    });

    it('tokenId rules: unknown → 404; not a decimal uint256, or beyond 2^256 - 1 → 400; bad hardDelete → 400', async () => {
      const t = await tenant();
      const max = ((1n << 256n) - 1n).toString();
      const revoke = (body: unknown) => () => t.admin.post('/api/v1/membership/revoke', body);
      await expectUnchanged(revoke({ tokenId: '999999999999' }), 404, 'not_found');
      await expectUnchanged(revoke({ tokenId: max }), 404, 'not_found');
      await expectUnchanged(revoke({ tokenId: '0' }), 404, 'not_found');
      for (const tokenId of [(1n << 256n).toString(), '-1', '01', '1e3', 'abc', '', ' 1', 12]) {
        await expectUnchanged(revoke({ tokenId }), 400, 'validation_failed');
      }
      await expectUnchanged(revoke({}), 400, 'validation_failed');
      for (const hardDelete of ['true', 1, null]) await expectUnchanged(revoke({ tokenId: '1', hardDelete }), 400, 'validation_failed');
    });

    it("another project's tokenId is 404", async () => {
      const [t, u] = await Promise.all([tenant(), tenant()]);
      const tokenId = (await issue(t.admin, [{ membershipType: 'gym:gold', walletAddress: address() }])).body.memberships[0]!.tokenId;
      await expectUnchanged(() => u.admin.post('/api/v1/membership/revoke', { tokenId }), 404, 'not_found');
      await expectUnchanged(() => u.admin.post('/api/v1/membership/transfer', { tokenId, from: address(), to: address() }), 404, 'not_found');
    });
  });

  describe('transfer', () => {
    async function issued(t: Awaited<ReturnType<typeof tenant>>, item: Record<string, unknown> = {}) {
      const holder = address();
      const res = await issue(t.admin, [{ membershipType: 'gym:gold', walletAddress: holder, transferable: true, ...item }]);
      expect(res.status, res.text).to.equal(201);
      return { holder, tokenId: res.body.memberships[0]!.tokenId };
    }
    const transfer = (t: { admin: Client }, body: unknown) => () => t.admin.post('/api/v1/membership/transfer', body);

    it('moves the membership (same tokenId, new holder) with a transfer transaction and its events; mixed-case addresses are fine', async () => {
      const t = await tenant();
      const { holder, tokenId } = await issued(t);
      const to = address();
      const res = await t.admin.post('/api/v1/membership/transfer', { from: holder.toLowerCase(), to: `0x${to.slice(2).toUpperCase()}`, tokenId });
      expect(res.status, res.text).to.equal(200);
      expect(res.body).to.include({ tokenId, walletAddress: to, status: 'active' });
      expect((await t.admin.get(`/api/v1/membership/view?walletAddress=${holder}`)).body.memberships).to.deep.equal([]);
      expect((await t.admin.get(`/api/v1/membership/view?walletAddress=${to.toLowerCase()}`)).body.memberships[0]).to.include({ tokenId });
      expect((await ledgerOf(t.project.id)).at(-1)).to.include({ type: 'transfer', from_address: holder, to_address: to });
      const events = (await eventsOf(t.project.id)).slice(3);
      expect(events.map((e) => e.type)).to.deep.equal(['membership.transferred', 'membership.updated', 'transaction.created']);
      expect(events[0]?.data).to.include({ from: holder, to, walletAddress: to });
      expect(events[1]?.data).to.include({ change: 'transferred' });
      // The old holder may be issued that type again.
      expect((await issue(t.admin, [{ membershipType: 'gym:gold', walletAddress: holder }])).status).to.equal(201);
    });

    it('refuses, changing nothing: a non-holder, a non-transferable, revoked or expired token, a taken place, the same address, bad addresses', async () => {
      const t = await tenant();
      const { holder, tokenId } = await issued(t);
      await expectUnchanged(transfer(t, { from: address(), to: address(), tokenId }), 409, 'holder_mismatch');

      const fixed = await issued(t, { transferable: false });
      await expectUnchanged(transfer(t, { from: fixed.holder, to: address(), tokenId: fixed.tokenId }), 409, 'not_transferable');

      const gone = await issued(t);
      await t.admin.post('/api/v1/membership/revoke', { tokenId: gone.tokenId });
      await expectUnchanged(transfer(t, { from: gone.holder, to: address(), tokenId: gone.tokenId }), 409, 'membership_inactive');

      const old = await issued(t, { expiration: nowS() + 10 });
      offsetMs = 11_000;
      await expectUnchanged(transfer(t, { from: old.holder, to: address(), tokenId: old.tokenId }), 409, 'membership_inactive');
      offsetMs = 0;

      const taken = await issued(t);
      await expectUnchanged(transfer(t, { from: holder, to: taken.holder, tokenId }), 409, 'already_member');

      await expectUnchanged(transfer(t, { from: holder, to: holder.toLowerCase(), tokenId }), 400, 'validation_failed');
      await expectUnchanged(transfer(t, { from: holder, to: badChecksum(address()), tokenId }), 400, 'validation_failed');
      await expectUnchanged(transfer(t, { from: holder, to: 'nobody', tokenId }), 400, 'validation_failed');
      await expectUnchanged(transfer(t, { from: holder, tokenId }), 400, 'validation_failed');
      await expectUnchanged(transfer(t, { from: holder, to: address(), tokenId: '424242424242' }), 404, 'not_found');

      // A holder whose own membership of that type has expired may receive one.
      const expiredHolder = await issued(t, { expiration: nowS() + 10 });
      offsetMs = 11_000;
      const ok = await t.admin.post('/api/v1/membership/transfer', { from: holder, to: expiredHolder.holder, tokenId });
      expect(ok.status, ok.text).to.equal(200);
    });
  });

  describe('view', () => {
    it('filters by wallet (any case) and type, pages by cursor, and refuses bad booleans, addresses and cursors', async () => {
      const t = await tenant();
      const a = address();
      const items = ['a:1', 'a:2', 'b:1', 'b:2', 'b:3'].map((membershipType) => ({ membershipType, walletAddress: a }));
      await issue(t.admin, [...items, { membershipType: 'b:1', walletAddress: address() }]);
      const page1 = await t.admin.get(`/api/v1/membership/view?walletAddress=${a.toLowerCase()}&limit=2`);
      expect(page1.status).to.equal(200);
      expect(page1.body.memberships.map((m: { membershipType: string }) => m.membershipType)).to.deep.equal(['a:1', 'a:2']);
      const page2 = await t.admin.get(`/api/v1/membership/view?walletAddress=${a.toLowerCase()}&limit=2&cursor=${page1.body.nextCursor}`);
      const page3 = await t.admin.get(`/api/v1/membership/view?walletAddress=${a.toLowerCase()}&limit=2&cursor=${page2.body.nextCursor}`);
      expect([...page2.body.memberships, ...page3.body.memberships].map((m: { membershipType: string }) => m.membershipType)).to.deep.equal([
        'b:1',
        'b:2',
        'b:3',
      ]);
      expect(page3.body.nextCursor).to.equal(null);
      expect((await t.admin.get('/api/v1/membership/view?membershipType=b:1')).body.memberships).to.have.length(2);
      expect((await t.admin.get(`/api/v1/membership/view?membershipType=b:1&walletAddress=${a}`)).body.memberships).to.have.length(1);
      expect((await t.admin.get('/api/v1/membership/view')).body.memberships).to.have.length(6);

      for (const q of [
        'includeRevoked=yes',
        'includeExpired=TRUE',
        'includeRevoked=',
        'includeRevoked=true&includeRevoked=false',
        `walletAddress=${badChecksum(a)}`,
        'walletAddress=0x123',
        'membershipType=nocolon',
        'limit=0',
        'limit=1001',
        'cursor=forged.cursor',
        `walletAddress=${address()}&cursor=${page1.body.nextCursor}`,
        'color=red',
      ]) {
        const res = await t.admin.get(`/api/v1/membership/view?${q}`);
        expect(res.status, q).to.equal(400);
        expect(res.problem.code, q).to.equal('validation_failed');
      }
    });
  });

  describe('authorisation (docs/interface.md section 3)', () => {
    it('project tokens act on their project; wider tokens name it with projectId; other tenants get 404; read tokens only GET', async () => {
      const [t, other] = await Promise.all([tenant(), tenant()]);
      const item = () => [{ membershipType: type(), walletAddress: address() }];
      const q = `?projectId=${t.project.id}` as const;

      expect((await issue(t.projectAdmin, item())).status).to.equal(201);
      expect((await issue(t.projectAdmin, item(), q)).status).to.equal(201);
      expect((await issue(t.orgAdmin, item(), q)).status).to.equal(201);
      expect((await issue(app.client, item(), q)).status).to.equal(201);
      await expectUnchanged(() => issue(t.orgAdmin, item()), 400, 'validation_failed');
      await expectUnchanged(() => issue(app.client, item()), 400, 'validation_failed');
      await expectUnchanged(() => issue(t.projectAdmin, item(), `?projectId=${other.project.id}`), 404, 'not_found');
      await expectUnchanged(() => issue(other.orgAdmin, item(), q), 404, 'not_found');
      await expectUnchanged(() => issue(other.projectAdmin, item(), q), 404, 'not_found');
      await expectUnchanged(() => issue(t.orgAdmin, item(), '?projectId=99999999'), 404, 'not_found');
      await expectUnchanged(() => issue(t.projectRead, item()), 403, 'forbidden');
      await expectUnchanged(() => issue(t.orgRead, item(), q), 403, 'forbidden');
      await expectUnchanged(() => t.projectRead.post('/api/v1/membership/revoke', { tokenId: '1' }), 403, 'forbidden');
      await expectUnchanged(() => t.projectRead.post('/api/v1/membership/transfer', { tokenId: '1', from: address(), to: address() }), 403, 'forbidden');
      await expectUnchanged(() => issue(t.admin.withToken(null), item()), 401, 'unauthorized');
      await expectUnchanged(() => issue(t.admin.withToken('sk_test_nope'), item(), q), 401, 'unauthorized');

      expect((await t.projectRead.get('/api/v1/membership/view')).body.memberships).to.have.length(4);
      expect((await t.orgRead.get(`/api/v1/membership/view${q}`)).body.memberships).to.have.length(4);
      expect((await other.orgRead.get(`/api/v1/membership/view${q}`)).status).to.equal(404);
      expect((await t.orgRead.get('/api/v1/membership/view')).status).to.equal(400);
      expect((await other.projectRead.get('/api/v1/membership/view')).body.memberships).to.deep.equal([]);
    });
  });

  describe('concurrency', () => {
    it('20 simultaneous transfers of one token to different addresses: exactly one succeeds, no 5xx', async () => {
      const t = await tenant();
      const holder = address();
      const tokenId = (await issue(t.admin, [{ membershipType: 'gym:gold', walletAddress: holder, transferable: true }])).body.memberships[0]!.tokenId;
      const targets = Array.from({ length: 20 }, () => address());
      const results = await Promise.all(targets.map((to) => t.admin.post('/api/v1/membership/transfer', { from: holder, to, tokenId })));
      const statuses = results.map((r) => r.status);
      expect(statuses.filter((s) => s === 200)).to.have.length(1);
      expect(statuses.filter((s) => s === 409)).to.have.length(19);
      expect(results.filter((r) => r.status === 409).map((r) => r.problem.code)).to.satisfy((codes: string[]) => codes.every((c) => c === 'holder_mismatch'));
      const winner = results.find((r) => r.status === 200)?.body.walletAddress;
      const row = await app
        .db('memberships')
        .where({ id: Number(tokenId) })
        .first();
      expect(row.wallet_address).to.equal(winner);
      expect((await ledgerOf(t.project.id)).filter((r) => r.type === 'transfer')).to.have.length(1);
    });

    it('20 simultaneous issues of one type to one wallet: exactly one succeeds, no 5xx', async () => {
      const t = await tenant();
      const a = address();
      const results = await Promise.all(Array.from({ length: 20 }, () => issue(t.admin, [{ membershipType: 'gym:gold', walletAddress: a }])));
      const statuses = results.map((r) => r.status);
      expect(statuses.filter((s) => s === 201)).to.have.length(1);
      expect(statuses.filter((s) => s === 409)).to.have.length(19);
      expect(await app.db('memberships').where({ project_id: t.project.id })).to.have.length(1);
      expect(await ledgerOf(t.project.id)).to.have.length(1);
    });

    it('20 simultaneous overrides of one place: one mint, the rest update it in place, no 5xx', async () => {
      const t = await tenant();
      const a = address();
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) => issue(t.admin, [{ membershipType: 'gym:gold', walletAddress: a, expiration: nowS() + 1000 + i, override: true }])),
      );
      expect(results.map((r) => r.status)).to.deep.equal(Array.from({ length: 20 }, () => 201));
      expect(new Set(results.map((r) => r.body.memberships[0]!.tokenId)).size).to.equal(1);
      const ledger = await ledgerOf(t.project.id);
      expect(ledger.map((r) => r.type).sort()).to.deep.equal(['mint', ...Array.from({ length: 19 }, () => 'update')]);
    });
  });
});
