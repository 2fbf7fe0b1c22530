import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import type { ImageConfig } from './image.js';
import { watchProcess, type Service } from './process.js';

/**
 * A stand-in for the kubelet, enough to start a rendered container the way Kubernetes would and
 * nothing more lenient: the image's root filesystem (this machine's, with the image's `/app`),
 * read-only when the container says so; exactly the container's environment (the image's, what
 * Kubernetes injects, then the container's own, Secrets resolved); its volumes at their mount
 * paths with the modes and group Kubernetes gives them; its user, group and supplementary group;
 * no capabilities; its probes. Every pod shares one network namespace whose loopback stands for
 * the cluster network (Services are names in /etc/hosts and forwards from their ports). Anything
 * of a pod spec it cannot reproduce faithfully is an error, never skipped.
 *
 * Needs root (mount and network namespaces): the suites that use it say so if not.
 */

// Kubernetes manifests are plain YAML objects here; each function says which fields it reads.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Manifest = any;

const INFRA = fileURLToPath(new URL('./pod-infra.js', import.meta.url));

export interface PodNetwork {
  /** Runs a program in the namespace as root, or as `user` (a name of this machine). */
  run(cmd: string[], opts?: { env?: Record<string, string>; user?: string }): Service;
  /** Asks the namespace's infrastructure (test/support/pod-infra.ts). */
  infra(what: string, body: unknown): Promise<Record<string, unknown>>;
  close(): Promise<void>;
}

