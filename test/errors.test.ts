import { request } from 'node:http';
import { expect } from 'chai';
import { startApp, type TestApp } from './support/app.js';
import { snapshot } from './support/db.js';
import { createTenant } from './support/factories.js';

interface BadCase {
  name: string;
  method: string;
  path: string;
  json?: unknown;
  raw?: string | Buffer;
  /** Content-Type for `raw`; null sends none. */
  contentType?: string | null;
  headers?: Record<string, string>;
  /** undefined: the operator token; null: no Authorization header. */
  token?: string | null;
  status: number;
  code: string;
  /** An entry of `errors` must have this path. */
  errorPath?: string;
}

type Ids = { org: number; project: number; token: number };

function cases(ids: Ids): BadCase[] {
  const orgs = '/api/v1/organisations';
  const org = `${orgs}/${ids.org}`;
  const projects = `${org}/projects`;
  const project = `/api/v1/project/${ids.project}`;
  const tokens = `${org}/tokens`;
  const vf = (name: string, method: string, path: string, json: unknown, errorPath?: string): BadCase => ({
    name,
    method,
    path,
    json,
    status: 400,
    code: 'validation_failed',
    ...(errorPath ? { errorPath } : {}),
  });
  const validProject = { name: 'p', issuer: 'https://idp.example.com' };
  return [
    // Routing
    { name: 'unknown route', method: 'GET', path: '/api/v1/nope', status: 404, code: 'not_found' },
    { name: 'unknown version', method: 'POST', path: '/api/v2/organisations', json: { name: 'a' }, status: 404, code: 'not_found' },
    { name: 'PATCH on a collection', method: 'PATCH', path: orgs, json: { name: 'a' }, status: 405, code: 'method_not_allowed' },
    { name: 'DELETE on a collection', method: 'DELETE', path: orgs, status: 405, code: 'method_not_allowed' },
    { name: 'PUT on keys', method: 'PUT', path: `${project}/keys`, json: {}, status: 405, code: 'method_not_allowed' },
    { name: 'GET on secret rotation', method: 'GET', path: `${project}/walletWebhook/secret`, status: 405, code: 'method_not_allowed' },
    // Body syntax and type
    { name: 'truncated JSON', method: 'POST', path: orgs, raw: '{"name":', status: 400, code: 'malformed_json' },
    { name: 'trailing comma', method: 'POST', path: orgs, raw: '{"name":"a",}', status: 400, code: 'malformed_json' },
    { name: 'JSON string body', method: 'POST', path: orgs, raw: '"just a string"', status: 400, code: 'malformed_json' },
    { name: 'JSON number body', method: 'POST', path: orgs, raw: '42', status: 400, code: 'malformed_json' },
    { name: '__proto__ key', method: 'POST', path: orgs, raw: '{"name":"a","__proto__":{"admin":true}}', status: 400, code: 'malformed_json' },
    { name: 'text/plain', method: 'POST', path: orgs, raw: '{"name":"a"}', contentType: 'text/plain', status: 400, code: 'unsupported_media_type' },
    {
      name: 'form encoded',
      method: 'POST',
      path: orgs,
      raw: 'name=a',
      contentType: 'application/x-www-form-urlencoded',
      status: 400,
      code: 'unsupported_media_type',
    },
    {
      name: 'multipart',
      method: 'POST',
      path: orgs,
      raw: '--x\r\n\r\n--x--',
      contentType: 'multipart/form-data; boundary=x',
      status: 400,
      code: 'unsupported_media_type',
    },
    { name: 'no Content-Type', method: 'POST', path: orgs, raw: Buffer.from('{"name":"a"}'), contentType: null, status: 400, code: 'unsupported_media_type' },
    {
      name: 'unknown charset',
      method: 'POST',
      path: orgs,
      raw: '{"name":"a"}',
      contentType: 'application/json; charset=x-unknown',
      status: 400,
      code: 'unsupported_media_type',
    },
    {
      name: 'unknown Content-Encoding',
      method: 'POST',
      path: orgs,
      raw: '{"name":"a"}',
      headers: { 'content-encoding': 'x-unknown' },
      status: 400,
      code: 'unsupported_media_type',
    },
    // Found by the fuzz suite: these were 500s.
    {
      name: 'gzip Content-Encoding over a plain body',
      method: 'POST',
      path: orgs,
      raw: '{"name":"a"}',
      headers: { 'content-encoding': 'gzip' },
      status: 400,
      code: 'malformed_json',
    },
    {
      name: 'br Content-Encoding over a plain body',
      method: 'POST',
      path: orgs,
      raw: '{"name":"a"}',
      headers: { 'content-encoding': 'br' },
      status: 400,
      code: 'malformed_json',
    },
    {
      name: 'deflate Content-Encoding over a plain body',
      method: 'POST',
      path: orgs,
      raw: '{"name":"a"}',
      headers: { 'content-encoding': 'deflate' },
      status: 400,
      code: 'malformed_json',
    },
    { name: 'body over 1 MiB', method: 'POST', path: orgs, json: { name: 'a'.repeat(1024 * 1024 + 10) }, status: 413, code: 'payload_too_large' },
    // Bodies are read only for a matched endpoint, after its auth, with its own limit and a depth limit.
    {
      name: 'large body without a token: refused before it is read',
      method: 'POST',
      path: orgs,
      raw: '['.repeat(400_000) + ']'.repeat(400_000),
      token: null,
      status: 401,
      code: 'unauthorized',
    },
    {
      name: 'large body to no route: refused before it is read',
      method: 'POST',
      path: '/api/v1/nothing',
      raw: '['.repeat(400_000) + ']'.repeat(400_000),
      status: 404,
      code: 'not_found',
    },
    {
      name: 'sign-in body over 8 KiB',
      method: 'POST',
      path: '/api/v1/signin',
      json: { key: 'pk_test_x', token: 't'.repeat(9 * 1024) },
      token: null,
      status: 413,
      code: 'payload_too_large',
    },
    {
      name: 'sign-in body nested 40 deep',
      method: 'POST',
      path: '/api/v1/signin',
      raw: `{"key":${'['.repeat(40)}${']'.repeat(40)}}`,
      token: null,
      status: 400,
      code: 'validation_failed',
    },
    {
      name: 'management body nested 200,000 deep',
      method: 'POST',
      path: orgs,
      raw: '['.repeat(200_000) + ']'.repeat(200_000),
      status: 400,
      code: 'validation_failed',
    },
    // Fields
    vf('unknown field', 'POST', orgs, { name: 'a', extra: 1 }, '/extra'),
    vf('name of wrong type', 'POST', orgs, { name: 123 }, '/name'),
    vf('null name', 'POST', orgs, { name: null }, '/name'),
    vf('empty name', 'POST', orgs, { name: '' }, '/name'),
    vf('blank name', 'POST', orgs, { name: '   ' }, '/name'),
    vf('name too long', 'POST', orgs, { name: 'n'.repeat(201) }, '/name'),
    vf('name as array', 'PUT', org, { name: ['a'] }, '/name'),
    vf('array body', 'POST', orgs, [], '/'),
    { name: 'no body where one is required', method: 'POST', path: orgs, status: 400, code: 'validation_failed', errorPath: '/name' },
    vf('body on undelete', 'POST', `${org}/undelete`, { force: true }, '/'),
    vf('body on DELETE', 'DELETE', project, { cascade: true }, '/'),
    // Path and query
    vf('non-numeric id', 'GET', `${orgs}/abc`, undefined, '/id'),
    vf('zero id', 'GET', `${orgs}/0`, undefined, '/id'),
    vf('id beyond bigint', 'GET', `${orgs}/99999999999999999999`, undefined, '/id'),
    vf('negative token id', 'DELETE', `${tokens}/-1`, undefined, '/tokenId'),
    vf('showDeleted not a boolean', 'GET', `${orgs}?showDeleted=maybe`, undefined, '/showDeleted'),
    vf('limit 0', 'GET', `${orgs}?limit=0`, undefined, '/limit'),
    vf('limit 1001', 'GET', `${projects}?limit=1001`, undefined, '/limit'),
    vf('limit not a number', 'GET', `${tokens}?limit=ten`, undefined, '/limit'),
    vf('forged cursor', 'GET', `${orgs}?cursor=1.AAAAAAAAAAAAAAAAAAAAAA`, undefined, '/cursor'),
    vf('garbage cursor', 'GET', `${orgs}?cursor=%00%01`, undefined, '/cursor'),
    vf('unknown query parameter', 'GET', `${orgs}?sort=name`, undefined, '/sort'),
    vf('repeated query parameter', 'GET', `${orgs}?limit=1&limit=2`, undefined, '/limit'),
    vf('query on a bare GET', 'GET', `${project}?verbose=1`, undefined, '/verbose'),
    // Projects
    vf('http issuer', 'POST', projects, { ...validProject, issuer: 'http://idp.example.com' }, '/issuer'),
    vf('missing issuer', 'POST', projects, { name: 'p' }, '/issuer'),
    vf('requireVerifiedEmail as string', 'POST', projects, { ...validProject, requireVerifiedEmail: 'yes' }, '/requireVerifiedEmail'),
    vf('ftp webhook URL', 'POST', projects, { ...validProject, walletWebhookUrl: 'ftp://x.example.com' }, '/walletWebhookUrl'),
    vf('short webhook secret', 'POST', projects, { ...validProject, walletWebhookSecret: 'short' }, '/walletWebhookSecret'),
    vf('empty project update', 'PUT', project, {}, '/'),
    vf('environment is not writable', 'PUT', project, { environment: 'production' }, '/environment'),
    vf('negative grace', 'POST', `${project}/keys`, { graceSeconds: -1 }, '/graceSeconds'),
    vf('fractional grace', 'POST', `${project}/keys`, { graceSeconds: 1.5 }, '/graceSeconds'),
    vf('grace as string', 'POST', `${project}/keys`, { graceSeconds: '60' }, '/graceSeconds'),
    vf('grace beyond 30 days', 'POST', `${project}/keys`, { graceSeconds: 30 * 86_400 + 1 }, '/graceSeconds'),
    // Characters no column can hold (NUL) or UTF-8 cannot encode (an unpaired surrogate), anywhere.
    vf('NUL in a name', 'POST', orgs, { name: 'a\u0000b' }, '/name'),
    vf('unpaired high surrogate in a name', 'PUT', org, { name: 'x\ud800' }, '/name'),
    vf('unpaired low surrogate in a project name', 'POST', projects, { ...validProject, name: '\udc00' }, '/name'),
    vf('NUL in an issuer URL', 'POST', projects, { ...validProject, issuer: 'https://idp.example.com/\u0000' }, '/issuer'),
    vf('NUL in a webhook URL', 'POST', projects, { ...validProject, walletWebhookUrl: 'https://hooks.example.com/\u0000' }, '/walletWebhookUrl'),
    vf('NUL in a token name', 'POST', tokens, { name: '\u0000', role: 'read' }, '/name'),
    vf(
      'NUL in a membership type',
      'POST',
      `/api/v1/membership/issue?projectId=${ids.project}`,
      [{ walletAddress: '0x52908400098527886E0F7030069857D2E4169EE7', membershipType: 'gym:gold\u0000' }],
      '/0/membershipType',
    ),
    vf('NUL in a query filter', 'GET', `/api/v1/project/${ids.project}/wallets?email=a%00b%40example.com`, undefined, '/email'),
    vf('NUL in a membership filter', 'GET', `/api/v1/membership/view?projectId=${ids.project}&membershipType=gym%00`, undefined, '/membershipType'),
    vf('NUL in a path id', 'GET', `${orgs}/1%00`, undefined, '/id'),
    // Tokens
    vf('unknown role', 'POST', tokens, { name: 't', role: 'owner' }, '/role'),
    vf('projectId as string', 'POST', tokens, { name: 't', role: 'read', projectId: String(ids.project) }, '/projectId'),
    vf('token without name', 'POST', tokens, { role: 'read' }, '/name'),
    // Headers
    {
      name: 'Idempotency-Key too long',
      method: 'POST',
      path: orgs,
      json: { name: 'a' },
      headers: { 'idempotency-key': 'k'.repeat(256) },
      status: 400,
      code: 'validation_failed',
      errorPath: '/Idempotency-Key',
    },
    {
      name: 'Idempotency-Key with a control character',
      method: 'POST',
      path: orgs,
      json: { name: 'a' },
      headers: { 'idempotency-key': 'a\tb' },
      status: 400,
      code: 'validation_failed',
    },
    // Authentication
    { name: 'no Authorization', method: 'GET', path: orgs, token: null, status: 401, code: 'unauthorized' },
    { name: 'unknown token', method: 'POST', path: orgs, json: { name: 'a' }, token: 'sk_test_nope', status: 401, code: 'unauthorized' },
    { name: 'Basic auth', method: 'GET', path: orgs, token: null, headers: { authorization: 'Basic YTpi' }, status: 401, code: 'unauthorized' },
  ];
}

