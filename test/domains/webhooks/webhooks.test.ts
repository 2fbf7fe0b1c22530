import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { expect } from 'chai';
import { getAddress } from 'ethers';
import { Webhook } from 'standardwebhooks';
import { recordEvents } from '../../../src/domains/webhooks/record.js';
import { startApp, type TestApp } from '../../support/app.js';
import { expectUnchanged as expectUnchangedIn } from '../../support/db.js';
import { createTenant } from '../../support/factories.js';
import { Client, required, type Reply } from '../../support/http.js';
import { Receiver, type Received } from '../../support/receiver.js';
import { until } from '../../support/wait.js';

const address = () => getAddress(`0x${randomBytes(20).toString('hex')}`);
const headersOf = (r: Received) => r.headers as Record<string, string>;
const envelope = (r: Received) => JSON.parse(r.body) as { id: string; type: string; createdAt: string; projectId: number; data: Record<string, unknown> };

describe('Project webhooks in production', () => {
  it('in production: https only, and a URL pointing to a private address is refused at creation and at connect time', async () => {
    const env = {
      APP_ENV: 'production',
      SERVICE_AUDIENCE: 'urn:custody:prod',
      OPERATOR_TOKEN: `op_${randomBytes(24).toString('hex')}`,
      DATA_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      WEBHOOK_RETRY_SCHEDULE: '0',
      RELAY_POLL_MS: '50',
    };
    // One deployment lets customers use 127.0.0.0/8 (a private network of theirs); the other does not.
    const allowing = await startApp({ ...env, EGRESS_ALLOW_PRIVATE: '127.0.0.0/8' });
    const strict = await startApp({ ...env, EGRESS_ALLOW_PRIVATE: '' }, undefined, { relay: true });
    try {
      const t = await createTenant(strict.client);
      const hooks = `/api/v1/project/${t.project.id}/webhooks` as const;
      for (const url of ['http://hooks.example.com/in', 'https://127.0.0.1/in', 'https://localhost/in', 'https://[::1]/in', 'https://169.254.169.254/latest']) {
        const res = await t.projectAdmin.post(hooks, { url, events: ['*'] });
        expect(res.status, url).to.equal(400);
        expect(res.problem.errors?.[0]?.path).to.equal('/url');
      }
      const viaAllowing = new Client(allowing.url, t.tokens.projectAdmin.token);
      const sub = await viaAllowing.post(hooks, { url: 'https://127.0.0.1:9/in', events: ['webhook.test'] });
      expect(sub.status, sub.text).to.equal(201);
      // The strict deployment's relay refuses to connect.
      expect((await t.projectAdmin.post(`${hooks}/${sub.body.id}/test`)).status).to.equal(202);
      const failed = await until('the failed delivery', async () => {
        const res = await t.projectAdmin.get(`${hooks}/failedDeliveries`);
        return res.body.failedDeliveries[0];
      });
      expect(failed).to.include({ kind: 'subscription', webhookId: sub.body.id, event: 'webhook.test', lastError: 'ssrf_blocked', lastStatus: null });
    } finally {
      await allowing.close();
      await strict.close();
    }
  });
});

