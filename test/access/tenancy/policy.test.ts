import { expect } from 'chai';
import type { Principal } from '../../../src/access/auth/principal.js';
import { permissions, refusal, type Action } from '../../../src/access/tenancy/policy.js';

const callers: Record<string, Principal> = {
  operator: { scope: 'operator', role: 'admin' },
  orgAdmin: { scope: 'organisation', role: 'admin', tokenId: 1, organisationId: 1 },
  orgRead: { scope: 'organisation', role: 'read', tokenId: 2, organisationId: 1 },
  projectAdmin: { scope: 'project', role: 'admin', tokenId: 3, organisationId: 1, projectId: 1 },
  projectRead: { scope: 'project', role: 'read', tokenId: 4, organisationId: 1, projectId: 1 },
  projectSigner: { scope: 'project', role: 'signer', tokenId: 5, organisationId: 1, projectId: 1 },
};

// Who may do what, written out as docs/interface.md section 3 says it (x: allowed, -: 403), in the
// order operator, organisation admin, organisation read, project admin, project read, project signer.
const expected: Record<Action, string> = {
  'organisation.list': 'x x x - - -',
  'organisation.create': 'x - - - - -',
  'organisation.read': 'x x x - - -',
  'organisation.rename': 'x x - - - -',
  'organisation.delete': 'x - - - - -',
  'organisation.undelete': 'x - - - - -',
  'audit.read': 'x x - - - -',
  'token.list': 'x x x - - -',
  'token.create': 'x x - - - -',
  'token.revoke': 'x x - - - -',
  'project.list': 'x x x - - -',
  'project.create': 'x x - - - -',
  'project.read': 'x x x x x x',
  'project.change': 'x x - x - -',
  'project.delete': 'x x - - - -',
  'project.rotateKey': 'x x - - - -',
  'project.rotateWalletWebhookSecret': 'x x - - - -',
  'project.checkIssuer': 'x x x x x x',
  'wallet.read': 'x x x x x x',
  'membership.read': 'x x x x x x',
  'membership.write': 'x x - x - -',
  'webhook.catalogue': 'x x x x x x',
  'webhook.read': 'x x x x x x',
  'webhook.write': 'x x - x - -',
  'delivery.read': 'x x x x x x',
  'delivery.retry': 'x x - x - -',
  'policy.read': 'x x x x x x',
  'policy.write': 'x x - x - -',
  'wallet.sign': '- - - - - x',
  'transaction.send': '- - - - - x',
  'transaction.read': 'x x x x x x',
};

describe('tenancy: who may do what', () => {
  it('the policy table answers as written for every action and every kind of caller', () => {
    expect(Object.keys(permissions).sort()).to.deep.equal(Object.keys(expected).sort());
    const got = Object.fromEntries(
      (Object.keys(expected) as Action[]).map((action) => [
        action,
        Object.values(callers)
          .map((p) => (refusal(p, action) === undefined ? 'x' : '-'))
          .join(' '),
      ]),
    );
    expect(got).to.deep.equal(expected);
  });

  it('says why it refuses: the read role, a project token, or an operator-only action', () => {
    expect(refusal(callers['orgRead']!, 'project.create')).to.match(/read role/);
    expect(refusal(callers['projectAdmin']!, 'project.delete')).to.match(/project token may not/);
    expect(refusal(callers['orgAdmin']!, 'organisation.delete')).to.match(/Only the operator/);
    expect(refusal(callers['projectAdmin']!, 'wallet.sign')).to.match(/admin does not imply it/);
    expect(refusal(callers['projectSigner']!, 'membership.write')).to.match(/signer role; writes need an admin token/);
  });
});