export async function startPodNetwork(dir: string): Promise<PodNetwork> {
  const holder: ChildProcess = spawn('unshare', ['--net', 'sleep', 'infinity'], { stdio: 'ignore' });
  await new Promise((r) => setTimeout(r, 100));
  if (holder.exitCode !== null || holder.pid === undefined) throw new Error('cannot create a network namespace (unshare --net): the pod suites need root');
  const ns = `/proc/${holder.pid}/ns/net`;
  const children: Service[] = [];
  const run: PodNetwork['run'] = (cmd, opts = {}) => {
    const as = opts.user ? ['setpriv', `--reuid=${opts.user}`, `--regid=${opts.user}`, '--init-groups', '--'] : [];
    const proc = spawn('nsenter', [`--net=${ns}`, '--', ...as, ...cmd], {
      env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', ...opts.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const svc = watchProcess(proc);
    children.push(svc);
    return svc;
  };
  const lo = run(['ip', 'link', 'set', 'lo', 'up']);
  if ((await lo.exited) !== 0) throw new Error(`cannot bring up the pods' loopback: ${lo.output()}`);
  const socket = path.join(dir, 'infra.sock');
  const infraProc = run([process.execPath, INFRA, socket]);
  await infraProc.waitFor(/pod-infra ready/, 10_000);
  const infra: PodNetwork['infra'] = (what, body) =>
    new Promise((resolve, reject) => {
      const req = request({ socketPath: socket, path: `/${what}`, method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => {
          const parsed = JSON.parse(text || '{}') as Record<string, unknown>;
          if (res.statusCode !== 200) reject(new Error(`pod-infra ${what}: ${text}`));
          else resolve(parsed);
        });
      });
      req.on('error', reject);
      req.end(JSON.stringify(body));
    });
  return {
    run,
    infra,
    async close() {
      for (const c of children) if (c.proc.exitCode === null) c.proc.kill('SIGKILL');
      await Promise.all(children.map((c) => c.exited));
      holder.kill('SIGKILL');
    },
  };
}

/** What the cluster holds besides the release: the operator's Secrets and ConfigMaps, tokens. */
export interface ClusterObjects {
  /**
   * Key `key` of Secret (or ConfigMap) `name`. `consumer` is how the container reads it: the
   * environment variable it fills, or the file name it is mounted as.
   */
  data(kind: 'Secret' | 'ConfigMap', name: string, key: string, consumer: string): Buffer;
  /** Every key of a Secret or ConfigMap mounted whole. */
  keys(kind: 'Secret' | 'ConfigMap', name: string): string[];
  /** A projected ServiceAccount token of this audience, as the API server would issue it. */
  serviceAccountToken(namespace: string, serviceAccount: string, podName: string, audience: string, expirationSeconds: number): Promise<string>;
}

export interface ContainerRun {
  namespace: string;
  podName: string;
  /** The pod spec (Deployment, Job or Pod template). */
  spec: Manifest;
  container: Manifest;
  image: ImageConfig & { root: string };
  /** OpenShift assigns user, group and fsGroup ids when the pod names none (restricted-v2). */
  platform: 'kubernetes' | 'openshift';
  /** Host names → addresses, as the cluster's DNS answers them. */
  hosts: Record<string, string>;
  /** Variables Kubernetes injects into every container (the API server's Service, Service links). */
  injected: Record<string, string>;
  objects: ClusterObjects;
  /**
   * A CA the container must trust beyond what it is given: a stand-in for a public CA's
   * certificate, which no stand-in server can have. Added as an operator adds a private CA
   * (a file and NODE_EXTRA_CA_CERTS); the suite says where and why it uses it.
   */
  trust?: string;
}

/** uid, gid and the supplementary group (fsGroup) a container runs as. */
function identity(run: ContainerRun): { uid: number; gid: number; fsGroup: number | undefined } {
  const sc = { ...run.spec.securityContext, ...run.container.securityContext } as Record<string, unknown>;
  // OpenShift's restricted-v2 SCC: an id from the namespace's range, group 0, fsGroup the same id.
  const assigned = 1_000_680_000;
  const openshift = run.platform === 'openshift' && sc['runAsUser'] === undefined;
  const uid = (sc['runAsUser'] as number | undefined) ?? (openshift ? assigned : run.image.user.uid);
  const gid = (sc['runAsGroup'] as number | undefined) ?? (openshift ? 0 : run.image.user.gid);
  const fsGroup = (run.spec.securityContext?.fsGroup as number | undefined) ?? (openshift ? assigned : undefined);
  if (sc['runAsNonRoot'] === true && uid === 0) throw new Error(`${run.container.name}: runAsNonRoot with user 0 would not start`);
  return { uid, gid, fsGroup };
}

const unsupported = (what: string): never => {
  throw new Error(`the kubelet stand-in cannot reproduce ${what}: teach test/support/kubelet.ts before relying on it`);
};

/** The container's environment, in Kubernetes' order: image, injected, then its own (later wins). */
function environment(run: ContainerRun): Record<string, string> {
  const env: Record<string, string> = { ...run.image.env, HOSTNAME: run.podName, ...run.injected };
  if (run.container.envFrom) unsupported('envFrom');
  for (const e of (run.container.env ?? []) as Manifest[]) {
    if (e.valueFrom === undefined) {
      if (/\$\(/.test(String(e.value ?? ''))) unsupported(`$(VAR) references in ${e.name}`);
      env[e.name] = String(e.value ?? '');
    } else if (e.valueFrom.secretKeyRef) {
      env[e.name] = run.objects.data('Secret', e.valueFrom.secretKeyRef.name, e.valueFrom.secretKeyRef.key, e.name).toString('utf8');
    } else if (e.valueFrom.configMapKeyRef) {
      env[e.name] = run.objects.data('ConfigMap', e.valueFrom.configMapKeyRef.name, e.valueFrom.configMapKeyRef.key, e.name).toString('utf8');
    } else if (e.valueFrom.fieldRef?.fieldPath === 'metadata.namespace') {
      env[e.name] = run.namespace;
    } else if (e.valueFrom.fieldRef?.fieldPath === 'metadata.name') {
      env[e.name] = run.podName;
    } else {
      unsupported(`the environment source of ${e.name}`);
    }
  }
  return env;
}

/** Writes a volume's files as Kubernetes would: root-owned, group fsGroup, the volume's modes. */
async function materialise(run: ContainerRun, volume: Manifest, dir: string, fsGroup: number | undefined): Promise<void> {
  mkdirSync(dir, { recursive: true });
  const group = fsGroup ?? 0;
  const put = (rel: string, data: Buffer | string, mode: number) => {
    const file = path.join(dir, rel);
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, data);
    chownSync(file, 0, group);
    chmodSync(file, mode);
  };
  const objectFiles = (kind: 'Secret' | 'ConfigMap', name: string, items: Manifest[] | undefined, mode: number) => {
    const listed = (items ?? run.objects.keys(kind, name).map((key) => ({ key, path: key }))) as Array<{ key: string; path: string; mode?: number }>;
    for (const item of listed) put(item.path, run.objects.data(kind, name, item.key, path.basename(item.path)), item.mode ?? mode);
  };
  if (volume.emptyDir) {
    chownSync(dir, 0, group);
    chmodSync(dir, 0o777);
  } else if (volume.secret) {
    objectFiles('Secret', volume.secret.secretName, volume.secret.items, volume.secret.defaultMode ?? 0o644);
  } else if (volume.configMap) {
    objectFiles('ConfigMap', volume.configMap.name, volume.configMap.items, volume.configMap.defaultMode ?? 0o644);
  } else if (volume.projected) {
    const mode = (volume.projected.defaultMode as number | undefined) ?? 0o644;
    for (const source of volume.projected.sources as Manifest[]) {
      if (source.secret) objectFiles('Secret', source.secret.name, source.secret.items, mode);
      else if (source.configMap) objectFiles('ConfigMap', source.configMap.name, source.configMap.items, mode);
      else if (source.serviceAccountToken) {
        const t = source.serviceAccountToken;
        const token = await run.objects.serviceAccountToken(
          run.namespace,
          run.spec.serviceAccountName ?? 'default',
          run.podName,
          t.audience,
          t.expirationSeconds ?? 3600,
        );
        put(t.path, token, mode);
      } else unsupported(`projected source ${JSON.stringify(Object.keys(source))}`);
    }
  } else {
    unsupported(`volume ${volume.name} (${Object.keys(volume).join(', ')})`);
  }
}

// Runs in a private mount namespace: an overlay of this machine's root (writes land in a tmpfs
// and are dropped), the container's mounts over it, the root made read-only if asked, then chroot.
const MOUNT_SCRIPT = `
set -eu
P=$1; ro=$2; shift 2
mount -t tmpfs -o mode=0755 custody-pod "$P/t"
mkdir "$P/t/u" "$P/t/w"
mount -t overlay custody-pod -o "lowerdir=/,upperdir=$P/t/u,workdir=$P/t/w" "$P/root"
for d in proc dev sys; do mount --rbind "/$d" "$P/root/$d"; done
while IFS='|' read -r src dst mode; do
  # Resolved inside the new root: its symlinks (/var/run -> /run) must not lead out of it.
  real=$(chroot "$P/root" realpath -m "$dst")
  if [ -d "$src" ]; then chroot "$P/root" mkdir -p "$real"; else chroot "$P/root" mkdir -p "$(dirname "$real")"; [ -e "$P/root$real" ] || : > "$P/root$real"; fi
  mount --bind "$src" "$P/root$real"
  if [ "$mode" = ro ]; then mount -o remount,bind,ro "$P/root$real"; fi
done < "$P/mounts"
if [ "$ro" = 1 ]; then mount -o remount,ro "$P/root"; fi
exec chroot "$P/root" "$@"
`;

/** Starts one container of a pod in the pod network; `dir` is scratch space for its volumes. */
export async function startContainer(net: PodNetwork, run: ContainerRun, scratch: string): Promise<Service> {
  const dir = mkdtempSync(path.join(scratch, `${run.container.name}-`));
  chmodSync(dir, 0o755);
  mkdirSync(path.join(dir, 't'));
  mkdirSync(path.join(dir, 'root'));
  const { uid, gid, fsGroup } = identity(run);
  const mounts: string[] = [`${run.image.root}|${run.image.workdir}|ro`];
  const hosts = ['127.0.0.1 localhost', ...Object.entries(run.hosts).map(([name, ip]) => `${ip} ${name}`)].join('\n');
  writeFileSync(path.join(dir, 'hosts'), `${hosts}\n`);
  chmodSync(path.join(dir, 'hosts'), 0o644);
  mounts.push(`${path.join(dir, 'hosts')}|/etc/hosts|ro`);
  const volumes = new Map<string, Manifest>(((run.spec.volumes ?? []) as Manifest[]).map((v) => [v.name as string, v]));
  for (const m of (run.container.volumeMounts ?? []) as Manifest[]) {
    if (m.subPath || m.subPathExpr) unsupported(`subPath mounts (${m.name})`);
    const volume = volumes.get(m.name);
    if (!volume) throw new Error(`${run.container.name} mounts ${m.name}, which the pod does not define`);
    // A directory of the host (the compose suite's volumes, which containers share), as it is.
    const source = volume.hostPath ? (volume.hostPath.path as string) : path.join(dir, `volume-${m.name}`);
    if (!volume.hostPath) await materialise(run, volume, source, fsGroup);
    mounts.push(`${source}|${m.mountPath}|${m.readOnly ? 'ro' : 'rw'}`);
  }
  const env = environment(run);
  if (run.trust !== undefined) {
    writeFileSync(path.join(dir, 'trust.pem'), run.trust);
    chmodSync(path.join(dir, 'trust.pem'), 0o644);
    mounts.push(`${path.join(dir, 'trust.pem')}|/etc/ssl/certs/custody-stand-in-public-ca.pem|ro`);
    env['NODE_EXTRA_CA_CERTS'] = '/etc/ssl/certs/custody-stand-in-public-ca.pem';
  }
  writeFileSync(path.join(dir, 'mounts'), `${mounts.join('\n')}\n`);
  const command = [...((run.container.command as string[] | undefined) ?? run.image.entrypoint), ...((run.container.args as string[] | undefined) ?? [])];
  const readOnly = run.container.securityContext?.readOnlyRootFilesystem === true ? '1' : '0';
  const workdir = (run.container.workingDir as string | undefined) ?? run.image.workdir;
  const groups = fsGroup === undefined ? ['--clear-groups'] : [`--groups=${fsGroup}`];
  const drop = run.container.securityContext?.capabilities?.drop?.includes('ALL') ? ['--bounding-set=-all', '--inh-caps=-all'] : [];
  const noNewPrivs = run.container.securityContext?.allowPrivilegeEscalation === false ? ['--no-new-privs'] : [];
  const argv = [
    ...['unshare', '--mount', '--propagation', 'private', '--', 'sh', '-c', MOUNT_SCRIPT, 'custody-pod', dir, readOnly],
    ...['setpriv', `--reuid=${uid}`, `--regid=${gid}`, ...groups, ...noNewPrivs, ...drop, '--'],
    ...['/usr/bin/env', '-i', '-C', workdir, ...Object.entries(env).map(([k, v]) => `${k}=${v}`), ...command],
  ];
  return net.run(argv);
}

/** The port a probe names (a number, or the name of one of the container's ports). */
function probePort(container: Manifest, port: number | string): number {
  if (typeof port === 'number') return port;
  const found = ((container.ports ?? []) as Manifest[]).find((p) => p.name === port);
  if (!found) throw new Error(`${container.name}: probe port ${port} is not one of its ports`);
  return found.containerPort as number;
}

/** Polls the container's probe (`readinessProbe` by default) as the kubelet would, until it succeeds. */
export async function waitProbe(net: PodNetwork, svc: Service, container: Manifest, which = 'readinessProbe', timeoutMs = 90_000): Promise<void> {
  const probe: Manifest = container[which]?.httpGet;
  if (!probe) unsupported(`${container.name} without an httpGet ${which}`);
  const url = `${String(probe.scheme ?? 'HTTP').toLowerCase()}://127.0.0.1:${probePort(container, probe.port)}${probe.path ?? '/'}`;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (svc.proc.exitCode !== null) throw new Error(`${container.name} exited (${svc.proc.exitCode}) before its ${which} passed:\n${svc.output()}`);
    const last = await net.infra('probe', { url, timeoutMs: 2_000 });
    const status = last['status'] as number | undefined;
    if (status !== undefined && status >= 200 && status < 400) return;
    if (Date.now() > deadline) throw new Error(`${container.name}: ${which} ${url} never passed (last: ${JSON.stringify(last)}):\n${svc.output()}`);
    await new Promise((r) => setTimeout(r, 300));
  }
}

