import { randomBytes, randomUUID } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { generateKeyPair, SignJWT } from 'jose';
import type pg from 'pg';
import { parseAllDocuments } from 'yaml';
import { createCa, type TestCa } from './support/idp.js';
import { imageApp, imageConfig, type ImageConfig } from './support/image.js';
import {
  removeScratch,
  startContainer,
  startPodNetwork,
  stopContainer,
  waitProbe,
  type ClusterObjects,
  type ContainerRun,
  type Manifest,
  type PodNetwork,
  startPostgresIn,
} from './support/kubelet.js';
import type { Service } from './support/process.js';
import { toolPath } from './support/tools.js';
import { vaultBinary } from './support/vault.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CHART = path.join(ROOT, 'helm/custody');
const NAMESPACE = 'custody';
/** Where the stand-in dependencies listen inside the pod network. */
const VAULT_BACKEND = { host: '127.0.0.3', port: 8200 };
const TOKEN_REVIEW = 'https://127.0.0.1:6443';
const DB_HOST = 'db.internal';
const REDIS_HOST = 'redis.internal';

/** A values set to install: a file of the chart's CI set, the defaults, or the install guide's. */
interface Install {
  name: string;
  release: string;
  values: string | undefined;
  /** Runs the Vault setup for this install; the default derives it from the signer's rendered settings. */
  vaultSetup?: (env: Record<string, string>, cwd: string) => string;
}

const ciFiles = readdirSync(path.join(ROOT, 'helm/ci'))
  .filter((f) => f.endsWith('.yaml'))
  .sort();

/** The fenced block after `<!-- tested: <tag> -->` markers of docs/operations.md. */
function docBlocks(tag: string): string[] {
  const doc = readFileSync(path.join(ROOT, 'docs/operations.md'), 'utf8');
  return [...doc.matchAll(new RegExp(`<!-- tested: ${tag} -->\\n\`\`\`\\w*\\n([\\s\\S]*?)\`\`\``, 'g'))].map((m) => m[1] ?? '');
}

const byKind = (ms: Manifest[], kind: string): Manifest[] => ms.filter((m) => m.kind === kind);
const component = (m: Manifest): string => m.metadata.labels['app.kubernetes.io/component'] as string;
const envOf = (container: Manifest): Record<string, string> =>
  Object.fromEntries(((container.env ?? []) as Manifest[]).filter((e) => e.value !== undefined).map((e) => [e.name as string, String(e.value)]));

/**
 * Point 2 of the production-install issue, as a class: every container of every render starts with
 * exactly what the chart gives it (the image's entry point, the container's environment and
 * mounted files, its user and read-only root) next to stand-ins of what an operator provides (the
 * Secrets the values name, a PostgreSQL over TLS, a Vault set up by scripts/vault-setup.sh, the
 * Kubernetes API's token reviews), and becomes ready; Jobs and `helm test` pods exit 0.
 */
