import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { DOMAINS } from '../../src/domains/index.js';
import { EVENT_CATALOGUE } from '../../src/domains/webhooks/catalogue.js';
import { outboxRegistry, periodicTasks } from '../../src/programs/assembly.js';
import { startApp, type TestApp } from '../support/app.js';
import { SecretBox } from '../../src/platform/crypto/secrets.js';
import { readChains } from '../../src/platform/eth/chains.js';
import { createLogger } from '../../src/platform/logging/logger.js';
import { SignerClient } from '../../src/platform/signer/client.js';

const DOMAINS_DIR = fileURLToPath(new URL('../../../src/domains/', import.meta.url));

describe('domains: one manifest each, one list', () => {
  let app: TestApp;
  before(async () => {
    app = await startApp();
  });
  after(async () => {
    await app.close();
  });
  const work = () => ({
    config: app.config,
    db: app.db,
    signer: new SignerClient('http://127.0.0.1:1', 'none', 1_000, 'none'),
    log: createLogger('silent'),
    now: Date.now,
    secretBox: new SecretBox(app.dataEncryptionKey),
  });

  it('lists every folder of src/domains/ once, by its own name', () => {
    const folders = readdirSync(DOMAINS_DIR, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name);
    expect(DOMAINS.map((d) => d.name).sort()).to.deep.equal([...folders].sort());
  });

  it('catalogues exactly the event types the manifests declare, in the order of the list', () => {
    expect(EVENT_CATALOGUE.map((e) => e.name)).to.deep.equal(DOMAINS.flatMap((d) => (d.events ?? []).map((e) => e.name)));
  });

  it('mounts exactly the endpoints the manifests declare, and the relay runs exactly their job kinds', () => {
    // The factories only declare: any deps will do to read what they declare.
    const anything: unknown = new Proxy(function () {}, { get: () => anything, apply: () => anything, construct: () => anything as object });
    const declared = DOMAINS.flatMap((d) => d.endpoints?.(anything as never) ?? []);
    const fromManifests = declared.filter((d) => !d.plain).map((d) => `${d.route.method} ${d.route.path}`);
    expect(app.endpoints.map((d) => `${d.route.method} ${d.route.path}`)).to.deep.equal(fromManifests);
    // A domain's plain endpoints (the service key's JWKS) are mounted beside the probes and the reference.
    const mounted = app.mounted.map((d) => `${d.route.method} ${d.route.path}`);
    for (const d of declared.filter((x) => x.plain)) expect(mounted).to.include(`${d.route.method} ${d.route.path}`);
    const registry = outboxRegistry(work());
    const kinds = DOMAINS.flatMap((d) => d.jobs?.(work()).kinds ?? []);
    expect(kinds.length).to.be.greaterThan(0);
    for (const k of kinds)
      expect(registry.kindOf({ kind: k.kind, delivery_kind: k.deliveryKind ?? null })?.lane, `${k.kind}:${k.deliveryKind ?? ''}`).to.equal(k.lane);
  });

  it('runs each periodic task in the roles it names, each name once', () => {
    const api = periodicTasks(['api'], work()).map((t) => t.name);
    const worker = periodicTasks(['worker'], work()).map((t) => t.name);
    expect(worker).to.include.members(['membership-expiry', 'signature-prune', 'outbox-prune', 'audit-seal', 'audit-checkpoint', 'db-statistics']);
    expect(api).to.include.members(['idempotency-cleanup']);
    expect(api.filter((n) => worker.includes(n))).to.deep.equal([]);
    const all = [...api, ...worker];
    expect(new Set(all).size).to.equal(all.length);
    // Sending runs in the worker, and only where the operator configured a chain (nothing is asked of it here).
    expect(all.filter((n) => n.startsWith('transactions-'))).to.deep.equal([]);
    const problems: string[] = [];
    const chains = readChains(
      JSON.stringify([{ chainId: 31337, name: 'local', rpcUrls: ['http://127.0.0.1:1'], maxFeePerGas: '2000000000', maxPriorityFeePerGas: '1000000000' }]),
      problems,
    );
    expect(problems).to.deep.equal([]);
    const sending = { ...work(), config: { ...app.config, chains } };
    expect(periodicTasks(['worker'], sending).map((t) => t.name)).to.include.members(['transactions-send', 'transactions-settle']);
    expect(
      periodicTasks(['api'], sending)
        .map((t) => t.name)
        .filter((n) => n.startsWith('transactions-')),
    ).to.deep.equal([]);
  });
});