/** Stops a container as the kubelet does (SIGTERM) and returns its exit status. */
export async function stopContainer(svc: Service): Promise<number | null> {
  if (svc.proc.exitCode === null) svc.proc.kill('SIGTERM');
  return svc.exited;
}

export const removeScratch = (dir: string) => rmSync(dir, { recursive: true, force: true });

/** A user's uid on this machine, from /etc/passwd. */
export function uidOf(user: string): number {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${user}:`));
  if (!line) throw new Error(`no user ${user} on this machine`);
  return Number(line.split(':')[2]);
}

/**
 * The machine's PostgreSQL server as a throwaway cluster in `net` (127.0.0.1:5432 there): trust on
 * its Unix socket in `dir` (a file, so it crosses the namespace: the answer's admin client uses it),
 * scram-sha-256 over TCP, TLS with `tls`'s certificate when given.
 */
export async function startPostgresIn(
  net: PodNetwork,
  dir: string,
  tls?: { certPem: string; keyPem: string },
): Promise<{ service: Service; admin: pg.Client }> {
  const bin = `/usr/lib/postgresql/${readdirSync('/usr/lib/postgresql')[0]}/bin`;
  const data = path.join(dir, 'data');
  mkdirSync(dir);
  chownSync(dir, uidOf('postgres'), uidOf('postgres'));
  const initdb = net.run([`${bin}/initdb`, '-D', data, '-U', 'postgres', '--auth-local=trust', '--auth-host=scram-sha-256'], { user: 'postgres' });
  if ((await initdb.exited) !== 0) throw new Error(`initdb failed: ${initdb.output()}`);
  const settings = ['fsync=off', 'password_encryption=scram-sha-256'];
  if (tls) {
    for (const [file, text] of [
      ['server.crt', tls.certPem],
      ['server.key', tls.keyPem],
    ] as const) {
      writeFileSync(path.join(data, file), text, { mode: 0o600 });
      chownSync(path.join(data, file), uidOf('postgres'), uidOf('postgres'));
    }
    settings.push('ssl=on');
  }
  const service = net.run([`${bin}/postgres`, '-D', data, '-h', '127.0.0.1', '-p', '5432', '-k', dir, ...settings.flatMap((s) => ['-c', s])], {
    user: 'postgres',
  });
  await service.waitFor(/ready to accept connections/, 60_000);
  const admin = new pg.Client({ host: dir, port: 5432, user: 'postgres', database: 'postgres' });
  await admin.connect();
  return { service, admin };
}
