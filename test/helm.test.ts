import { execFileSync, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { X509Certificate } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { parseAllDocuments } from 'yaml';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { Job } from 'kubernetes-models/batch/v1/Job';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1/Ingress';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';

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
  'v1/Secret': (m) => new Secret(m),
  'v1/Service': (m) => new Service(m),
  'v1/ServiceAccount': (m) => new ServiceAccount(m),
  'networking.k8s.io/v1/Ingress': (m) => new Ingress(m),
  'networking.k8s.io/v1/NetworkPolicy': (m) => new NetworkPolicy(m),
  'policy/v1/PodDisruptionBudget': (m) => new PodDisruptionBudget(m),
  'autoscaling/v2/HorizontalPodAutoscaler': (m) => new HorizontalPodAutoscaler(m),
  'monitoring.coreos.com/v1/ServiceMonitor': (m) => new ServiceMonitor(m),
};

function helmBinary(): string {
  if (process.env['HELM_BIN']) return process.env['HELM_BIN'];
  return execFileSync('bash', [path.join(ROOT, 'scripts/helm.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
}

describe('Helm chart (helm/custody)', function () {
  this.timeout(600_000);
  let helm: string;

  const template = (valuesFile?: string) =>
    spawnSync(helm, ['template', 'rel', CHART, '--namespace', 'custody', ...(valuesFile ? ['-f', valuesFile] : [])], { encoding: 'utf8' });

  function render(valuesFile?: string): Manifest[] {
    const res = template(valuesFile);
    expect(res.status, res.stderr).to.equal(0);
    return parseAllDocuments(res.stdout)
      .map((d) => d.toJS())
      .filter((m) => m !== null);
  }

  const byKind = (ms: Manifest[], kind: string) => ms.filter((m) => m.kind === kind);
  const component = (m: Manifest) => m.metadata.labels['app.kubernetes.io/component'] as string;
  const podSpecs = (ms: Manifest[]) => [...byKind(ms, 'Deployment'), ...byKind(ms, 'Job')].map((m) => ({ name: component(m), spec: m.spec.template.spec }));

  before(() => {
    helm = helmBinary();
  });

  it('passes helm lint --strict', () => {
    const res = spawnSync(helm, ['lint', '--strict', CHART], { encoding: 'utf8' });
    expect(res.status, res.stdout + res.stderr).to.equal(0);
  });

  const files: Array<[string, string | undefined]> = [
    ['default values', undefined],
    ...readdirSync(path.join(ROOT, 'helm/ci'))
      .filter((f) => f.endsWith('.yaml'))
      .map((f): [string, string] => [f, path.join(ROOT, 'helm/ci', f)]),
  ];

  for (const [name, file] of files) {
    describe(`rendered with ${name}`, () => {
      let ms: Manifest[];
      before(() => {
        ms = render(file);
      });

      it('is valid against the Kubernetes schemas, offline', () => {
        expect(ms.length).to.be.greaterThan(8);
        for (const m of ms) {
          const model = MODELS[`${m.apiVersion}/${m.kind}`];
          expect(model, `no schema check for ${m.apiVersion}/${m.kind}`).to.not.equal(undefined);
          expect(() => model?.(m).validate(), `${m.kind} ${m.metadata.name}`).not.to.throw();
        }
        // The only Secrets the chart makes: the signer's generated TLS (its CA, server and client certificates).
        expect(byKind(ms, 'Secret').map((m) => m.metadata.name as string).sort()).to.deep.equal(['rel-custody-keyvault-client-tls', 'rel-custody-keyvault-tls']);
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
          if (component(d) !== 'keyvault') expect((c.env as Array<{ name: string }>).filter((e) => e.name.startsWith('VAULT_')), component(d)).to.deep.equal([]);
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

      it('meets the restricted Pod Security profile; only the signer mounts a service-account token', () => {
        for (const { name, spec } of podSpecs(ms)) {
          expect(spec.securityContext.runAsNonRoot, name).to.equal(true);
          expect(spec.securityContext.seccompProfile.type, name).to.equal('RuntimeDefault');
          expect(spec.hostNetwork ?? false).to.equal(false);
          expect(spec.hostPID ?? false).to.equal(false);
          for (const v of spec.volumes ?? []) expect(Object.keys(v).filter((k) => k !== 'name'), name).to.satisfy((ks: string[]) => ks.every((k) => ['emptyDir', 'secret'].includes(k)));
          for (const c of spec.containers) {
            const sc = c.securityContext;
            expect(sc.allowPrivilegeEscalation, name).to.equal(false);
            expect(sc.readOnlyRootFilesystem, name).to.equal(true);
            expect(sc.runAsNonRoot, name).to.equal(true);
            expect(sc.capabilities.drop, name).to.deep.equal(['ALL']);
            expect(sc.capabilities.add ?? [], name).to.deep.equal([]);
            expect(sc.privileged ?? false, name).to.equal(false);
            // Secrets only from Secrets.
            for (const e of c.env as Array<{ name: string; value?: string; valueFrom?: { secretKeyRef?: unknown } }>) {
              if (SECRET_ENV.includes(e.name)) {
                expect(e.value, `${name} ${e.name}`).to.equal(undefined);
                expect(e.valueFrom?.secretKeyRef, `${name} ${e.name}`).to.not.equal(undefined);
              }
            }
          }
          const mountsToken = spec.automountServiceAccountToken;
          if (name === 'keyvault') {
            const auth = (spec.containers[0].env as Array<{ name: string }>).some((e) => e.name === 'VAULT_K8S_ROLE');
            expect(mountsToken).to.equal(auth);
          } else {
            expect(mountsToken, name).to.equal(false);
          }
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
        expect(signer.spec.ingress[0].from[0].podSelector.matchExpressions[0].values).to.deep.equal(['api', 'worker']);
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
        it('adds the HPA and the ServiceMonitor', () => {
          expect(byKind(ms, 'HorizontalPodAutoscaler')).to.have.length(1);
          const api = byKind(ms, 'Deployment').find((d) => component(d) === 'api');
          expect(api.spec.replicas).to.equal(undefined);
          const [monitor] = byKind(ms, 'ServiceMonitor');
          expect(monitor.metadata.labels.release).to.equal('kube-prometheus-stack');
          expect(monitor.spec.endpoints[0].path).to.equal('/metrics');
        });
        it('routes only /api/ through the Ingress without ingress.reference', () => {
          const [ingress] = byKind(ms, 'Ingress');
          expect(ingress.spec.rules[0].http.paths.map((p: { path: string }) => p.path)).to.deep.equal(['/api/']);
        });
      }
      if (name === 'production-vault-kubernetes.yaml') {
        it('routes /api/ and (ingress.reference) the API reference through the Ingress, with TLS; never /metrics or the probes', () => {
          const [ingress] = byKind(ms, 'Ingress');
          expect(ingress.spec.tls[0].secretName).to.equal('custody-example-com-tls');
          expect(ingress.spec.rules[0].http.paths.map((p: { path: string; pathType: string }) => `${p.pathType} ${p.path}`)).to.deep.equal([
            'Prefix /api/',
            'Prefix /docs',
            'Exact /openapi.json',
          ]);
        });
      }
    });
  }

  describe('TLS between the API and the signer (another pod)', () => {
    const setRender = (...sets: string[]) => {
      const res = spawnSync(helm, ['template', 'rel', CHART, '--namespace', 'custody', ...sets.flatMap((v) => ['--set', v])], { encoding: 'utf8' });
      expect(res.status, res.stderr).to.equal(0);
      return parseAllDocuments(res.stdout)
        .map((d): Manifest => d.toJS())
        .filter((m) => m !== null);
    };
    const deployment = (ms: Manifest[], name: string) => byKind(ms, 'Deployment').find((d) => component(d) === name);
    const envOf = (d: Manifest) => new Map<string, string>((d?.spec.template.spec.containers[0].env as Array<{ name: string; value?: string }>).map((e) => [e.name, e.value ?? '']));
    const secretOf = (d: Manifest, volume: string) => (d?.spec.template.spec.volumes as Array<{ name: string; secret?: { secretName: string } }>).find((v) => v.name === volume)?.secret?.secretName;

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
      const ms = setRender('signer.tls.source=certManager', 'signer.tls.certManager.issuerRef.name=custody-ca', 'signer.tls.certManager.issuerRef.kind=ClusterIssuer');
      const certs = ms.filter((m) => m.kind === 'Certificate');
      expect(certs.map((c) => c.spec.secretName as string).sort()).to.deep.equal(['rel-custody-keyvault-client-tls', 'rel-custody-keyvault-tls']);
      for (const c of certs) expect(c.spec.issuerRef).to.include({ name: 'custody-ca', kind: 'ClusterIssuer' });
      expect(byKind(ms, 'Secret')).to.deep.equal([]);
      const oneWay = setRender('signer.tls.source=existingSecret', 'signer.tls.existingSecret=my-signer-tls', 'signer.tls.mutual=false');
      const api = deployment(oneWay, 'api');
      expect(secretOf(api, 'signer-tls')).to.equal('my-signer-tls');
      expect((api?.spec.template.spec.volumes as Array<{ name: string; secret?: { items?: unknown[] } }>).find((v) => v.name === 'signer-tls')?.secret?.items).to.deep.equal([{ key: 'ca.crt', path: 'ca.crt' }]);
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
    };
    const bad = readdirSync(path.join(ROOT, 'helm/ci/bad')).filter((f) => f.endsWith('.yaml'));
    expect(bad.sort()).to.deep.equal(Object.keys(expected).sort());
    for (const f of bad) {
      const res = template(path.join(ROOT, 'helm/ci/bad', f));
      expect(res.status, f).to.not.equal(0);
      expect(res.stderr, f).to.match(expected[f] ?? /^$/);
    }
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
    expect(paths.filter((p) => !documented.includes(p)), 'in the schema, not in the README').to.deep.equal([]);
    expect(documented.filter((p) => p !== undefined && !paths.includes(p) && !paths.some((q) => q.startsWith(`${p}.`))), 'in the README, not in the schema').to.deep.equal([]);
    expect(schema.additionalProperties).to.equal(false);
  });
});