describe('Project webhooks', () => {
  let app: TestApp;
  let receiver: Receiver;
  let offsetMs = 0;
  const now = () => Date.now() + offsetMs;

  before(async () => {
    app = await startApp({ WEBHOOK_RETRY_SCHEDULE: '0,40,40', RELAY_POLL_MS: '50', WEBHOOK_TIMEOUT_MS: '2000' }, undefined, { relay: true, now });
    receiver = await Receiver.start();
  });
  after(async () => {
    await app.close();
    await receiver.close();
  });
  afterEach(() => {
    offsetMs = 0;
    receiver.respond = undefined;
  });

  async function tenant() {
    const t = await createTenant(app.client);
    return { ...t, admin: t.projectAdmin, hooks: `/api/v1/project/${t.project.id}/webhooks` as const };
  }
  type Tenant = Awaited<ReturnType<typeof tenant>>;

  async function subscribe(t: Tenant, body: Record<string, unknown> = {}, target = receiver): Promise<{ id: number; secret: string }> {
    const res = await t.admin.post(t.hooks, { url: `${target.url}?t=${t.project.id}`, events: ['*'], ...body });
    expect(res.status, res.text).to.equal(201);
    return { id: res.body.id, secret: (body['secret'] as string | undefined) ?? required(res.body.secret, 'the generated secret') };
  }

  const issue = (t: Tenant, n = 1) =>
    t.admin.post(
      '/api/v1/membership/issue',
      Array.from({ length: n }, () => ({ membershipType: 'gym:gold', walletAddress: address() })),
    );

  /** What this tenant's subscriptions received so far (the receiver is shared; the query string names the project). */
  const receivedBy = (t: Tenant, target = receiver) => target.received.filter((r) => JSON.parse(r.body).projectId === t.project.id);

  const expectUnchanged = <T>(call: () => Promise<Reply<T>>, status: number, code: string) => expectUnchangedIn(app, call, status, code);

  describe('subscriptions', () => {
    it('create (secret shown once), list, get, update, rotate, delete (soft), showDeleted, and the event catalogue', async () => {
      const t = await tenant();
      const created = await t.admin.post(t.hooks, { url: 'https://hooks.example.com/in', events: ['membership.issued', 'wallet.created'] });
      expect(created.status, created.text).to.equal(201);
      expect(created.body).to.have.all.keys(
        'id',
        'projectId',
        'url',
        'events',
        'createdAt',
        'updatedAt',
        'deletedAt',
        'disabledAt',
        'disabledReason',
        'secret',
      );
      expect(created.body.secret).to.match(/^whsec_[A-Za-z0-9+/]{43}=$/);
      const id = created.body.id;
      const stored = await app.db('webhook_subscriptions').where({ id }).first();
      expect(JSON.stringify(stored)).not.to.include(required(created.body.secret).slice(6));

      const given = await t.admin.post(t.hooks, { url: 'http://hooks.example.com/b', events: ['*'], secret: 'a-secret-of-my-own-choosing' });
      expect(given.status).to.equal(201);
      expect(given.body).not.to.have.property('secret');

      const list = await t.projectRead.get(t.hooks);
      expect(list.status).to.equal(200);
      expect(list.body.webhooks.map((w: { id: number }) => w.id)).to.deep.equal([id, given.body.id]);
      expect(list.text).not.to.include('whsec_');
      expect((await t.projectRead.get(`${t.hooks}/${id}`)).body).to.include({ id, url: 'https://hooks.example.com/in' });

      const put = await t.admin.put(`${t.hooks}/${id}`, { events: ['membership.revoked'] });
      expect(put.status).to.equal(200);
      expect(put.body).to.include({ url: 'https://hooks.example.com/in' });
      expect(put.body.events).to.deep.equal(['membership.revoked']);

      const rotated = await t.admin.post(`${t.hooks}/${id}/secret`);
      expect(rotated.status).to.equal(200);
      expect(rotated.body.secret).to.match(/^whsec_/);
      expect(rotated.body.secret).not.to.equal(created.body.secret);
      const chosen = await t.admin.post(`${t.hooks}/${id}/secret`, { secret: 'another-secret-of-mine' });
      expect(chosen.body).to.deep.equal({ secret: 'another-secret-of-mine' });

      expect((await t.admin.delete(`${t.hooks}/${id}`)).status).to.equal(204);
      expect((await t.admin.get(t.hooks)).body.webhooks.map((w: { id: number }) => w.id)).to.deep.equal([given.body.id]);
      const all = await t.admin.get(`${t.hooks}?showDeleted=true`);
      expect(all.body.webhooks).to.have.length(2);
      expect(all.body.webhooks[0]?.deletedAt).to.be.a('string');
      expect((await t.admin.get(`${t.hooks}/${id}`)).body.deletedAt).to.be.a('string');
      await expectUnchanged(() => t.admin.delete(`${t.hooks}/${id}`), 404, 'not_found');
      await expectUnchanged(() => t.admin.put(`${t.hooks}/${id}`, { url: 'https://x.example.com' }), 404, 'not_found');
      await expectUnchanged(() => t.admin.post(`${t.hooks}/${id}/test`), 404, 'not_found');

      const catalogue = await t.projectRead.get('/api/v1/webhooks/events');
      expect(catalogue.status).to.equal(200);
      expect(catalogue.body.events.map((e: { name: string }) => e.name)).to.have.members([
        'wallet.created',
        'membership.issued',
        'membership.updated',
        'membership.revoked',
        'membership.transferred',
        'transaction.created',
        'membership.expired',
        'webhook.test',
        'wallet.signature.created',
        'wallet.signature.denied',
        ...['queued', 'signed', 'submitted', 'repriced', 'mined', 'reorged', 'confirmed', 'failed', 'replaced', 'cancelled', 'expired'].map(
          (s) => `wallet.transaction.${s}`,
        ),
      ]);
      expect((await t.admin.withToken(null).get('/api/v1/webhooks/events')).status).to.equal(401);
    });

    it('refuses bad input with 400 and changes nothing; other tenants get 404, read tokens 403', async () => {
      const [t, other] = await Promise.all([tenant(), tenant()]);
      const ok = { url: 'https://hooks.example.com/in', events: ['*'] };
      const bad: Array<[Record<string, unknown>, string]> = [
        [{ ...ok, url: 'ftp://hooks.example.com/in' }, '/url'],
        [{ ...ok, url: 'not a url' }, '/url'],
        [{ ...ok, url: `https://hooks.example.com/${'a'.repeat(2040)}` }, '/url'],
        [{ ...ok, url: 'https://user:pw@hooks.example.com/in' }, '/url'],
        [{ ...ok, events: [] }, '/events'],
        [{ ...ok, events: ['membership.exploded'] }, '/events/0'],
        [{ ...ok, events: ['*', '*'] }, '/events'],
        [{ ...ok, events: 'membership.issued' }, '/events'],
        [{ ...ok, secret: 'short' }, '/secret'],
        [{ ...ok, secret: 'has a space in it, sadly' }, '/secret'],
        [{ ...ok, secret: `whsec_${Buffer.alloc(8).toString('base64')}` }, '/secret'],
        [{ ...ok, secret: 'whsec_!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!' }, '/secret'],
        [{ ...ok, colour: 'red' }, '/colour'],
        [{ events: ['*'] }, '/url'],
      ];
      for (const [body, path] of bad) {
        const res = await expectUnchanged(() => t.admin.post(t.hooks, body), 400, 'validation_failed');
        expect(
          (res.problem.errors ?? []).map((e: { path: string }) => e.path),
          JSON.stringify(body).slice(0, 100),
        ).to.include(path);
      }
      const { id } = await subscribe(t);
      await expectUnchanged(() => t.admin.put(`${t.hooks}/${id}`, { events: ['nope'] }), 400, 'validation_failed');
      await expectUnchanged(() => t.admin.post(`${t.hooks}/${id}/secret`, { secret: 'tiny' }), 400, 'validation_failed');
      await expectUnchanged(() => t.admin.get(`${t.hooks}?showDeleted=yes`), 400, 'validation_failed');

      for (const client of [other.admin, other.orgAdmin, other.orgRead]) {
        await expectUnchanged(() => client.get(t.hooks), 404, 'not_found');
        await expectUnchanged(() => client.post(t.hooks, ok), 404, 'not_found');
        await expectUnchanged(() => client.get(`${t.hooks}/${id}`), 404, 'not_found');
        await expectUnchanged(() => client.put(`${t.hooks}/${id}`, {}), 404, 'not_found');
        await expectUnchanged(() => client.delete(`${t.hooks}/${id}`), 404, 'not_found');
        await expectUnchanged(() => client.get(`${t.hooks}/failedDeliveries`), 404, 'not_found');
      }
      // Another project's subscription id under this project is not found either.
      const theirs = await subscribe(other);
      await expectUnchanged(() => t.admin.get(`${t.hooks}/${theirs.id}`), 404, 'not_found');
      for (const client of [t.projectRead, t.orgRead]) {
        await expectUnchanged(() => client.post(t.hooks, ok), 403, 'forbidden');
        await expectUnchanged(() => client.put(`${t.hooks}/${id}`, {}), 403, 'forbidden');
        await expectUnchanged(() => client.delete(`${t.hooks}/${id}`), 403, 'forbidden');
        await expectUnchanged(() => client.post(`${t.hooks}/${id}/test`), 403, 'forbidden');
        await expectUnchanged(() => client.post(`${t.hooks}/${id}/secret`), 403, 'forbidden');
      }
      expect((await t.orgAdmin.get(t.hooks)).status).to.equal(200);
      expect((await app.client.get(t.hooks)).status).to.equal(200);
    });
  });

  describe('fan-out and signatures', () => {
    it('delivers each event to every subscription naming it, once, with its own webhook-id, the stored bytes and a verifiable signature', async () => {
      const [t, other] = await Promise.all([tenant(), tenant()]);
      const issued = await subscribe(t, { events: ['membership.issued'] });
      const all = await subscribe(t, { events: ['*'], secret: 'plain-text-secret-for-hmac' });
      const gone = await subscribe(t);
      await t.admin.delete(`${t.hooks}/${gone.id}`);
      await subscribe(other, { events: ['*'] });

      const res = await issue(t);
      expect(res.status).to.equal(201);
      const got = await until('4 deliveries', () => (receivedBy(t).length >= 4 ? receivedBy(t) : undefined));
      await new Promise((r) => setTimeout(r, 200));
      expect(receivedBy(t)).to.have.length(4);
      expect(receivedBy(other)).to.have.length(0);

      const verified = got.map((r) => {
        const secrets = [issued.secret, all.secret];
        const ok = secrets.filter((s) => {
          try {
            new Webhook(s.startsWith('whsec_') ? s : Buffer.from(s).toString('base64')).verify(r.body, headersOf(r));
            return true;
          } catch {
            return false;
          }
        });
        expect(ok, r.body).to.have.length(1);
        return { secret: ok[0], event: envelope(r), id: r.headers['webhook-id'] as string, body: r.body };
      });
      expect(verified.filter((v) => v.secret === issued.secret).map((v) => v.event.type)).to.deep.equal(['membership.issued']);
      expect(
        verified
          .filter((v) => v.secret === all.secret)
          .map((v) => v.event.type)
          .sort(),
      ).to.deep.equal(['membership.issued', 'membership.updated', 'transaction.created']);
      expect(new Set(verified.map((v) => v.id)).size).to.equal(4);
      // Both deliveries of membership.issued carry the same event (same envelope id, same bytes).
      const both = verified.filter((v) => v.event.type === 'membership.issued');
      expect(both[0]?.body).to.equal(both[1]?.body);
      const { rows: stored } = await app.db.raw(
        `SELECT e::text AS body FROM outbox o CROSS JOIN LATERAL json_array_elements(o.payload::json) e WHERE o.kind = 'event' AND e->>'id' = ?`,
        [both[0]?.event.id ?? ''],
      );
      expect(stored[0].body).to.equal(both[0]?.body);
      expect(both[0]?.event).to.include({ projectId: t.project.id, type: 'membership.issued' });
      expect(both[0]?.event.data).to.deep.equal(res.body.memberships[0]);
      expect(both[0]?.event.createdAt).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(got[0]?.headers['content-type']).to.equal('application/json');
      expect(got[0]?.headers['user-agent']).to.match(/custody/);
    });

    it('wallet.created events fan out like any other', async () => {
      const t = await tenant();
      const sub = await subscribe(t, { events: ['wallet.created'] });
      const data = { walletId: 42, walletAddress: address(), emailAddress: 'someone@example.com' };
      await app.db.transaction((tx) => recordEvents(tx, t.project.id, [{ type: 'wallet.created', data }], new Date()));
      const [got] = await until('the delivery', () => (receivedBy(t).length > 0 ? receivedBy(t) : undefined));
      const payload = new Webhook(sub.secret).verify(got!.body, headersOf(got!)) as { type: string; data: unknown };
      expect(payload.type).to.equal('wallet.created');
      expect(payload.data).to.deep.equal(data);
    });

    it('during a secret rotation each delivery carries both signatures, and either secret verifies it', async () => {
      const t = await tenant();
      const sub = await subscribe(t, { events: ['webhook.test'] });
      const rotated = await t.admin.post(`${t.hooks}/${sub.id}/secret`);
      const test = await t.admin.post(`${t.hooks}/${sub.id}/test`);
      expect(test.status).to.equal(202);
      expect(test.body.webhookId).to.match(/^msg_/);
      const [got] = await until('the test delivery', () => (receivedBy(t).length > 0 ? receivedBy(t) : undefined));
      expect(got!.headers['webhook-id']).to.equal(test.body.webhookId);
      expect(String(got!.headers['webhook-signature']).split(' ')).to.have.length(2);
      for (const secret of [sub.secret, rotated.body.secret]) {
        const payload = new Webhook(secret).verify(got!.body, headersOf(got!)) as { type: string; data: unknown };
        expect(payload).to.include({ type: 'webhook.test' });
        expect(payload.data).to.deep.equal({});
      }
      // Past the overlap, only the new secret signs.
      await app
        .db('webhook_subscriptions')
        .where({ id: sub.id })
        .update({ secret_prev_expires_at: new Date(Date.now() - 1000) });
      await t.admin.post(`${t.hooks}/${sub.id}/test`);
      const second = await until('the second test delivery', () => receivedBy(t)[1]);
      expect(String(second.headers['webhook-signature']).split(' ')).to.have.length(1);
      new Webhook(rotated.body.secret).verify(second.body, headersOf(second));
      expect(() => new Webhook(sub.secret).verify(second.body, headersOf(second))).to.throw();
    });
  });

  describe('retries and failures', () => {
    it('retries on the schedule with the same webhook-id, then lists the delivery as failed with the fields of section 8; a manual retry delivers it', async () => {
      const t = await tenant();
      const sub = await subscribe(t, { events: ['webhook.test'] });
      const big = 'x'.repeat(20_000);
      receiver.respond = () => ({ status: 500, body: big });
      const test = await t.admin.post(`${t.hooks}/${sub.id}/test`);
      const failed = await until('the failed delivery', async () => (await t.admin.get(`${t.hooks}/failedDeliveries`)).body.failedDeliveries[0]);
      const attempts = receivedBy(t);
      expect(attempts).to.have.length(3);
      expect(new Set(attempts.map((r) => r.headers['webhook-id']))).to.deep.equal(new Set([test.body.webhookId]));
      expect(failed).to.have.all.keys(
        'id',
        'kind',
        'webhookId',
        'event',
        'url',
        'payload',
        'attempts',
        'lastStatus',
        'lastError',
        'lastResponseBody',
        'lastAttemptAt',
        'createdAt',
      );
      expect(failed).to.include({ kind: 'subscription', webhookId: sub.id, event: 'webhook.test', attempts: 3, lastStatus: 500, lastError: 'http_status' });
      expect(failed.lastResponseBody).to.have.length(16 * 1024);
      expect(failed.payload).to.deep.equal(JSON.parse(attempts[0]!.body));

      await expectUnchanged(() => t.projectRead.post(`${t.hooks}/failedDeliveries/${failed.id}/retry`), 403, 'forbidden');
      await expectUnchanged(() => t.admin.post(`${t.hooks}/failedDeliveries/999999999/retry`), 404, 'not_found');
      receiver.respond = undefined;
      const retry = await t.admin.post(`${t.hooks}/failedDeliveries/${failed.id}/retry`);
      expect(retry.status).to.equal(202);
      await until('the re-sent delivery', () => (receivedBy(t).length === 4 ? true : undefined));
      expect(receivedBy(t)[3]?.headers['webhook-id']).to.equal(test.body.webhookId);
      await until('an empty failed list', async () =>
        (await t.admin.get(`${t.hooks}/failedDeliveries`)).body.failedDeliveries.length === 0 ? true : undefined,
      );
      await expectUnchanged(() => t.admin.post(`${t.hooks}/failedDeliveries/${failed.id}/retry`), 409, 'conflict');

      // A manual retry that fails again goes straight back to failed (one attempt, no new schedule).
      receiver.respond = () => ({ status: 502 });
      await t.admin.post(`${t.hooks}/${sub.id}/test`);
      const again = await until('the second failure', async () => (await t.admin.get(`${t.hooks}/failedDeliveries`)).body.failedDeliveries[0]);
      const before = receivedBy(t).length;
      await t.admin.post(`${t.hooks}/failedDeliveries/${again.id}/retry`);
      const back = await until('failed again', async () => {
        const list = (await t.admin.get(`${t.hooks}/failedDeliveries`)).body.failedDeliveries;
        return list[0]?.attempts === 4 ? list[0] : undefined;
      });
      expect(back.lastStatus).to.equal(502);
      await new Promise((r) => setTimeout(r, 200));
      expect(receivedBy(t).length).to.equal(before + 1);
    });

    it('honours Retry-After on 429/503 (within the schedule)', async () => {
      const t = await tenant();
      const sub = await subscribe(t, { events: ['webhook.test'] });
      receiver.respond = () => ({ status: 503, headers: { 'retry-after': '3' } });
      const test = await t.admin.post(`${t.hooks}/${sub.id}/test`);
      const row = await until('the first attempt', async () => {
        const r = await app.db('outbox').where({ id: test.body.deliveryId }).first();
        return r.attempts === 1 ? r : undefined;
      });
      expect(row.status).to.equal('pending');
      const wait = row.next_attempt_at.getTime() - row.last_attempt_at.getTime();
      expect(wait).to.be.at.least(2_500);
      // The schedule's step is 40 ms: Retry-After wins over it, as the endpoint asked.
      await app.db('outbox').where({ id: test.body.deliveryId }).update({ status: 'done' });
    });

    it('classifies timeouts and refused connections', async () => {
      const t = await tenant();
      const slow = await Receiver.start();
      try {
        slow.respond = () => 'hang';
        const hanging = await subscribe(t, { events: ['webhook.test'] }, slow);
        const refused = await subscribe(t, { events: ['webhook.test'], url: 'http://127.0.0.1:9/in' });
        await t.admin.post(`${t.hooks}/${hanging.id}/test`);
        await t.admin.post(`${t.hooks}/${refused.id}/test`);
        const list = await until(
          'two failed deliveries',
          async () => {
            const l = (await t.admin.get(`${t.hooks}/failedDeliveries`)).body.failedDeliveries;
            return l.length === 2 ? l : undefined;
          },
          30_000,
        );
        const errorOf = (id: number) => list.find((d) => d.webhookId === id)?.lastError as string;
        expect(errorOf(hanging.id)).to.equal('timeout');
        expect(errorOf(refused.id)).to.equal('connection');
      } finally {
        await slow.close();
      }
    });

    it('bounds hostile receivers under load: one that trickles bytes times out, a 10 MiB answer is read to 16 KiB, a redirect to an internal address is not followed, and a healthy endpoint gets its 150 deliveries meanwhile', async () => {
      const t = await tenant();
      const healthy = await Receiver.start();
      const sockets = new Set<Socket>();
      const hostile = createServer((req, res) => {
        req.resume();
        req.on('end', () => {
          const kind = new URL(req.url ?? '/', 'http://x').searchParams.get('kind');
          if (kind === 'trickle') {
            res.writeHead(200, { 'content-type': 'text/plain' });
            const timer = setInterval(() => res.write('.'), 100);
            res.on('close', () => clearInterval(timer));
          } else if (kind === 'huge') {
            res.writeHead(500, { 'content-type': 'text/plain' });
            const chunk = Buffer.alloc(64 * 1024, 120);
            let sent = 0;
            const pump = () => {
              while (sent < 10 * 1024 * 1024) {
                sent += chunk.length;
                if (!res.write(chunk)) return void res.once('drain', pump);
              }
              res.end();
            };
            pump();
          } else {
            res.writeHead(307, { location: 'http://169.254.169.254/latest/meta-data/' }).end();
          }
        });
      });
      hostile.on('connection', (s) => sockets.add(s));
      await new Promise<void>((resolve) => hostile.listen(0, '127.0.0.1', resolve));
      const base = `http://127.0.0.1:${(hostile.address() as AddressInfo).port}/in`;
      try {
        const subs: Record<string, number> = {};
        for (const kind of ['trickle', 'huge', 'redirect']) {
          const res = await t.admin.post(t.hooks, { url: `${base}?kind=${kind}`, events: ['webhook.test'] });
          subs[kind] = res.body.id;
          await t.admin.post(`${t.hooks}/${res.body.id}/test`);
        }
        // The load: 50 memberships (150 events) to a healthy subscription while those attempts run.
        await t.admin.post(t.hooks, { url: `${healthy.url}?t=${t.project.id}`, events: ['*'] });
        const issued = await t.admin.post(
          '/api/v1/membership/issue',
          Array.from({ length: 50 }, () => ({ membershipType: 'gym:gold', walletAddress: address() })),
        );
        expect(issued.status).to.equal(201);
        await until('150 healthy deliveries', () => (healthy.received.length >= 150 ? true : undefined), 30_000);
        expect(healthy.received).to.have.length(150);
        const list = await until(
          'three failed deliveries',
          async () => {
            const l = (await t.admin.get(`${t.hooks}/failedDeliveries`)).body.failedDeliveries;
            return l.length === 3 ? l : undefined;
          },
          30_000,
        );
        const of = (kind: string) => list.find((d) => d.webhookId === subs[kind]);
        expect(of('trickle')?.lastError).to.equal('timeout');
        expect(of('huge')).to.include({ lastError: 'http_status', lastStatus: 500 });
        expect(of('huge')?.lastResponseBody).to.have.length(16 * 1024);
        expect(of('redirect')).to.include({ lastError: 'http_status', lastStatus: 307 });
      } finally {
        for (const s of sockets) s.destroy();
        await new Promise<void>((resolve) => hostile.close(() => resolve()));
        await healthy.close();
      }
    });

    it('410 Gone disables the subscription at once; PUT re-enables it', async () => {
      const t = await tenant();
      const sub = await subscribe(t, { events: ['webhook.test', 'membership.issued'] });
      receiver.respond = () => ({ status: 410 });
      await t.admin.post(`${t.hooks}/${sub.id}/test`);
      const disabled = await until('disabled', async () => {
        const s = (await t.admin.get(`${t.hooks}/${sub.id}`)).body;
        return s.disabledAt ? s : undefined;
      });
      expect(disabled.disabledReason).to.match(/410/);
      expect(receivedBy(t)).to.have.length(1);
      const failed = (await t.admin.get(`${t.hooks}/failedDeliveries`)).body.failedDeliveries;
      expect(failed).to.have.length(1);
      expect(failed[0]).to.include({ attempts: 1, lastStatus: 410 });

      // Disabled: new events are not delivered to it.
      receiver.respond = undefined;
      await issue(t);
      await new Promise((r) => setTimeout(r, 300));
      expect(receivedBy(t)).to.have.length(1);

      const enabled = await t.admin.put(`${t.hooks}/${sub.id}`, {});
      expect(enabled.status).to.equal(200);
      expect(enabled.body).to.include({ disabledAt: null, disabledReason: null });
      await issue(t);
      await until('a delivery after re-enabling', () => (receivedBy(t).length === 2 ? true : undefined));
      expect(envelope(receivedBy(t)[1]!).type).to.equal('membership.issued');
    });

    it('five days of nothing but failures disable the subscription; one success in between starts the count again', async () => {
      const t = await tenant();
      const sub = await subscribe(t, { events: ['webhook.test'] });
      const day = 86_400_000;
      const failOnce = async () => {
        const before = receivedBy(t).length;
        await t.admin.post(`${t.hooks}/${sub.id}/test`);
        await until('an attempt', async () => {
          const r = await app.db('outbox').where({ subscription_id: sub.id }).orderBy('id', 'desc').first();
          return receivedBy(t).length > before && r.status !== 'pending' ? true : undefined;
        });
      };
      const state = async () => (await t.admin.get(`${t.hooks}/${sub.id}`)).body;

      receiver.respond = () => ({ status: 500 });
      await failOnce();
      offsetMs = 3 * day;
      receiver.respond = undefined;
      await failOnce(); // a success: the run of failures ends
      receiver.respond = () => ({ status: 500 });
      offsetMs = 4 * day;
      await failOnce();
      offsetMs = 8 * day;
      await failOnce();
      expect((await state()).disabledAt).to.equal(null);
      offsetMs = 9 * day + 1_000;
      await failOnce();
      const s = await state();
      expect(s.disabledAt).to.be.a('string');
      expect(s.disabledReason).to.match(/5 days/);
    });
  });
});
