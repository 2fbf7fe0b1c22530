import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { README_FILE, VALUES_FILE, valuesTable, withTable } from '../scripts/values-table.js';
import { parse as parseYaml } from 'yaml';
import { createHash, X509Certificate } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { parseAllDocuments } from 'yaml';
import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { Job } from 'kubernetes-models/batch/v1/Job';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Pod } from 'kubernetes-models/v1/Pod';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1/Ingress';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { toolPath } from './support/tools.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CHART = path.join(ROOT, 'helm/custody');
const SECRET_ENV = ['DATABASE_URL', 'REDIS_URL', 'OPERATOR_TOKEN', 'DATA_ENCRYPTION_KEY', 'KEYVAULT_TOKEN', 'VAULT_TOKEN', 'VAULT_ROLE_ID', 'VAULT_SECRET_ID'];
const PRIVATE = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16', '127.0.0.0/8'];

// Rendered manifests are plain YAML objects; each assertion says which fields it reads.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Manifest = any;

/** Offline schema validation: the kubernetes-models class of each kind (throws on a schema error). */
const MODELS: Record<string, (m: Manifest) => { validate(): void }> = {
  'apps/v1/Deployment': (m) => new Deployment(m),
  'batch/v1/Job': (m) => new Job(m),
  'v1/Pod': (m) => new Pod(m),
  'v1/Secret': (m) => new Secret(m),
  'v1/Service': (m) => new Service(m),
  'v1/ServiceAccount': (m) => new ServiceAccount(m),
  'networking.k8s.io/v1/Ingress': (m) => new Ingress(m),
  'networking.k8s.io/v1/NetworkPolicy': (m) => new NetworkPolicy(m),
  'policy/v1/PodDisruptionBudget': (m) => new PodDisruptionBudget(m),
  'autoscaling/v2/HorizontalPodAutoscaler': (m) => new HorizontalPodAutoscaler(m),
  'monitoring.coreos.com/v1/ServiceMonitor': (m) => new ServiceMonitor(m),
  'monitoring.coreos.com/v1/PrometheusRule': (m) => new PrometheusRule(m),
  'v1/ConfigMap': (m) => new ConfigMap(m),
};

