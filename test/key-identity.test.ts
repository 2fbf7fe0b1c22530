import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { LocalKeyStore } from '../keyvault/stores/local.js';
import { readDeploymentId } from '../src/platform/db/deployment.js';
import { createDb } from '../src/platform/db/knex.js';
import { migrateLatest } from '../src/platform/db/migrate.js';
import { KeyConflictError } from '../src/platform/http/errors.js';
import { projectUid, SignerClient } from '../src/platform/signer/client.js';
import { startApp, type TestApp } from './support/app.js';
import { adminQuery, databaseUrlFor, migrateTo, ownDatabase } from './support/db.js';
import { createOrganisation, createProject, createToken, type Project } from './support/factories.js';
import { TestIdp, type TestIssuer } from './support/idp.js';
import { spawnService, MAIN } from './support/process.js';
import { writeLegacyKey } from './support/legacy-signer.js';
import { ownerSigned, policyOwner, signInMessage, siwePolicy } from './support/policies.js';
import { SIGNER_MAIN, startSigner, type RunningSigner } from './support/signer.js';

const AUDIENCE = 'urn:custody:testnet';

describe('key identity: one key, one wallet, whatever is shared or restored', function () {
  this.timeout(120_000);
  const stamp = `${Date.now()}_${process.pid}`;
  let idp: TestIdp;
  let caDir: string;

  before(async () => {
    idp = await TestIdp.start();
    caDir = mkdtempSync(path.join(tmpdir(), 'custody-keyid-'));
    writeFileSync(path.join(caDir, 'ca.pem'), idp.caPem);
  });
  after(async () => {
    await idp.close();
    rmSync(caDir, { recursive: true, force: true });
  });

  const appOn = (db: { url: string; db: Knex }, signer: RunningSigner) =>
    startApp({ DATABASE_URL: db.url, KEYVAULT_URL: signer.url, KEYVAULT_TOKEN: signer.token, OIDC_CA_FILE: path.join(caDir, 'ca.pem') }, db.db);
  const tenant = async (app: TestApp): Promise<{ iss: TestIssuer; project: Project }> => {
    const iss = await idp.issuer();
    const org = await createOrganisation(app.client);
    return { iss, project: await createProject(app.client, org.id, { issuer: iss.issuer }) };
  };
  const signIn = async (app: TestApp, t: { iss: TestIssuer; project: Project }, email: string) =>
    app.client.post('/api/v1/signin', { key: t.project.projectKey }, { token: await t.iss.sign({ email }, { audience: AUDIENCE }) });

  /** A deployment of its own (database, signer, API process) for `run`, removed afterwards. */
  async function withDeployment(
    name: string,
    run: (d: { own: { url: string; db: Knex }; signer: RunningSigner; app: TestApp; t: { iss: TestIssuer; project: Project } }) => Promise<void>,
  ) {
    const own = await ownDatabase(`custody_keyid_${name}_${stamp}`);
    const signer = await startSigner();
    try {
      await migrateLatest(own.db);
      const app = await appOn(own, signer);
      try {
        await run({ own, signer, app, t: await tenant(app) });
      } finally {
        await app.close();
      }
    } finally {
      await signer.destroy();
      await own.drop();
    }
  }

  it('stores a random UUIDv4 key id on every new wallet row before the signer is called', () =>
    withDeployment('rows', async ({ own, app, t }) => {
      // createasync without a relay: the row exists, the signer has not been asked.
      const accepted = await app.client.post(
        '/api/v1/wallets/createasync',
        { key: t.project.projectKey },
        { token: await t.iss.sign({ email: 'pending@example.com' }, { audience: AUDIENCE }) },
      );
      expect(accepted.status).to.equal(202);
      const pending = (await own.db('wallets').where({ email: 'pending@example.com' }).first()) as { key_id: string; address: string | null };
      expect(pending.address).to.equal(null);
      expect(pending.key_id).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      const done = await signIn(app, t, 'pending@example.com');
      expect(done.status, done.text).to.equal(200);
      const row = (await own.db('wallets').where({ email: 'pending@example.com' }).first()) as { key_id: string; address: string };
      expect(row.key_id).to.equal(pending.key_id);
      expect(row.address).to.equal(done.body.walletAddress);
    }));

  it('two deployments on one signer: the second is refused (API start, bind, key creation) and no address is shared', async () => {
    const first = await ownDatabase(`custody_keyid_a_${stamp}`);
    const second = await ownDatabase(`custody_keyid_b_${stamp}`);
    const signer = await startSigner();
    try {
      await migrateLatest(first.db);
      await migrateLatest(second.db);
      const [idA, idB] = [await readDeploymentId(first.db), await readDeploymentId(second.db)];
      expect(idA).not.to.equal(idB);
      const appA = await appOn(first, signer);
      const appB = await appOn(second, signer);
      try {
        const tA = await tenant(appA);
        const tB = await tenant(appB);
        const a = await signIn(appA, tA, 'first@example.com');
        expect(a.status, a.text).to.equal(200);
        // The same wallet row id in the other deployment: refused, nothing recorded.
        const b = await signIn(appB, tB, 'second@example.com');
        expect(b.status, b.text).to.equal(503);
        expect(b.problem.code).to.equal('key_conflict');
        expect(b.headers.get('retry-after')).to.match(/^\d+$/);
        const rows = (await second.db('wallets').whereNotNull('address')) as unknown[];
        expect(rows).to.have.length(0);
        const line = appB.logs.map((l) => JSON.parse(l) as { level: number; msg: string; err?: string }).find((l) => l.msg.startsWith('key conflict'));
        expect(line?.level).to.equal(50);
        expect(line?.err).to.include(idA);
      } finally {
        await appA.close();
        await appB.close();
      }
      // Asked directly, the signer names the owner.
      const client = new SignerClient(signer.url, signer.token, 5_000, idB);
      try {
        await client.bind();
        expect.fail('bind should have been refused');
      } catch (err) {
        expect(err).to.be.instanceOf(KeyConflictError);
        expect((err as KeyConflictError).why).to.include(idA);
      }
      // An API process of the second deployment refuses to start, and says which deployment owns the store.
      const api = spawnService(
        {
          ROLE: 'api',
          PORT: '0',
          DATABASE_URL: second.url,
          KEYVAULT_URL: signer.url,
          KEYVAULT_TOKEN: signer.token,
          DATA_ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64'),
          OPERATOR_TOKEN: `sk_test_${'a'.repeat(40)}`,
        },
        MAIN,
      );
      expect(await api.exited, api.output()).to.equal(1);
      expect(api.output()).to.include(`belongs to deployment ${idA}`);
      // A signer told its deployment at start refuses a store that is another's.
      const other = spawnService(
        {
          KEYVAULT_LISTEN: '127.0.0.1:0',
          KEYVAULT_TOKEN: signer.token,
          KEYVAULT_DATA_DIR: signer.dataDir,
          KEYVAULT_LOCAL_LOCK_WAIT_MS: '0',
          KEYVAULT_DEPLOYMENT_ID: idB,
        },
        SIGNER_MAIN,
      );
      await signer.stop();
      expect(await other.exited, other.output()).to.equal(1);
      expect(other.output()).to.include(`belongs to deployment ${idA}`);
    } finally {
      await signer.destroy();
      await first.drop();
      await second.drop();
    }
  });

  it('a database restored to an earlier dump, then new users: every user has an address of their own', async () => {
    const live = await ownDatabase(`custody_keyid_live_${stamp}`);
    const signer = await startSigner();
    let restored: { url: string; db: Knex; drop(): Promise<void> } | undefined;
    try {
      await migrateLatest(live.db);
      const addresses = new Map<string, string>();
      let app = await appOn(live, signer);
      const t = await tenant(app);
      for (const email of ['u1@example.com']) addresses.set(email, (await signIn(app, t, email)).body.walletAddress);
      // The dump: a copy of the database as it is now.
      await app.close();
      await live.db.destroy();
      const dumpName = `custody_keyid_dump_${stamp}`;
      await adminQuery(`CREATE DATABASE ${dumpName} TEMPLATE custody_keyid_live_${stamp}`);
      live.db = createDb({ url: live.url, poolMax: 5 });
      // Life goes on after the dump: u2 and u3 get wallets (rows 2 and 3) with keys in the signer.
      app = await appOn(live, signer);
      for (const email of ['u2@example.com', 'u3@example.com']) {
        const res = await signIn(app, t, email);
        expect(res.status, res.text).to.equal(200);
        addresses.set(email, res.body.walletAddress);
      }
      await app.close();
      // The restore: the earlier copy is the database now; the signer keeps every key it made.
      restored = { url: databaseUrlFor(dumpName), db: createDb({ url: databaseUrlFor(dumpName), poolMax: 5 }), drop: () => Promise.resolve() };
      const restoredDb = restored.db;
      restored.drop = async () => {
        await restoredDb.destroy();
        await adminQuery(`DROP DATABASE IF EXISTS ${dumpName} WITH (FORCE)`);
      };
      app = await appOn(restored, signer);
      try {
        // New users take the row ids 2 and 3 again; the old derived key ids would have handed them u2's and u3's keys.
        const after = new Map<string, string>();
        for (const email of ['u4@example.com', 'u5@example.com', 'u2@example.com']) {
          const res = await signIn(app, t, email);
          expect(res.status, res.text).to.equal(200);
          expect(res.body.isNew).to.equal(true);
          after.set(email, res.body.walletAddress);
        }
        const u1 = await signIn(app, t, 'u1@example.com');
        expect(u1.body).to.include({ isNew: false, walletAddress: addresses.get('u1@example.com') });
        const all = [...addresses.values(), ...after.values()];
        expect(new Set(all).size, 'distinct users, distinct addresses').to.equal(all.length);
      } finally {
        await app.close();
      }
    } finally {
      await signer.destroy();
      await restored?.drop();
      await live.drop();
    }
  });

  it("a database restored to an earlier dump, then a new project: it gets an old project's numeric id, none of its policy or owners, and its admin sets its own", async () => {
    const live = await ownDatabase(`custody_keyid_plive_${stamp}`);
    const signer = await startSigner();
    const dumpName = `custody_keyid_pdump_${stamp}`;
    let restored: Knex | undefined;
    try {
      await migrateLatest(live.db);
      let app = await appOn(live, signer);
      const org = await createOrganisation(app.client);
      await createProject(app.client, org.id);
      // The dump: a copy of the database as it is now (one organisation, one project).
      await app.close();
      await live.db.destroy();
      await adminQuery(`CREATE DATABASE ${dumpName} TEMPLATE custody_keyid_plive_${stamp}`);
      live.db = createDb({ url: live.url, poolMax: 5 });
      // After the dump: a project whose admin writes a policy that signs anything, and registers an owner.
      app = await appOn(live, signer);
      const alice = await policyOwner();
      const anything = { rules: [{ name: 'anything', action: 'allow', method: 'personal_sign' }] };
      const before = await createProject(app.client, org.id);
      const beforeAdmin = app.client.withToken((await createToken(app.client, org.id, 'admin', before.id)).token);
      expect((await beforeAdmin.put(`/api/v1/project/${before.id}/policy`, anything)).status).to.equal(201);
      expect((await beforeAdmin.put(`/api/v1/project/${before.id}/policy/owners`, { keys: [alice.jwk] })).status).to.equal(201);
      await app.close();

      // The restore: the dump is the database now; the signer keeps every document it holds.
      restored = createDb({ url: databaseUrlFor(dumpName), poolMax: 5 });
      app = await appOn({ url: databaseUrlFor(dumpName), db: restored }, signer);
      try {
        const after = await createProject(app.client, org.id);
        expect(after.id, "the sequence hands out the lost project's id again").to.equal(before.id);
        expect(after.uid).not.to.equal(before.uid);
        const admin = app.client.withToken((await createToken(app.client, org.id, 'admin', after.id)).token);
        const policy = `/api/v1/project/${after.id}/policy`;
        const got = await admin.get(policy);
        expect([got.status, got.problem.code], "none of the old project's policy").to.deep.equal([404, 'no_policy']);
        expect((await admin.get(`${policy}/owners`)).body, 'nor its owners').to.deep.include({ version: 0, keys: [] });
        expect((await admin.post(`${policy}/evaluate`, { caller: 'server', ...signInMessage })).body).to.include({ allowed: false, policyVersion: 0 });
        // An owner's signature made for the old project opens nothing here.
        const replayed = await admin.put(policy, { signed: await ownerSigned(alice.privateKey, { projectId: before.uid, version: 1, policy: anything }) });
        expect(replayed.status, replayed.text).to.equal(400);
        // Its own admin writes its own policy and owners.
        const own = await admin.put(policy, siwePolicy);
        expect(own.status, own.text).to.equal(201);
        expect(own.body).to.deep.include({ version: 1, policy: siwePolicy });
        const bob = await policyOwner();
        const owners = await admin.put(`${policy}/owners`, { keys: [bob.jwk] });
        expect(owners.status, owners.text).to.equal(201);
        expect(owners.body).to.deep.include({ version: 1, keys: [bob.jwk] });
        // The lost project's documents are still the signer's, under its own uid.
        const client = new SignerClient(signer.url, signer.token, 5_000, await readDeploymentId(restored));
        expect((await client.getPolicy(projectUid(before.uid)))?.policy).to.deep.equal(anything);
        expect((await client.getOwners(projectUid(before.uid))).keys).to.deep.equal([alice.jwk]);
      } finally {
        await app.close();
      }
    } finally {
      await signer.destroy();
      await restored?.destroy();
      await adminQuery(`DROP DATABASE IF EXISTS ${dumpName} WITH (FORCE)`);
      await live.drop();
    }
  });

  it("a key the signer already holds for another request under the row's key id is 503 key_conflict, never an answer", () =>
    withDeployment('conflict', async ({ own, signer, app, t }) => {
      const jwt = await t.iss.sign({ email: 'taken@example.com' }, { audience: AUDIENCE });
      expect((await app.client.post('/api/v1/wallets/createasync', { key: t.project.projectKey }, { token: jwt })).status).to.equal(202);
      const row = (await own.db('wallets').where({ email: 'taken@example.com' }).first()) as { id: number; key_id: string };
      // Someone else's key under that id (as a shared or restored store would hold it).
      const client = new SignerClient(signer.url, signer.token, 5_000, await readDeploymentId(own.db));
      const foreign = await client.createKey(row.key_id, 'wallet:someone-else', projectUid(randomUUID()));
      const res = await app.client.post('/api/v1/signin', { key: t.project.projectKey }, { token: jwt });
      expect(res.status, res.text).to.equal(503);
      expect(res.problem.code).to.equal('key_conflict');
      expect(res.text).not.to.include(foreign.address);
      const after = (await own.db('wallets').where({ id: row.id }).first()) as { address: string | null };
      expect(after.address).to.equal(null);
      expect(app.logs.some((l) => l.includes('"level":50') && l.includes('key conflict'))).to.equal(true);
    }));

  it('a database of the previous release migrates, and its users sign in unchanged', async () => {
    const own = await ownDatabase(`custody_keyid_upgrade_${stamp}`);
    const dataDir = mkdtempSync(path.join(tmpdir(), 'custody-prev-signer-'));
    try {
      // The previous release's schema: every migration before key identity.
      await migrateTo(own.db, '20261123000000_project_change_notify.js');
      // Its rows, as that release wrote them: a tenant, two activated wallets under UUIDv5 key ids
      // derived from `wallet:<id>` (e-mail folded with toLowerCase), and one pending row without a key id.
      const iss = await idp.issuer();
      const [org] = await own.db('organisations').insert({ name: 'Prev' }).returning<Array<{ id: number }>>('id');
      const [project] = await own
        .db('projects')
        .insert({ organisation_id: org?.id, name: 'Prev', environment: 'testnet', issuer: iss.issuer, wallet_webhook_secret_enc: 'unused-by-this-test' })
        .returning<Array<{ id: number }>>('id');
      // Keys of that release (made without a project), in a store without an owner marker.
      const store = new LocalKeyStore(dataDir, 0);
      await store.check();
      const legacy: Array<{ email: string; keyId: string; address: string }> = [];
      for (const [i, email] of ['Old.One@Example.com', 'old.two@example.com'].entries()) {
        const keyId = `0000000${i}-0000-5000-8000-00000000000${i}`;
        const made = await writeLegacyKey(store, keyId, `wallet:${i + 1}`);
        legacy.push({ email, keyId, address: made.address });
        await own.db('wallets').insert({
          id: i + 1,
          project_id: project?.id,
          email,
          email_lower: email.toLowerCase(),
          address: made.address,
          key_id: keyId,
          activated_at: new Date(),
        });
      }
      await own.db('wallets').insert({ id: 3, project_id: project?.id, email: 'pending@example.com', email_lower: 'pending@example.com' });
      await own.db.raw(`SELECT setval('wallets_id_seq', 3)`);
      store.close();
      rmSync(path.join(dataDir, 'keys.lock'), { force: true });

      await migrateLatest(own.db);
      const pending = (await own.db('wallets').where({ id: 3 }).first()) as { key_id: string };
      expect(pending.key_id).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-/);
      const signer = await startSigner({}, { dataDir, token: 'p'.repeat(43) });
      const app = await appOn(own, signer);
      try {
        const rotated = await app.client.post(`/api/v1/project/${project?.id}/keys`, { graceSeconds: 0 });
        expect(rotated.status, rotated.text).to.equal(200);
        const uid =
          (
            await own
              .db<{ id: number; uid: string }>('projects')
              .where({ id: project?.id ?? 0 })
              .first('uid')
          )?.uid ?? '';
        const t = { iss, project: { id: project?.id ?? 0, uid, organisationId: org?.id ?? 0, projectKey: rotated.body.projectKey } };
        for (const w of legacy) {
          const res = await signIn(app, t, w.email);
          expect(res.status, res.text).to.equal(200);
          expect(res.body).to.include({ walletAddress: w.address, isNew: false });
          const client = new SignerClient(signer.url, signer.token, 5_000, await readDeploymentId(own.db));
          expect((await client.getKey(w.keyId))?.address).to.equal(w.address);
        }
        const fresh = await signIn(app, t, 'pending@example.com');
        expect(fresh.status, fresh.text).to.equal(200);
        expect(fresh.body.isNew).to.equal(true);
        expect(legacy.map((w) => w.address)).not.to.include(fresh.body.walletAddress);
      } finally {
        await app.close();
        await signer.destroy();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
      await own.drop();
    }
  });
});
