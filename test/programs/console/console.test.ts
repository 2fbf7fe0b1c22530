import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import axe from 'axe-core';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { startApp, type TestApp } from '../../support/app.js';
import { startAnvil, type Anvil } from '../../support/anvil.js';
import { chainConfig } from '../../support/chain.js';
import { TestIdp } from '../../support/idp.js';
import { Receiver } from '../../support/receiver.js';
import { toolPath } from '../../support/tools.js';
import { writeTenant, type Tenant } from '../../support/write-fixtures.js';
import { createToken } from '../../support/factories.js';
import { sealAuditLog } from '../../../src/domains/audit/seal.js';

/** Where the suite writes a screenshot of each page (1280×800); `CONSOLE_SCREENSHOTS=docs/console` refreshes the README's. */
const SHOTS = process.env['CONSOLE_SCREENSHOTS'] ?? path.join('dist', 'console-screenshots');
const AUDIENCE = 'urn:custody:testnet';
/** The labels of controls that change something: a read token's console shows none of them. */
const WRITE_CONTROL =
  /^(Create|Save|Delete|Undelete|Rename|Revoke|Rotate|Retry|Issue|Transfer|Test ping|Speed up|Cancel|Subscribe)|(organisation|project|token|subscription|membership|version)$/;

interface Watch {
  errors: string[];
  foreign: string[];
}

