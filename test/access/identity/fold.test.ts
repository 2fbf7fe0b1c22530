import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { migrateLatest } from '../../../src/platform/db/migrate.js';
import { foldIdentity } from '../../../src/access/identity/fold.js';
import { startApp, type TestApp } from '../../support/app.js';
import { migrateTo, ownDatabase } from '../../support/db.js';
import { createOrganisation, createProject, type Project } from '../../support/factories.js';
import { TestIdp, type TestIssuer } from '../../support/idp.js';

const AUDIENCE = 'urn:custody:testnet';

/** Pairs that full Unicode case mapping, normalisation or a careless eye would merge, and must stay two people. */
const DISTINCT: Array<[string, string, string]> = [
  ['Kelvin sign (compatibility)', 'kelvin@example.com', '\u212Aelvin@example.com'],
  ['Angstrom sign', 'xa@example.com', 'x\u212B@example.com'],
  ['dotted capital I', 'iris@example.com', '\u0130ris@example.com'],
  ['long s', 'sam@example.com', '\u017Fam@example.com'],
  ['fullwidth letters', 'ab@example.com', '\uFF41\uFF42@example.com'],
  ['ligature ff', 'ff@example.com', '\uFB00@example.com'],
  ['combining acute vs precomposed', 'jos\u00E9@example.com', 'jose\u0301@example.com'],
  ['Cyrillic a in a Latin name (mixed scripts)', 'paypal@example.com', 'p\u0430ypal@example.com'],
  ['Greek capital sigma', '\u03C3igma@example.com', '\u03A3igma@example.com'],
  ['mathematical bold', 'bob@example.com', '\uD835\uDC1Bob@example.com'],
];

