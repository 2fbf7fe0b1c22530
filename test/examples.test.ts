import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { verifyMessage, verifyTypedData } from 'ethers';
import { CustodyClient } from '../src/programs/client/index.js';
import { startAppWithIdp } from './support/app.js';
import { goWebhookExample, ROOT, startSnippet, type Snippet } from './support/examples.js';
import { Receiver, type Received } from './support/receiver.js';
import { until } from './support/wait.js';

/**
 * The examples of docs/client.md, run against the service: the webhook receivers of
 * docs/examples/webhooks (TypeScript with the standardwebhooks package, Python with the standard
 * library, Go with the Standard Webhooks module) fed the service's real deliveries, and the curl
 * script of docs/examples/curl against a real sign-in and real signatures.
 */
const AUDIENCE = 'urn:custody:testnet';
/** A secret of the project's own choosing, not in the whsec_ form: the service keys it by its UTF-8 bytes. */
const CUSTOM_SECRET = 'our-own-secret:not-whsec-form-36ch!';

const SNIPPETS: Record<string, (secret: string) => Promise<Snippet>> = {
  typescript: (secret) => startSnippet(process.execPath, [path.join(ROOT, 'dist/docs/examples/webhooks/verify.js')], { WEBHOOK_SECRET: secret }),
  python: (secret) => startSnippet('python3', [path.join(ROOT, 'docs/examples/webhooks/verify.py')], { WEBHOOK_SECRET: secret }),
  go: (secret) => startSnippet(goWebhookExample(), [], { WEBHOOK_SECRET: secret }),
};

/** Sends a captured delivery to a snippet as the service sent it: its signature headers and its bytes. */
async function replay(snippet: Snippet, delivery: Received, body = delivery.body): Promise<number> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  for (const h of ['webhook-id', 'webhook-timestamp', 'webhook-signature']) headers[h] = String(delivery.headers[h]);
  return (await fetch(snippet.url, { method: 'POST', headers, body })).status;
}