describe('operator console in a real browser (Chromium, Playwright)', function () {
  this.timeout(600_000);
  let app: TestApp;
  let idp: TestIdp;
  let receiver: Receiver;
  let anvil: Anvil;
  let dir: string;
  let browser: Browser;
  let t: Tenant;
  const contexts: BrowserContext[] = [];
  const watches = new Map<Page, Watch>();

  before(async () => {
    idp = await TestIdp.start();
    receiver = await Receiver.start();
    receiver.status = 500;
    dir = mkdtempSync(path.join(tmpdir(), 'custody-console-'));
    writeFileSync(path.join(dir, 'ca.pem'), idp.caPem);
    // A chain that does not mine: sends stay submitted, so the console can speed them up and cancel them; never
    // stuck for the worker, so every replacement is the console's.
    anvil = await startAnvil({ args: ['--no-mining'] });
    // The relay runs (a retry is an attempt), each delivery tried once: the receiver fails them all.
    app = await startApp(
      {
        OIDC_CA_FILE: path.join(dir, 'ca.pem'),
        CHAINS: JSON.stringify([chainConfig(anvil, { stuckAfterMs: 600_000 })]),
        RELAY_POLL_MS: '100',
        WEBHOOK_RETRY_SCHEDULE: '0',
      },
      undefined,
      { relay: true },
    );
    t = await writeTenant(app, idp, receiver, anvil);
    mkdirSync(SHOTS, { recursive: true });
    // First use installs Debian's Chromium (scripts/chromium.sh); later runs find it.
    browser = await chromium.launch({ executablePath: toolPath('chromium'), args: ['--no-sandbox'] });
  });
  after(async () => {
    for (const c of contexts) await c.close();
    await browser?.close();
    await app?.close();
    await anvil?.stop();
    await receiver?.close();
    await idp?.close();
    rmSync(dir, { recursive: true, force: true });
  });
  afterEach(() => {
    // No page of the console logged an error or asked anything of another origin.
    for (const [, w] of watches) {
      expect(w.errors, 'console errors').to.deep.equal([]);
      expect(w.foreign, 'requests to other origins').to.deep.equal([]);
    }
  });

  /** A signed-in page for `token`, in a browser context of its own (its own cookie jar). */
  async function signedIn(token: string): Promise<Page> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    contexts.push(context);
    const page = await context.newPage();
    const watch: Watch = { errors: [], foreign: [] };
    watches.set(page, watch);
    page.on('pageerror', (e) => watch.errors.push(e.message));
    page.on('console', (m) => {
      // A refused call the test makes on purpose is logged by Chromium as a failed resource load.
      if (m.type() === 'error' && !/status of (401|403|404|409|400)/.test(m.text())) watch.errors.push(m.text());
    });
    page.on('request', (r) => {
      if (!r.url().startsWith(app.url) && !r.url().startsWith('data:')) watch.foreign.push(r.url());
    });
    page.on('dialog', (d) => void d.accept());
    await page.goto(`${app.url}/console`);
    await page.getByLabel('API token').fill(token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('button', { name: 'Sign out' }).waitFor();
    return page;
  }

  async function open(page: Page, hash: string, title: string): Promise<void> {
    await page.goto(`${app.url}/console#/${hash}`);
    await page.getByRole('heading', { level: 1, name: title }).waitFor();
  }

  /** axe-core on the page as it is: no serious or critical violation. Evaluated through the debugger, which the page's CSP does not govern. */
  async function accessible(page: Page, name: string): Promise<void> {
    await page.evaluate(axe.source);
    const violations = await page.evaluate<Array<{ id: string; impact: string; nodes: string[] }>>(
      `axe.run(document, { resultTypes: ['violations'] }).then((r) => r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(' ')) })))`,
    );
    expect(
      violations.filter((v) => v.impact === 'serious' || v.impact === 'critical'),
      `${name}: axe`,
    ).to.deep.equal([]);
    await page.screenshot({ path: path.join(SHOTS, `${name}.png`) });
  }

  async function auditActions(organisationId: number, since: number): Promise<string[]> {
    const rows = await app
      .db('audit_log')
      .where({ organisation_id: organisationId })
      .where('id', '>', since)
      .orderBy('id')
      .select<Array<{ action: string }>>('action');
    return rows.map((r) => r.action);
  }
  /** Polls `check` (the page re-renders after a click) until it holds, or fails saying `what`. */
  async function until(page: Page, check: () => Promise<boolean>, what: string): Promise<void> {
    for (let i = 0; i < 150; i++) {
      if (await check()) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`the console never showed ${what}; it shows: ${(await page.locator('main').innerText()).slice(0, 2000)}`);
  }
  const lastAuditId = async (): Promise<number> => Number((await app.db('audit_log').max<{ max: number | null }>('id as max').first())?.max ?? 0);

  it('signs in with a token (never kept by the browser), survives a reload, and ends on sign-out', async () => {
    const page = await signedIn(app.operatorToken);
    await accessible(page, 'organisations');
    const storage = await page.evaluate<string>('JSON.stringify([Object.entries(localStorage), Object.entries(sessionStorage), document.cookie])');
    expect(storage).not.to.include(app.operatorToken.slice(8));
    expect(JSON.parse(storage)).to.deep.equal([[], [], '']);
    await page.reload();
    await page.getByRole('button', { name: 'Sign out' }).waitFor();
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('API token').waitFor();
    await accessible(page, 'sign-in');
    await page.reload();
    await page.getByLabel('API token').waitFor();
    // A wrong token is said so, on the sign-in page.
    await page.getByLabel('API token').fill('sk_test_not_a_token');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: '401' }).waitFor();
  });

  it('organisations: create, see it listed, rename, delete, show deleted, undelete, and the audit rows', async () => {
    const page = await signedIn(app.operatorToken);
    const name = `Console org ${Date.now()}`;
    await page.getByLabel('Name', { exact: true }).fill(name);
    await page.getByRole('button', { name: 'Create organisation' }).click();
    await until(page, async () => (await page.getByLabel('Name', { exact: true }).inputValue()) === '', 'the create form emptied after the create');
    // The list pages oldest first over every organisation of the deployment: found by its name.
    await page.getByLabel('Name contains').fill(name);
    await page.getByRole('button', { name: 'Find' }).click();
    const row = page.getByRole('row', { name: new RegExp(name) });
    await row.waitFor();
    const id = Number(await row.getByRole('cell').first().textContent());
    const since = await lastAuditId();
    await row.getByRole('button', { name: 'Rename' }).click();
    await page.getByLabel(`New name of ${id}`).fill(`${name} renamed`);
    await page.getByRole('button', { name: 'Rename', exact: true }).last().click();
    await page.getByRole('row', { name: new RegExp(`${name} renamed`) }).waitFor();
    await page
      .getByRole('row', { name: new RegExp(`${name} renamed`) })
      .getByRole('button', { name: 'Delete', exact: true })
      .click();
    await page.getByRole('row', { name: new RegExp(`${name} renamed`) }).waitFor({ state: 'detached' });
    await page.getByLabel('Show deleted').check();
    const deleted = page.getByRole('row', { name: new RegExp(`${name} renamed`) });
    await deleted.getByRole('button', { name: 'Undelete' }).click();
    await page
      .getByRole('row', { name: new RegExp(`${name} renamed`) })
      .getByRole('button', { name: 'Delete', exact: true })
      .waitFor();
    expect(await auditActions(id, since)).to.deep.equal([
      'PUT /api/v1/organisations/:id',
      'DELETE /api/v1/organisations/:id',
      'POST /api/v1/organisations/:id/undelete',
    ]);
    await accessible(page, 'organisations-deleted');
  });

  it('projects: create (key shown once), edit, rotate the key and the wallet webhook secret, check the issuer with a pasted JWT', async () => {
    const page = await signedIn(app.operatorToken);
    await open(page, `projects?organisation=${t.orgId}`, 'Projects');
    const since = await lastAuditId();
    const issuer = await idp.issuer();
    await page.getByText('Create a project').click();
    const name = `Console project ${Date.now()}`;
    await page.getByLabel('Project name').fill(name);
    await page.getByLabel('Issuer (OIDC)').fill(issuer.issuer);
    await page.getByRole('button', { name: 'Create project' }).click();
    const dialog = page.getByRole('dialog');
    expect(await dialog.getByLabel('The secret').textContent()).to.match(/^pk_test_/);
    await accessible(page, 'projects-key-shown-once');
    await dialog.getByRole('button', { name: 'I have stored it' }).click();
    await page.getByRole('link', { name }).click();
    await page.getByRole('heading', { level: 2, name: new RegExp(name) }).waitFor();
    await page.getByLabel('Project name').last().fill(`${name} edited`);
    await page.getByRole('button', { name: 'Save project' }).click();
    await page.getByRole('heading', { level: 2, name: new RegExp(`${name} edited`) }).waitFor();
    await page.getByRole('button', { name: 'Rotate the project key' }).click();
    expect(await page.getByRole('dialog').getByLabel('The secret').textContent()).to.match(/^pk_test_/);
    await page.getByRole('button', { name: 'I have stored it' }).click();
    await page.getByRole('button', { name: 'Rotate the wallet webhook secret' }).click();
    expect(await page.getByRole('dialog').getByLabel('The secret').textContent()).to.match(/^whsec_/);
    await page.getByRole('button', { name: 'I have stored it' }).click();
    // The issuer check: each check's outcome, from a JWT of the project's issuer.
    await page.getByLabel("A user's JWT (pasted)").fill(await issuer.sign({ email: 'check@example.com' }, { audience: AUDIENCE }));
    await page.getByRole('button', { name: 'Check', exact: true }).click();
    const checks = page.getByRole('table', { name: 'Every check passed' });
    await checks.waitFor();
    expect(await checks.getByRole('row').count()).to.be.greaterThan(3);
    await accessible(page, 'projects');
    const project = await app
      .db('projects')
      .where({ name: `${name} edited` })
      .first<{ id: number }>('id');
    expect(await auditActions(t.orgId, since)).to.include.members([
      'POST /api/v1/organisations/:id/projects',
      'PUT /api/v1/project/:projectId',
      'POST /api/v1/project/:projectId/keys',
      'POST /api/v1/project/:projectId/walletWebhook/secret',
    ]);
    expect(project).to.not.equal(undefined);
  });

  it('tokens: create (shown once), see it listed, revoke it, and its console session ends', async () => {
    const page = await signedIn(app.operatorToken);
    await open(page, `tokens?organisation=${t.orgId}`, 'API tokens');
    const name = `console-${Date.now()}`;
    await page.getByLabel('Token name').fill(name);
    await page.getByLabel('Role').selectOption('read');
    await page.getByRole('button', { name: 'Create token' }).click();
    const secret = (await page.getByRole('dialog').getByLabel('The secret').textContent()) ?? '';
    expect(secret).to.match(/^sk_test_/);
    await page.getByRole('button', { name: 'I have stored it' }).click();
    // The new token signs in elsewhere; revoking it ends that session at its next request.
    const other = await signedIn(secret);
    const row = page.getByRole('row', { name: new RegExp(name) });
    await row.waitFor();
    await accessible(page, 'tokens');
    const since = await lastAuditId();
    await row.getByRole('button', { name: 'Revoke' }).click();
    await row.waitFor({ state: 'detached' });
    expect(await auditActions(t.orgId, since)).to.deep.equal(['DELETE /api/v1/organisations/:id/tokens/:tokenId']);
    await other.reload();
    await other.getByLabel('API token').waitFor();
  });

  it('webhooks: subscribe (secret shown once), test ping, rotate the secret; failed deliveries with payload and response, retry one and all', async () => {
    const page = await signedIn(app.operatorToken);
    await open(page, `webhooks?organisation=${t.orgId}&project=${t.projectId}`, 'Webhooks');
    const since = await lastAuditId();
    await page.getByText('Subscribe a webhook').click();
    await page.getByLabel('Endpoint URL').fill(`${receiver.url}/console`);
    await page.getByLabel('membership.issued').check();
    await page.getByRole('button', { name: 'Create subscription' }).click();
    expect(await page.getByRole('dialog').getByLabel('The secret').textContent()).to.match(/^whsec_/);
    await page.getByRole('button', { name: 'I have stored it' }).click();
    const row = page.getByRole('row', { name: new RegExp(`${receiver.url}/console`) });
    await row.getByRole('button', { name: 'Test ping' }).click();
    await page.getByRole('status').filter({ hasText: 'Test ping queued' }).waitFor();
    await row.getByRole('button', { name: 'Rotate secret' }).click();
    expect(await page.getByRole('dialog').getByLabel('The secret').textContent()).to.match(/^whsec_/);
    await page.getByRole('button', { name: 'I have stored it' }).click();
    // The failed delivery of the tenant: its payload and the receiver's answer.
    const failed = page.getByRole('table', { name: 'Failed deliveries' });
    await failed
      .getByRole('row', { name: new RegExp(`^${t.deliveryId} `) })
      .getByRole('button', { name: 'Show payload' })
      .click();
    await failed.getByText('"type": "webhook.test"').first().waitFor();
    await accessible(page, 'webhooks');
    // Retry one: the receiver still fails, so it stays failed with one more attempt.
    await failed
      .getByRole('row', { name: new RegExp(`^${t.deliveryId} `) })
      .getByRole('button', { name: 'Retry' })
      .click();
    await expectAttempts(t.deliveryId, 2);
    await page.getByRole('button', { name: 'Retry all' }).click();
    await page
      .getByRole('status')
      .filter({ hasText: /Retried: [1-9][0-9]* queued/ })
      .waitFor();
    expect(await auditActions(t.orgId, since)).to.include.members([
      'POST /api/v1/project/:projectId/webhooks',
      'POST /api/v1/project/:projectId/webhooks/:webhookId/test',
      'POST /api/v1/project/:projectId/webhooks/:webhookId/secret',
      'POST /api/v1/project/:projectId/webhooks/failedDeliveries/:deliveryId/retry',
    ]);
  });

  async function expectAttempts(deliveryId: number, atLeast: number): Promise<void> {
    for (let i = 0; i < 100; i++) {
      const row = await app.db('outbox').where({ id: deliveryId }).first<{ attempts: number; status: string }>('attempts', 'status');
      if (row && row.attempts >= atLeast && row.status === 'failed') return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`delivery ${deliveryId} did not fail again after a retry`);
  }

  it('wallets: look up by e-mail and by address, and the wallet’s memberships', async () => {
    const page = await signedIn(app.operatorToken);
    await open(page, `wallets?organisation=${t.orgId}&project=${t.projectId}`, 'Wallets');
    await page.getByLabel('E-mail or address').fill('ada@example.com');
    await page.getByRole('button', { name: 'Find' }).click();
    const row = page.getByRole('table', { name: 'Wallets' }).getByRole('row', { name: /ada@example\.com/ });
    await row.waitFor();
    expect(await page.getByRole('table', { name: 'Wallets' }).getByRole('row').count()).to.equal(2);
    // The empty state: nobody has this e-mail.
    await page.getByLabel('E-mail or address').fill('nobody@example.com');
    await page.getByRole('button', { name: 'Find' }).click();
    await page.getByText('No wallet matches.').waitFor();
    await page.getByLabel('E-mail or address').fill(t.walletAddress.toLowerCase());
    await page.getByRole('button', { name: 'Find' }).click();
    await row.getByRole('button', { name: 'Show memberships' }).click();
    await page
      .getByRole('table', { name: 'Memberships' })
      .getByRole('row', { name: /held:m0/ })
      .waitFor();
    await accessible(page, 'wallets');
  });

  it('memberships: filter, issue, see it listed, transfer and revoke, with the audit rows', async () => {
    const page = await signedIn(app.operatorToken);
    await open(page, `memberships?organisation=${t.orgId}&project=${t.projectId}`, 'Memberships');
    const since = await lastAuditId();
    const type = `console:${Date.now()}`;
    await page.getByText('Issue a membership').click();
    await page.getByLabel('Membership type').first().fill(type);
    await page.getByLabel('Wallet address').first().fill(t.walletAddress);
    await page.getByRole('button', { name: 'Issue membership' }).click();
    await page.getByRole('form', { name: 'Issue a membership' }).getByRole('button', { name: 'Issue membership' }).isEnabled();
    await page.getByRole('form', { name: 'Filter memberships' }).getByLabel('Membership type').fill(type);
    await page.getByRole('button', { name: 'Filter' }).click();
    const row = page.getByRole('table', { name: 'Memberships' }).getByRole('row', { name: new RegExp(type) });
    await row.waitFor();
    await row.getByRole('button', { name: 'Transfer' }).click();
    await page.getByLabel(/^New holder of/).fill('0x000000000000000000000000000000000000dEaD');
    await page.getByRole('button', { name: 'Transfer', exact: true }).last().click();
    const moved = page.getByRole('table', { name: 'Memberships' }).getByRole('row', { name: /0x000000000000000000000000000000000000dEaD/i });
    await moved.waitFor();
    await moved.getByRole('button', { name: 'Revoke' }).click();
    await moved.waitFor({ state: 'detached' });
    await accessible(page, 'memberships');
    expect(await auditActions(t.orgId, since)).to.deep.equal([
      'POST /api/v1/membership/issue',
      'POST /api/v1/membership/transfer',
      'POST /api/v1/membership/revoke',
    ]);
  });

  it('audit log: filters by actor, action, target and time, and the chain’s verification status', async () => {
    await sealAuditLog(app.db);
    const page = await signedIn(app.operatorToken);
    await open(page, `audit?organisation=${t.orgId}`, 'Audit log');
    await page.getByText(/^verified: [1-9][0-9]* newest rows/).waitFor();
    await page.getByLabel('Action begins with').fill('POST /api/v1/membership/issue');
    await page.getByLabel('Actor').fill('operator');
    await page.getByRole('button', { name: 'Filter' }).click();
    await new Promise((r) => setTimeout(r, 300));
    const table = page.getByRole('table', { name: 'Audit log' });
    const cells = (n: number) => table.locator(`tbody tr td:nth-child(${n})`).allTextContents();
    await until(
      page,
      async () => {
        const actions = await cells(4);
        return actions.length > 0 && actions.every((a) => a === 'POST /api/v1/membership/issue');
      },
      'only the filtered action',
    );
    expect(new Set(await cells(3))).to.deep.equal(new Set(['operator']));
    await page.getByLabel('From', { exact: true }).fill('2001-01-01T00:00');
    await page.getByLabel('To', { exact: true }).fill('2001-01-02T00:00');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.getByText('No entries match.').waitFor();
    await accessible(page, 'audit');
  });

  it('signing policy: versions side by side, edit with validation, a dry run, owners', async () => {
    const page = await signedIn(app.operatorToken);
    await open(page, `policy?organisation=${t.orgId}&project=${t.projectId}`, 'Signing policy');
    await page.getByText('No owners: the project').waitFor();
    const editor = page.getByLabel('Policy (JSON)');
    await editor.waitFor();
    const since = await lastAuditId();
    // Not JSON: said before anything is sent. A policy the signer refuses: its problem, field by field.
    await editor.fill('{ "rules": [');
    await page.getByRole('button', { name: 'Save new version' }).click();
    await page.getByRole('alert').filter({ hasText: 'The policy is not JSON' }).waitFor();
    await editor.fill(JSON.stringify({ rules: [{ name: 'bad', action: 'allow', method: 'no_such_method' }] }));
    await page.getByRole('button', { name: 'Save new version' }).click();
    await page.getByRole('alert').filter({ hasText: '400' }).waitFor();
    const policy = {
      rules: [
        { name: 'hello only', action: 'allow', method: 'personal_sign', conditions: [{ field: 'message', op: 'eq', value: 'hello' }] },
        { name: 'sends', action: 'allow', method: 'eth_sendTransaction' },
      ],
    };
    await editor.fill(JSON.stringify(policy, null, 2));
    await page.getByRole('button', { name: 'Save new version' }).click();
    await page.getByText(/^Version 2 by operator/).waitFor();
    await page.getByRole('button', { name: 'Evaluate' }).click();
    await page.getByRole('status').filter({ hasText: 'Allowed by rule “hello only”' }).waitFor();
    const side = page.getByRole('region', { name: 'Compare versions' });
    await side.getByText('"hello only"').first().waitFor();
    await side.getByText('"orders"').first().waitFor();
    await accessible(page, 'policy');
    expect(await auditActions(t.orgId, since)).to.deep.equal(['PUT /api/v1/project/:projectId/policy']);
  });

  it('transactions: by wallet and status, each with its states, hashes, fees and events; speed up and cancel with a signer token', async () => {
    const sent = await t.signer.post(`/api/v1/project/${t.projectId}/wallets/${t.walletId}/transactions`, {
      chainId: t.chainId,
      to: '0x000000000000000000000000000000000000dEaD',
      value: '1',
    });
    expect(sent.status, sent.text).to.equal(202);
    const signerToken = t.signer.token ?? '';
    const page = await signedIn(signerToken);
    await open(page, 'transactions', 'Transactions');
    await page.getByLabel('Wallet id').fill(String(t.walletId));
    await page.getByLabel('Status').selectOption('submitted');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.getByRole('button', { name: `Open ${sent.body.id}` }).click();
    const detail = page.getByRole('region', { name: `Transaction ${sent.body.id}` });
    await detail.getByText('wallet.transaction.submitted').waitFor();
    expect(await detail.getByRole('table', { name: 'Signed attempts' }).getByRole('row').count()).to.equal(2);
    const since = await lastAuditId();
    await detail.getByRole('button', { name: 'Speed up' }).click();
    await detail
      .getByRole('table', { name: 'Signed attempts' })
      .getByRole('row', { name: /speedUp/ })
      .waitFor();
    await accessible(page, 'transactions');
    await detail.getByRole('button', { name: 'Cancel' }).click();
    await detail
      .getByRole('table', { name: 'Signed attempts' })
      .getByRole('row', { name: /cancel/ })
      .waitFor();
    // Each button's replacement at the nonce (the worker never finds this send stuck), each signed under the policy.
    const actions = await auditActions(t.orgId, since);
    expect(actions.filter((a) => a === 'wallet.transaction.repriced').length).to.equal(2);
    expect(actions.filter((a) => a === 'wallet.signature.created').length).to.be.at.least(2);
  });

  it('a read token sees no write control on any page, and a forced write is refused', async () => {
    const read = await createToken(app.client, t.orgId, 'read');
    const page = await signedIn(read.token);
    const pages: Array<[string, string]> = [
      ['organisations', 'Organisations'],
      [`projects?project=${t.projectId}`, 'Projects'],
      ['tokens', 'API tokens'],
      [`webhooks?project=${t.projectId}`, 'Webhooks'],
      [`wallets?project=${t.projectId}`, 'Wallets'],
      [`memberships?project=${t.projectId}`, 'Memberships'],
      [`policy?project=${t.projectId}`, 'Signing policy'],
      [`transactions?project=${t.projectId}`, 'Transactions'],
    ];
    // The audit log is for admins: a read token's console does not offer it.
    expect(await page.getByRole('navigation').getByRole('link').allTextContents()).not.to.include('Audit log');
    for (const [hash, title] of pages) {
      await open(page, hash, title);
      await page
        .getByRole('status')
        .filter({ hasText: /^Loading/ })
        .first()
        .waitFor({ state: 'detached' });
      const buttons = await page.getByRole('button').allTextContents();
      expect(
        buttons.filter((b) => WRITE_CONTROL.test(b.trim())),
        title,
      ).to.deep.equal([]);
    }
    await open(page, `webhooks?project=${t.projectId}`, 'Webhooks');
    await accessible(page, 'read-token-webhooks');
    // Forced: the console's own CSRF token, a write the token may not make.
    const status = await page.evaluate(
      `fetch('/console/session').then((r) => r.json()).then((s) => fetch('/api/v1/organisations/${t.orgId}/tokens', { method: 'POST', headers: { 'content-type': 'application/json', 'x-csrf-token': s.csrfToken }, body: JSON.stringify({ name: 'forced', role: 'admin' }) })).then((r) => r.status)`,
    );
    expect(status).to.equal(403);
  });

  it('shows a list’s error state: the service’s problem, said on the page', async () => {
    const page = await signedIn(app.operatorToken);
    await open(page, `webhooks?organisation=${t.orgId}&project=999999999`, 'Webhooks');
    const alert = page.getByRole('region', { name: 'Webhook subscriptions' }).getByRole('alert');
    await alert.waitFor();
    expect(await alert.textContent()).to.match(/^404 Not Found/);
    await accessible(page, 'list-error');
  });

  it('refuses a write without the CSRF token, from the console’s own page', async () => {
    const page = await signedIn(app.operatorToken);
    const before = await app.db('organisations').count<Array<{ count: string }>>('* as count');
    const status = await page.evaluate(
      `fetch('/api/v1/organisations', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'no csrf' }) }).then((r) => r.status)`,
    );
    expect(status).to.equal(403);
    expect(await app.db('organisations').count<Array<{ count: string }>>('* as count')).to.deep.equal(before);
  });

  it('pages 10,000 failed deliveries a page at a time, never loading them all', async () => {
    await app.db.batchInsert(
      'outbox',
      Array.from({ length: 10_000 }, (_, i) => ({
        project_id: t.projectId,
        kind: 'delivery',
        delivery_kind: 'wallet',
        url: 'https://hooks.example.com/many',
        payload: JSON.stringify({ n: i }),
        message_id: `msg_console_many_${i}_${Math.random().toString(36).slice(2)}`,
        status: 'failed',
        attempts: 10,
        last_error: 'HTTP 500',
      })),
      1_000,
    );
    const page = await signedIn(app.operatorToken);
    const answers: number[] = [];
    page.on('response', (r) => {
      if (r.url().includes('/failedDeliveries?'))
        void r.json().then(
          (b: { failedDeliveries: unknown[] }) => answers.push(b.failedDeliveries.length),
          () => undefined,
        );
    });
    await open(page, `webhooks?organisation=${t.orgId}&project=${t.projectId}`, 'Webhooks');
    const table = page.getByRole('table', { name: 'Failed deliveries' });
    await table.waitFor();
    expect(await table.locator('tbody tr').count()).to.equal(25);
    const pager = page.getByRole('region', { name: 'Failed deliveries' }).locator('.pager');
    await pager.getByRole('button', { name: 'Next page' }).click();
    await pager.getByText('Page 2').waitFor();
    expect(await table.locator('tbody tr').count()).to.equal(25);
    expect(answers.every((n) => n <= 25)).to.equal(true);
    expect(answers.reduce((a, b) => a + b, 0)).to.be.lessThan(100);
  });
});
