import { expect } from 'chai';
import { request } from 'node:http';
import { MAX_BODY_VALUES } from '../../../src/platform/http/body.js';
import { MAX_PROBLEMS } from '../../../src/platform/http/problem.js';
import { startAppWithIdp } from '../../support/app.js';
import { createOrganisation, createProject } from '../../support/factories.js';
import { MAXIMAL } from '../../support/limits.js';

/**
 * The user present's signing endpoint (issue 30): its body may be 300 KiB and carries the project
 * key, so it is authenticated before it is validated, every refused authentication counts against
 * the address, and no answer grows with what was sent.
 */
const AUDIENCE = 'urn:custody:testnet';
const RPC = '/api/v1/wallets/rpc';
const FAILURES = 6;

/** About 250 KiB of an object of unknown fields: under the old order, validated in full before anything else, one problem listed per field. */
const invalid = (key?: string) => {
  const fields = Object.fromEntries(Array.from({ length: 250 }, (_, i) => [`field${i}`, 'y'.repeat(1000)]));
  return { ...(key ? { key } : {}), method: 'personal_sign', params: { message: 'hi' }, ...fields };
};

describe('wallets: the user-present signing endpoint authenticates before it validates', function () {
  this.timeout(120_000);
  let env: Awaited<ReturnType<typeof startAppWithIdp>>;
  let projectKey: string;
  let jwt: () => Promise<string>;
  before(async () => {
    env = await startAppWithIdp({ RATE_LIMIT_AUTH_FAILURES: String(FAILURES), RATE_LIMIT_FLUSH_MS: '10' });
    const iss = await env.idp.issuer();
    const org = await createOrganisation(env.app.client);
    const project = await createProject(env.app.client, org.id, { issuer: iss.issuer });
    projectKey = project.projectKey;
    jwt = () => iss.sign({ email: 'ada@example.com' }, { audience: AUDIENCE });
    const signin = await env.app.client.post('/api/v1/signin', { key: projectKey }, { token: await jwt() });
    expect(signin.status, signin.text).to.equal(200);
  });
  after(() => env.close());

  /** From a client address of its own, 127.0.0.n (the failure limit is per address). */
  const post = (n: number, body: unknown, token?: string) =>
    new Promise<{ status: number; text: string; problem: { code?: string; errors?: unknown[] } }>((resolve, reject) => {
      const url = new URL(RPC, env.app.client.baseUrl);
      const req = request(
        url,
        {
          method: 'POST',
          localAddress: `127.0.0.${n}`,
          headers: { 'content-type': 'application/json', ...(token === undefined ? {} : { authorization: `Bearer ${token}` }) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            resolve({ status: res.statusCode ?? 0, text, problem: JSON.parse(text || '{}') as { code?: string; errors?: unknown[] } });
          });
        },
      );
      // The server may answer before the body is sent and close: the answer is what is tested.
      req.on('error', reject);
      req.end(typeof body === 'string' ? body : JSON.stringify(body));
    });

  it('refuses a large invalid body without a JWT, or with one that is not a JWT, with 401 before reading it', async () => {
    const body = JSON.stringify(invalid(projectKey));
    expect(body.length).to.be.above(240 * 1024);
    const none = await post(2, body);
    expect(none.status, none.text.slice(0, 300)).to.equal(401);
    expect(none.problem.code).to.equal('missing_token');
    expect(none.problem.errors).to.equal(undefined);
    const garbage = await post(2, body, 'not-a-jwt');
    expect(garbage.status).to.equal(401);
    expect(garbage.problem.code).to.equal('invalid_token');
  });

  it('refuses a large invalid body with a forged JWT (a valid key) with 401, not a 400 listing its problems', async () => {
    const real = await jwt();
    const forged = `${real.slice(0, real.lastIndexOf('.') + 1)}${'A'.repeat(real.length - real.lastIndexOf('.') - 1)}`;
    const res = await post(3, invalid(projectKey), forged);
    expect(res.status, res.text.slice(0, 300)).to.equal(401);
    expect(res.problem.code).to.equal('invalid_token');
    expect(res.problem.errors).to.equal(undefined);
  });

  it('validates the body once the user is known, stopping at the first problems: the answer stays small', async () => {
    const res = await post(4, invalid(projectKey), await jwt());
    expect(res.status).to.equal(400);
    expect(res.problem.code).to.equal('validation_failed');
    expect(res.problem.errors?.length).to.be.at.least(1).and.at.most(MAX_PROBLEMS);
    expect(res.text.length).to.be.below(4096);
    // A small body lists every problem it has, up to MAX_PROBLEMS.
    const small = await post(4, { key: projectKey, method: 'personal_sign', params: {}, a: 1, b: 2, c: 3 }, await jwt());
    expect(small.problem.errors?.length).to.be.at.least(3);
    // More values than any operation can hold: refused from the text, unparsed.
    const values = await post(
      4,
      `{"key":"${projectKey}","method":"personal_sign","params":{"message":"x","n":[${'0,'.repeat(MAX_BODY_VALUES)}0]}}`,
      await jwt(),
    );
    expect(values.status).to.equal(400);
    expect(values.text).to.include(`more than ${MAX_BODY_VALUES} values`);
    // The largest operation of each method within the signer's limits goes through to the signer (no policy: denied).
    for (const [method, build] of Object.entries(MAXIMAL)) {
      const denied = await post(4, { key: projectKey, ...(build() as object) }, await jwt());
      expect(denied.status, `${method}: ${denied.text.slice(0, 300)}`).to.equal(403);
      expect(denied.problem.code).to.equal('policy_denied');
    }
  });

  it('counts every refused authentication against the address: past the limit it gets 429, even with valid credentials', async () => {
    const real = await jwt();
    const forged = `${real.slice(0, -4)}AAAA`;
    const refusals = [
      await post(5, invalid(projectKey)),
      await post(5, invalid(projectKey), 'garbage'),
      await post(5, invalid(projectKey), forged),
      await post(5, invalid('pk_test_unknown'), real),
      await post(5, invalid(), real),
      await post(5, invalid(projectKey), forged),
    ];
    expect(refusals.map((r) => r.status)).to.deep.equal([401, 401, 401, 400, 400, 401]);
    await new Promise((r) => setTimeout(r, 50));
    const blocked = await post(5, { key: projectKey, method: 'personal_sign', params: { message: 'hi' } }, real);
    expect(blocked.status).to.equal(429);
    expect(blocked.problem.code).to.equal('rate_limited');
    // Another address is not affected.
    const other = await post(6, { key: projectKey, method: 'personal_sign', params: { message: 'hi' } }, real);
    expect(other.status, other.text).to.equal(403);
  });
});
