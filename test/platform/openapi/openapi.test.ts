import SwaggerParser from '@apidevtools/swagger-parser';
import { expect } from 'chai';
import type { OpenAPIV3_1 } from 'openapi-types';
import { chromium } from 'playwright-core';
import { startApp, type TestApp } from '../../support/app.js';
import { Conformance, schemaValidator } from '../../support/conformance.js';
import { toolPath } from '../../support/tools.js';

/** Every operation the interface document and docs/interface.md call for, plus operations and reference routes. */
const EXPECTED = [
  'POST /api/v1/signin',
  'POST /api/v1/wallets/createasync',
  'POST /api/v1/project/{projectId}/issuer/check',
  'GET /api/v1/project/{projectId}/wallets',
  'GET /api/v1/project/{projectId}/wallets/{walletId}',
  'POST /api/v1/project/{projectId}/wallets/{walletId}/rpc',
  'POST /api/v1/wallets/rpc',
  'POST /api/v1/membership/issue',
  'POST /api/v1/membership/revoke',
  'POST /api/v1/membership/transfer',
  'GET /api/v1/membership/view',
  'GET /api/v1/organisations',
  'POST /api/v1/organisations',
  'GET /api/v1/organisations/{id}',
  'PUT /api/v1/organisations/{id}',
  'DELETE /api/v1/organisations/{id}',
  'POST /api/v1/organisations/{id}/undelete',
  'GET /api/v1/organisations/{id}/audit',
  'GET /api/v1/organisations/{id}/audit/export',
  'GET /api/v1/organisations/{id}/audit/verification',
  'GET /api/v1/membership/check',
  'POST /api/v1/wallets/membership/check',
  'GET /.well-known/jwks.json',
  'POST /api/v1/organisations/{id}/projects',
  'GET /api/v1/organisations/{id}/projects',
  'POST /api/v1/organisations/{id}/tokens',
  'GET /api/v1/organisations/{id}/tokens',
  'DELETE /api/v1/organisations/{id}/tokens/{tokenId}',
  'GET /api/v1/project/{projectId}',
  'PUT /api/v1/project/{projectId}',
  'DELETE /api/v1/project/{projectId}',
  'POST /api/v1/project/{projectId}/keys',
  'POST /api/v1/project/{projectId}/walletWebhook/secret',
  'GET /api/v1/webhooks/events',
  'GET /api/v1/project/{projectId}/webhooks',
  'POST /api/v1/project/{projectId}/webhooks',
  'GET /api/v1/project/{projectId}/webhooks/{webhookId}',
  'PUT /api/v1/project/{projectId}/webhooks/{webhookId}',
  'DELETE /api/v1/project/{projectId}/webhooks/{webhookId}',
  'POST /api/v1/project/{projectId}/webhooks/{webhookId}/secret',
  'POST /api/v1/project/{projectId}/webhooks/{webhookId}/test',
  'GET /api/v1/project/{projectId}/webhooks/failedDeliveries',
  'POST /api/v1/project/{projectId}/webhooks/failedDeliveries/{deliveryId}/retry',
  'PUT /api/v1/project/{projectId}/policy',
  'GET /api/v1/project/{projectId}/policy',
  'GET /api/v1/project/{projectId}/policy/versions',
  'POST /api/v1/project/{projectId}/policy/evaluate',
  'POST /api/v1/project/{projectId}/dev/token',
  'PUT /api/v1/project/{projectId}/policy/owners',
  'GET /api/v1/project/{projectId}/policy/owners',
  'POST /api/v1/project/{projectId}/wallets/{walletId}/transactions',
  'POST /api/v1/wallets/transactions',
  'GET /api/v1/project/{projectId}/transactions',
  'GET /api/v1/project/{projectId}/transactions/{transactionId}',
  'POST /api/v1/project/{projectId}/transactions/{transactionId}/cancel',
  'POST /api/v1/project/{projectId}/transactions/{transactionId}/speed-up',
  'GET /',
  'GET /healthz',
  'GET /readyz',
  'GET /metrics',
  'GET /openapi.json',
  'GET /docs',
  'GET /docs/assets/{file}',
];

