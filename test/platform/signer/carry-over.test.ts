import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { verifyMessage } from 'ethers';
import { LocalKeyStore } from '../../../keyvault/stores/local.js';
import { readDeploymentId } from '../../../src/platform/db/deployment.js';
import { migrateLatest } from '../../../src/platform/db/migrate.js';
import { startApp, type TestApp } from '../../support/app.js';
import { migrateTo, ownDatabase } from '../../support/db.js';
import { createToken } from '../../support/factories.js';
import { appendLegacyDocuments, legacyBinding, legacyVersion, writeLegacyKey } from '../../support/legacy-signer.js';
import { ownerSigned, policyOwner } from '../../support/policies.js';
import { freePort } from '../../support/process.js';
import { startSigner, type RunningSigner } from '../../support/signer.js';

/** The migration before project uids: a database as the earlier release left it. */
const EARLIER_RELEASE = '20261124090000_wallet_signatures.js';
/** What the migration lists for the carry-over, as it lists it (migrations/20261124100000_project_uid.ts). */
const LIST_AGAIN = [
  'INSERT INTO signer_carry_over (project_id) SELECT id FROM projects ORDER BY id',
  'INSERT INTO signer_carry_over (project_id, wallet_id) SELECT project_id, id FROM wallets ORDER BY project_id, id',
];

const backendOrders = { rules: [{ name: 'orders', action: 'allow', method: 'personal_sign', caller: ['server'] }] };
const order = { method: 'personal_sign', params: { message: 'order 4711 approved' } };

