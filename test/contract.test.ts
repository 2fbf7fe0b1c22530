import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { fileURLToPath } from 'node:url';
import { Value } from '@sinclair/typebox/value';
import { expect } from 'chai';
import {
  CATALOGUE,
  LIMIT_SCOPES,
  LIMIT_WINDOWS,
  matchRoute,
  OPERATORS,
  OPERATORS_FOR,
  pathTo,
  POLICY_BOUNDS,
  RULE_ACTIONS,
  SIGNER_ROUTES,
  SIGNING_METHODS,
  type FieldKind,
  type RouteParams,
  type SignerRouteName,
  type SigningMethod,
} from '../contract/index.js';
import { parsePolicy } from '../keyvault/policy/document.js';
import { parseOperation } from '../keyvault/sign/operation.js';
import { PolicyLimits } from '../src/domains/signing/policies/limits.js';
import { EvaluateBody, PolicyBody } from '../src/domains/signing/policies/schemas.js';
import type { ProjectUid } from '../src/platform/signer/client.js';
import { RpcBody, UserRpcBody } from '../src/domains/wallets/schemas.js';
import { REAL_TYPED_DATA } from './support/limits.js';
import { startSigner, type RunningSigner } from './support/signer.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** One operation of each method: a method added to the contract without one here does not compile. */
const SAMPLE: Record<SigningMethod, object> = {
  personal_sign: { message: 'hello' },
  eth_signTypedData_v4: { typedData: REAL_TYPED_DATA['EIP-2612 permit'] },
  eth_signTransaction: { transaction: { chainId: 8453, nonce: 1, gas: 60000, maxFeePerGas: '1000', maxPriorityFeePerGas: '1', to: `0x${'11'.repeat(20)}` } },
  eth_signAuthorization: { chainId: 1, address: `0x${'22'.repeat(20)}`, nonce: 0 },
  eth_sendTransaction: {
    transaction: { chainId: 8453, nonce: 1, gas: 60000, maxFeePerGas: '1000', maxPriorityFeePerGas: '1', to: `0x${'11'.repeat(20)}` },
    purpose: 'send',
  },
};

/** A value of each kind a condition can compare. */
const VALUE: Record<FieldKind, unknown> = { quantity: '1', address: `0x${'33'.repeat(20)}`, string: 'a', boolean: true, hex: '0xa9059cbb' };

const limitPolicy = (limits: unknown[]) => ({ rules: [], limits });

describe('contract: one list per thing both processes must agree on', () => {
  it('every signing method is taken by the API schemas and read by the signer, with exactly its catalogue fields', () => {
    for (const method of SIGNING_METHODS) {
      const params = SAMPLE[method];
      expect(Value.Check(RpcBody, { method, params }), `RpcBody ${method}`).to.equal(true);
      expect(Value.Check(UserRpcBody, { method, params }), `UserRpcBody ${method}`).to.equal(true);
      expect(Value.Check(EvaluateBody, { method, params }), `EvaluateBody ${method}`).to.equal(true);
      const op = parseOperation({ method, params });
      expect(op.method).to.equal(method);
      expect(Object.keys(op.fields).sort(), `${method} fields`).to.deep.equal(Object.keys(CATALOGUE[method]).sort());
    }
    // A method neither side knows is refused by both.
    expect(Value.Check(RpcBody, { method: 'eth_sign', params: {} })).to.equal(false);
    expect(() => parseOperation({ method: 'eth_sign', params: {} })).to.throw(/must be one of/);
  });

  it('every rule action, method and catalogue field with each operator its kind takes is accepted by both', () => {
    const rules = SIGNING_METHODS.flatMap((method) =>
      RULE_ACTIONS.map((action) => ({
        name: `${action} ${method}`,
        action,
        method,
        conditions: Object.entries(CATALOGUE[method]).flatMap(([field, kind]) =>
          OPERATORS_FOR[kind].map((op) => ({ field, op, value: op === 'in' || op === 'not_in' ? [VALUE[kind]] : VALUE[kind] })),
        ),
      })),
    );
    // The per-rule bound is the policy's: split the conditions into rules of at most its size.
    const n = POLICY_BOUNDS.conditionsPerRule;
    const split = rules.flatMap((r) =>
      Array.from({ length: Math.ceil(r.conditions.length / n) }, (_, i) => ({
        ...r,
        name: `${r.name} ${i}`,
        conditions: r.conditions.slice(i * n, i * n + n),
      })),
    );
    const policy = { rules: split };
    expect(Value.Check(PolicyBody, policy), JSON.stringify([...Value.Errors(PolicyBody, policy)].slice(0, 2))).to.equal(true);
    expect(parsePolicy(policy).rules).to.have.length(split.length);
    // Every operator is used by some kind, and taken by the API.
    expect([...new Set(Object.values(OPERATORS_FOR).flat())].sort()).to.deep.equal([...OPERATORS].sort());
  });

  it('every limit window and scope is accepted by the signer and counted by the API, by the same length', async () => {
    for (const window of Object.keys(LIMIT_WINDOWS) as Array<keyof typeof LIMIT_WINDOWS>) {
      for (const per of LIMIT_SCOPES) {
        const limit = { method: 'personal_sign', per, window, count: 3 };
        expect(Value.Check(PolicyBody, limitPolicy([limit])), `API ${window} ${per}`).to.equal(true);
        const parsed = parsePolicy(limitPolicy([limit])).limits[0];
        expect(parsed?.windowSeconds, `signer ${window}`).to.equal(LIMIT_WINDOWS[window]);
        // The API reads the limits of the policy the signer answers.
        const limits = new PolicyLimits({ getPolicy: () => Promise.resolve({ policy: limitPolicy([limit]) } as never) }, () => 0);
        expect(await limits.of('p' as ProjectUid, 'personal_sign')).to.deep.equal([limit]);
      }
    }
    const unknown = { method: 'personal_sign', per: 'wallet', window: '1w', count: 3 };
    expect(Value.Check(PolicyBody, limitPolicy([unknown]))).to.equal(false);
    expect(() => parsePolicy(limitPolicy([unknown]))).to.throw(/window must be one of/);
  });

  it('builds each route path from the table and matches it back to that route', () => {
    for (const route of SIGNER_ROUTES) {
      const params = { keyId: randomUUID(), projectId: randomUUID(), version: '7' };
      const path = pathTo(route.name, params as RouteParams<SignerRouteName>);
      expect(path).not.to.match(/[{}]/);
      expect(matchRoute(route.method, path)?.route.name, path).to.equal(route.name);
    }
  });

  it('is shipped in the image beside the code that imports it', () => {
    expect(readFileSync(`${ROOT}Dockerfile`, 'utf8')).to.match(/^COPY contract \.\/contract$/m);
    expect(readFileSync(`${ROOT}scripts/image-layout.sh`, 'utf8')).to.match(/cp -r [^\n]*"\$root\/contract"/);
    expect((JSON.parse(readFileSync(`${ROOT}tsconfig.build.json`, 'utf8')) as { include: string[] }).include).to.include('contract');
  });
});

