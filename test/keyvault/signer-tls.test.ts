import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { get as httpsGet } from 'node:https';
import { expect } from 'chai';
import { loadConfig } from '../../src/platform/config/config.js';
import { DependencyUnavailableError } from '../../src/platform/http/errors.js';
import { SignerClient } from '../../src/platform/signer/client.js';
import { startApp } from '../support/app.js';
import { createCa } from '../support/idp.js';
import { keyIdOf, TEST_DEPLOYMENT, TEST_PROJECT } from '../support/keys.js';
import { freePort, spawnService, type Service } from '../support/process.js';
import { SIGNER_MAIN } from '../support/signer.js';

describe('keyvault: the API reaches a signer in another pod over TLS, mutual where configured', function () {
  this.timeout(60_000);
  let dir: string;
  const files: Record<string, string> = {};
  const token = randomBytes(32).toString('base64url');
  const running: Service[] = [];

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'custody-signer-tls-'));
    const ca = await createCa('signer CA');
    const server = await ca.issue();
    const client = await ca.issue();
    const other = await (await createCa('someone else')).issue();
    const write = (name: string, text: string) => {
      files[name] = path.join(dir, name);
      writeFileSync(files[name], text, { mode: 0o600 });
    };
    write('ca.pem', ca.certPem);
    write('server.pem', server.certPem);
    write('server.key', server.keyPem);
    write('client.pem', client.certPem);
    write('client.key', client.keyPem);
    write('other.pem', other.certPem);
    write('other.key', other.keyPem);
  });
  after(async () => {
    for (const s of running) {
      s.proc.kill('SIGTERM');
      await s.exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  const signer = async (env: Record<string, string>): Promise<string> => {
    const port = await freePort();
    const svc = spawnService(
      { KEYVAULT_LISTEN: `127.0.0.1:${port}`, KEYVAULT_TOKEN: token, KEYVAULT_DATA_DIR: mkdtempSync(path.join(dir, 'data-')), ...env },
      SIGNER_MAIN,
    );
    running.push(svc);
    await svc.waitFor(/keyvault listening/, 30_000);
    return `https://127.0.0.1:${port}`;
  };
  const tls = (over: Record<string, string> = {}) => ({
    KEYVAULT_TLS_CERT_FILE: files['server.pem'] ?? '',
    KEYVAULT_TLS_KEY_FILE: files['server.key'] ?? '',
    ...over,
  });
  const unavailable = async (client: SignerClient) => {
    try {
      await client.createKey(keyIdOf('tls'), 'tls', TEST_PROJECT);
      expect.fail('the signer answered');
    } catch (err) {
      expect(err).to.be.instanceOf(DependencyUnavailableError);
    }
  };

  it('plain HTTP only on a Unix socket or loopback: the signer refuses another address without TLS, the API an http:// URL to another host', async () => {
    const svc = spawnService({ KEYVAULT_LISTEN: '0.0.0.0:0', KEYVAULT_TOKEN: token }, SIGNER_MAIN);
    expect(await svc.exited).to.equal(1);
    expect(svc.output()).to.include('is reachable from other hosts: set KEYVAULT_TLS_CERT_FILE and KEYVAULT_TLS_KEY_FILE');
    const problems = (() => {
      try {
        loadConfig({ ROLE: 'api', DATABASE_URL: 'postgres://x/y', KEYVAULT_URL: 'http://keyvault.custody.svc:8300', KEYVAULT_TOKEN: token });
        return '';
      } catch (err) {
        return String(err);
      }
    })();
    expect(problems).to.include('KEYVAULT_URL to another host must be https://');
    expect(() =>
      loadConfig({ ROLE: 'api', DATABASE_URL: 'postgres://x/y', KEYVAULT_URL: 'https://keyvault.custody.svc:8300', KEYVAULT_TOKEN: token }),
    ).not.to.throw();
  });

  it("TLS: a client that trusts the signer's CA creates keys; one that does not is refused; the bearer secret is still required", async () => {
    const url = await signer(tls());
    const trusted = new SignerClient(url, token, 5_000, TEST_DEPLOYMENT, { ca: readPem('ca.pem') });
    expect((await trusted.createKey(keyIdOf('tls'), 'tls', TEST_PROJECT)).address).to.match(/^0x[0-9a-fA-F]{40}$/);
    await unavailable(new SignerClient(url, token, 5_000, TEST_DEPLOYMENT));
    const wrongSecret = new SignerClient(url, `${token}x`, 5_000, TEST_DEPLOYMENT, { ca: readPem('ca.pem') });
    expect((await wrongSecret.health()).ok).to.equal(false);
  });

  it('mutual TLS: without a client certificate of the configured CA only the probes answer', async () => {
    const url = await signer(tls({ KEYVAULT_TLS_CLIENT_CA_FILE: files['ca.pem'] ?? '' }));
    const probe = await new Promise<number>((resolve, reject) =>
      httpsGet(`${url}/healthz`, { ca: readPem('ca.pem') }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      }).on('error', reject),
    );
    expect(probe).to.equal(200);
    await unavailable(new SignerClient(url, token, 5_000, TEST_DEPLOYMENT, { ca: readPem('ca.pem') }));
    await unavailable(new SignerClient(url, token, 5_000, TEST_DEPLOYMENT, { ca: readPem('ca.pem'), cert: readPem('other.pem'), key: readPem('other.key') }));
    const mutual = new SignerClient(url, token, 5_000, TEST_DEPLOYMENT, { ca: readPem('ca.pem'), cert: readPem('client.pem'), key: readPem('client.key') });
    expect((await mutual.createKey(keyIdOf('mtls'), 'mtls', TEST_PROJECT)).address).to.match(/^0x[0-9a-fA-F]{40}$/);
  });

  it('the API configured with KEYVAULT_CA_FILE and a client certificate is ready against a mutual-TLS signer', async () => {
    const url = await signer(tls({ KEYVAULT_TLS_CLIENT_CA_FILE: files['ca.pem'] ?? '' }));
    const app = await startApp({
      KEYVAULT_URL: url,
      KEYVAULT_TOKEN: token,
      KEYVAULT_CA_FILE: files['ca.pem'] ?? '',
      KEYVAULT_CLIENT_CERT_FILE: files['client.pem'] ?? '',
      KEYVAULT_CLIENT_KEY_FILE: files['client.key'] ?? '',
    });
    try {
      const ready = await app.client.get('/readyz', { token: null });
      expect(ready.status, ready.text).to.equal(200);
    } finally {
      await app.close();
    }
  });

  const readPem = (name: string): string => readFileSync(files[name] ?? '', 'utf8');
});
