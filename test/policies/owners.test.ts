import { expect } from 'chai';
import { startApp, type TestApp } from '../support/app.js';
import { createTenant } from '../support/factories.js';
import { signInMessage as hello, ownerSigned as sign, policyOwner as owner, siwePolicy as siwe } from '../support/policies.js';

/** Owner-signed policies (SIGNING.md): once a project has owners, an admin token alone cannot widen its policy. */
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
});
