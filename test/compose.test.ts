import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { parse as parseYaml } from 'yaml';
import { imageApp, imageConfig } from './support/image.js';
import { startContainer, startPodNetwork, startPostgresIn, waitProbe, type ClusterObjects, type Manifest, type PodNetwork } from './support/kubelet.js';
import type { Service } from './support/process.js';
import { vaultBinary } from './support/vault.js';
import { until } from './support/wait.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const COMPOSE = path.join(ROOT, 'docker-compose.yml');

interface ComposeService {
  image?: string;
  user?: string;
  read_only?: boolean;
  tmpfs?: string[];
  volumes?: string[];
  entrypoint?: string[];
  command?: string | string[];
  environment?: Record<string, string>;
}

/** What `.env` holds for the evaluation (docs/operations.md says how to make one). */
const DOT_ENV = {
  POSTGRES_PASSWORD: 'compose-pg-password-0123456789',
  VAULT_DEV_ROOT_TOKEN: 'compose-root-token-0123456789',
  OPERATOR_TOKEN: `op_${'c'.repeat(40)}`,
  DATA_ENCRYPTION_KEY: Buffer.alloc(32, 9).toString('base64'),
  KEYVAULT_TOKEN: 'k'.repeat(48),
};

function composeConfig(dockerCompose: string, env: Record<string, string>): { status: number | null; stdout: string; stderr: string } {
  return spawnSync(dockerCompose, ['-f', COMPOSE, 'config'], { cwd: ROOT, encoding: 'utf8', env: { PATH: process.env['PATH'] ?? '', ...env } });
}