describe('every container the chart renders starts with what the chart gives it', function () {
  this.timeout(1_200_000);
  let helm: string;
  let vaultBin: string;
  let image: ImageConfig & { root: string };
  let scratch: string;
  let ca: TestCa;
  let net: PodNetwork;
  let admin: pg.Client;
  let vaultHosts: string[];
  const dbPassword = randomBytes(18).toString('base64url');
  const reviewer = `reviewer-${randomBytes(16).toString('hex')}`;
  const saKey = generateKeyPair('RS256');

  // One render per install: the Vault hosts are read off the same manifests the install runs.
  const rendered = new Map<Install, Manifest[]>();
  const render = (install: Install): Manifest[] => {
    const known = rendered.get(install);
    if (known) return known;
    const args = ['template', install.release, CHART, '--namespace', NAMESPACE, ...(install.values ? ['-f', install.values] : [])];
    const res = spawnSync(helm, args, { encoding: 'utf8' });
    expect(res.status, res.stderr).to.equal(0);
    const ms = parseAllDocuments(res.stdout)
      .map((d): Manifest => d.toJS())
      .filter((m) => m !== null);
    rendered.set(install, ms);
    return ms;
  };

  const installs: Install[] = [...ciFiles.map((f) => ({ name: `helm/ci/${f}`, release: 'rel', values: path.join(ROOT, 'helm/ci', f) }))];

  const guide = walkthrough();
  const everyInstall = [...installs, guide];

  before(async function () {
    if (process.getuid?.() !== 0) throw new Error('this suite starts containers in mount and network namespaces: run it as root (CI does)');
    helm = toolPath('helm');
    vaultBin = vaultBinary();
    image = { ...imageConfig(), root: imageApp() };
    scratch = mkdtempSync(path.join(tmpdir(), 'custody-pods-'));
    chmodSync(scratch, 0o755);
    ca = await createCa('stand-in cluster CA');
    writeFileSync(path.join(scratch, 'ca.crt'), ca.certPem);
    net = await startPodNetwork(scratch);

    // Every Vault address a render names, on one certificate of the stand-in CA.
    vaultHosts = [
      ...new Set(
        everyInstall.flatMap((i) =>
          byKind(render(i), 'Deployment')
            .filter((d) => component(d) === 'keyvault')
            .map((d) => new URL(envOf(d.spec.template.spec.containers[0])['VAULT_ADDR'] ?? '').hostname),
        ),
      ),
    ];

    // PostgreSQL 14+ with TLS, as the install guide asks: a role `custody` with a password.
    ({ admin } = await startPostgresIn(net, path.join(scratch, 'pg'), await ca.issue([DB_HOST])));
    await admin.query(`CREATE ROLE custody LOGIN PASSWORD '${dbPassword}'`);

    const redis = net.run(['redis-server', '--bind', '127.0.0.1', '--port', '6379', '--save', '', '--appendonly', 'no']);
    await redis.waitFor(/Ready to accept connections/, 30_000);

    const k8s = await ca.issue(['k8s-api.example.internal']);
    await net.infra('token-review', { port: 6443, cert: k8s.certPem, key: k8s.keyPem, reviewer });
    writeFileSync(path.join(scratch, 'reviewer.jwt'), reviewer);
    const vaultCert = await ca.issue(vaultHosts);
    writeFileSync(path.join(scratch, 'vault.crt'), vaultCert.certPem);
    writeFileSync(path.join(scratch, 'vault.key'), vaultCert.keyPem);
  });

  after(async () => {
    await admin?.end().catch(() => undefined);
    await net?.close();
    if (scratch) removeScratch(scratch);
    if (guide.values) removeScratch(path.dirname(guide.values));
  });

  /** The install guide's walkthrough (docs/operations.md): its values file and its Vault setup. */
  function walkthrough(): Install {
    const dir = path.join(tmpdir(), `custody-walkthrough-${process.pid}`);
    mkdirSync(dir, { recursive: true });
    const [values] = docBlocks('values');
    if (values === undefined) throw new Error('docs/operations.md has no tested values block');
    writeFileSync(path.join(dir, 'custody-values.yaml'), values);
    return {
      name: 'the install guide (docs/operations.md)',
      release: 'custody',
      values: path.join(dir, 'custody-values.yaml'),
      vaultSetup(env, cwd) {
        // The guide's setup for a Vault outside the cluster, as written; only the cluster's API
        // address is this machine's stand-in.
        const block = docBlocks('vault-setup').find((b) => b.includes('TOKEN_REVIEWER_JWT'));
        if (!block) throw new Error('docs/operations.md has no tested setup for a Vault outside the cluster');
        writeFileSync(path.join(cwd, 'k8s-ca.crt'), ca.certPem);
        writeFileSync(path.join(cwd, 'reviewer.jwt'), reviewer);
        const script = block.replace(/K8S_HOST=\S+/, `K8S_HOST=${TOKEN_REVIEW}`).replace('scripts/vault-setup.sh', path.join(ROOT, 'scripts/vault-setup.sh'));
        return script;
      },
    };
  }

  /** Sets up a fresh Vault for one install, as scripts/vault-setup.sh does; returns AppRole credentials if asked. */
  async function freshVault(install: Install, signer: Manifest, cwd: string): Promise<{ stop(): Promise<void>; approle: Record<string, string> }> {
    const server = net.run([vaultBin, 'server', '-dev', '-dev-root-token-id=root', `-dev-listen-address=${VAULT_BACKEND.host}:${VAULT_BACKEND.port}`], {
      env: { HOME: cwd },
    });
    await server.waitFor(/Root Token/, 60_000);
    const env = envOf(signer.spec.template.spec.containers[0]);
    const addr = new URL(env['VAULT_ADDR'] ?? '');
    const tls = addr.protocol === 'https:';
    await net.infra('forward', {
      listen: { host: tls ? '127.0.0.1' : '127.0.0.2', port: Number(addr.port || (tls ? 443 : 80)) },
      to: VAULT_BACKEND,
      ...(tls ? { tls: { cert: readFileSync(path.join(scratch, 'vault.crt'), 'utf8'), key: readFileSync(path.join(scratch, 'vault.key'), 'utf8') } } : {}),
    });
    const projected = ((signer.spec.template.spec.volumes ?? []) as Manifest[])
      .flatMap((v) => v.projected?.sources ?? [])
      .find((s: Manifest) => s.serviceAccountToken);
    const setupEnv: Record<string, string> = {
      PATH: process.env['PATH'] ?? '/usr/bin:/bin',
      HOME: cwd,
      VAULT_ADDR: `http://${VAULT_BACKEND.host}:${VAULT_BACKEND.port}`,
      VAULT_TOKEN: 'root',
      VAULT_BIN: vaultBin,
    };
    let script: string;
    if (install.vaultSetup) {
      script = install.vaultSetup(setupEnv, cwd);
    } else {
      const settings: Record<string, string> = {
        RELEASE: install.release,
        NAMESPACE,
        SERVICE_ACCOUNT: signer.spec.template.spec.serviceAccountName,
        TRANSIT_MOUNT: env['VAULT_TRANSIT_MOUNT'] ?? '',
        TRANSIT_KEY: env['VAULT_TRANSIT_KEY'] ?? '',
        SERVICE_KEY: env['VAULT_SERVICE_KEY'] ?? '',
        KV_MOUNT: env['VAULT_KV_MOUNT'] ?? '',
        KV_PREFIX: env['VAULT_KV_PREFIX'] ?? '',
        ...(env['VAULT_K8S_ROLE']
          ? {
              AUTH: 'kubernetes',
              ROLE: env['VAULT_K8S_ROLE'],
              K8S_MOUNT: env['VAULT_K8S_MOUNT'] ?? '',
              K8S_AUDIENCE: projected?.serviceAccountToken.audience,
              K8S_HOST: TOKEN_REVIEW,
              K8S_CA_CERT: path.join(scratch, 'ca.crt'),
              TOKEN_REVIEWER_JWT: path.join(scratch, 'reviewer.jwt'),
            }
          : { AUTH: 'approle', APPROLE_MOUNT: env['VAULT_APPROLE_MOUNT'] ?? '', APPROLE_BOUND_CIDRS: '127.0.0.1/32' }),
      };
      script = `${Object.entries(settings)
        .map(([k, v]) => `${k}='${v}'`)
        .join(' ')} ${path.join(ROOT, 'scripts/vault-setup.sh')} --print-approle`;
    }
    const setup = net.run(['bash', '-c', `cd '${cwd}' && ${script}`], { env: setupEnv });
    if ((await setup.exited) !== 0) {
      server.proc.kill('SIGTERM');
      await server.exited;
      expect.fail(`the Vault setup failed:\n${setup.output()}`);
    }
    const approle = Object.fromEntries([...setup.output().matchAll(/^(VAULT_ROLE_ID|VAULT_SECRET_ID)=(\S+)$/gm)].map((m) => [m[1], m[2]]));
    return {
      approle,
      async stop() {
        server.proc.kill('SIGTERM');
        await server.exited;
      },
    };
  }

  for (const install of everyInstall) {
    it(`${install.name}: the migration Job exits 0, the signer, the API and the worker become ready, helm test passes`, async () => {
      const ms = render(install);
      const work = mkdtempSync(path.join(scratch, 'install-'));
      chmodSync(work, 0o755);
      const deployments = byKind(ms, 'Deployment');
      const signer = deployments.find((d) => component(d) === 'keyvault');
      const database = `custody_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
      await admin.query(`CREATE DATABASE ${database} OWNER custody`);
      const vault = await freshVault(install, signer, work);
      const running: Service[] = [];
      try {
        // The cluster's DNS: every Service of the release, and the operator's hosts.
        const hosts: Record<string, string> = { [DB_HOST]: '127.0.0.1', [REDIS_HOST]: '127.0.0.1' };
        const injected: Record<string, string> = {
          KUBERNETES_SERVICE_HOST: '10.96.0.1',
          KUBERNETES_SERVICE_PORT: '443',
          KUBERNETES_SERVICE_PORT_HTTPS: '443',
          KUBERNETES_PORT: 'tcp://10.96.0.1:443',
          KUBERNETES_PORT_443_TCP: 'tcp://10.96.0.1:443',
          KUBERNETES_PORT_443_TCP_PROTO: 'tcp',
          KUBERNETES_PORT_443_TCP_PORT: '443',
          KUBERNETES_PORT_443_TCP_ADDR: '10.96.0.1',
        };
        const serviceLinks: Record<string, string> = {};
        for (const s of byKind(ms, 'Service')) {
          const name = s.metadata.name as string;
          for (const n of [name, `${name}.${NAMESPACE}`, `${name}.${NAMESPACE}.svc`, `${name}.${NAMESPACE}.svc.cluster.local`]) hosts[n] = '127.0.0.1';
          const target = deployments.find((d) => component(d) === component(s))?.spec.template.spec.containers[0];
          for (const p of s.spec.ports as Manifest[]) {
            const to = typeof p.targetPort === 'number' ? p.targetPort : (target.ports as Manifest[]).find((cp) => cp.name === p.targetPort)?.containerPort;
            if (to !== p.port) await net.infra('forward', { listen: { host: '127.0.0.1', port: p.port }, to: { host: '127.0.0.1', port: to } });
          }
          // Docker-link variables, which Kubernetes injects unless a pod turns them off.
          const prefix = name.toUpperCase().replace(/-/g, '_');
          const first = (s.spec.ports as Manifest[])[0];
          serviceLinks[`${prefix}_SERVICE_HOST`] = '127.0.0.1';
          serviceLinks[`${prefix}_SERVICE_PORT`] = String(first.port);
          serviceLinks[`${prefix}_PORT`] = `tcp://127.0.0.1:${first.port}`;
        }
        for (const h of vaultHosts) hosts[h] = '127.0.0.1';
        const signerAddr = new URL(envOf(signer.spec.template.spec.containers[0])['VAULT_ADDR'] ?? '');
        if (signerAddr.protocol === 'http:') hosts[signerAddr.hostname] = '127.0.0.2';

        const objects = standIns(ms, database, vault.approle);
        const pods: Array<{ name: string; spec: Manifest }> = [
          ...byKind(ms, 'Job').map((j) => ({ name: `${j.metadata.name}-0`, spec: j.spec.template.spec })),
          ...deployments.map((d) => ({ name: `${d.metadata.name}-0`, spec: d.spec.template.spec })),
          ...byKind(ms, 'Pod').map((p) => ({ name: p.metadata.name as string, spec: p.spec })),
        ];
        const runOf = (pod: { name: string; spec: Manifest }, container: Manifest): ContainerRun => ({
          namespace: NAMESPACE,
          podName: pod.name,
          spec: pod.spec,
          container,
          image,
          platform: pod.spec.securityContext?.runAsUser === undefined ? 'openshift' : 'kubernetes',
          hosts,
          injected: { ...injected, ...(pod.spec.enableServiceLinks === false ? {} : serviceLinks) },
          objects,
          ...publicTrust(container),
        });
        const start = async (pod: { name: string; spec: Manifest }) => {
          expect(pod.spec.initContainers ?? [], `${pod.name}: init containers`).to.deep.equal([]);
          expect(pod.spec.containers, pod.name).to.have.length(1);
          const container = pod.spec.containers[0];
          const svc = await startContainer(net, runOf(pod, container), work);
          running.push(svc);
          return { svc, container };
        };

        // 1. Hooks: the migration Job.
        const jobs = pods.filter((p) => byKind(ms, 'Job').some((j) => p.name === `${j.metadata.name}-0`));
        expect(jobs, 'a migration Job').to.have.length(1);
        for (const job of jobs) {
          const { svc } = await start(job);
          expect(await svc.exited, `${job.name}:\n${svc.output()}`).to.equal(0);
        }
        // 2. The Deployments, the signer first (the others' readiness needs it).
        const deploymentPod = (c: string) => {
          const pod = pods.find((p) => p.name === `${deployments.find((d) => component(d) === c).metadata.name}-0`);
          if (!pod) throw new Error(`no ${c} Deployment`);
          return pod;
        };
        const signerPod = await start(deploymentPod('keyvault'));
        await waitProbe(net, signerPod.svc, signerPod.container, 'startupProbe');
        await waitProbe(net, signerPod.svc, signerPod.container);
        const api = await start(deploymentPod('api'));
        await waitProbe(net, api.svc, api.container, 'startupProbe');
        await waitProbe(net, api.svc, api.container);
        // With AppRole, the API publishes when the signer's secret id lapses (the setup gave it 720 h).
        if (envOf(signerPod.container)['VAULT_APPROLE_MOUNT'] !== undefined) {
          const metrics = await net.infra('probe', { url: 'http://127.0.0.1:8080/metrics', timeoutMs: 5_000 });
          const at = /^custody_signer_vault_credential_expiry_timestamp_seconds (\S+)$/m.exec(String(metrics['body']))?.[1];
          expect(Number(at), 'the secret id expiry on /metrics').to.be.closeTo(Date.now() / 1000 + 720 * 3600, 300);
        }
        // 3. helm test.
        const tests = pods.filter((p) => byKind(ms, 'Pod').some((t) => t.metadata.name === p.name));
        expect(tests, 'helm test pods').to.have.length.greaterThan(0);
        for (const t of tests) {
          const { svc } = await start(t);
          expect(await svc.exited, `${t.name}:\n${svc.output()}`).to.equal(0);
        }
        // The API and the worker listen on the same port: one after the other in this one network.
        expect(await stopContainer(api.svc), api.svc.output()).to.equal(0);
        const worker = await start(deploymentPod('worker'));
        await waitProbe(net, worker.svc, worker.container, 'startupProbe');
        await waitProbe(net, worker.svc, worker.container);
        expect(await stopContainer(worker.svc), worker.svc.output()).to.equal(0);
        expect(await stopContainer(signerPod.svc), signerPod.svc.output()).to.equal(0);
      } finally {
        for (const svc of running) if (svc.proc.exitCode === null) svc.proc.kill('SIGKILL');
        await Promise.all(running.map((s) => s.exited));
        await vault.stop();
        await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      }
    });
  }

  /**
   * A signer whose values trust the system's CAs expects a Vault certificate of a public CA; a
   * stand-in cannot have one, so only there the stand-in CA is added the way an operator adds a
   * private one (NODE_EXTRA_CA_CERTS). Nothing else is ever added to a container.
   */
  function publicTrust(container: Manifest): Partial<ContainerRun> {
    const env = envOf(container);
    if (!env['VAULT_ADDR']?.startsWith('https:') || env['VAULT_CACERT'] || env['NODE_EXTRA_CA_CERTS']) return {};
    return { trust: ca.certPem };
  }

  /** The operator's Secrets and ConfigMaps a render names, and the release's own (the chart's TLS). */
  function standIns(ms: Manifest[], database: string, approle: Record<string, string>): ClusterObjects {
    const own = new Map<string, Record<string, Buffer>>();
    for (const s of byKind(ms, 'Secret')) {
      own.set(s.metadata.name, Object.fromEntries(Object.entries((s.data ?? {}) as Record<string, string>).map(([k, v]) => [k, Buffer.from(v, 'base64')])));
    }
    const mountsDbCa = ms.some((m) =>
      (((m.spec?.template?.spec ?? m.spec)?.containers ?? []) as Manifest[]).some((c) =>
        ((c.volumeMounts ?? []) as Manifest[]).some((v) => v.mountPath === '/etc/custody/db-ca'),
      ),
    );
    const byConsumer: Record<string, () => string> = {
      DATABASE_URL: () =>
        `postgres://custody:${dbPassword}@${DB_HOST}:5432/${database}${mountsDbCa ? '?sslmode=verify-full&sslrootcert=/etc/custody/db-ca/ca.crt' : ''}`,
      OPERATOR_TOKEN: () => randomBytes(36).toString('base64url'),
      DATA_ENCRYPTION_KEY: () => randomBytes(32).toString('base64'),
      KEYVAULT_TOKEN: () => randomBytes(36).toString('base64url'),
      REDIS_URL: () => `redis://${REDIS_HOST}:6379`,
      // A chain whose node is not there: the processes start, check its URL, and say so.
      CHAINS: () =>
        JSON.stringify([{ chainId: 31337, name: 'dev', rpcUrls: ['http://127.0.0.1:9/'], maxFeePerGas: '1000000000', maxPriorityFeePerGas: '1000000000' }]),
      VAULT_ROLE_ID: () => approle['VAULT_ROLE_ID'] ?? '',
      VAULT_SECRET_ID: () => approle['VAULT_SECRET_ID'] ?? '',
      'ca.crt': () => ca.certPem,
    };
    const given = new Map<string, { consumer: string; value: Buffer }>();
    return {
      data(kind, name, key, consumer) {
        const mine = kind === 'Secret' ? own.get(name) : undefined;
        if (mine) {
          const v = mine[key];
          if (v === undefined) throw new Error(`the release's Secret ${name} has no key ${key}`);
          return v;
        }
        const id = `${kind}/${name}/${key}`;
        const known = given.get(id);
        const make = byConsumer[consumer];
        if (!make) throw new Error(`${id} is read as ${consumer}: no stand-in for it`);
        if (known) {
          if (known.consumer !== consumer) throw new Error(`${id} is read both as ${known.consumer} and as ${consumer}`);
          return known.value;
        }
        const value = Buffer.from(make());
        given.set(id, { consumer, value });
        return value;
      },
      keys(kind, name) {
        const mine = kind === 'Secret' ? own.get(name) : undefined;
        return mine ? Object.keys(mine) : ['ca.crt'];
      },
      async serviceAccountToken(namespace, serviceAccount, podName, audience, expirationSeconds) {
        const { privateKey } = await saKey;
        const uid = randomUUID();
        const now = Math.floor(Date.now() / 1000);
        const token = await new SignJWT({
          'kubernetes.io': { namespace, serviceaccount: { name: serviceAccount, uid }, pod: { name: podName, uid: randomUUID() } },
        })
          .setProtectedHeader({ alg: 'RS256', kid: 'stand-in' })
          .setIssuer('https://kubernetes.default.svc.cluster.local')
          .setSubject(`system:serviceaccount:${namespace}:${serviceAccount}`)
          .setAudience([audience])
          .setIssuedAt(now)
          .setNotBefore(now)
          .setExpirationTime(now + expirationSeconds)
          .sign(privateKey);
        await net.infra('token', { token, review: { username: `system:serviceaccount:${namespace}:${serviceAccount}`, uid, audiences: [audience] } });
        return token;
      },
    };
  }
});