describe('Helm chart (helm/custody)', function () {
  this.timeout(600_000);
  let helm: string;

  /** `helm template <release> <chart> --namespace custody <args>`. */
  const template = (args: string[] = [], release = 'rel', chart = CHART) =>
    spawnSync(helm, ['template', release, chart, '--namespace', 'custody', ...args], { encoding: 'utf8' });
  // The chart has no default for the audience or Vault: "the defaults" are the defaults plus the least a production install sets.
  const REQUIRED = path.join(ROOT, 'helm/ci/required.yaml');
  const valuesArgs = (valuesFile?: string) => ['-f', valuesFile ?? REQUIRED];
  const setArgs = (...values: string[]) => ['-f', REQUIRED, ...values.flatMap((v) => ['--set', v])];

  /** The manifests of a render that must succeed. */
  function render(args: string[] = valuesArgs(), release = 'rel'): Manifest[] {
    const res = template(args, release);
    expect(res.status, res.stderr).to.equal(0);
    return parseAllDocuments(res.stdout)
      .map((d): Manifest => d.toJS())
      .filter((m) => m !== null);
  }

  const byKind = (ms: Manifest[], kind: string) => ms.filter((m) => m.kind === kind);
  const component = (m: Manifest) => m.metadata.labels['app.kubernetes.io/component'] as string;
  const podSpecs = (ms: Manifest[]) => [
    ...[...byKind(ms, 'Deployment'), ...byKind(ms, 'Job')].map((m) => ({ name: component(m), spec: m.spec.template.spec })),
    ...byKind(ms, 'Pod').map((m) => ({ name: component(m), spec: m.spec })),
  ];
  /** Volumes the operator added through extraVolumes (theirs to choose). */
  const extraVolumeNames = (file: string | undefined): string[] =>
    file ? ((parseYaml(readFileSync(file, 'utf8')) as { extraVolumes?: Array<{ name: string }> }).extraVolumes ?? []).map((v) => v.name) : [];

  before(() => {
    helm = toolPath('helm');
  });

  it('passes helm lint --strict', () => {
    const res = spawnSync(helm, ['lint', '--strict', CHART], { encoding: 'utf8' });
    expect(res.status, res.stdout + res.stderr).to.equal(0);
  });

  const files: Array<[string, string | undefined]> = [
    ...readdirSync(path.join(ROOT, 'helm/ci'))
      .filter((f) => f.endsWith('.yaml'))
      .map((f): [string, string] => [f, path.join(ROOT, 'helm/ci', f)]),
  ];

  for (const [name, file] of files) {
    describe(`rendered with ${name}`, () => {
      let ms: Manifest[];
      before(() => {
        ms = render(valuesArgs(file));
      });

      it('is valid against the Kubernetes schemas, offline', () => {
        expect(ms.length).to.be.greaterThan(8);
        for (const m of ms) {
          const model = MODELS[`${m.apiVersion}/${m.kind}`];
          expect(model, `no schema check for ${m.apiVersion}/${m.kind}`).to.not.equal(undefined);
          expect(() => model?.(m).validate(), `${m.kind} ${m.metadata.name}`).not.to.throw();
        }
        // The only Secrets the chart makes: the signer's generated TLS (its CA, server and client certificates).
        const base = (byKind(ms, 'Deployment').find((d) => component(d) === 'api').metadata.name as string).replace(/-api$/, '');
        expect(
          byKind(ms, 'Secret')
            .map((m) => m.metadata.name as string)
            .sort(),
        ).to.deep.equal([`${base}-keyvault-client-tls`, `${base}-keyvault-tls`]);
      });

      it('decodes strictly (no unknown or misspelt field) as every supported Kubernetes version reads it, offline', () => {
        const dir = toolPath('kube-strict');
        const res = template(valuesArgs(file));
        for (const bin of readdirSync(dir).filter((f) => /^kube-strict-1\.\d+$/.test(f))) {
          const checked = spawnSync(path.join(dir, bin), [], { input: res.stdout, encoding: 'utf8' });
          expect(checked.status, `${bin}: ${checked.stdout}${checked.stderr}`).to.equal(0);
        }
      });

      it('restarts the pods that use the generated signer TLS when it changes (a checksum of exactly the rendered Secrets)', () => {
        const secrets = Object.fromEntries(byKind(ms, 'Secret').map((s) => [s.metadata.name as string, s.data as Record<string, string>]));
        const base = (byKind(ms, 'Deployment').find((d) => component(d) === 'api').metadata.name as string).replace(/-api$/, '');
        const sorted = (o: Record<string, string> | undefined) => Object.fromEntries(Object.entries(o ?? {}).sort(([a], [b]) => a.localeCompare(b)));
        // Helm's toJson of { client, server }: keys sorted, no spaces.
        const json = JSON.stringify({ client: sorted(secrets[`${base}-keyvault-client-tls`]), server: sorted(secrets[`${base}-keyvault-tls`]) });
        const sum = createHash('sha256').update(json).digest('hex');
        for (const d of byKind(ms, 'Deployment')) expect(d.spec.template.metadata.annotations?.['checksum/signer-tls'], component(d)).to.equal(sum);
        for (const j of byKind(ms, 'Job')) expect(j.spec.template.metadata.annotations?.['checksum/signer-tls'], 'migrations').to.equal(undefined);
      });

      it('deploys the API, the worker and the signer, a pre-install/pre-upgrade migration Job, services and probes', () => {
        expect(byKind(ms, 'Deployment').map(component).sort()).to.deep.equal(['api', 'keyvault', 'worker']);
        const [job] = byKind(ms, 'Job');
        expect(job.metadata.annotations['helm.sh/hook']).to.equal('pre-install,pre-upgrade');
        expect(job.spec.template.spec.containers[0].env).to.deep.include({ name: 'ROLE', value: 'migrate' });
        expect(byKind(ms, 'Service').map(component).sort()).to.deep.equal(['api', 'keyvault', 'worker']);
        for (const d of byKind(ms, 'Deployment')) {
          const c = d.spec.template.spec.containers[0];
          expect(c.env, component(d)).to.deep.include({ name: 'ROLE', value: component(d) });
          // Only the signer holds anything of Vault's.
          if (component(d) !== 'keyvault')
            expect(
              (c.env as Array<{ name: string }>).filter((e) => e.name.startsWith('VAULT_')),
              component(d),
            ).to.deep.equal([]);
          expect(c.livenessProbe.httpGet.path).to.equal('/healthz');
          expect(c.readinessProbe.httpGet.path).to.equal('/readyz');
        }
        const signer = byKind(ms, 'Deployment').find((d) => component(d) === 'keyvault');
        const env = signer.spec.template.spec.containers[0].env as Array<{ name: string; value?: string }>;
        expect(env.find((e) => e.name === 'VAULT_ADDR')?.value).to.match(/^https?:\/\//);
        expect(env.map((e) => e.name)).not.to.include('KEYVAULT_DATA_DIR');
        // The key store's prefix names the release unless set: two releases never share one store.
        const prefix = env.find((e) => e.name === 'VAULT_KV_PREFIX')?.value;
        expect(prefix).to.equal('custody/rel/keys');
      });

      it('names its namespace on every resource', () => {
        for (const m of ms) expect(m.metadata.namespace, `${m.kind} ${m.metadata.name}`).to.equal('custody');
      });

      it('probes every long-running container with timeouts, a startup probe included', () => {
        for (const d of byKind(ms, 'Deployment')) {
          const c = d.spec.template.spec.containers[0];
          for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe']) {
            expect(c[probe]?.timeoutSeconds, `${component(d)} ${probe}`)
              .to.be.a('number')
              .and.greaterThan(0);
            expect(c[probe]?.periodSeconds, `${component(d)} ${probe}`)
              .to.be.a('number')
              .and.greaterThan(0);
          }
          expect(c.startupProbe.httpGet.path, component(d)).to.equal('/healthz');
        }
      });

      it('never blocks a node drain: PodDisruptionBudgets allow one pod down and evict unhealthy pods; none for one replica', () => {
        for (const pdb of byKind(ms, 'PodDisruptionBudget')) {
          expect(pdb.spec.minAvailable, pdb.metadata.name).to.equal(undefined);
          expect(pdb.spec.maxUnavailable, pdb.metadata.name).to.be.at.least(1);
          expect(pdb.spec.unhealthyPodEvictionPolicy, pdb.metadata.name).to.equal('AlwaysAllow');
          const target = byKind(ms, 'Deployment').find((d) => component(d) === component(pdb));
          const hpa = byKind(ms, 'HorizontalPodAutoscaler').find((h) => h.spec.scaleTargetRef.name === target.metadata.name);
          expect(target.spec.replicas ?? hpa?.spec.minReplicas, pdb.metadata.name).to.be.greaterThan(1);
        }
      });

      it('runs pre-install/pre-upgrade hooks only on what exists by then: earlier hooks or what the operator provides', () => {
        const hookOf = (m: Manifest) => String(m.metadata.annotations?.['helm.sh/hook'] ?? '');
        const weight = (m: Manifest) => Number(m.metadata.annotations?.['helm.sh/hook-weight'] ?? 0);
        const early = (m: Manifest) => /\bpre-(install|upgrade)\b/.test(hookOf(m));
        const ordinary = new Set(ms.filter((m) => !hookOf(m)).map((m) => `${m.kind}/${m.metadata.name}`));
        const hooks = ms.filter(early);
        expect(hooks.length, 'the migration Job at least').to.be.greaterThan(0);
        for (const h of hooks) {
          const spec = h.spec?.template?.spec;
          if (!spec) continue;
          const refs: string[] = [`ServiceAccount/${spec.serviceAccountName ?? 'default'}`];
          for (const v of spec.volumes ?? []) {
            if (v.secret) refs.push(`Secret/${v.secret.secretName}`);
            if (v.configMap) refs.push(`ConfigMap/${v.configMap.name}`);
            if (v.persistentVolumeClaim) refs.push(`PersistentVolumeClaim/${v.persistentVolumeClaim.claimName}`);
            for (const src of v.projected?.sources ?? []) {
              if (src.secret) refs.push(`Secret/${src.secret.name}`);
              if (src.configMap) refs.push(`ConfigMap/${src.configMap.name}`);
            }
          }
          for (const c of [...spec.containers, ...(spec.initContainers ?? [])]) {
            for (const e of c.env ?? []) {
              if (e.valueFrom?.secretKeyRef) refs.push(`Secret/${e.valueFrom.secretKeyRef.name}`);
              if (e.valueFrom?.configMapKeyRef) refs.push(`ConfigMap/${e.valueFrom.configMapKeyRef.name}`);
            }
            for (const e of c.envFrom ?? []) refs.push(e.secretRef ? `Secret/${e.secretRef.name}` : `ConfigMap/${e.configMapRef?.name}`);
          }
          for (const ref of refs) {
            expect(ordinary.has(ref), `${h.kind} ${h.metadata.name} needs ${ref}, which the release creates only after its hooks`).to.equal(false);
            const asHook = hooks.find((x) => `${x.kind}/${x.metadata.name}` === ref);
            if (asHook) expect(weight(asHook), `${ref} must come before ${h.metadata.name}`).to.be.lessThan(weight(h));
          }
        }
      });

      it('spreads replicas softly by default (never a scheduling refusal the operator did not ask for)', () => {
        for (const d of byKind(ms, 'Deployment')) {
          const spec = d.spec.template.spec;
          const operatorSet = name === 'conventions.yaml' && component(d) === 'api';
          if (operatorSet) continue;
          expect(spec.affinity?.podAntiAffinity?.preferredDuringSchedulingIgnoredDuringExecution, component(d)).to.have.length.greaterThan(0);
          expect(spec.affinity?.podAntiAffinity?.requiredDuringSchedulingIgnoredDuringExecution, component(d)).to.equal(undefined);
          for (const t of spec.topologySpreadConstraints ?? []) expect(t.whenUnsatisfiable, component(d)).to.equal('ScheduleAnyway');
        }
      });

      it("meets the restricted Pod Security profile; no pod mounts the API server's token", () => {
        for (const { name, spec } of podSpecs(ms)) {
          expect(spec.securityContext.runAsNonRoot, name).to.equal(true);
          expect(spec.securityContext.seccompProfile.type, name).to.equal('RuntimeDefault');
          expect(spec.hostNetwork ?? false).to.equal(false);
          expect(spec.hostPID ?? false).to.equal(false);
          for (const v of (spec.volumes ?? []).filter((x: { name: string }) => !extraVolumeNames(file).includes(x.name))) {
            expect(
              Object.keys(v).filter((k) => k !== 'name'),
              name,
            ).to.satisfy((ks: string[]) => ks.every((k) => ['emptyDir', 'secret', 'projected'].includes(k)));
            for (const source of v.projected?.sources ?? [])
              expect(Object.keys(source), `${name} ${v.name}`).to.satisfy((ks: string[]) => ks.every((k) => ['secret', 'serviceAccountToken'].includes(k)));
          }
          for (const c of spec.containers) {
            const sc = c.securityContext;
            expect(sc.allowPrivilegeEscalation, name).to.equal(false);
            expect(sc.readOnlyRootFilesystem, name).to.equal(true);
            expect(sc.runAsNonRoot, name).to.equal(true);
            expect(sc.capabilities.drop, name).to.deep.equal(['ALL']);
            expect(sc.capabilities.add ?? [], name).to.deep.equal([]);
            expect(sc.privileged ?? false, name).to.equal(false);
            // Secrets only from Secrets: as files under /etc/custody/secrets (NAME_FILE) by default, else secretKeyRef.
            for (const e of (c.env ?? []) as Array<{ name: string; value?: string; valueFrom?: { secretKeyRef?: unknown } }>) {
              if (SECRET_ENV.includes(e.name)) {
                expect(e.value, `${name} ${e.name}`).to.equal(undefined);
                expect(e.valueFrom?.secretKeyRef, `${name} ${e.name}`).to.not.equal(undefined);
              }
              if (SECRET_ENV.includes(e.name.replace(/_FILE$/, '')) && e.name.endsWith('_FILE'))
                expect(e.value, `${name} ${e.name}`).to.equal(`/etc/custody/secrets/${e.name.replace(/_FILE$/, '')}`);
            }
          }
          // No pod mounts the API server's token; the signer, with Kubernetes auth, gets one of Vault's audience only.
          expect(spec.automountServiceAccountToken, name).to.equal(false);
          const tokens = (spec.volumes ?? []).flatMap((v: Manifest) => (v.projected?.sources ?? []).filter((src: Manifest) => src.serviceAccountToken));
          const k8sAuth = name === 'keyvault' && (spec.containers[0].env as Array<{ name: string }>).some((e) => e.name === 'VAULT_K8S_ROLE');
          expect(
            tokens.every((t: Manifest) => t.serviceAccountToken.expirationSeconds <= 3600),
            name,
          ).to.equal(true);
          expect(
            tokens.map((t: Manifest) => t.serviceAccountToken.audience),
            name,
          ).to.deep.equal(k8sAuth ? ['vault'] : []);
        }
        const accounts = byKind(ms, 'ServiceAccount');
        expect(accounts.find((a) => component(a) === 'app').automountServiceAccountToken).to.equal(false);
      });

      it('network policies (when on): only the API and the worker reach the signer, only the signer reaches Vault', () => {
        const policies = byKind(ms, 'NetworkPolicy');
        const enabled = policies.length > 0;
        if (!enabled) {
          expect(name).to.equal('minimal.yaml');
          return;
        }
        const deny = policies.find((p) => p.metadata.name.endsWith('default-deny'));
        expect(deny.spec.policyTypes).to.deep.equal(['Ingress', 'Egress']);
        expect(deny.spec.ingress ?? []).to.deep.equal([]);
        expect(deny.spec.egress ?? []).to.deep.equal([]);

        const signer = policies.find((p) => p.spec.podSelector.matchLabels?.['app.kubernetes.io/component'] === 'keyvault');
        expect(signer.spec.ingress).to.have.length(1);
        expect(signer.spec.ingress[0].from).to.have.length(1);
        expect(signer.spec.ingress[0].from[0].podSelector.matchExpressions[0].values).to.deep.equal(['api', 'worker', 'test']);
        expect(signer.spec.egress).to.have.length(1);
        const vaultPeers = (signer.spec.egress[0].to as Manifest[]).map((peer) => JSON.stringify(peer));
        expect(vaultPeers.length).to.be.greaterThan(0);

        // Nobody else may reach Vault: no other egress rule names Vault's peers, and the rule open
        // to public addresses leaves every private range (where an in-cluster Vault lives) out.
        for (const p of policies.filter((x) => x !== signer)) {
          for (const rule of p.spec.egress ?? []) {
            for (const peer of rule.to ?? []) {
              expect(vaultPeers, `${p.metadata.name} reaches Vault`).not.to.include(JSON.stringify(peer));
              const b = peer.ipBlock;
              if (b?.cidr === '0.0.0.0/0') expect(b.except, p.metadata.name).to.include.members(PRIVATE);
              if (b?.cidr === '::/0') expect(b.except, p.metadata.name).to.include.members(['fc00::/7', 'fe80::/10']);
            }
          }
        }
      });

      if (name === 'hpa-servicemonitor.yaml') {
        it('adds the HPA, the ServiceMonitor, the PrometheusRule and the dashboard', () => {
          expect(byKind(ms, 'HorizontalPodAutoscaler')).to.have.length(1);
          const api = byKind(ms, 'Deployment').find((d) => component(d) === 'api');
          expect(api.spec.replicas).to.equal(undefined);
          const [monitor] = byKind(ms, 'ServiceMonitor');
          expect(monitor.metadata.labels.release).to.equal('kube-prometheus-stack');
          expect(monitor.spec.endpoints[0].path).to.equal('/metrics');
          // Its groups are files/alerts.yaml's (test/alerts.test.ts checks them and the dashboard in full).
          const [rule] = byKind(ms, 'PrometheusRule');
          expect(rule.metadata.labels.release).to.equal('kube-prometheus-stack');
          expect(rule.spec).to.deep.equal(parseYaml(readFileSync(path.join(CHART, 'files/alerts.yaml'), 'utf8')));
          const [dashboard] = byKind(ms, 'ConfigMap');
          expect(dashboard.metadata.labels.grafana_dashboard).to.equal('1');
        });
        it('routes only /api/ through the Ingress without ingress.reference and console.enabled, and tells the API the console is off', () => {
          const [ingress] = byKind(ms, 'Ingress');
          expect(ingress.spec.rules[0].http.paths.map((p: { path: string }) => p.path)).to.deep.equal(['/api/']);
          const api = byKind(ms, 'Deployment').find((d: { metadata: { name: string } }) => d.metadata.name.endsWith('-api'));
          expect(api.spec.template.spec.containers[0].env).to.deep.include({ name: 'CONSOLE_ENABLED', value: 'false' });
        });
      }
      if (name === 'production-vault-kubernetes.yaml') {
        it('routes /api/, (ingress.reference) the API reference and (console.enabled) the console through the Ingress, with TLS; never /metrics or the probes', () => {
          const [ingress] = byKind(ms, 'Ingress');
          expect(ingress.spec.tls[0].secretName).to.equal('custody-example-com-tls');
          expect(ingress.spec.rules[0].http.paths.map((p: { path: string; pathType: string }) => `${p.pathType} ${p.path}`)).to.deep.equal([
            'Prefix /api/',
            'Prefix /docs',
            'Exact /openapi.json',
            'Prefix /console',
          ]);
          const api = byKind(ms, 'Deployment').find((d: { metadata: { name: string } }) => d.metadata.name.endsWith('-api'));
          const env = Object.fromEntries(api.spec.template.spec.containers[0].env.map((e: { name: string; value?: string }) => [e.name, e.value]));
          expect(env).to.include({ CONSOLE_ENABLED: 'true', CONSOLE_SESSION_TTL_S: '43200', PUBLIC_BASE_URL: 'https://custody.example.com' });
        });
      }
    });
  }

  describe('conventions operators expect (helm/ci/conventions.yaml and --set)', () => {
    const file = path.join(ROOT, 'helm/ci/conventions.yaml');

    it('names, labels, annotations, extra environment and volumes, priority class, probes, OpenShift ids, image digest, secrets as variables', () => {
      const ms = render(valuesArgs(file));
      const deployments = byKind(ms, 'Deployment');
      expect(deployments.map((d) => d.metadata.name as string).sort()).to.deep.equal(['acme-wallets-api', 'acme-wallets-keyvault', 'acme-wallets-worker']);
      for (const m of ms) expect(m.metadata.labels.team, `${m.kind} ${m.metadata.name}`).to.equal('payments');
      for (const { name, spec } of podSpecs(ms)) {
        const c = spec.containers[0];
        expect(c.image, name).to.equal('registry.example.com/platform/custody@sha256:0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9');
        // OpenShift's restricted-v2 assigns the ids: the chart sets none, and still runs as non-root.
        expect(spec.securityContext, name).to.not.have.any.keys('runAsUser', 'runAsGroup', 'fsGroup');
        expect(spec.securityContext.runAsNonRoot, name).to.equal(true);
        if (name === 'test') continue; // the helm test pod takes no extras
        expect(c.env, name).to.deep.include({ name: 'NODE_EXTRA_CA_CERTS', value: '/etc/corporate-ca/ca.crt' });
        expect(c.volumeMounts, name).to.deep.include({ name: 'corporate-ca', mountPath: '/etc/corporate-ca', readOnly: true });
        expect(
          spec.volumes.map((v: { name: string }) => v.name),
          name,
        ).to.include('corporate-ca');
        // Secrets as variables from the Secrets, no secret volume.
        expect(
          (c.env as Array<{ name: string }>).filter((e) => e.name.endsWith('_FILE') && SECRET_ENV.includes(e.name.replace(/_FILE$/, ''))),
          name,
        ).to.deep.equal([]);
      }
      for (const d of deployments) {
        const t = d.spec.template;
        expect(t.metadata.annotations['example.com/scrape'], component(d)).to.equal('true');
        expect(t.metadata.labels['cost-centre'], component(d)).to.equal('cc-42');
        expect(t.spec.priorityClassName, component(d)).to.equal(component(d) === 'worker' ? 'custody-background' : 'custody-critical');
      }
      const api = deployments.find((d) => component(d) === 'api').spec.template.spec;
      expect(api.containers[0].env).to.deep.include({ name: 'UV_THREADPOOL_SIZE', value: '8' });
      expect(api.containers[0].readinessProbe).to.deep.include({ periodSeconds: 15, timeoutSeconds: 9, failureThreshold: 2 });
      expect(api.containers[0].readinessProbe.httpGet.path).to.equal('/readyz');
      expect(api.topologySpreadConstraints[0].whenUnsatisfiable).to.equal('DoNotSchedule');
      expect(api.containers[0].env).to.deep.include({ name: 'DATABASE_URL', valueFrom: { secretKeyRef: { name: 'custody-secrets', key: 'DATABASE_URL' } } });
      expect(byKind(ms, 'PodDisruptionBudget')).to.deep.equal([]);
    });

    it('nameOverride renames resources and the name label; works as a subchart (global values)', () => {
      const ms = render(setArgs('nameOverride=wallets', 'global.anything=1'));
      expect(
        byKind(ms, 'Deployment')
          .map((d) => d.metadata.name as string)
          .sort(),
      ).to.deep.equal(['rel-wallets-api', 'rel-wallets-keyvault', 'rel-wallets-worker']);
      for (const m of ms) expect(m.metadata.labels['app.kubernetes.io/name']).to.equal('wallets');
    });

    it("mounts secrets as files by default: a projected volume of exactly the named Secrets' keys", () => {
      const ms = render(valuesArgs(path.join(ROOT, 'helm/ci/production-vault-kubernetes.yaml')));
      const api = byKind(ms, 'Deployment').find((d) => component(d) === 'api').spec.template.spec;
      const volume = api.volumes.find((v: { name: string }) => v.name === 'secrets');
      expect(volume.projected.sources.map((src: Manifest) => `${src.secret.name}:${src.secret.items[0].key}->${src.secret.items[0].path}`)).to.deep.equal([
        'custody-database:url->DATABASE_URL',
        'custody-dek:key->DATA_ENCRYPTION_KEY',
        'custody-keyvault:token->KEYVAULT_TOKEN',
        'custody-operator:token->OPERATOR_TOKEN',
        'custody-redis:REDIS_URL->REDIS_URL',
      ]);
      expect(api.containers[0].volumeMounts).to.deep.include({ name: 'secrets', mountPath: '/etc/custody/secrets', readOnly: true });
    });

    it('declares kubeVersion, has a helm test (API readiness, signer health) and NOTES with the next steps', () => {
      const chart = parseYaml(readFileSync(path.join(CHART, 'Chart.yaml'), 'utf8')) as { kubeVersion?: string };
      expect(chart.kubeVersion).to.match(/^>=1\.\d+/);
      const ms = render();
      const [pod] = byKind(ms, 'Pod');
      expect(pod.metadata.annotations['helm.sh/hook']).to.equal('test');
      const script = pod.spec.containers[0].args[0] as string;
      expect(script).to.include('http://rel-custody-api:80/readyz');
      expect(script).to.include('https://rel-custody-keyvault:8300/healthz');
      // NOTES.txt is rendered only by an install against a cluster: render it here through `tpl` in a copy of the chart.
      const dir = mkdtempSync(path.join(tmpdir(), 'custody-notes-'));
      try {
        cpSync(CHART, path.join(dir, 'custody'), { recursive: true });
        cpSync(path.join(CHART, 'templates/NOTES.txt'), path.join(dir, 'custody/notes.txt'));
        writeFileSync(
          path.join(dir, 'custody/templates/notes-check.yaml'),
          'apiVersion: v1\nkind: ConfigMap\nmetadata: { name: notes }\ndata:\n  notes: {{ tpl (.Files.Get "notes.txt") . | quote }}\n',
        );
        const res = template([...valuesArgs(), '--show-only', 'templates/notes-check.yaml'], 'rel', path.join(dir, 'custody'));
        expect(res.status, res.stderr).to.equal(0);
        const notes = (parseYaml(res.stdout) as { data: { notes: string } }).data.notes;
        expect(notes).to.include('rollout status deploy/rel-custody-api deploy/rel-custody-keyvault deploy/rel-custody-worker');
        expect(notes).to.include('helm test rel -n custody');
        expect(notes).to.include('--token-file /etc/custody/secrets/OPERATOR_TOKEN bootstrap');
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });

  describe('network policies for real installs', () => {
    const policies = (...sets: string[]) => byKind(render(setArgs(...sets)), 'NetworkPolicy');
    const appEgress = (ps: Manifest[]) => ps.find((p) => p.metadata.name.endsWith('-app-egress')).spec.egress as Manifest[];
    const rulesOnPort = (rules: Manifest[], port: number) => rules.filter((r) => (r.ports as Array<{ port: number }>).some((p) => p.port === port));

    it('PostgreSQL: by default its port to any address (the API is ready after the first migration wherever the database is); narrowed by CIDR and port', () => {
      const [db] = rulesOnPort(appEgress(policies()), 5432);
      expect(db.to, 'no peer: any address').to.equal(undefined);
      const migrate = policies().find((p) => p.metadata.name.endsWith('-migrate'));
      expect(migrate.spec.egress).to.deep.equal([{ ports: [{ port: 5432, protocol: 'TCP' }] }]);
      const narrowed = rulesOnPort(appEgress(policies('networkPolicy.database.cidrs={10.30.4.0/24}', 'networkPolicy.database.port=6432')), 6432);
      expect(narrowed).to.deep.equal([{ to: [{ ipBlock: { cidr: '10.30.4.0/24' } }], ports: [{ port: 6432, protocol: 'TCP' }] }]);
    });

    it('Redis: egress only when configured, to its location', () => {
      expect(rulesOnPort(appEgress(policies()), 6379)).to.deep.equal([]);
      const redis = rulesOnPort(appEgress(policies('redis.existingSecret=custody-redis', 'networkPolicy.redis.cidrs={10.30.5.10/32}')), 6379);
      expect(redis).to.deep.equal([{ to: [{ ipBlock: { cidr: '10.30.5.10/32' } }], ports: [{ port: 6379, protocol: 'TCP' }] }]);
    });

    it("Prometheus reaches the API's /metrics when apiFrom narrows who may call the API", () => {
      const api = (ps: Manifest[]) => ps.find((p) => p.metadata.name === 'rel-custody-api').spec.ingress as Manifest[];
      expect(api(policies())).to.deep.equal([{ ports: [{ port: 8080, protocol: 'TCP' }] }]);
      const narrowed = api(
        policies(
          'networkPolicy.apiFrom[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=ingress-nginx',
          'networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=monitoring',
        ),
      );
      expect(narrowed).to.have.length(2);
      expect(narrowed[1].from[0]).to.deep.equal({ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } });
    });
  });

  it("binds Vault's Kubernetes role to the ServiceAccount the chart really creates, for any release name (scripts/vault-setup.sh)", () => {
    for (const release of ['custody', 'rel', 'acme-custody-prod', 'payments', 'a-release-name-long-enough-to-be-cut-at-fifty-chars-x']) {
      const ms = render(valuesArgs(), release);
      const signer = byKind(ms, 'Deployment').find((d) => component(d) === 'keyvault');
      const account = signer.spec.template.spec.serviceAccountName as string;
      expect(byKind(ms, 'ServiceAccount').map((a) => a.metadata.name)).to.include(account);
      const script = spawnSync('bash', [path.join(ROOT, 'scripts/vault-setup.sh'), '--service-account-name'], {
        encoding: 'utf8',
        env: { ...process.env, RELEASE: release },
      });
      expect(script.stdout.trim(), release).to.equal(account);
    }
  });

  it('refuses a misspelt field in what an operator merges in (readOnlyRootFileSystem), with every supported Kubernetes version', () => {
    const dir = toolPath('kube-strict');
    const res = template(setArgs('containerSecurityContext.readOnlyRootFileSystem=true'));
    expect(res.status, res.stderr).to.equal(0);
    const bins = readdirSync(dir).filter((f) => /^kube-strict-1\.\d+$/.test(f));
    expect(bins.sort()).to.deep.equal(['kube-strict-1.31', 'kube-strict-1.33', 'kube-strict-1.36']);
    for (const bin of bins) {
      const checked = spawnSync(path.join(dir, bin), [], { input: res.stdout, encoding: 'utf8' });
      expect(checked.status, bin).to.equal(1);
      expect(checked.stdout, bin).to.include('unknown field').and.include('readOnlyRootFileSystem');
    }
  });

  it('passes kube-score over the default and the production render; every finding left is listed with its reason in helm/README.md', () => {
    const kubeScore = toolPath('kube-score');
    const readme = readFileSync(path.join(ROOT, 'helm/README.md'), 'utf8');
    const listed = new Set([...readme.matchAll(/^\| kube-score `([a-z-]+)` \|/gm)].map((m) => m[1] ?? ''));
    const found = new Set<string>();
    for (const file of [REQUIRED, path.join(ROOT, 'helm/ci/production-vault-kubernetes.yaml')]) {
      const rendered = template(valuesArgs(file));
      expect(rendered.status, rendered.stderr).to.equal(0);
      const res = spawnSync(kubeScore, ['score', '-', '--output-format', 'json'], { input: rendered.stdout, encoding: 'utf8' });
      const report = JSON.parse(res.stdout) as Array<{ object_name: string; checks: Array<{ grade: number; skipped: boolean; check: { id: string } }> }>;
      expect(report.length).to.be.greaterThan(10);
      for (const o of report) for (const c of o.checks) if (!c.skipped && c.grade < 10) found.add(c.check.id);
    }
    expect(
      [...found].filter((id) => !listed.has(id)),
      'findings not fixed and not listed',
    ).to.deep.equal([]);
    expect(
      [...listed].filter((id) => !found.has(id)),
      'listed, but no longer found',
    ).to.deep.equal([]);
  });

  it('documents install and upgrade commands that wait at least as long as the migration Job may run', () => {
    const values = parseYaml(readFileSync(path.join(CHART, 'values.yaml'), 'utf8')) as { migrations: { activeDeadlineSeconds: number; backoffLimit: number } };
    const seconds = (t: string) =>
      [...t.matchAll(/(\d+)([hms])/g)].reduce((sum, [, n, unit]) => sum + Number(n) * (unit === 'h' ? 3600 : unit === 'm' ? 60 : 1), 0);
    const commands = ['helm/README.md', 'docs/operations.md'].flatMap((f) =>
      [...readFileSync(path.join(ROOT, f), 'utf8').matchAll(/^\s*helm (?:upgrade --install|install|upgrade)\b[^\n]*(?:\\\n[^\n]*)*/gm)].map((m) => m[0]),
    );
    expect(commands.length).to.be.greaterThan(1);
    for (const c of commands) {
      expect(c, 'waits for the rollout').to.include('--wait');
      const timeout = /--timeout[ =](\S+)/.exec(c)?.[1];
      expect(timeout, c).to.not.equal(undefined);
      // Helm's --timeout covers each hook; the Job's deadline bounds all its attempts.
      expect(seconds(timeout ?? ''), c).to.be.at.least(values.migrations.activeDeadlineSeconds);
    }
  });

  it("renders the values file of docs/operations.md, and the names and paths its commands use are the chart's", () => {
    const doc = readFileSync(path.join(ROOT, 'docs/operations.md'), 'utf8');
    const yaml = /<!-- tested: values -->\n```yaml\n([\s\S]*?)```/.exec(doc)?.[1] ?? '';
    expect(yaml).to.include('serviceAudience');
    const dir = mkdtempSync(path.join(tmpdir(), 'custody-docs-values-'));
    try {
      const file = path.join(dir, 'custody-values.yaml');
      writeFileSync(file, yaml);
      const ms = render(valuesArgs(file), 'custody');
      const deployments = byKind(ms, 'Deployment');
      // `kubectl rollout status deploy/…`, `exec deploy/custody-api`, `port-forward svc/custody-api 8080:80`
      for (const name of [...doc.matchAll(/deploy\/(custody-[a-z]+)/g)].map((m) => m[1]))
        expect(
          deployments.map((d) => d.metadata.name),
          name,
        ).to.include(name);
      expect(byKind(ms, 'Service').find((x) => x.metadata.name === 'custody-api').spec.ports[0].port).to.equal(80);
      const api = deployments.find((d) => component(d) === 'api').spec.template.spec;
      // The database CA: mounted where the documented DATABASE_URL's sslrootcert points.
      const rootCert = /sslrootcert=([^'&\s]+)/.exec(doc)?.[1] ?? '';
      const mount = api.containers[0].volumeMounts.find((m: { name: string }) => m.name === 'db-ca');
      expect(rootCert.startsWith(`${mount.mountPath}/`), rootCert).to.equal(true);
      expect(api.volumes.find((v: { name: string }) => v.name === 'db-ca').secret.secretName).to.equal(
        /create secret generic (custody-db-ca) --from-file=(ca\.crt)=/.exec(doc)?.[1],
      );
      // The operator token's file, as the bootstrap command reads it.
      const tokenFile = /--token-file (\S+)/.exec(doc)?.[1] ?? '';
      expect(api.containers[0].env).to.deep.include({ name: 'OPERATOR_TOKEN_FILE', value: tokenFile });
      // Vault's CA Secret and the signer's ServiceAccount, as the Vault section names them.
      const signer = deployments.find((d) => component(d) === 'keyvault').spec.template.spec;
      expect(signer.volumes.find((v: { name: string }) => v.name === 'vault-ca').secret.secretName).to.equal('custody-vault-ca');
      expect(doc).to.include('create secret generic custody-vault-ca --from-file=ca.crt=');
      expect(signer.serviceAccountName).to.equal('custody-keyvault');
      expect(doc).to.include(`(\`${signer.serviceAccountName}\` for release \`custody\``);
      // The documented secret names are the chart's defaults.
      expect(doc).to.include('create secret generic custody-secrets');
      expect(api.volumes.find((v: { name: string }) => v.name === 'secrets').projected.sources.map((x: Manifest) => x.secret.name)).to.deep.equal([
        'custody-secrets',
        'custody-secrets',
        'custody-secrets',
        'custody-secrets',
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  describe('transit rewrap and KEYVAULT_TOKEN rotation', () => {
    const base = ['networkPolicy.vault.cidrs[0]=10.40.0.0/16'];
    const envNames = (c: Manifest) => (c.env as Array<{ name: string }>).map((e) => e.name);

    it('off by default; on, a post-install/post-upgrade Job runs `custody vault rewrap` as its own account and Vault role, reaching Vault only', () => {
      expect(byKind(render(setArgs(...base)), 'Job').map(component)).to.deep.equal(['migrate']);
      for (const auth of ['kubernetes', 'approle']) {
        const sets = [...base, 'rewrap.enabled=true', 'rewrap.paceMs=25', `signer.vault.auth=${auth}`];
        if (auth === 'approle') sets.push('signer.vault.approle.existingSecret=signer-approle', 'rewrap.approle.existingSecret=rewrap-approle');
        const ms = render(setArgs(...sets));
        const job = byKind(ms, 'Job').find((j) => component(j) === 'rewrap');
        MODELS['batch/v1/Job']?.(job).validate();
        expect(job.metadata.annotations['helm.sh/hook']).to.equal('post-install,post-upgrade');
        const spec = job.spec.template.spec;
        const c = spec.containers[0];
        expect(c.command).to.deep.equal(['node', 'dist/src/programs/cli/main.js', 'vault', 'rewrap', '--pace-ms', '25']);
        expect(spec.serviceAccountName).to.equal('rel-custody-rewrap');
        expect(byKind(ms, 'ServiceAccount').map((a) => a.metadata.name)).to.include('rel-custody-rewrap');
        expect(spec.automountServiceAccountToken).to.equal(false);
        expect(c.securityContext).to.deep.include({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, runAsNonRoot: true });
        const env = new Map((c.env as Array<{ name: string; value?: string }>).map((e) => [e.name, e.value]));
        expect(env.get('VAULT_KV_PREFIX')).to.equal('custody/rel/keys');
        expect(env.get('VAULT_TRANSIT_KEY')).to.equal('custody-wallets');
        // Nothing of the API's or the signer's bearer secret; its own Vault identity.
        expect(envNames(c).filter((n) => /KEYVAULT|DATABASE|OPERATOR|DATA_ENCRYPTION/.test(n))).to.deep.equal([]);
        if (auth === 'kubernetes') expect(env.get('VAULT_K8S_ROLE')).to.equal('custody-rewrap');
        else
          expect((spec.volumes as Manifest[]).find((v) => v.name === 'secrets').projected.sources.map((x: Manifest) => x.secret.name)).to.deep.equal([
            'rewrap-approle',
            'rewrap-approle',
          ]);
        const policy = byKind(ms, 'NetworkPolicy').find((p) => p.spec.podSelector.matchLabels?.['app.kubernetes.io/component'] === 'rewrap');
        expect(policy.spec.policyTypes).to.deep.equal(['Ingress', 'Egress']);
        expect(policy.spec.ingress ?? []).to.deep.equal([]);
        // Vault only: exactly the signer's egress.
        const signerPolicy = byKind(ms, 'NetworkPolicy').find((p) => p.spec.podSelector.matchLabels?.['app.kubernetes.io/component'] === 'keyvault');
        expect(policy.spec.egress).to.deep.equal(signerPolicy.spec.egress);
        expect(policy.spec.egress[0].to).to.deep.include({ ipBlock: { cidr: '10.40.0.0/16' } });
      }
      const missing = template(setArgs(...base, 'rewrap.enabled=true', 'signer.vault.auth=approle', 'signer.vault.approle.existingSecret=a'));
      expect(missing.status).to.not.equal(0);
      expect(missing.stderr).to.include('rewrap.approle.existingSecret');
    });

    it('keyvaultToken.signerKey and previousKey: the signer takes the new token and also accepts the old; the API and the worker present `key`', () => {
      const ms = render(setArgs(...base, 'keyvaultToken.signerKey=NEXT', 'keyvaultToken.previousKey=KEYVAULT_TOKEN'));
      const items = (d: Manifest) =>
        new Map<string, string>(
          (d.spec.template.spec.volumes as Manifest[])
            .find((v) => v.name === 'secrets')
            .projected.sources.flatMap((x: Manifest) => x.secret.items.map((i: Manifest) => [i.path, i.key])),
        );
      const deployments = new Map(byKind(ms, 'Deployment').map((d) => [component(d), d]));
      const signer = items(deployments.get('keyvault'));
      expect(signer.get('KEYVAULT_TOKEN')).to.equal('NEXT');
      expect(signer.get('KEYVAULT_TOKEN_PREVIOUS')).to.equal('KEYVAULT_TOKEN');
      expect(envNames(deployments.get('keyvault').spec.template.spec.containers[0])).to.include('KEYVAULT_TOKEN_PREVIOUS_FILE');
      for (const name of ['api', 'worker']) {
        expect(items(deployments.get(name)).get('KEYVAULT_TOKEN'), name).to.equal('KEYVAULT_TOKEN');
        expect(items(deployments.get(name)).has('KEYVAULT_TOKEN_PREVIOUS'), name).to.equal(false);
      }
      const plain = render(setArgs(...base));
      const plainSigner = byKind(plain, 'Deployment').find((d) => component(d) === 'keyvault');
      expect(items(plainSigner).get('KEYVAULT_TOKEN')).to.equal('KEYVAULT_TOKEN');
      expect(items(plainSigner).has('KEYVAULT_TOKEN_PREVIOUS')).to.equal(false);
    });
  });

  it('the prepared-statements setting reaches every role that runs the hot statements: the API and the worker', () => {
    const envOf = (ms: Manifest[], name: string) =>
      new Map<string, string>(
        (byKind(ms, 'Deployment').find((d) => component(d) === name)?.spec.template.spec.containers[0].env as Array<{ name: string; value?: string }>).map(
          (e) => [e.name, e.value ?? ''],
        ),
      );
    for (const [set, want] of [
      [[], 'true'],
      [['api.dbPreparedStatements=false'], 'false'],
    ] as const) {
      const ms = render(setArgs(...set));
      for (const name of ['api', 'worker']) expect(envOf(ms, name).get('DB_PREPARED_STATEMENTS'), `${name} ${set.join()}`).to.equal(want);
    }
  });

  describe('TLS between the API and the signer (another pod)', () => {
    const setRender = (...sets: string[]) => render(setArgs(...sets));
    const deployment = (ms: Manifest[], name: string) => byKind(ms, 'Deployment').find((d) => component(d) === name);
    const envOf = (d: Manifest) =>
      new Map<string, string>((d?.spec.template.spec.containers[0].env as Array<{ name: string; value?: string }>).map((e) => [e.name, e.value ?? '']));
    const secretOf = (d: Manifest, volume: string) =>
      (d?.spec.template.spec.volumes as Array<{ name: string; secret?: { secretName: string } }>).find((v) => v.name === volume)?.secret?.secretName;

    it('by default: generated CA, server and client certificates; HTTPS probes; the API and the worker present the client certificate and never see the server key', () => {
      const ms = render();
      const signer = envOf(deployment(ms, 'keyvault'));
      expect(signer.get('KEYVAULT_TLS_CERT_FILE')).to.equal('/etc/custody/signer-tls/tls.crt');
      expect(signer.get('KEYVAULT_TLS_CLIENT_CA_FILE')).to.equal('/etc/custody/signer-tls/ca.crt');
      expect(deployment(ms, 'keyvault')?.spec.template.spec.containers[0].readinessProbe.httpGet.scheme).to.equal('HTTPS');
      for (const name of ['api', 'worker']) {
        const env = envOf(deployment(ms, name));
        expect(env.get('KEYVAULT_URL'), name).to.equal('https://rel-custody-keyvault:8300');
        expect(env.get('KEYVAULT_CLIENT_CERT_FILE'), name).to.equal('/etc/custody/signer-tls/tls.crt');
        expect(secretOf(deployment(ms, name), 'signer-tls'), name).to.equal('rel-custody-keyvault-client-tls');
      }
      const secrets = new Map(byKind(ms, 'Secret').map((m) => [m.metadata.name as string, m.data as Record<string, string>]));
      const pem = (name: string, key: string) => Buffer.from(secrets.get(name)?.[key] ?? '', 'base64').toString('utf8');
      const server = new X509Certificate(pem('rel-custody-keyvault-tls', 'tls.crt'));
      const client = new X509Certificate(pem('rel-custody-keyvault-client-tls', 'tls.crt'));
      const ca = new X509Certificate(pem('rel-custody-keyvault-tls', 'ca.crt'));
      expect(server.checkIssued(ca) && client.checkIssued(ca)).to.equal(true);
      expect(server.subjectAltName).to.include('DNS:rel-custody-keyvault.custody.svc');
      expect(server.checkHost('rel-custody-keyvault')).to.equal('rel-custody-keyvault');
    });

    it('cert-manager: a server and a client Certificate from the given issuer; without mutual, the API mounts only the CA', () => {
      const ms = setRender(
        'signer.tls.source=certManager',
        'signer.tls.certManager.issuerRef.name=custody-ca',
        'signer.tls.certManager.issuerRef.kind=ClusterIssuer',
      );
      const certs = ms.filter((m) => m.kind === 'Certificate');
      expect(certs.map((c) => c.spec.secretName as string).sort()).to.deep.equal(['rel-custody-keyvault-client-tls', 'rel-custody-keyvault-tls']);
      for (const c of certs) expect(c.spec.issuerRef).to.include({ name: 'custody-ca', kind: 'ClusterIssuer' });
      expect(byKind(ms, 'Secret')).to.deep.equal([]);
      const oneWay = setRender('signer.tls.source=existingSecret', 'signer.tls.existingSecret=my-signer-tls', 'signer.tls.mutual=false');
      const api = deployment(oneWay, 'api');
      expect(secretOf(api, 'signer-tls')).to.equal('my-signer-tls');
      expect(
        (api?.spec.template.spec.volumes as Array<{ name: string; secret?: { items?: unknown[] } }>).find((v) => v.name === 'signer-tls')?.secret?.items,
      ).to.deep.equal([{ key: 'ca.crt', path: 'ca.crt' }]);
      expect(envOf(api).has('KEYVAULT_CLIENT_CERT_FILE')).to.equal(false);
      expect(envOf(deployment(oneWay, 'keyvault')).has('KEYVAULT_TLS_CLIENT_CA_FILE')).to.equal(false);
    });
  });

  it('refuses every values file of helm/ci/bad, saying why', () => {
    const expected: Record<string, RegExp> = {
      'unknown-key.yaml': /replicaCount/,
      'wrong-type.yaml': /replicas/,
      'secret-value-inline.yaml': /value/,
      'no-vault-address.yaml': /signer\.vault\.address/,
      'policies-without-vault.yaml': /networkPolicy\.vault/,
      'approle-without-secret.yaml': /approle\.existingSecret/,
      'bad-env.yaml': /appEnv/,
      'no-audience.yaml': /serviceAudience/,
      'no-database-secret.yaml': /database\.existingSecret/,
      'signer-tls-without-secret.yaml': /existingSecret|clientExistingSecret/,
      'no-values.yaml': /set serviceAudience; signer\.vault\.address/,
      'production-image-by-tag.yaml': /appEnv production needs image\.digest/,
    };
    const bad = readdirSync(path.join(ROOT, 'helm/ci/bad')).filter((f) => f.endsWith('.yaml'));
    expect(bad.sort()).to.deep.equal(Object.keys(expected).sort());
    for (const f of bad) {
      const res = template(valuesArgs(path.join(ROOT, 'helm/ci/bad', f)));
      expect(res.status, f).to.not.equal(0);
      expect(res.stderr, f).to.match(expected[f] ?? /^$/);
    }
  });

  it('documents the values in a table generated from values.yaml (npm run values-table), kept in step by this test', () => {
    const readme = readFileSync(README_FILE, 'utf8');
    const generated = withTable(readme, valuesTable(readFileSync(VALUES_FILE, 'utf8')));
    expect(readme === generated, 'helm/README.md: run `npm run values-table`').to.equal(true);
    // Every key of values.yaml that is not inside a documented block has its row.
    const rows = [...readme.matchAll(/^\| `([A-Za-z0-9.]+)` \| (.*?) \|/gm)].map((m) => m[1]);
    expect(rows).to.include.members(['serviceAudience', 'signer.vault.address', 'dataEncryptionKey.decryptionKeysKey']);
  });

  it("passes DATA_DECRYPTION_KEYS to the API and the worker from the data key's Secret only when a key is named", () => {
    const deployment = (ms: Manifest[], c: string) => byKind(ms, 'Deployment').find((d) => component(d) === c);
    const keyNamed = (ms: Manifest[], c: string) =>
      (deployment(ms, c)?.spec.template.spec.volumes as Manifest[])
        .flatMap((v) => (v.projected?.sources ?? []) as Manifest[])
        .flatMap((src) => (src.secret?.items ?? []) as Manifest[])
        .some((i) => i.path === 'DATA_DECRYPTION_KEYS');
    const without = render();
    expect(['api', 'worker'].map((c) => keyNamed(without, c))).to.deep.equal([false, false]);
    const rotating = render(setArgs('dataEncryptionKey.decryptionKeysKey=DATA_DECRYPTION_KEYS'));
    expect(['api', 'worker', 'keyvault'].map((c) => keyNamed(rotating, c))).to.deep.equal([true, true, false]);
    const env = (deployment(rotating, 'api')?.spec.template.spec.containers[0].env ?? []) as Array<{ name: string; value?: string }>;
    expect(env.find((e) => e.name === 'DATA_DECRYPTION_KEYS_FILE')?.value).to.equal('/etc/custody/secrets/DATA_DECRYPTION_KEYS');
  });

  it('documents every value of the schema in helm/README.md', () => {
    const schema = JSON.parse(readFileSync(path.join(CHART, 'values.schema.json'), 'utf8'));
    const paths: string[] = [];
    const walk = (node: Manifest, prefix: string) => {
      for (const [key, child] of Object.entries<Manifest>(node.properties ?? {})) {
        const p = prefix ? `${prefix}.${key}` : key;
        // Resource blocks are documented as a whole.
        if (child.type === 'object' && child.properties && !p.endsWith('resources')) walk(child, p);
        else paths.push(p);
      }
    };
    walk(schema, '');
    const readme = readFileSync(path.join(ROOT, 'helm/README.md'), 'utf8');
    const documented = [...readme.matchAll(/^\| `([A-Za-z0-9.]+)` \|/gm)].map((m) => m[1]);
    expect(
      paths.filter((p) => !documented.includes(p)),
      'in the schema, not in the README',
    ).to.deep.equal([]);
    expect(
      documented.filter((p) => p !== undefined && !paths.includes(p) && !paths.some((q) => q.startsWith(`${p}.`))),
      'in the README, not in the schema',
    ).to.deep.equal([]);
    expect(schema.additionalProperties).to.equal(false);
  });
});