describe('bad input: problem+json with a stable code, and no change in the database', () => {
  let app: TestApp;
  let ids: Ids;
  before(async () => {
    app = await startApp();
    const t = await createTenant(app.client);
    ids = { org: t.org.id, project: t.project.id, token: t.tokens.orgRead.id };
  });
  after(() => app.close());

  it('covers at least 40 kinds of bad input', () => {
    expect(cases({ org: 1, project: 1, token: 1 }).length).to.be.at.least(40);
  });

  // Cases are built once ids exist; mocha needs the titles up front, so each case is looked up by index.
  const count = cases({ org: 1, project: 1, token: 1 }).length;
  for (let i = 0; i < count; i++) {
    const title = cases({ org: 1, project: 1, token: 1 })[i]!.name;
    it(title, async () => {
      const c = cases(ids)[i]!;
      const before = await snapshot(app.db);
      const res = await app.client.request(c.method, c.path, {
        ...(c.json === undefined ? {} : { json: c.json }),
        ...(c.raw === undefined ? {} : { raw: c.raw }),
        ...(c.contentType === undefined ? {} : { contentType: c.contentType }),
        ...(c.headers ? { headers: c.headers } : {}),
        ...(c.token === undefined ? {} : { token: c.token }),
      });
      expect(res.status, res.text).to.equal(c.status);
      expect(res.headers.get('content-type')).to.equal('application/problem+json');
      expect(res.problem).to.include({ status: c.status, code: c.code });
      expect(res.problem.type).to.equal(`urn:custody:problem:${c.code}`);
      expect(res.problem.title).to.be.a('string');
      expect(res.problem.detail).to.be.a('string');
      expect(res.problem.requestId).to.equal(res.headers.get('x-request-id'));
      if (c.errorPath) {
        expect(
          (res.problem.errors ?? []).map((e: { path: string }) => e.path),
          JSON.stringify(res.problem.errors),
        ).to.include(c.errorPath);
      }
      if (c.status === 405) expect(res.headers.get('allow')).to.be.a('string');
      expect(await snapshot(app.db)).to.deep.equal(before);
    });
  }

  it('lists every field problem at once', async () => {
    const res = await app.client.post(`/api/v1/organisations/${ids.org}/projects`, { name: '', issuer: 7, extra: true });
    expect(res.status).to.equal(400);
    const paths = (res.problem.errors ?? []).map((e) => e.path);
    expect(paths).to.include.members(['/name', '/issuer', '/extra']);
  });

  it('echoes a well-formed X-Request-Id and replaces a malformed one', async () => {
    const mine = await app.client.get('/healthz', { headers: { 'x-request-id': 'trace-123.abc' } });
    expect(mine.headers.get('x-request-id')).to.equal('trace-123.abc');
    const bad = await app.client.get('/healthz', { headers: { 'x-request-id': 'has spaces and ; semicolons' } });
    expect(bad.headers.get('x-request-id')).to.match(/^[0-9a-f-]{36}$/);
    const onError = await app.client.get('/api/v1/nope', { headers: { 'x-request-id': 'err-1' } });
    expect(onError.headers.get('x-request-id')).to.equal('err-1');
    expect(onError.problem.requestId).to.equal('err-1');
  });

  it('accepts JSON bodies however application/json with a UTF-8 charset is spelled', async () => {
    const spellings = [
      'application/json',
      'Application/JSON',
      'application/json; charset=utf-8',
      'application/json;charset=UTF-8',
      'application/json; charset="utf-8"',
      'application/json; charset=utf8',
      'application/json ; charset=utf-8',
      'application/json; charset=utf-8; foo=bar',
    ];
    for (const [i, contentType] of spellings.entries()) {
      const res = await app.client.request('POST', '/api/v1/organisations', { raw: JSON.stringify({ name: `spelling ${i}` }), contentType });
      expect(res.status, `${contentType}: ${res.text}`).to.equal(201);
    }
  });

  it('answers OPTIONS with the allowed methods', async () => {
    const res = await app.client.request('OPTIONS', '/api/v1/organisations');
    expect(res.status).to.equal(204);
    expect(res.headers.get('allow')).to.include('POST');
  });
});

