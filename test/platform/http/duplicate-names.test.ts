import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { duplicateName } from '../../../contract/json-names.js';
import { startApp, type TestApp } from '../../support/app.js';
import { startAnvil, type Anvil } from '../../support/anvil.js';
import { chainConfig } from '../../support/chain.js';
import { TestIdp } from '../../support/idp.js';
import { Receiver } from '../../support/receiver.js';
import { fixtures, writeTenant, type Call, type Tenant } from '../../support/write-fixtures.js';

/** The endpoints that take a body without writing: how to call each. */
const reads: Record<string, (t: Tenant) => Call | Promise<Call>> = {
  'POST /api/v1/project/:projectId/issuer/check': (t) => ({ client: t.admin, path: `/api/v1/project/${t.projectId}/issuer/check`, body: { token: 'x.y.z' } }),
  'POST /api/v1/project/:projectId/policy/evaluate': (t) => ({
    client: t.admin,
    path: `/api/v1/project/${t.projectId}/policy/evaluate`,
    body: { walletId: t.walletId, operation: { method: 'personal_sign', params: { message: 'hello' } } },
  }),
  'POST /api/v1/wallets/membership/check': async (t) => ({
    client: await t.user('ada@example.com'),
    path: '/api/v1/wallets/membership/check',
    body: { key: t.projectKey, membershipType: 'gym:gold' },
  }),
};

/** The body's JSON with its first member repeated (at the top, or in the first element of a list). */
function withDuplicate(body: unknown): string {
  const json = JSON.stringify(body ?? {});
  const repeat = (o: Record<string, unknown>) => {
    const [k, v] = Object.entries(o)[0] ?? ['dup', 1];
    return `{${JSON.stringify(k)}:${JSON.stringify(v)},`;
  };
  if (Array.isArray(body) && body[0] !== null && typeof body[0] === 'object')
    return json.replace(/^\[\{/, `[${repeat(body[0] as Record<string, unknown>)}`).replace(/,\}/, '}');
  const o = (body ?? {}) as Record<string, unknown>;
  return Object.keys(o).length === 0 ? '{"dup":1,"dup":2}' : json.replace(/^\{/, repeat(o));
}

/**
 * A repeated member name is refused (400 duplicate_member) by every endpoint that takes a body, at
 * any depth, and changes nothing: JSON.parse keeps the last of the two, another reader the first.
 */
describe('http: a body that repeats a member name is refused by every endpoint that takes one', function () {
  this.timeout(300_000);
  let app: TestApp;
  let idp: TestIdp;
  let receiver: Receiver;
  // The chain of the send fixtures, so that their bodies are valid but for the repeated name.
  let anvil: Anvil;
  let dir: string;

  before(async () => {
    idp = await TestIdp.start();
    receiver = await Receiver.start();
    dir = mkdtempSync(path.join(tmpdir(), 'custody-dup-'));
    writeFileSync(path.join(dir, 'ca.pem'), idp.caPem);
    anvil = await startAnvil();
    app = await startApp({ OIDC_CA_FILE: path.join(dir, 'ca.pem'), CHAINS: JSON.stringify([chainConfig(anvil)]) });
  });
  after(async () => {
    await app.close();
    await receiver.close();
    await anvil.stop();
    await idp.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('finds the first repeated name at any depth, after unescaping, and nothing in distinct objects', () => {
    expect(duplicateName('{"a":1,"b":{"a":2,"b":[{"a":3}]},"c":"\\"a\\":"}')).to.equal(undefined);
    expect(duplicateName('{"a":1,"b":{"x":2},"a" :3}')).to.deep.equal({ pointer: '/', name: 'a' });
    expect(duplicateName('{"rules":[{"name":"x","n\\u0061me":"y"}]}')).to.deep.equal({ pointer: '/rules/0', name: 'name' });
    expect(duplicateName('[{"a":1},{"b":{"c":1,"c":2}}]')).to.deep.equal({ pointer: '/1/b', name: 'c' });
  });

  it('answers 400 duplicate_member on every endpoint with a body, whoever calls, and changes nothing', async () => {
    const t = await writeTenant(app, idp, receiver, anvil);
    const withBody = app.endpoints.filter((d) => d.schemas.body !== undefined);
    expect(withBody.length).to.be.greaterThan(15);
    const problems: string[] = [];
    for (const { route } of withBody) {
      const name = `${route.method} ${route.path}`;
      const call = (await reads[name]?.(t)) ?? (await fixtures[name]?.call(t, 0));
      if (!call) throw new Error(`no call for ${name}`);
      const before = await app.db('audit_log').count<Array<{ count: string }>>('* as count');
      const res = await call.client.request(route.method, call.path, { raw: withDuplicate(call.body) });
      if (res.status !== 400 || res.problem.code !== 'duplicate_member') problems.push(`${name}: ${res.status} ${res.text.slice(0, 200)}`);
      const after = await app.db('audit_log').count<Array<{ count: string }>>('* as count');
      if (after[0]?.count !== before[0]?.count) problems.push(`${name}: something was recorded`);
    }
    expect(problems).to.deep.equal([]);
    // Deeper in: a rule of a policy that names itself twice.
    const nested = await t.admin.request('PUT', `/api/v1/project/${t.projectId}/policy`, {
      raw: '{"rules":[{"name":"a","name":"b","action":"allow","method":"personal_sign"}]}',
    });
    expect(nested.status).to.equal(400);
    expect(nested.problem.errors?.[0]?.path).to.equal('/rules/0/name');
  });
});
