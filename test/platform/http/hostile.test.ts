import { expect } from 'chai';
import { DEFAULT_BODY_LIMIT, MAX_BODY_VALUES, MAX_OBJECT_MEMBERS } from '../../../src/platform/http/body.js';
import { MAX_PROBLEMS } from '../../../src/platform/http/problem.js';
import { startApp, type TestApp } from '../../support/app.js';
import { createTenant } from '../../support/factories.js';

/** What a problem answer may weigh, whatever was sent. */
const ANSWER_BYTES = 4096;

/**
 * Every declared endpoint (listed from the declarations) under hostile input, without credentials
 * and with a read token (issue 30): never a 5xx, never an answer that grows with the request (at
 * most MAX_PROBLEMS problems, a few KiB), and a body past the shape bounds refused from its text.
 */
describe('http: every endpoint answers hostile input with a small 4xx', function () {
  this.timeout(120_000);
  let app: TestApp;
  let read: string;
  before(async () => {
    app = await startApp();
    read = (await createTenant(app.client)).tokens.orgRead.token;
  });
  after(() => app.close());

  /** An object of unknown members, as many as a body may have, small enough to have every problem listed. */
  const wide = JSON.stringify(Object.fromEntries(Array.from({ length: MAX_OBJECT_MEMBERS - 1 }, (_, i) => [`unknown${i}`, i])));
  /** As many values as the route's byte limit allows, past what any body may hold where the limit allows that many. */
  const manyValues = (limit: number) => `[${'{},'.repeat(Math.min(MAX_BODY_VALUES, Math.floor(limit / 3) - 2))}{}]`;
  const holdsTooMany = (limit: number) => Math.floor(limit / 3) - 2 >= MAX_BODY_VALUES;
  /** A query of a hundred unknown parameters. */
  const query = Array.from({ length: 100 }, (_, i) => `unknown${i}=${i}`).join('&');

  const check = (what: string, res: { status: number; text: string; headers: Headers }, statuses: number[]) => {
    expect(statuses, `${what}: ${res.status} ${res.text.slice(0, 200)}`).to.include(res.status);
    expect(res.text.length, `${what}: answer size`).to.be.at.most(ANSWER_BYTES);
    if (/json/.test(res.headers.get('content-type') ?? '')) {
      const errors = (JSON.parse(res.text) as { errors?: unknown[] }).errors ?? [];
      expect(errors.length, `${what}: problems listed`).to.be.at.most(MAX_PROBLEMS);
    }
  };

  it('walks every declared endpoint: unauthenticated, and with a read token, wide, over-valued and unknown-parameter requests', async () => {
    expect(app.endpoints.length).to.be.greaterThan(30);
    let listedEvery = 0;
    for (const { route, schemas } of app.endpoints) {
      const path = route.path.replace(/:\w+/g, '1');
      const name = `${route.method} ${route.path}`;
      const hasBody = route.method !== 'GET';
      const limit = schemas.bodyLimit ?? DEFAULT_BODY_LIMIT;
      const bodies = hasBody ? [wide, manyValues(limit)] : [undefined];
      for (const body of bodies) {
        const raw = body === undefined ? {} : { raw: body };
        check(`${name} without a token`, await app.client.request(route.method, path, { ...raw, token: null }), [400, 401, 413]);
        const withRead = await app.client.request(route.method, `${path}${body === undefined ? `?${query}` : ''}`, { ...raw, token: read });
        check(`${name} with a read token`, withRead, [400, 401, 403, 404, 413]);
        if (body === wide && withRead.status === 400 && (withRead.problem.errors?.length ?? 0) === MAX_PROBLEMS) listedEvery++;
        if (body !== undefined && body !== wide && holdsTooMany(limit) && withRead.status === 400)
          expect(withRead.text, name).to.include(`more than ${MAX_BODY_VALUES} values`);
      }
    }
    // The wide body's problems were many (one per unknown member) wherever it reached validation: each answer listed the first MAX_PROBLEMS.
    expect(listedEvery).to.be.greaterThan(5);
  });
});
