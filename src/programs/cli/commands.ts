import { readFileSync } from 'node:fs';
import type { CliEnv } from './config.js';
import type { CustodyClient } from '../client/index.js';
import { createDb } from '../../platform/db/knex.js';
import { pendingMigrations, runNextMigration } from '../../platform/db/migrate.js';
import type { Output } from './output.js';
import { isSigningMethod, SIGNING_METHODS } from '../../../contract/index.js';

/** A mistake in how the CLI was called: exit 2 with the usage line. */
export class UsageError extends Error {}

export type Flags = Record<string, string | boolean | undefined>;
export interface Invocation {
  args: string[];
  flags: Flags;
  out: Output;
  client: () => CustodyClient;
  env: CliEnv;
}

const str = (flags: Flags, name: string): string | undefined => (typeof flags[name] === 'string' ? flags[name] : undefined);
function need(flags: Flags, name: string): string {
  const v = str(flags, name);
  if (v === undefined || v === '') throw new UsageError(`--${name} is required`);
  return v;
}
function id(value: string | undefined, what: string): number {
  if (value === undefined || !/^[1-9][0-9]{0,14}$/.test(value)) throw new UsageError(`${what} must be a positive integer (got ${value ?? 'nothing'})`);
  return Number(value);
}

/** Every item of a paged list. */
async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

const failedDeliveries = (c: CustodyClient, project: number) =>
  collect(c.all('failedDeliveries', (cursor) => c.listFailedDeliveries(project, cursor ? { cursor } : {})));

const TOKEN_COLUMNS = ['id', 'name', 'role', 'scope', 'projectId', 'createdAt', 'revokedAt'];
const DELIVERY_COLUMNS = ['id', 'kind', 'webhookId', 'event', 'url', 'attempts', 'lastStatus', 'lastError', 'lastAttemptAt'];