const within = <T>(ms: number, what: string, p: Promise<T>): Promise<T> =>
  Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what} took over ${ms} ms`)), ms).unref())]);

describe('signer carry-over: what an earlier release kept under numeric project ids, carried at API start', function () {
  this.timeout(120_000);
  const stamp = `${Date.now()}_${process.pid}`;

  it('documents and keys of an earlier release apply to their own projects once the API has started; a second run changes nothing', async () => {
    const own = await ownDatabase(`custody_carry_${stamp}`);
    const dataDir = mkdtempSync(path.join(tmpdir(), 'custody-carry-'));
    const apps: TestApp[] = [];
    let signer: RunningSigner | undefined;
    try {
      // The earlier release's database: three projects, wallets whose keys that release made.
      await migrateTo(own.db, EARLIER_RELEASE);
      const [org] = await own.db('organisations').insert({ name: 'Earlier' }).returning<Array<{ id: number }>>('id');
      const projectRows = await own
        .db('projects')
        .insert(
          ['One', 'Two', 'Three'].map((name) => ({
            organisation_id: org?.id,
            name,
            environment: 'testnet',
            issuer: 'https://idp.example.com',
            wallet_webhook_secret_enc: 'unused',
          })),
        )
        .returning<Array<{ id: number }>>('id');
      const [p1, p2, p3] = projectRows.map((r) => r.id) as [number, number, number];

      // Its signer's store: keys made without a project (one bound at its first signature, one to
      // the wrong project by the look of it), one with the numeric id, one no wallet knows.
      const store = new LocalKeyStore(dataDir, 0);
      await store.check();
      await store.claimOwner(await readDeploymentId(own.db));
      const k = {
        firstUse: await writeLegacyKey(store, randomUUID(), 'wallet:1'),
        numeric: await writeLegacyKey(store, randomUUID(), 'wallet:2', String(p1)),
        unused: await writeLegacyKey(store, randomUUID(), 'wallet:3'),
        disagrees: await writeLegacyKey(store, randomUUID(), 'wallet:5'),
        unknown: await writeLegacyKey(store, randomUUID(), 'nobody'),
      };
      store.close();
      rmSync(path.join(dataDir, 'keys.lock'), { force: true });
      const wallet = async (projectId: number, email: string, key?: { keyId: string; address: string }) => {
        const [row] = await own
          .db('wallets')
          .insert({
            project_id: projectId,
            email,
            email_lower: email,
            ...(key ? { key_id: key.keyId, address: key.address, activated_at: new Date() } : {}),
          })
          .returning<Array<{ id: number }>>('id');
        return row?.id ?? 0;
      };
      const w = {
        firstUse: await wallet(p1, 'first@example.com', k.firstUse),
        numeric: await wallet(p1, 'numeric@example.com', k.numeric),
        unused: await wallet(p2, 'unused@example.com', k.unused),
        pending: await wallet(p2, 'pending@example.com'),
        disagrees: await wallet(p2, 'disagrees@example.com', k.disagrees),
      };
      const alice = await policyOwner();
      const documents = [
        legacyVersion('policies', p1, 1, { rules: [] }),
        legacyVersion('policies', p1, 2, backendOrders, 'token:1'),
        legacyVersion('owners', p1, 1, { keys: [alice.jwk] }, 'token:1'),
        legacyVersion('policies', p2, 1, backendOrders),
        legacyBinding(k.firstUse.keyId, p1),
        // Bound by its first signature to project 1, while this database says project 2: not carried.
        legacyBinding(k.disagrees.keyId, p1),
      ];
      appendLegacyDocuments(dataDir, documents);

      await migrateLatest(own.db);
      expect(await own.db('signer_carry_over').count<Array<{ count: number }>>('* as count'), 'three projects, five wallets').to.deep.equal([{ count: 8 }]);
      const uids = Object.fromEntries((await own.db<{ id: number; uid: string }>('projects').select('id', 'uid')).map((r) => [r.id, r.uid])) as Record<
        number,
        string
      >;

      // The API starts while the signer is still down: a call about a project waits, then 503.
      const port = await freePort();
      const token = randomBytes(32).toString('base64url');
      const env = { DATABASE_URL: own.url, KEYVAULT_URL: `http://127.0.0.1:${port}`, KEYVAULT_TOKEN: token };
      const app = await startApp(env, own.db);
      apps.push(app);
      const admin = (projectId: number) => createToken(app.client, org?.id ?? 0, 'admin', projectId).then((t) => app.client.withToken(t.token));
      const [admin1, admin2, admin3] = await Promise.all([admin(p1), admin(p2), admin(p3)]);
      const early = await admin1.get(`/api/v1/project/${p1}/policy`);
      expect([early.status, early.problem.code], early.text).to.deep.equal([503, 'signer_upgrading']);
      expect(early.headers.get('retry-after')).to.match(/^\d+$/);

      signer = await startSigner({}, { dataDir, token, port });
      await within(30_000, 'the carry-over', app.carryOver.done);

      // Each project has its own documents, under its uid; the owners apply.
      const policy1 = await admin1.get(`/api/v1/project/${p1}/policy`);
      expect(policy1.body).to.deep.equal({ version: 2, policy: backendOrders, author: 'token:1', createdAt: documents[1]?.createdAt });
      expect((await admin1.get(`/api/v1/project/${p1}/policy/owners`)).body).to.deep.include({ version: 1, keys: [alice.jwk] });
      const plain = await admin1.put(`/api/v1/project/${p1}/policy`, { rules: [] });
      expect([plain.status, plain.problem.code]).to.deep.equal([403, 'owner_signature_required']);
      const signed = await admin1.put(`/api/v1/project/${p1}/policy`, {
        signed: await ownerSigned(alice.privateKey, { projectId: uids[p1], version: 3, policy: backendOrders }),
      });
      expect(signed.status, signed.text).to.equal(201);
      expect((await admin2.get(`/api/v1/project/${p2}/policy`)).body).to.deep.include({ version: 1, policy: backendOrders });
      expect((await admin3.get(`/api/v1/project/${p3}/policy`)).status, 'a project that had none has none').to.equal(404);

      // Each wallet's key signs for its project, as this database records it.
      const backend = async (projectId: number) => {
        const minted = await app.client.post(`/api/v1/organisations/${org?.id}/tokens`, { name: 'backend', role: 'signer', projectId });
        expect(minted.status, minted.text).to.equal(201);
        return app.client.withToken(minted.body.token);
      };
      const [backend1, backend2] = await Promise.all([backend(p1), backend(p2)]);
      const signs = async (client: typeof backend1, projectId: number, walletId: number, address: string) => {
        const r = await client.post(`/api/v1/project/${projectId}/wallets/${walletId}/rpc`, order);
        expect(r.status, r.text).to.equal(200);
        expect(verifyMessage(order.params.message, 'signature' in r.body ? r.body.signature : '')).to.equal(address);
      };
      await signs(backend1, p1, w.firstUse, k.firstUse.address);
      await signs(backend1, p1, w.numeric, k.numeric.address);
      await signs(backend2, p2, w.unused, k.unused.address);
      const refused = await backend2.post(`/api/v1/project/${p2}/wallets/${w.disagrees}/rpc`, order);
      expect([refused.status, refused.problem.code], refused.text).to.deep.equal([503, 'key_unbound']);
      const line = app.logs
        .map((l) => JSON.parse(l) as { level: number; msg: string })
        .find((l) => l.level === 50 && l.msg.startsWith(`wallet ${w.disagrees}:`));
      expect(line?.msg).to.include('at its first use');
      // A key no wallet of this database has stays unbound; a bound key signs for its project only.
      const direct = (keyId: string, projectId: string) =>
        fetch(`${signer?.url}/v1/keys/${keyId}/sign`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ projectId, caller: 'server', operation: order }),
        }).then(async (r) => [r.status, ((await r.json()) as { code?: string }).code]);
      expect(await direct(k.unknown.keyId, uids[p1] ?? '')).to.deep.equal([403, 'key_unbound']);
      expect(await direct(k.firstUse.keyId, uids[p2] ?? '')).to.deep.equal([403, 'wrong_project']);
      const left = await own.db<{ wallet_id: number; refused: string }>('signer_carry_over').select('wallet_id', 'refused');
      expect(left.map((r) => r.wallet_id)).to.deep.equal([w.disagrees]);
      expect(left[0]?.refused).to.match(/^wrong_project: an earlier release bound the key to project/);

      // Again, from the start (a database restored to a copy taken mid-way would list it all again): nothing changes.
      const files = () => ['documents.log', 'keys.log'].map((f) => readFileSync(path.join(dataDir, f), 'utf8'));
      const before = files();
      await app.close();
      apps.pop();
      for (const sql of LIST_AGAIN) await own.db.raw(sql);
      const again = await startApp(env, own.db);
      apps.push(again);
      await within(30_000, 'the second carry-over', again.carryOver.done);
      expect(files(), 'the store, byte for byte').to.deep.equal(before);
      const refusedAgain = await own.db<{ wallet_id: number }>('signer_carry_over').select('wallet_id');
      expect(refusedAgain.map((r) => r.wallet_id)).to.deep.equal([w.disagrees, w.disagrees]);
      const admin1Again = again.client.withToken((await createToken(again.client, org?.id ?? 0, 'admin', p1)).token);
      expect((await admin1Again.get(`/api/v1/project/${p1}/policy`)).body).to.deep.include({ version: 3 });
      const backendAgain = again.client.withToken(
        (await again.client.post(`/api/v1/organisations/${org?.id}/tokens`, { name: 'backend', role: 'signer', projectId: p1 })).body.token,
      );
      await signs(backendAgain, p1, w.firstUse, k.firstUse.address);
    } finally {
      for (const app of apps) await app.close();
      await signer?.destroy();
      rmSync(dataDir, { recursive: true, force: true });
      await own.drop();
    }
  });

  it('two API processes starting together carry over once: one holds the lock, the other waits for it and serves', async () => {
    const own = await ownDatabase(`custody_carry_two_${stamp}`);
    const dataDir = mkdtempSync(path.join(tmpdir(), 'custody-carry-'));
    const apps: TestApp[] = [];
    let signer: RunningSigner | undefined;
    try {
      await migrateTo(own.db, EARLIER_RELEASE);
      const [org] = await own.db('organisations').insert({ name: 'Earlier' }).returning<Array<{ id: number }>>('id');
      const rows = await own
        .db('projects')
        .insert(
          Array.from({ length: 40 }, (_, i) => ({
            organisation_id: org?.id,
            name: `P${i}`,
            environment: 'testnet',
            issuer: 'https://idp.example.com',
            wallet_webhook_secret_enc: 'unused',
          })),
        )
        .returning<Array<{ id: number }>>('id');
      const store = new LocalKeyStore(dataDir, 0);
      await store.check();
      await store.claimOwner(await readDeploymentId(own.db));
      store.close();
      rmSync(path.join(dataDir, 'keys.lock'), { force: true });
      appendLegacyDocuments(
        dataDir,
        rows.map((r) => legacyVersion('policies', r.id, 1, backendOrders)),
      );
      await migrateLatest(own.db);
      signer = await startSigner({}, { dataDir, token: randomUUID() });
      const env = { DATABASE_URL: own.url, KEYVAULT_URL: signer.url, KEYVAULT_TOKEN: signer.token };
      const [a, b] = await Promise.all([startApp(env, own.db), startApp(env, own.db)]);
      apps.push(a, b);
      await within(30_000, 'both carry-overs', Promise.all([a.carryOver.done, b.carryOver.done]));
      const carriedBy = [a, b].map((app) => app.logs.filter((l) => l.includes('its signer documents are under')).length);
      expect(
        carriedBy.sort((x, y) => x - y),
        'each project carried once, by one of them',
      ).to.deep.equal([0, rows.length]);
      expect(await own.db('signer_carry_over').count<Array<{ count: number }>>('* as count')).to.deep.equal([{ count: 0 }]);
      const last = rows[rows.length - 1]?.id ?? 0;
      for (const app of [a, b]) {
        const reader = app.client.withToken((await createToken(app.client, org?.id ?? 0, 'read', last)).token);
        expect((await reader.get(`/api/v1/project/${last}/policy`)).body).to.deep.include({ version: 1, policy: backendOrders });
      }
    } finally {
      for (const app of apps) await app.close();
      await signer?.destroy();
      rmSync(dataDir, { recursive: true, force: true });
      await own.drop();
    }
  });
});