describe('contract: the signer serves its route table, no more and no less', function () {
  this.timeout(60_000);
  let signer: RunningSigner;
  before(async () => {
    signer = await startSigner();
  });
  after(() => signer.destroy());

  const call = (method: string, path: string, token: string | undefined): Promise<{ status: number; body: { code?: string; message?: string } }> =>
    new Promise((resolve, reject) => {
      const body = method === 'GET' ? undefined : '{}';
      const headers: Record<string, string> = {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        // A length of its own: Node sends a DELETE's body neither chunked nor measured otherwise.
        ...(body === undefined ? {} : { 'content-type': 'application/json', 'content-length': String(body.length) }),
      };
      const req = request(new URL(path, signer.url), { method, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') }));
      });
      req.on('error', reject);
      req.end(body);
    });
  const unknownRoute = (r: { status: number; body: { code?: string; message?: string } }) =>
    r.status === 404 && r.body.code === 'not_found' && r.body.message === 'no such route';

  const params = { keyId: randomUUID(), projectId: randomUUID(), version: '1' };
  const pathOf = (name: SignerRouteName) => pathTo(name, params as RouteParams<SignerRouteName>);

  it('answers every route of the table (its probes without credentials, the rest only with them)', async () => {
    for (const route of SIGNER_ROUTES) {
      const path = pathOf(route.name);
      const served = await call(route.method, path, signer.token);
      expect(unknownRoute(served), `${route.method} ${path}: ${JSON.stringify(served)}`).to.equal(false);
      const anonymous = await call(route.method, path, undefined);
      if (route.auth) expect(anonymous.status, `${route.method} ${path} without a token`).to.equal(401);
      else expect(anonymous.status, `${route.method} ${path} without a token`).to.equal(200);
    }
  });

  it('answers 404 no such route for every method the table lacks on its paths, and for paths off the table', async () => {
    const paths = new Map<string, Set<string>>();
    for (const route of SIGNER_ROUTES) {
      const path = pathOf(route.name);
      paths.set(path, (paths.get(path) ?? new Set()).add(route.method));
    }
    for (const [path, methods] of paths) {
      for (const method of ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'].filter((m) => !methods.has(m))) {
        const r = await call(method, path, signer.token);
        expect(unknownRoute(r), `${method} ${path}: ${JSON.stringify(r)}`).to.equal(true);
      }
    }
    for (const path of [
      '/',
      '/v1',
      `/v1/keys/${params.keyId}/other`,
      `/v1/projects/${params.projectId}/nothing`,
      `/v1/projects/${params.projectId}/policy/versions/0`,
    ]) {
      const r = await call('GET', path, signer.token);
      expect(unknownRoute(r), `GET ${path}: ${JSON.stringify(r)}`).to.equal(true);
    }
  });
});