describe("character-set SQLSTATEs are the caller's input, not a 500", () => {
  it('maps 22021, 22P05 and 22026 to 400 invalid_characters by code', async () => {
    const { mapDatabaseError } = await import('../src/platform/db/pg-errors.js');
    for (const code of ['22021', '22P05', '22026']) {
      const mapped = mapDatabaseError({ code, message: 'anything' });
      expect(mapped?.status, code).to.equal(400);
      expect(mapped?.code, code).to.equal('invalid_characters');
    }
    // A real one from PostgreSQL, past validation: a NUL byte in text.
    const { testDb } = await import('./support/db.js');
    try {
      await testDb().raw('SELECT convert_from(?::bytea, ?)', [Buffer.from([0x61, 0x00]), 'UTF8']);
      expect.fail('PostgreSQL took a NUL in text');
    } catch (err) {
      expect(mapDatabaseError(err)?.status).to.equal(400);
    }
  });
});

describe('a large body the answer did not need is not drained', function () {
  this.timeout(30_000);
  let app: TestApp;
  before(async () => {
    app = await startApp();
  });
  after(() => app.close());

  it('answers it (401, 404, 413) with Connection: close and ends the connection without reading the rest; the client gets the answer', async () => {
    const body = Buffer.alloc(4 * 1024 * 1024, 0x5b);
    const send = (path: string, headers: Record<string, string>) =>
      new Promise<{ status: number; connection: string | undefined; text: string; socketEnded: boolean }>((resolve, reject) => {
        const req = request(
          `${app.url}${path}`,
          { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': String(body.length), ...headers } },
          (res) => {
            let text = '';
            res.on('data', (c: Buffer) => (text += c.toString('utf8')));
            res.on('end', () => {
              const socket = res.socket;
              // The server half-closes: the socket ends without a reset.
              const ended = new Promise<boolean>((r) => {
                if (socket.readableEnded) r(true);
                socket.once('end', () => r(true));
                setTimeout(() => r(false), 5_000).unref();
              });
              void ended.then((socketEnded) => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, text, socketEnded }));
            });
          },
        );
        req.on('error', (err: NodeJS.ErrnoException) => (err.code === 'EPIPE' || err.code === 'ECONNRESET' ? undefined : reject(err)));
        req.end(body);
      });
    for (const [path, headers, status] of [
      ['/api/v1/organisations', {}, 401],
      ['/api/v1/nothing-here', { authorization: `Bearer ${app.operatorToken}` }, 404],
      ['/api/v1/signin', {}, 413],
    ] as const) {
      const res = await send(path, headers);
      expect(res.status, path).to.equal(status);
      expect(res.connection, path).to.equal('close');
      expect(JSON.parse(res.text) as { status: number }).to.include({ status });
      expect(res.socketEnded, path).to.equal(true);
    }
    // The service goes on answering on new connections.
    expect((await app.client.get('/healthz', { token: null })).status).to.equal(200);
  });
});