describe('docker-compose.yml: the service with containers, without Kubernetes', function () {
  this.timeout(600_000);
  let dockerCompose: string;

  before(() => {
    const found = spawnSync('bash', [path.join(ROOT, 'scripts/docker-compose.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
    expect(found.status, 'scripts/docker-compose.sh').to.equal(0);
    dockerCompose = found.stdout.trim();
  });

  it('is a valid compose file (docker-compose config), and names every secret .env must give', () => {
    const ok = composeConfig(dockerCompose, DOT_ENV);
    expect(ok.status, ok.stderr).to.equal(0);
    const services = (parseYaml(ok.stdout) as { services: Record<string, ComposeService> }).services;
    expect(Object.keys(services).sort()).to.deep.equal(['api', 'keyvault', 'migrate', 'postgres', 'vault', 'vault-setup', 'worker']);
    for (const secret of Object.keys(DOT_ENV)) {
      const without = composeConfig(dockerCompose, Object.fromEntries(Object.entries(DOT_ENV).filter(([k]) => k !== secret)));
      expect(without.status, secret).to.not.equal(0);
      expect(without.stderr, secret).to.include(`set ${secret} in .env`);
    }
    // The roles run as the image's user, on a read-only root; only the signer and vault-setup see the AppRole.
    for (const role of ['migrate', 'keyvault', 'api', 'worker']) expect(services[role]).to.deep.include({ user: '10001:10001', read_only: true });
    const withApprole = Object.entries(services)
      .filter(([, s]) => (s.volumes ?? []).some((v) => v.startsWith('approle:')))
      .map(([n]) => n);
    expect(withApprole.sort()).to.deep.equal(['keyvault', 'vault-setup']);
    expect(Object.keys(services['worker']?.environment ?? {})).to.not.include('OPERATOR_TOKEN');
  });

  it('starts every role from the image with exactly its compose environment, next to PostgreSQL and a dev Vault; a user signs in and gets a wallet', async function () {
    if (process.getuid?.() !== 0) throw new Error('this test starts containers in mount and network namespaces: run it as root (CI does)');
    // The pods' loopback stands for the compose network: the AppRole is bound to it.
    const config = composeConfig(dockerCompose, { ...DOT_ENV, APPROLE_BOUND_CIDRS: '127.0.0.1/32' });
    expect(config.status, config.stderr).to.equal(0);
    const services = (parseYaml(config.stdout) as { services: Record<string, ComposeService> }).services;
    const service = (name: string): ComposeService => {
      const s = services[name];
      if (!s) throw new Error(`docker-compose.yml has no service ${name}`);
      return s;
    };

    const scratch = mkdtempSync(path.join(tmpdir(), 'custody-compose-'));
    chmodSync(scratch, 0o755);
    const volumes = path.join(scratch, 'volumes');
    let net: PodNetwork | undefined;
    const running: Service[] = [];
    try {
      net = await startPodNetwork(scratch);
      const image = { ...imageConfig(), root: imageApp() };

      // postgres: the machine's server, with the compose service's user, database and password.
      const pgEnv = service('postgres').environment ?? {};
      const { service: postgres, admin } = await startPostgresIn(net, path.join(scratch, 'pg'));
      running.push(postgres);
      await admin.query(`CREATE ROLE ${pgEnv['POSTGRES_USER']} LOGIN PASSWORD '${pgEnv['POSTGRES_PASSWORD']}'`);
      await admin.query(`CREATE DATABASE ${pgEnv['POSTGRES_DB']} OWNER ${pgEnv['POSTGRES_USER']}`);
      await admin.end();

      // vault: a dev server with the compose service's root token; its CLI copied to the vault-cli volume, as its entrypoint does.
      const vaultCommand = service('vault').command ?? [];
      const rootToken = (Array.isArray(vaultCommand) ? vaultCommand : [vaultCommand]).map((a) => /^-dev-root-token-id=(.+)$/.exec(a)?.[1]).find(Boolean);
      expect(rootToken).to.equal(DOT_ENV.VAULT_DEV_ROOT_TOKEN);
      const vault = net.run([vaultBinary(), 'server', '-dev', '-dev-listen-address=127.0.0.1:8200', `-dev-root-token-id=${rootToken}`], {
        env: { HOME: scratch },
      });
      running.push(vault);
      await vault.waitFor(/Root Token/, 60_000);
      mkdirSync(path.join(volumes, 'vault-cli'), { recursive: true });
      copyFileSync(vaultBinary(), path.join(volumes, 'vault-cli/vault'));
      chmodSync(path.join(volumes, 'vault-cli/vault'), 0o755);

      const objects: ClusterObjects = {
        data: () => {
          throw new Error('compose services read no Kubernetes object');
        },
        keys: () => [],
        serviceAccountToken: () => Promise.reject(new Error('compose services have no ServiceAccount')),
      };
      /** A compose service as a container: its environment, user, read-only root, tmpfs and volumes (named ones shared through the host). */
      const start = async (name: string, probe?: { port: number }): Promise<Service> => {
        const s = service(name);
        const [uid, gid] = (s.user ?? `${image.user.uid}:${image.user.gid}`).split(':').map(Number);
        const podVolumes: Manifest[] = [];
        const mounts: Manifest[] = [];
        for (const [i, target] of (s.tmpfs ?? []).entries()) {
          podVolumes.push({ name: `tmpfs-${i}`, emptyDir: {} });
          mounts.push({ name: `tmpfs-${i}`, mountPath: target });
        }
        for (const [i, spec] of (s.volumes ?? []).entries()) {
          const [source = '', target = '', mode = 'rw'] = spec.split(':');
          const host = source.startsWith('/') ? source : path.join(volumes, source);
          mkdirSync(host, { recursive: true });
          podVolumes.push({ name: `volume-${i}`, hostPath: { path: host } });
          mounts.push({ name: `volume-${i}`, mountPath: target, readOnly: mode === 'ro' });
        }
        const container: Manifest = {
          name,
          env: Object.entries(s.environment ?? {}).map(([k, v]) => ({ name: k, value: String(v) })),
          volumeMounts: mounts,
          securityContext: { readOnlyRootFilesystem: s.read_only === true, runAsUser: uid, runAsGroup: gid },
          ...(s.entrypoint ? { command: s.entrypoint } : {}),
          ...(s.command !== undefined ? { args: Array.isArray(s.command) ? s.command : [s.command] } : {}),
          ...(probe ? { readinessProbe: { httpGet: { path: '/readyz', port: probe.port } } } : {}),
        };
        const svc = await startContainer(
          net as PodNetwork,
          {
            namespace: 'compose',
            podName: name,
            spec: { volumes: podVolumes },
            container,
            image,
            platform: 'kubernetes',
            hosts: { postgres: '127.0.0.1', vault: '127.0.0.1' },
            injected: {},
            objects,
          },
          scratch,
        );
        running.push(svc);
        if (probe) await waitProbe(net as PodNetwork, svc, container);
        return svc;
      };

      // In compose's order: vault-setup and migrate run to completion, then the signer, then the API and the worker.
      const setup = await start('vault-setup');
      expect(await setup.exited, setup.output()).to.equal(0);
      const migrate = await start('migrate');
      expect(await migrate.exited, migrate.output()).to.equal(0);
      const signer = await start('keyvault');
      const socket = path.join(volumes, 'signer-socket/signer.sock');
      await until('the signer listening on its socket', () => existsSync(socket) || (signer.proc.exitCode !== null && expect.fail(signer.output())), 60_000);
      await start('api', { port: Number(service('api').environment?.['PORT']) });
      await start('worker', { port: Number(service('worker').environment?.['PORT']) });

      // A user signs in, as an evaluator would, from inside the compose network.
      const flow = `
        const base = 'http://127.0.0.1:8080', op = { authorization: 'Bearer ' + process.env.OP, 'content-type': 'application/json' };
        const call = async (method, path, body, headers = op) => {
          const res = await fetch(base + path, { method, headers, body: body && JSON.stringify(body) });
          return { status: res.status, body: await res.json().catch(() => null) };
        };
        (async () => {
          const org = await call('POST', '/api/v1/organisations', { name: 'Compose' });
          const project = await call('POST', '/api/v1/organisations/' + org.body.id + '/projects', { name: 'Eval', issuer: 'https://dev-idp.invalid' });
          const token = await call('POST', '/api/v1/project/' + project.body.id + '/dev/token', { email: 'eval@example.com' });
          const user = { authorization: 'Bearer ' + token.body.token, 'content-type': 'application/json' };
          const created = await call('POST', '/api/v1/wallets/createasync', { key: project.body.projectKey }, user);
          let signin;
          for (let i = 0; i < 100; i++) {
            signin = await call('POST', '/api/v1/signin', { key: project.body.projectKey }, user);
            if (signin.status === 200 && JSON.stringify(signin.body).match(/0x[0-9a-fA-F]{40}/)) break;
            await new Promise((r) => setTimeout(r, 300));
          }
          console.log(JSON.stringify({ org: org.status, project: project.status, token: token.status, created: created.status, signin }));
        })().catch((e) => { console.error(e); process.exit(1); });
      `;
      const user = net.run([process.execPath, '-e', flow], { env: { OP: service('api').environment?.['OPERATOR_TOKEN'] ?? '' } });
      expect(await user.exited, user.output()).to.equal(0);
      const result = JSON.parse(user.output().trim().split('\n').pop() ?? '{}') as {
        org: number;
        project: number;
        token: number;
        created: number;
        signin: { status: number; body: unknown };
      };
      expect(result, user.output()).to.deep.include({ org: 201, project: 201, token: 200, created: 202 });
      expect(result.signin.status, JSON.stringify(result.signin)).to.equal(200);
      expect(JSON.stringify(result.signin.body)).to.match(/0x[0-9a-fA-F]{40}/);
    } finally {
      for (const s of running.reverse()) if (s.proc.exitCode === null) s.proc.kill('SIGKILL');
      await Promise.all(running.map((s) => s.exited));
      await net?.close();
      spawnSync('chmod', ['-R', 'u+w', scratch]);
      rmSync(scratch, { recursive: true, force: true });
    }
  });
});