describe('docs/examples: the documented snippets, against real deliveries and a real service', function () {
  this.timeout(120_000);
  let env: Awaited<ReturnType<typeof startAppWithIdp>>;
  let operator: CustodyClient;
  let project: { id: number; projectKey: string; walletWebhookSecret?: string };
  let issuer: Awaited<ReturnType<Awaited<ReturnType<typeof startAppWithIdp>>['idp']['issuer']>>;
  let orgId: number;
  before(async () => {
    env = await startAppWithIdp();
    operator = new CustodyClient({ baseUrl: env.app.url, token: env.app.operatorToken });
    issuer = await env.idp.issuer('examples');
    orgId = (await operator.createOrganisation('Examples')).id;
    project = await operator.createProject(orgId, { name: 'Examples', issuer: issuer.issuer, walletWebhookUrl: env.receiver.url });
  });
  after(() => env.close());

  it('webhooks: each verify snippet (TypeScript, Python, Go) accepts the deliveries the service sent, under either kind of secret, and rejects a tampered body or another secret', async () => {
    const generatedReceiver = await Receiver.start();
    const customReceiver = await Receiver.start();
    const snippets: Snippet[] = [];
    try {
      const generated = await operator.createWebhook(project.id, { url: generatedReceiver.url, events: ['wallet.created'] });
      const custom = await operator.createWebhook(project.id, { url: customReceiver.url, events: ['*'], secret: CUSTOM_SECRET });
      // Real deliveries: a sign-in's wallet-created webhook (the project's wallet webhook secret), its
      // wallet.created event to the subscription with a generated secret, and a test ping to the one with our own.
      await operator.signIn(project.projectKey, await issuer.sign({ email: 'hook@example.com' }, { audience: AUDIENCE }));
      await operator.testWebhook(project.id, custom.id);
      const [wallet] = await env.receiver.waitFor(1);
      const [event] = await generatedReceiver.waitFor(1);
      const ping = (await customReceiver.waitFor(2)).find((r) => r.body.includes('"webhook.test"'));
      if (!wallet || !event || !ping) throw new Error('deliveries missing');
      const cases = [
        { name: 'wallet webhook', secret: project.walletWebhookSecret ?? '', delivery: wallet },
        { name: 'wallet.created event', secret: generated.secret ?? '', delivery: event },
        { name: 'test ping, own secret', secret: CUSTOM_SECRET, delivery: ping },
      ];
      expect(cases.map((c) => c.secret.startsWith('whsec_'))).to.deep.equal([true, true, false]);

      for (const [language, start] of Object.entries(SNIPPETS)) {
        for (const { name, secret, delivery } of cases) {
          const snippet = await start(secret);
          snippets.push(snippet);
          const what = `${language}, ${name}`;
          expect(await replay(snippet, delivery), `${what}: ${snippet.stderr()}`).to.equal(204);
          // The snippet's output arrives by its own pipe, not with the HTTP answer.
          const line = await until(`${what}: its output`, () => snippet.lines.find((l) => l.startsWith('{')), 5_000);
          expect(JSON.parse(line), what).to.deep.equal({ id: delivery.headers['webhook-id'], event: JSON.parse(delivery.body) });
          expect(await replay(snippet, delivery, delivery.body.replace('}', ',"extra":1}')), `${what}: a tampered body`).to.equal(400);
          const other = cases.find((c) => c.delivery !== delivery)?.delivery;
          if (other) expect(await replay(snippet, other), `${what}: signed under another secret`).to.equal(400);
          expect(snippet.stderr(), what).to.match(/rejected/);
          await snippet.stop();
        }
      }
    } finally {
      await Promise.all(snippets.map((s) => s.stop()));
      await generatedReceiver.close();
      await customReceiver.close();
    }
  });

  it('server to server (docs/client.md): no CORS headers on any answer, a preflight included', async () => {
    const origin = { origin: 'https://app.example.com' };
    const preflight = await fetch(`${env.app.url}/api/v1/signin`, {
      method: 'OPTIONS',
      headers: { ...origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
    });
    const signin = await fetch(`${env.app.url}/api/v1/signin`, { method: 'POST', headers: { ...origin, 'content-type': 'application/json' }, body: '{}' });
    const health = await fetch(`${env.app.url}/healthz`, { headers: origin });
    for (const res of [preflight, signin, health]) {
      expect([...res.headers.keys()].filter((h) => h.startsWith('access-control-'))).to.deep.equal([]);
    }
  });

  it('curl: the sign-in and signing script signs in a user and signs as the user and as the backend, each signature the wallet’s', async () => {
    const policy = {
      rules: [
        { name: 'sign-in', action: 'allow' as const, method: 'personal_sign' as const, caller: ['user' as const] },
        { name: 'orders', action: 'allow' as const, method: 'eth_signTypedData_v4' as const, caller: ['server' as const] },
      ],
    };
    await operator.putPolicy(project.id, policy);
    const signer = await operator.createToken(orgId, { name: 'curl backend', role: 'signer', projectId: project.id });
    const run = await promisify(execFile)('sh', [path.join(ROOT, 'docs/examples/curl/sign-in-and-sign.sh')], {
      env: {
        PATH: process.env['PATH'] ?? '',
        CUSTODY_URL: env.app.url,
        PROJECT_KEY: project.projectKey,
        USER_JWT: await issuer.sign({ email: 'curl@example.com' }, { audience: AUDIENCE }),
        PROJECT_ID: String(project.id),
        SIGNER_TOKEN: signer.token,
      },
    });
    const [signin, user, backend] = run.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(signin).to.include({ emailAddress: 'curl@example.com', isNew: true });
    const address = String(signin?.['walletAddress']);
    expect(verifyMessage('Sign in to example.com', String(user?.['signature']))).to.equal(address);
    const typed = {
      domain: { name: 'Shop', version: '1', chainId: 8453 },
      types: {
        Order: [
          { name: 'id', type: 'uint256' },
          { name: 'buyer', type: 'address' },
        ],
      },
      message: { id: '4711', buyer: '0x0000000000000000000000000000000000000B0b' },
    };
    expect(verifyTypedData(typed.domain, typed.types, typed.message, String(backend?.['signature']))).to.equal(address);
  });
});