/** Each command: what it does, its usage, and the code. Returns the exit code. */
export const COMMANDS: Record<string, { usage: string; summary: string; run(i: Invocation): Promise<number> }> = {
  bootstrap: {
    usage: 'bootstrap --org NAME --project NAME --issuer URL [--wallet-webhook-url URL] [--token-name NAME]',
    summary: 'create an organisation, its first project and an organisation admin token (operator token needed)',
    async run({ flags, out, client }) {
      const c = client();
      const org = await c.createOrganisation(need(flags, 'org'));
      out.note(`created organisation ${org.id}`);
      const webhook = str(flags, 'wallet-webhook-url');
      const project = await c.createProject(org.id, {
        name: need(flags, 'project'),
        issuer: need(flags, 'issuer'),
        ...(webhook ? { walletWebhookUrl: webhook } : {}),
      });
      out.note(`created project ${project.id}`);
      const token = await c.createToken(org.id, { name: str(flags, 'token-name') ?? 'admin', role: 'admin' });
      out.note(`created token ${token.id}; the project key, token and secret below are shown once: store them now`);
      out.record({
        organisationId: org.id,
        projectId: project.id,
        environment: project.environment,
        projectKey: project.projectKey,
        walletWebhookSecret: project.walletWebhookSecret ?? null,
        tokenId: token.id,
        token: token.token,
      });
      return 0;
    },
  },
  'orgs list': {
    usage: 'orgs list [--show-deleted]',
    summary: 'list the organisations the token sees',
    async run({ flags, out, client }) {
      const c = client();
      const rows = await collect(
        c.all('organisations', (cursor) => c.listOrganisations({ showDeleted: flags['show-deleted'] === true, ...(cursor ? { cursor } : {}) })),
      );
      out.table(rows, ['id', 'name', 'createdAt', 'deletedAt']);
      return 0;
    },
  },
  'tokens create': {
    usage: 'tokens create --org ID --name NAME [--role admin|read|signer] [--project ID]',
    summary: 'create an API token (shown once)',
    async run({ flags, out, client }) {
      const role = str(flags, 'role') ?? 'admin';
      if (role !== 'admin' && role !== 'read' && role !== 'signer') throw new UsageError('--role is admin, read or signer (signer needs --project)');
      const project = str(flags, 'project');
      const created = await client().createToken(id(str(flags, 'org'), '--org'), {
        name: need(flags, 'name'),
        role,
        ...(project ? { projectId: id(project, '--project') } : {}),
      });
      out.note('the token is shown once: store it now');
      out.record(created);
      return 0;
    },
  },
  'tokens list': {
    usage: 'tokens list --org ID [--show-revoked]',
    summary: "list an organisation's API tokens (never their secrets)",
    async run({ flags, out, client }) {
      const c = client();
      const org = id(str(flags, 'org'), '--org');
      const rows = await collect(
        c.all('tokens', (cursor) => c.listTokens(org, { showRevoked: flags['show-revoked'] === true, ...(cursor ? { cursor } : {}) })),
      );
      out.table(rows, TOKEN_COLUMNS);
      return 0;
    },
  },
  'tokens revoke': {
    usage: 'tokens revoke --org ID TOKEN_ID',
    summary: 'revoke an API token at once',
    async run({ args, flags, out, client }) {
      const tokenId = id(args[0], 'TOKEN_ID');
      await client().revokeToken(id(str(flags, 'org'), '--org'), tokenId);
      out.record({ revoked: tokenId });
      return 0;
    },
  },
  'project rotate-key': {
    usage: 'project rotate-key --project ID [--grace-seconds N]',
    summary: 'issue a new project key; the old ones keep working for the grace period (default 86400 s)',
    async run({ flags, out, client }) {
      const grace = str(flags, 'grace-seconds');
      if (grace !== undefined && !/^(0|[1-9][0-9]{0,7})$/.test(grace)) throw new UsageError('--grace-seconds must be a whole number of seconds');
      const rotated = await client().rotateProjectKey(id(str(flags, 'project'), '--project'), grace === undefined ? undefined : Number(grace));
      out.note('the new key is shown once: store it now');
      out.record(rotated);
      return 0;
    },
  },
  'deliveries list': {
    usage: 'deliveries list --project ID',
    summary: "list a project's failed webhook deliveries",
    async run({ flags, out, client }) {
      const rows = await failedDeliveries(client(), id(str(flags, 'project'), '--project'));
      out.table(rows, out.json ? Object.keys(rows[0] ?? {}) : DELIVERY_COLUMNS);
      return 0;
    },
  },
  'deliveries retry': {
    usage: 'deliveries retry --project ID (DELIVERY_ID... | --all)',
    summary: 'retry failed deliveries once each (they are listed as failed again if the attempt fails)',
    async run({ args, flags, out, client }) {
      const c = client();
      const project = id(str(flags, 'project'), '--project');
      let ids = args.map((a) => id(a, 'DELIVERY_ID'));
      if (flags['all'] === true) {
        if (ids.length > 0) throw new UsageError('give delivery ids or --all, not both');
        ids = (await failedDeliveries(c, project)).map((d) => d.id);
      }
      if (ids.length === 0) throw new UsageError(flags['all'] === true ? 'there are no failed deliveries' : 'give delivery ids or --all');
      const results: Array<Record<string, unknown>> = [];
      for (const [n, deliveryId] of ids.entries()) {
        out.note(`retrying ${n + 1}/${ids.length}: delivery ${deliveryId}`);
        results.push({ ...(await c.retryFailedDelivery(project, deliveryId)) });
      }
      out.table(results, ['id', 'status']);
      return 0;
    },
  },
  'issuer check': {
    usage: 'issuer check --project ID (--jwt TOKEN | --jwt-file PATH)',
    summary: "run every JWT check against the project's issuer with a sample token; exit 1 if one fails",
    async run({ flags, out, client }) {
      const file = str(flags, 'jwt-file');
      const jwt = file ? readFileSync(file, 'utf8').trim() : need(flags, 'jwt');
      const result = await client().checkIssuer(id(str(flags, 'project'), '--project'), jwt);
      if (out.json) out.record(result);
      else {
        out.note(`issuer ${result.issuer}: ${result.ok ? 'every check passed' : 'some checks failed'}`);
        out.table(result.checks, ['name', 'outcome', 'detail']);
      }
      return result.ok ? 0 : 1;
    },
  },
  'policy put': {
    usage: 'policy put --project ID --file PATH [--if-version N]',
    summary: "write a new version of the project's signing policy (JSON file); --if-version: the version it replaces",
    async run({ flags, out, client }) {
      const text = readFileSync(need(flags, 'file'), 'utf8');
      let policy: Parameters<CustodyClient['putPolicy']>[1];
      try {
        policy = JSON.parse(text) as typeof policy;
      } catch {
        throw new UsageError('--file must hold a JSON policy: { "rules": [...], "limits": [...] }');
      }
      const base = str(flags, 'if-version');
      if (base !== undefined && !/^(0|[1-9][0-9]{0,8})$/.test(base)) throw new UsageError('--if-version must be a version number (0: none)');
      out.record(await client().putPolicy(id(str(flags, 'project'), '--project'), policy, base === undefined ? undefined : Number(base)));
      return 0;
    },
  },
  'policy get': {
    usage: 'policy get --project ID',
    summary: "show the project's signing policy (its newest version)",
    async run({ flags, out, client }) {
      out.record(await client().getPolicy(id(str(flags, 'project'), '--project')));
      return 0;
    },
  },
  sign: {
    usage: 'sign --project ID --wallet ID --method METHOD (--message TEXT | --params JSON | --params-file PATH)   (a signer token)',
    summary: `sign with a wallet under the project's policy: ${SIGNING_METHODS.join(', ')}`,
    async run({ flags, out, client }) {
      const method = need(flags, 'method');
      if (!isSigningMethod(method)) throw new UsageError(`--method is one of ${SIGNING_METHODS.join(', ')}`);
      const message = str(flags, 'message');
      const file = str(flags, 'params-file');
      const raw = file ? readFileSync(file, 'utf8') : str(flags, 'params');
      if ((message === undefined) === (raw === undefined)) throw new UsageError('give --message (personal_sign), or --params / --params-file');
      let params: object;
      try {
        params = message !== undefined ? { message } : (JSON.parse(raw ?? '') as object);
      } catch {
        throw new UsageError("--params must be JSON: the method's parameters");
      }
      const result = await client().signWithWallet(id(str(flags, 'project'), '--project'), id(str(flags, 'wallet'), '--wallet'), {
        method,
        params,
      });
      out.record(result);
      return 0;
    },
  },
  migrate: {
    usage: 'migrate   (uses DATABASE_URL)',
    summary: 'apply pending database migrations, one by one',
    async run({ out, env }) {
      const url = env.databaseUrl;
      if (!url) throw new UsageError('set DATABASE_URL to the PostgreSQL database to migrate');
      const db = createDb({ url, poolMax: 2 });
      try {
        const pending = await pendingMigrations(db);
        if (pending.length === 0) out.note('the database is up to date');
        const applied: string[] = [];
        for (const [n, name] of pending.entries()) {
          out.note(`applying ${n + 1}/${pending.length}: ${name}`);
          applied.push(...(await runNextMigration(db)));
        }
        out.table(
          applied.map((name) => ({ migration: name, status: 'applied' })),
          ['migration', 'status'],
        );
        return 0;
      } finally {
        await db.destroy();
      }
    },
  },
};
