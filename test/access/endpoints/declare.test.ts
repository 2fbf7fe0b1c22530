import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Router from '@koa/router';
import Koa from 'koa';
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { declare, listKey, mount, type Route } from '../../../src/access/endpoints/declare.js';
import type { UserAuthenticator } from '../../../src/access/auth/user.js';
import { Cursors } from '../../../src/platform/http/pagination.js';
import type { AppContext, AppMiddleware, AppState } from '../../../src/platform/http/context.js';
import { startApp, type TestApp } from '../../support/app.js';
import { permissions } from '../../../src/access/tenancy/policy.js';

describe('http: one declaration per endpoint', function () {
  this.timeout(30_000);
  let app: TestApp;
  before(async () => {
    app = await startApp();
  });
  after(async () => {
    await app.close();
  });

  it('declares every API route once; writes are audited, management POSTs idempotent, every operation documents its errors', async () => {
    const declared = app.endpoints.map((d) => `${d.route.method} ${d.route.path}`);
    expect(new Set(declared).size, 'no route declared twice').to.equal(declared.length);
    // The served document is built from the router: every /api/ operation in it is a declared one.
    const doc = (await app.client.get('/openapi.json', { token: null })).body as {
      paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
    };
    const served = Object.entries(doc.paths)
      .filter(([p]) => p.startsWith('/api/'))
      .flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${p.replace(/\{(\w+)\}/g, ':$1')}`));
    expect([...served].sort()).to.deep.equal([...declared].sort());

    for (const { route, schemas } of app.endpoints) {
      const name = `${route.method} ${route.path}`;
      if (route.method === 'GET') {
        expect(route.write, `${name}: a GET changes nothing`).to.equal(undefined);
      } else {
        // A non-GET is a write (audited) or says on purpose that it changes nothing.
        expect(route.write !== undefined || route.readOnly === true, `${name}: neither a write nor readOnly`).to.equal(true);
        expect(route.write !== undefined && route.readOnly === true, `${name}: both a write and readOnly`).to.equal(false);
      }
      // Signing and sending (a send, a cancel, a speed-up: each is signed under the policy).
      const signs = route.auth === 'apiToken' && (route.may === 'wallet.sign' || route.may === 'transaction.send');
      if (route.write) {
        // The request's audit entry, except where the command audits what it does: the wallet keys it
        // creates, and each signing decision (a denial too, which no request transaction would keep).
        expect(route.write.audit ?? 'request', name).to.equal(route.auth === 'userJwt' || signs ? 'command' : 'request');
        // docs/interface.md section 2b: every management POST takes Idempotency-Key; sign-in and createasync are
        // idempotent by identity; signing and sending take the key whoever asks (docs/signing.md, docs/transactions.md).
        const userSigns = route.path === '/api/v1/wallets/rpc' || route.path === '/api/v1/wallets/transactions';
        expect(route.write.idempotent, name).to.equal(route.method === 'POST' && (route.auth === 'apiToken' || userSigns));
      }
      expect(schemas.doc?.security, name).to.equal(route.auth);
      if (route.auth === 'apiToken') {
        // The tenant comes from the path parameter the rule names; a write is an action only admins may do.
        if (route.tenant.level === 'organisation') expect(route.path, name).to.match(/^\/api\/v1\/organisations\/:id(\/|$)/);
        if (route.tenant.level === 'project' && route.tenant.from !== 'query') expect(route.path, name).to.include('/:projectId');
        // A write is an action only admins may do; signing and sending only signer tokens (admin does not imply it).
        if (route.write) expect(permissions[route.may].role, `${name}: ${route.may}`).to.equal(signs ? 'signer' : 'admin');
        if (route.write && route.write.audit !== 'command') expect(route.write.target, `${name}: audit target`).to.not.equal(undefined);
      }
      const op = doc.paths[route.path.replace(/:(\w+)/g, '{$1}')]?.[route.method.toLowerCase()];
      const errors = Object.keys(op?.responses ?? {}).filter((s) => /^[45]\d\d$/.test(s));
      expect(errors, `${name}: documented error statuses`).to.include.members(route.auth === 'none' ? [] : ['400', '401']);
      if (route.write) expect(errors, name).to.include('503');
    }
  });

  it('mounts each declaration with its middlewares in the one order: cache, auth, idempotency, audit, then validation and the handler', async () => {
    const seen: string[] = [];
    const step =
      (name: string): AppMiddleware =>
      async (_ctx, next) => {
        seen.push(name);
        await next();
      };
    const router = new Router<AppState>();
    const handler = (ctx: AppContext): Promise<void> => {
      seen.push('handler');
      ctx.status = 204;
      return Promise.resolve();
    };
    const cursors = new Cursors([randomBytes(32)]);
    const authenticate: AppMiddleware = async (ctx, next) => {
      seen.push('authenticate');
      ctx.state.principal = { scope: 'operator', role: 'admin' };
      await next();
    };
    // The user endpoint's authentication is the user authenticator's (test/domains/wallets): here it admits anyone.
    const users = { identify: () => Promise.resolve({ project: {}, email: 'ada@example.com', token: null, requestId: 'r' }) } as unknown as UserAuthenticator;
    mount(router, { projectChange: step('projectChange'), authenticate, idempotent: step('idempotent'), audited: () => step('audited'), cursors, users }, [
      declare(
        {
          method: 'POST',
          path: '/w',
          auth: 'apiToken',
          tenant: { level: 'deployment' },
          may: 'organisation.create',
          write: { idempotent: true, invalidatesProjectKeys: true },
        },
        {},
        handler,
      ),
      declare(
        { method: 'PUT', path: '/w', auth: 'apiToken', tenant: { level: 'deployment' }, may: 'organisation.create', write: { idempotent: false } },
        {},
        handler,
      ),
      declare({ method: 'GET', path: '/r', auth: 'apiToken', tenant: { level: 'deployment' }, may: 'organisation.list' }, {}, handler),
      declare(
        { method: 'POST', path: '/u', auth: 'userJwt', user: { verify: 'afterValidation' }, write: { idempotent: false, audit: 'command' } },
        {},
        handler,
      ),
    ]);
    const koa = new Koa<AppState>();
    koa.use(router.routes());
    const callback = koa.callback();
    const server: Server = createServer((req, res) => void callback(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const call = async (method: string, path: string) => {
      seen.length = 0;
      expect((await fetch(`${url}${path}`, { method })).status).to.equal(204);
      return [...seen];
    };
    try {
      expect(await call('POST', '/w')).to.deep.equal(['projectChange', 'authenticate', 'idempotent', 'audited', 'handler']);
      expect(await call('PUT', '/w')).to.deep.equal(['authenticate', 'audited', 'handler']);
      expect(await call('GET', '/r')).to.deep.equal(['authenticate', 'handler']);
      expect(await call('POST', '/u')).to.deep.equal(['handler']);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('binds a list cursor to the route, its path parameters and its selecting query, never to cursor or limit', () => {
    const projects: Route = {
      method: 'GET',
      path: '/api/v1/organisations/:id/projects',
      auth: 'apiToken',
      tenant: { level: 'organisation' },
      may: 'project.list',
      list: true,
    };
    const tokens: Route = { ...projects, path: '/api/v1/organisations/:id/tokens' };
    const key = listKey(projects, { id: '1' }, { showDeleted: 'true', limit: '1', cursor: 'x.y' });
    expect(listKey(projects, { id: '1' }, { limit: '50', showDeleted: 'true' })).to.equal(key);
    expect(listKey(projects, { id: '2' }, { showDeleted: 'true' })).to.not.equal(key);
    expect(listKey(projects, { id: '1' }, {})).to.not.equal(key);
    expect(listKey(tokens, { id: '1' }, { showDeleted: 'true' })).to.not.equal(key);
    // The order the query came in does not matter.
    expect(listKey(projects, { id: '1' }, { b: '2', a: '1' })).to.equal(listKey(projects, { id: '1' }, { a: '1', b: '2' }));
  });
});
