import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startApp, type TestApp } from '../../../support/app.js';
import { startSigner } from '../../../support/signer.js';
import { createTenant } from '../../../support/factories.js';
import { signInMessage as hello, ownerSigned as sign, policyOwner as owner, siwePolicy as siwe } from '../../../support/policies.js';

/** Owner-signed policies (docs/signing.md): once a project has owners, an admin token alone cannot widen its policy. */
describe('signing policies signed by their owners', function () {
  this.timeout(60_000);
  let app: TestApp;
  before(async () => {
    app = await startApp();
  });
  after(() => app.close());

  it('an admin registers owners once; from then on a policy needs an owner signature for this project and the next version, and so does the owner list', async () => {
    const t = await createTenant(app.client);
    const other = await createTenant(app.client);
    const policy = `/api/v1/project/${t.project.id}/policy` as const;
    const owners = `/api/v1/project/${t.project.id}/policy/owners` as const;
    // Owners sign over the project's uid, never its numeric id.
    const projectId = t.project.uid;
    expect((await t.projectRead.get(owners)).body).to.deep.equal({ version: 0, keys: [], author: null, createdAt: null });
    expect((await t.projectAdmin.put(policy, { rules: [] })).status, 'before owners, an admin writes policies').to.equal(201);

    const alice = await owner();
    const mallory = await owner();
    const privateKeyPart = await t.projectAdmin.put(owners, { keys: [{ ...alice.jwk, d: 'AAAA' }] });
    expect(privateKeyPart.status).to.equal(400);
    expect((await t.projectRead.put(owners, { keys: [alice.jwk] })).status, 'a read token').to.equal(403);
    const registered = await t.projectAdmin.put(owners, { keys: [alice.jwk] });
    expect(registered.status, registered.text).to.equal(201);
    expect(registered.body).to.include({ version: 1 });

    // The admin token alone can no longer widen the policy.
    const widen = { rules: [{ name: 'anything', action: 'allow', method: 'personal_sign' }] };
    const plain = await t.projectAdmin.put(policy, widen);
    expect([plain.status, plain.problem.code]).to.deep.equal([403, 'owner_signature_required']);
    const byMallory = await t.projectAdmin.put(policy, { signed: await sign(mallory.privateKey, { projectId, version: 2, policy: widen }) });
    expect([byMallory.status, byMallory.problem.code]).to.deep.equal([403, 'invalid_owner_signature']);
    const forAnother = await t.projectAdmin.put(policy, {
      signed: await sign(alice.privateKey, { projectId: other.project.uid, version: 2, policy: widen }),
    });
    expect([forAnother.status, forAnother.problem.code], "a signature for another project's policy").to.deep.equal([403, 'invalid_owner_signature']);
    // Over the project's numeric id, which a restored database gives to another project: refused, saying so.
    const byNumber = await t.projectAdmin.put(policy, { signed: await sign(alice.privateKey, { projectId: String(t.project.id), version: 2, policy: widen }) });
    expect([byNumber.status, byNumber.problem.code]).to.deep.equal([403, 'invalid_owner_signature']);
    expect(byNumber.problem.detail).to.include('numeric project id');
    const wrongVersion = await t.projectAdmin.put(policy, { signed: await sign(alice.privateKey, { projectId, version: 7, policy: widen }) });
    expect([wrongVersion.status, wrongVersion.problem.code]).to.deep.equal([409, 'policy_conflict']);
    expect((await t.projectRead.get(policy)).body).to.include({ version: 1 });
    expect((await t.projectRead.post(`${policy}/evaluate`, { caller: 'user', ...hello })).body).to.include({ allowed: false });

    // An owner's signature over this project and the next version is taken, and applies.
    const signedSiwe = await sign(alice.privateKey, { projectId, version: 2, policy: siwe });
    const accepted = await t.projectAdmin.put(policy, { signed: signedSiwe });
    expect(accepted.status, accepted.text).to.equal(201);
    expect(accepted.body).to.deep.include({ version: 2, policy: siwe });
    expect((await t.projectRead.post(`${policy}/evaluate`, { caller: 'user', ...hello })).body).to.include({ allowed: true, policyVersion: 2 });
    // Replayed, the same signature is for a version that is no longer the next one.
    expect((await t.projectAdmin.put(policy, { signed: signedSiwe })).status).to.equal(409);
    // And a signature for this project does not open another project's policy.
    const otherPolicy = await other.projectAdmin.put(`/api/v1/project/${other.project.id}/policy`, {
      signed: await sign(alice.privateKey, { projectId, version: 1, policy: widen }),
    });
    expect(otherPolicy.status, 'a project without owners takes no signed form').to.equal(400);

    // The owner list changes only by an owner's signature too; an empty list, signed, ends owner signing.
    const swap = await t.projectAdmin.put(owners, { keys: [mallory.jwk] });
    expect([swap.status, swap.problem.code]).to.deep.equal([403, 'owner_signature_required']);
    const selfAdded = await t.projectAdmin.put(owners, { signed: await sign(mallory.privateKey, { projectId, version: 2, owners: { keys: [mallory.jwk] } }) });
    expect(selfAdded.status).to.equal(403);
    const ended = await t.projectAdmin.put(owners, { signed: await sign(alice.privateKey, { projectId, version: 2, owners: { keys: [] } }) });
    expect(ended.status, ended.text).to.equal(201);
    expect((await t.projectAdmin.put(policy, widen)).status, 'no owners: admins write again').to.equal(201);

    // Each owner list written is an audit entry (a refused write changes nothing, so records nothing).
    const audit = await app.client.get(`/api/v1/organisations/${t.org.id}/audit?limit=100`);
    const ownerWrites = audit.body.entries.filter((e) => e.action === 'PUT /api/v1/project/:projectId/policy/owners');
    expect(ownerWrites.map((e) => e.status)).to.deep.equal([201, 201]);
  });

  it("the operator's recovery key replaces lost owners (never a policy), and the change is written down", async () => {
    const recovery = await owner();
    const dir = mkdtempSync(path.join(tmpdir(), 'custody-recovery-'));
    writeFileSync(path.join(dir, 'recovery.json'), JSON.stringify({ keys: [recovery.jwk] }));
    const signer = await startSigner({ KEYVAULT_RECOVERY_KEYS_FILE: path.join(dir, 'recovery.json') });
    const own = await startApp({ KEYVAULT_URL: signer.url, KEYVAULT_TOKEN: signer.token });
    try {
      const t = await createTenant(own.client);
      const owners = `/api/v1/project/${t.project.id}/policy/owners` as const;
      const policy = `/api/v1/project/${t.project.id}/policy` as const;
      const projectId = t.project.uid;
      const lost = await owner();
      expect((await t.projectAdmin.put(owners, { keys: [lost.jwk] })).status).to.equal(201);
      // The owner's key is lost: the recovery key may not sign a policy...
      const widen = { rules: [{ name: 'anything', action: 'allow', method: 'personal_sign' }] };
      const policyByRecovery = await t.projectAdmin.put(policy, { signed: await sign(recovery.privateKey, { projectId, version: 1, policy: widen }) });
      expect([policyByRecovery.status, policyByRecovery.problem.code]).to.deep.equal([403, 'invalid_owner_signature']);
      // ...but may name new owners.
      const fresh = await owner();
      const replaced = await t.projectAdmin.put(owners, { signed: await sign(recovery.privateKey, { projectId, version: 2, owners: { keys: [fresh.jwk] } }) });
      expect(replaced.status, replaced.text).to.equal(201);
      expect(replaced.body.author).to.match(/\(recovery key\)$/);
      expect(signer.service.output()).to.include("replaced with the operator's recovery key");
      const audited = await own.db('audit_log').where({ action: 'PUT /api/v1/project/:projectId/policy/owners', project_id: t.project.id, status: 201 });
      expect(audited, 'the API audits both owner writes').to.have.length(2);
      // Owners bound what wallets sign, not who asks within it: an admin still mints a backend's signer token
      // (docs/signing.md), and that token signs only what the owner-signed policy allows.
      const minted = await t.orgAdmin.post(`/api/v1/organisations/${t.org.id}/tokens`, { name: 'backend', role: 'signer', projectId: t.project.id });
      expect(minted.status, minted.text).to.equal(201);
      // The new owner signs from then on.
      const bySigned = await t.projectAdmin.put(policy, { signed: await sign(fresh.privateKey, { projectId, version: 1, policy: siwe }) });
      expect(bySigned.status, bySigned.text).to.equal(201);
    } finally {
      await own.close();
      await signer.destroy();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