describe('identity folding: ASCII letters only, so no crafted claim reaches another person', function () {
  this.timeout(60_000);

  it('folds A-Z and nothing else', () => {
    expect(foldIdentity('Ada.Lovelace@EXAMPLE.com')).to.equal('ada.lovelace@example.com');
    expect(foldIdentity('already@lower.case')).to.equal('already@lower.case');
    for (const [, , crafted] of DISTINCT) {
      const expected = crafted.replace(/[A-Z]/g, (c) => c.toLowerCase());
      expect(foldIdentity(crafted)).to.equal(expected);
    }
    // Full case mapping would have merged these: the rule exists because of them.
    expect('\u212Aelvin'.toLowerCase()).to.equal('kelvin');
    expect(foldIdentity('\u212Aelvin')).to.equal('\u212Aelvin');
  });

  describe('through sign-in, createasync and the lookup', () => {
    let idp: TestIdp;
    let app: TestApp;
    let dir: string;
    let iss: TestIssuer;
    let project: Project;

    before(async () => {
      idp = await TestIdp.start();
      dir = mkdtempSync(path.join(tmpdir(), 'custody-fold-'));
      writeFileSync(path.join(dir, 'ca.pem'), idp.caPem);
      app = await startApp({ OIDC_CA_FILE: path.join(dir, 'ca.pem') });
      iss = await idp.issuer();
      const org = await createOrganisation(app.client);
      project = await createProject(app.client, org.id, { issuer: iss.issuer });
    });
    after(async () => {
      await app.close();
      await idp.close();
      rmSync(dir, { recursive: true, force: true });
    });

    const signIn = async (email: string) => {
      const res = await app.client.post('/api/v1/signin', { key: project.projectKey }, { token: await iss.sign({ email }, { audience: AUDIENCE }) });
      expect(res.status, `${email}: ${res.text}`).to.equal(200);
      return res.body;
    };

    for (const [name, plain, crafted] of DISTINCT) {
      it(`keeps two people apart: ${name}`, async () => {
        const a = await signIn(plain);
        // createasync first for the crafted one: the path the relay takes must fold alike.
        const accepted = await app.client.post(
          '/api/v1/wallets/createasync',
          { key: project.projectKey },
          { token: await iss.sign({ email: crafted }, { audience: AUDIENCE }) },
        );
        expect(accepted.status).to.equal(202);
        const b = await signIn(crafted);
        expect(b.walletId).not.to.equal(a.walletId);
        expect(b.walletAddress).not.to.equal(a.walletAddress);
        // ASCII case still folds, for both.
        expect((await signIn(plain.replace(/[a-z]/g, (c) => c.toUpperCase()))).walletId).to.equal(a.walletId);
        expect((await signIn(crafted.replace(/[a-z]/g, (c) => c.toUpperCase()))).walletId).to.equal(b.walletId);
        const lookup = await app.client.get(`/api/v1/project/${project.id}/wallets?email=${encodeURIComponent(crafted)}`);
        expect(lookup.status).to.equal(200);
        expect(lookup.body.wallets.map((w) => w.walletId)).to.deep.equal([b.walletId]);
      });
    }

    it('folds ASCII case on every path: sign-in, createasync, lookup', async () => {
      const first = await signIn('Grace.Hopper@Example.COM');
      expect((await signIn('grace.hopper@example.com')).walletId).to.equal(first.walletId);
      const accepted = await app.client.post(
        '/api/v1/wallets/createasync',
        { key: project.projectKey },
        { token: await iss.sign({ email: 'GRACE.HOPPER@EXAMPLE.COM' }, { audience: AUDIENCE }) },
      );
      expect(accepted.status).to.equal(202);
      const rows = await app
        .db('wallets')
        .where({ project_id: project.id })
        .whereRaw(`translate(email, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz') = 'grace.hopper@example.com'`);
      expect(rows).to.have.length(1);
      const lookup = await app.client.get(`/api/v1/project/${project.id}/wallets?email=gRACE.hOPPER@example.com`);
      expect(lookup.body.wallets.map((w) => w.walletId)).to.deep.equal([first.walletId]);
    });
  });

  describe('the migration', () => {
    it('refolds existing rows, lists the ones whose key changed, and stops on a collision without changing anything', async () => {
      const stamp = `${Date.now()}_${process.pid}`;
      const own = await ownDatabase(`custody_fold_${stamp}`);
      const written: string[] = [];
      const write = process.stderr.write.bind(process.stderr);
      try {
        await migrateTo(own.db, '20261124000000_key_identity.js');
        const [org] = await own.db('organisations').insert({ name: 'Fold' }).returning<Array<{ id: number }>>('id');
        const [p] = await own
          .db('projects')
          .insert({ organisation_id: org?.id, name: 'Fold', environment: 'testnet', issuer: 'https://idp.example.com', wallet_webhook_secret_enc: 'unused' })
          .returning<Array<{ id: number }>>('id');
        // As toLowerCase keyed them: the Kelvin-sign row shares its key with a plain one.
        await own.db('wallets').insert([
          { project_id: p?.id, email: '\u212Aelvin@example.com', email_lower: 'kelvin@example.com' },
          { project_id: p?.id, email: 'Ada@Example.com', email_lower: 'ada@example.com' },
        ]);
        // A collision only a hand-written row can make: two rows one ASCII fold apart.
        const [bad] = await own
          .db('wallets')
          .insert({ project_id: p?.id, email: 'ADA@example.com', email_lower: 'written-by-hand' })
          .returning<Array<{ id: number }>>('id');
        const before = (await own.db('wallets').orderBy('id')) as unknown[];
        try {
          await migrateLatest(own.db);
          expect.fail('the migration should have stopped');
        } catch (err) {
          expect(String(err)).to.include('would merge wallets');
        }
        expect(await own.db('wallets').orderBy('id')).to.deep.equal(before);
        await own.db('wallets').where({ id: bad?.id }).delete();
        process.stderr.write = (chunk: string | Uint8Array) => {
          written.push(String(chunk));
          return true;
        };
        await migrateLatest(own.db);
        process.stderr.write = write;
        const kelvin = (await own.db('wallets').where({ email: '\u212Aelvin@example.com' }).first()) as { id: number; email_lower: string };
        expect(kelvin.email_lower).to.equal('\u212Aelvin@example.com');
        expect(written.join('')).to.include(`wallet ${kelvin.id} (project ${p?.id})`);
        const ada = (await own.db('wallets').where({ email: 'Ada@Example.com' }).first()) as { email_lower: string };
        expect(ada.email_lower).to.equal('ada@example.com');
      } finally {
        process.stderr.write = write;
        await own.drop();
      }
    });
  });
});