type Doc = OpenAPIV3_1.Document;
type Op = OpenAPIV3_1.OperationObject;
const METHODS = ['get', 'post', 'put', 'delete', 'patch'] as const;

function operations(doc: Doc): Array<[string, Op]> {
  return Object.entries(doc.paths ?? {}).flatMap(([path, item]) =>
    METHODS.filter((m) => item?.[m]).map((m): [string, Op] => [`${m.toUpperCase()} ${path}`, item?.[m] as Op]),
  );
}

describe('OpenAPI document and API reference', () => {
  let app: TestApp;
  let doc: Doc;
  let resolved: Doc;

  before(async () => {
    app = await startApp();
    const res = await app.client.get('/openapi.json', { token: null });
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^application\/json/);
    doc = res.body as Doc;
    resolved = (await SwaggerParser.dereference(structuredClone(doc))) as Doc;
  });
  after(() => app.close());

  it('is a valid OpenAPI 3.1 document (@apidevtools/swagger-parser) listing every endpoint exactly once', async () => {
    expect(doc.openapi).to.equal('3.1.0');
    const validated = (await SwaggerParser.validate(structuredClone(doc))) as Doc;
    expect(validated.info.title).to.equal('Custody service API');
    const listed = operations(doc).map(([k]) => k);
    expect([...listed].sort()).to.deep.equal([...EXPECTED].sort());
    const ids = operations(doc).map(([, op]) => op.operationId);
    expect(new Set(ids).size).to.equal(ids.length);
  });

  it('states both security schemes and uses them: API tokens on management routes, project key + user JWT on the wallet routes', () => {
    const schemes = doc.components?.securitySchemes ?? {};
    expect(schemes).to.have.keys('apiToken', 'userJwt');
    const byKey = new Map(operations(doc));
    expect(byKey.get('POST /api/v1/signin')?.security).to.deep.equal([{ userJwt: [] }]);
    expect(byKey.get('POST /api/v1/wallets/createasync')?.security).to.deep.equal([{ userJwt: [] }]);
    expect(byKey.get('POST /api/v1/wallets/rpc')?.security).to.deep.equal([{ userJwt: [] }]);
    expect(byKey.get('POST /api/v1/wallets/transactions')?.security).to.deep.equal([{ userJwt: [] }]);
    expect(byKey.get('POST /api/v1/wallets/membership/check')?.security).to.deep.equal([{ userJwt: [] }]);
    expect(byKey.get('POST /api/v1/membership/issue')?.security).to.deep.equal([{ apiToken: [] }]);
    expect(byKey.get('GET /healthz')?.security).to.deep.equal([]);
    for (const [key, op] of operations(doc)) {
      if (key.includes(' /api/v1/') && !/signin|createasync| \/api\/v1\/wallets\/(rpc|transactions|membership\/check)$/.test(key))
        expect(op.security, key).to.deep.equal([{ apiToken: [] }]);
    }
    // The project key is the body field `key`, and the request schema says so.
    const signin = byKey.get('POST /api/v1/signin');
    const body = (signin?.requestBody as OpenAPIV3_1.RequestBodyObject).content['application/json']?.schema as { properties: Record<string, unknown> };
    expect(body.properties).to.have.property('key');
  });

  it('documents the errors every API route can answer as problem+json: 400, 401/403 or 401, 404 with path ids, 409/422 with Idempotency-Key, 413 with bodies, 429, 503 with Retry-After', () => {
    for (const [key, op] of operations(resolved)) {
      if (!key.includes(' /api/v1/')) continue;
      const statuses = Object.keys(op.responses ?? {});
      const [method = '', path = ''] = key.split(' ');
      const expected = ['400', '401', '429', '503'];
      // 403 is a token's role or scope, or a policy's refusal; a user's send the policy refuses is a 202 with a failed transaction,
      // and the user's own membership check has nothing to forbid.
      if (!/signin|createasync|^\/api\/v1\/wallets\/transactions$|wallets\/membership\/check/.test(path)) expected.push('403');
      if (path.includes('{')) expected.push('404');
      if (['POST', 'PUT', 'DELETE'].includes(method)) expected.push('413');
      const idempotent = (op.parameters ?? []).some((p) => (p as OpenAPIV3_1.ParameterObject).name === 'Idempotency-Key');
      if (idempotent) expected.push('409', '422');
      expect(statuses, key).to.include.members(expected);
      // Every management POST but the read-only ones (the issuer check, the policy dry run) takes an Idempotency-Key (section 2b).
      expect(idempotent, key).to.equal(method === 'POST' && !/signin|createasync|issuer\/check|policy\/evaluate|membership\/check/.test(path));
      for (const s of statuses.filter((x) => Number(x) >= 400)) {
        const r = op.responses?.[s] as OpenAPIV3_1.ResponseObject;
        expect(r.content, `${key} ${s}`).to.have.key('application/problem+json');
        if (s === '503' || s === '429') expect(r.headers, `${key} ${s}`).to.have.property('Retry-After');
      }
    }
    // The rules of docs/interface.md are in the document's prose, section by section.
    for (const heading of [
      'Environments',
      'Errors',
      'Idempotent retries',
      'Management authentication',
      'Projects',
      'Wallets',
      'Memberships',
      'Webhooks and events',
      'Lists',
      'Running it',
    ]) {
      expect(doc.info.description).to.include(`## ${heading}`);
    }
  });

  it('carries an example for every JSON success answer and every request body, and each example matches its schema', () => {
    const ajv = schemaValidator();
    let checked = 0;
    for (const [key, op] of operations(resolved)) {
      for (const [status, r] of Object.entries(op.responses ?? {})) {
        for (const [type, media] of Object.entries((r as OpenAPIV3_1.ResponseObject).content ?? {})) {
          if (!/json/.test(type)) continue;
          if (key === 'GET /openapi.json' && status === '200') continue;
          expect(media.example, `${key} ${status} example`).not.to.equal(undefined);
          const ok = ajv.validate(media.schema as object, media.example);
          expect(ok, `${key} ${status}: ${ajv.errorsText(ajv.errors)}`).to.equal(true);
          checked++;
        }
      }
      const body = (op.requestBody as OpenAPIV3_1.RequestBodyObject | undefined)?.content['application/json'];
      if (body && key !== 'POST /api/v1/project/{projectId}/walletWebhook/secret') {
        if (body.example !== undefined) {
          expect(ajv.validate(body.schema as object, body.example), `${key} request: ${ajv.errorsText(ajv.errors)}`).to.equal(true);
          checked++;
        } else {
          // Only bodies whose every field is optional may go without an example.
          expect((body.schema as { required?: string[] }).required ?? [], `${key} request example`).to.deep.equal([]);
        }
      }
    }
    expect(checked).to.be.greaterThan(80);
  });

  it('the conformance check used on every suite’s responses catches what does not match', async () => {
    const c = await Conformance.of(doc);
    const org = { id: 1, name: 'a', createdAt: '2026-11-22T10:00:00.000Z', updatedAt: '2026-11-22T10:00:00.000Z', deletedAt: null };
    const json = 'application/json; charset=utf-8';
    expect(c.check({ method: 'GET', path: '/api/v1/organisations/1', status: 200, contentType: json, body: org })).to.deep.equal([]);
    // An extra field, a missing one, a wrong type, an undocumented status, a wrong media type, an unknown path that is not 404.
    expect(c.check({ method: 'GET', path: '/api/v1/organisations/1', status: 200, contentType: json, body: { ...org, secret: 'x' } })).to.have.length(1);
    expect(c.check({ method: 'GET', path: '/api/v1/organisations/1', status: 200, contentType: json, body: { ...org, name: undefined } })).to.have.length(1);
    expect(c.check({ method: 'GET', path: '/api/v1/organisations/1', status: 200, contentType: json, body: { ...org, id: '1' } })).to.have.length(1);
    expect(c.check({ method: 'GET', path: '/api/v1/organisations/1', status: 418, contentType: json, body: org })).to.have.length(1);
    expect(c.check({ method: 'GET', path: '/api/v1/organisations/1', status: 200, contentType: 'text/html', body: '' })).to.have.length(1);
    expect(c.check({ method: 'GET', path: '/api/v1/nowhere', status: 200, contentType: json, body: {} })).to.have.length(1);
    // Headers the document marks required: X-Request-Id on every answer, Retry-After on 503.
    const requestId = new Headers({ 'x-request-id': 'r1' });
    expect(c.check({ method: 'GET', path: '/api/v1/organisations/1', status: 200, contentType: json, headers: requestId, body: org })).to.deep.equal([]);
    expect(c.check({ method: 'GET', path: '/api/v1/organisations/1', status: 200, contentType: json, headers: new Headers(), body: org })).to.have.length(1);
    const problem = {
      type: 'urn:custody:problem:dependency_unavailable',
      title: 'Service Unavailable',
      status: 503,
      detail: 'd',
      code: 'dependency_unavailable',
      requestId: 'r1',
    };
    const problemJson = 'application/problem+json';
    expect(
      c.check({ method: 'GET', path: '/api/v1/organisations/1', status: 503, contentType: problemJson, headers: requestId, body: problem }),
    ).to.have.length(1);
    expect(
      c.check({
        method: 'GET',
        path: '/api/v1/organisations/1',
        status: 503,
        contentType: problemJson,
        headers: new Headers({ 'x-request-id': 'r1', 'retry-after': '2' }),
        body: problem,
      }),
    ).to.deep.equal([]);
    expect(c.check({ method: 'GET', path: '/api/v1/organisations/1/', status: 200, contentType: json, body: org })).to.deep.equal([]);
    // The concrete path wins over a template: failedDeliveries is not a webhook id.
    expect(
      c.check({
        method: 'GET',
        path: '/api/v1/project/3/webhooks/failedDeliveries',
        status: 200,
        contentType: json,
        body: { failedDeliveries: [], nextCursor: null },
      }),
    ).to.deep.equal([]);
    // What the service really answers matches: a problem for a bad id, and a live list.
    const bad = await app.client.get('/api/v1/organisations/0');
    expect(bad.status).to.equal(400);
    expect(
      c.check({ method: 'GET', path: '/api/v1/organisations/0', status: bad.status, contentType: bad.headers.get('content-type') ?? '', body: bad.body }),
    ).to.deep.equal([]);
  });

  it('serves the reference page at /docs with its assets from the service itself (headless Chromium: loads, lists signin, no console errors)', async function () {
    // First use installs Debian's Chromium (scripts/chromium.sh); later runs find it.
    this.timeout(600_000);
    const browser = await chromium.launch({ executablePath: toolPath('chromium'), args: ['--no-sandbox'] });
    try {
      const page = await browser.newPage();
      const consoleErrors: string[] = [];
      const foreign: string[] = [];
      const failed: string[] = [];
      page.on('console', (m) => {
        if (m.type() === 'error') consoleErrors.push(m.text());
      });
      page.on('pageerror', (e) => consoleErrors.push(e.message));
      page.on('request', (r) => {
        if (!r.url().startsWith(app.url) && !r.url().startsWith('data:')) foreign.push(r.url());
      });
      page.on('requestfailed', (r) => failed.push(r.url()));
      const res = await page.goto(`${app.url}/docs`, { waitUntil: 'networkidle' });
      expect(res?.status()).to.equal(200);
      expect(res?.headers()['content-security-policy']).to.include("script-src 'self'");
      await page.getByText('/api/v1/signin', { exact: true }).first().waitFor({ timeout: 30_000 });
      expect(await page.title()).to.equal('Custody service API reference');
      // Open the operation: its request body and responses render from the document.
      await page.getByText('/api/v1/signin', { exact: true }).first().click();
      await page.getByText('Sign a user in', { exact: false }).first().waitFor();
      expect(await page.locator('.opblock').count()).to.equal(EXPECTED.length);
      expect(consoleErrors).to.deep.equal([]);
      expect(foreign).to.deep.equal([]);
      expect(failed).to.deep.equal([]);
    } finally {
      await browser.close();
    }
    // Only the page's own files are served; anything else under /docs/assets is 404.
    const missing = await app.client.get('/docs/assets/package.json', { token: null });
    expect(missing.status).to.equal(404);
  });
});
