import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { CliEnv } from './config.js';
import type { CustodyClient } from '../client/index.js';
import { withDatabase } from './database.js';
import type { Output } from './output.js';
import { isSigningMethod, SIGNING_METHODS } from '../../../contract/index.js';
import { AUDIT_COMMANDS } from './audit.js';
import { DATA_KEY_COMMANDS } from './data-key.js';

/**
 * The signer's program that moves key records to the newest transit version: run as a process of
 * its own (src/ loads nothing of keyvault/), under the rewrap job's Vault identity.
 */
const REWRAP_MAIN = fileURLToPath(new URL('../../../keyvault/rewrap.js', import.meta.url));

/** A mistake in how the CLI was called: exit 2 with the usage line. */
export class UsageError extends Error {}

export type Flags = Record<string, string | boolean | undefined>;

/** One command of the table: what `--help` shows, which options it takes, and the code. */
export interface Command {
  /** After `custody `: the words, then the options and arguments. */
  usage: string;
  summary: string;
  /** Its options (besides the global ones), by name, with what each means. */
  options?: Readonly<Record<string, string>>;
  /** Those of its options that take no value. */
  switches?: readonly string[];
  /** Kept for scripts written before the noun groups: the command it is the same as. */
  aliasOf?: string;
  /** Returns the exit code. */
  run(i: Invocation): Promise<number>;
}

export interface Invocation {
  args: string[];
  flags: Flags;
  out: Output;
  client: () => CustodyClient;
  env: CliEnv;
  /** The service's URL (--url, CUSTODY_URL or the default). */
  baseUrl: string;
}

const str = (flags: Flags, name: string): string | undefined => (typeof flags[name] === 'string' ? flags[name] : undefined);
function need(flags: Flags, name: string): string {
  const v = str(flags, name);
  if (v === undefined || v === '') throw new UsageError(`--${name} is required`);
  return v;
}
/** `--events a,b`: a comma-separated list. */
const list = (value: string): string[] =>
  value
    .split(',')
    .map((v) => v.trim())
    .filter((v) => v !== '');
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

/** Exactly one positional argument, an id. */
function oneId(args: string[], what: string): number {
  if (args.length > 1) throw new UsageError(`one ${what} only (got ${args.join(' ')})`);
  return id(args[0], what);
}
const project = (flags: Flags): number => id(str(flags, 'project'), '--project');
/** `--project` where a token wider than one project must name it (memberships). */
const optionalProject = (flags: Flags): number | undefined => (str(flags, 'project') === undefined ? undefined : project(flags));

const ORG_COLUMNS = ['id', 'name', 'createdAt', 'deletedAt'];
const PROJECT_COLUMNS = ['id', 'organisationId', 'name', 'environment', 'issuer', 'walletWebhookUrl', 'createdAt', 'deletedAt'];
const WALLET_COLUMNS = ['walletId', 'walletAddress', 'emailAddress', 'createdAt'];
const MEMBERSHIP_COLUMNS = ['tokenId', 'membershipType', 'walletAddress', 'status', 'expiration', 'transferable', 'issuedAt'];
const WEBHOOK_COLUMNS = ['id', 'url', 'events', 'createdAt', 'disabledAt', 'disabledReason', 'deletedAt'];
const TOKEN_COLUMNS = ['id', 'name', 'role', 'scope', 'projectId', 'createdAt', 'revokedAt'];
const DELIVERY_COLUMNS = ['id', 'kind', 'webhookId', 'event', 'url', 'attempts', 'lastStatus', 'lastError', 'lastAttemptAt'];
const TRANSACTION_COLUMNS = ['id', 'walletId', 'chainId', 'status', 'waiting', 'nonce', 'to', 'value', 'hash', 'createdAt'];
/** How often `transactions send` looks again at a send waiting its turn. */
const SEND_POLL_MS = 200;
const TRANSACTION_STATUSES = ['queued', 'signed', 'submitted', 'mined', 'confirmed', 'failed', 'replaced', 'cancelled', 'expired'] as const;
/** A quantity as the service reads it: decimal, or 0x hex. */
const QUANTITY = /^(0|[1-9][0-9]{0,77}|0x[0-9a-fA-F]{1,64})$/;

/** Walks every page of a list. */
const pages = <K extends string, T>(
  c: CustodyClient,
  key: K,
  page: (cursor: string | undefined) => Promise<{ [P in K]: T[] } & { nextCursor: string | null }>,
) => collect(c.all(key, page));
const cursorOf = (cursor: string | undefined) => (cursor ? { cursor } : {});

const deliveriesList: Command = {
  usage: 'webhooks deliveries --project ID',
  summary: "list a project's failed webhook deliveries (wallet webhook and subscriptions)",
  options: { project: 'the project' },
  async run({ flags, out, client }) {
    const rows = await failedDeliveries(client(), project(flags));
    out.table(rows, out.json ? Object.keys(rows[0] ?? {}) : DELIVERY_COLUMNS);
    return 0;
  },
};

const deliveriesRetry: Command = {
  usage: 'webhooks retry --project ID (DELIVERY_ID... | --all)',
  summary: 'retry failed deliveries once each (they are listed as failed again if the attempt fails)',
  options: { project: 'the project', all: 'every failed delivery of the project' },
  switches: ['all'],
  async run({ args, flags, out, client }) {
    const c = client();
    const projectId = project(flags);
    let ids = args.map((a) => id(a, 'DELIVERY_ID'));
    if (flags['all'] === true) {
      if (ids.length > 0) throw new UsageError('give delivery ids or --all, not both');
      ids = (await failedDeliveries(c, projectId)).map((d) => d.id);
    }
    if (ids.length === 0) throw new UsageError(flags['all'] === true ? 'there are no failed deliveries' : 'give delivery ids or --all');
    const results: Array<Record<string, unknown>> = [];
    for (const [n, deliveryId] of ids.entries()) {
      out.note(`retrying ${n + 1}/${ids.length}: delivery ${deliveryId}`);
      results.push({ ...(await c.retryFailedDelivery(projectId, deliveryId)) });
    }
    out.table(results, ['id', 'status']);
    return 0;
  },
};

const rotateKey: Command = {
  usage: 'projects rotate-key --project ID [--grace-seconds N]',
  summary: 'issue a new project key; the old ones keep working for the grace period (default 86400 s)',
  options: { project: 'the project', 'grace-seconds': 'how long the previous keys keep working (0: not at all)' },
  async run({ flags, out, client }) {
    const grace = str(flags, 'grace-seconds');
    if (grace !== undefined && !/^(0|[1-9][0-9]{0,7})$/.test(grace)) throw new UsageError('--grace-seconds must be a whole number of seconds');
    const rotated = await client().rotateProjectKey(project(flags), grace === undefined ? undefined : Number(grace));
    out.note('the new key is shown once: store it now');
    out.record(rotated);
    return 0;
  },
};

/** A wallet of the project by id, e-mail or address: exactly one way. */
async function findWallets(c: CustodyClient, flags: Flags): Promise<Array<Record<string, unknown>>> {
  const email = str(flags, 'email');
  const address = str(flags, 'address');
  if (email !== undefined && address !== undefined) throw new UsageError('give --email or --address, not both');
  if (address !== undefined && !/^0x[0-9a-fA-F]{40}$/.test(address)) throw new UsageError('--address must be 0x and 40 hex digits');
  const projectId = project(flags);
  const query = { ...(email === undefined ? {} : { email }), ...(address === undefined ? {} : { address }) };
  return pages(c, 'wallets', (cursor) => c.listWallets(projectId, { ...query, ...cursorOf(cursor) }));
}

/** `--NAME` as a quantity (wei or gas), when given. */
function quantity(flags: Flags, name: string): string | undefined {
  const v = str(flags, name);
  if (v !== undefined && !QUANTITY.test(v)) throw new UsageError(`--${name} must be a whole number (decimal, or 0x hex)`);
  return v;
}

/** A transaction as the service answers it: exit 1 when it failed (the policy or the node refused it), with why. */
function transactionResult(out: Output, tx: Awaited<ReturnType<CustodyClient['transactions']['get']>>): number {
  out.record(tx);
  if (tx.status !== 'failed') return 0;
  out.note(`transaction ${tx.id} failed${tx.error ? `: ${tx.error.code}: ${tx.error.message}` : ''}`);
  return 1;
}

/**
 * The command table: every command, by its words. `custody --help` lists them, `custody <words>
 * --help` shows one. The `dev` group (a development identity provider) is to come.
 */
export const COMMANDS: Record<string, Command> = {
  bootstrap: {
    usage: 'bootstrap --org NAME --project NAME --issuer URL [--wallet-webhook-url URL] [--token-name NAME]',
    summary: 'create an organisation, its first project and an organisation admin token (operator token needed)',
    options: {
      org: "the new organisation's name",
      project: "its first project's name",
      issuer: "the OpenID issuer of the project's users (https)",
      'wallet-webhook-url': 'where wallet-created webhooks go',
      'token-name': "the admin token's name (default admin)",
    },
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
    options: { 'show-deleted': 'include deleted ones' },
    switches: ['show-deleted'],
    async run({ flags, out, client }) {
      const c = client();
      const rows = await pages(c, 'organisations', (cursor) => c.listOrganisations({ showDeleted: flags['show-deleted'] === true, ...cursorOf(cursor) }));
      out.table(rows, ORG_COLUMNS);
      return 0;
    },
  },
  'orgs create': {
    usage: 'orgs create --name NAME',
    summary: 'create an organisation (operator token)',
    options: { name: 'its name' },
    async run({ flags, out, client }) {
      out.record(await client().createOrganisation(need(flags, 'name')));
      return 0;
    },
  },
  'orgs get': {
    usage: 'orgs get ORG_ID',
    summary: 'show an organisation',
    async run({ args, out, client }) {
      out.record(await client().getOrganisation(oneId(args, 'ORG_ID')));
      return 0;
    },
  },
  'orgs rename': {
    usage: 'orgs rename ORG_ID --name NAME',
    summary: 'rename an organisation',
    options: { name: 'the new name' },
    async run({ args, flags, out, client }) {
      out.record(await client().renameOrganisation(oneId(args, 'ORG_ID'), need(flags, 'name')));
      return 0;
    },
  },
  'orgs delete': {
    usage: 'orgs delete ORG_ID',
    summary: 'delete an organisation (soft: `orgs undelete` brings it back)',
    async run({ args, out, client }) {
      const orgId = oneId(args, 'ORG_ID');
      await client().deleteOrganisation(orgId);
      out.record({ deleted: orgId });
      return 0;
    },
  },
  'orgs undelete': {
    usage: 'orgs undelete ORG_ID',
    summary: 'bring a deleted organisation back (operator token)',
    async run({ args, out, client }) {
      out.record(await client().undeleteOrganisation(oneId(args, 'ORG_ID')));
      return 0;
    },
  },

  'projects list': {
    usage: 'projects list --org ID [--show-deleted]',
    summary: "list an organisation's projects",
    options: { org: 'the organisation', 'show-deleted': 'include deleted ones' },
    switches: ['show-deleted'],
    async run({ flags, out, client }) {
      const c = client();
      const org = id(str(flags, 'org'), '--org');
      const rows = await pages(c, 'projects', (cursor) => c.listProjects(org, { showDeleted: flags['show-deleted'] === true, ...cursorOf(cursor) }));
      out.table(rows, PROJECT_COLUMNS);
      return 0;
    },
  },
  'projects create': {
    usage: 'projects create --org ID --name NAME --issuer URL [--wallet-webhook-url URL]',
    summary: 'create a project (its key and wallet webhook secret are shown once)',
    options: {
      org: 'the organisation',
      name: "the project's name",
      issuer: "the OpenID issuer of the project's users (https)",
      'wallet-webhook-url': 'where wallet-created webhooks go',
    },
    async run({ flags, out, client }) {
      const webhook = str(flags, 'wallet-webhook-url');
      const created = await client().createProject(id(str(flags, 'org'), '--org'), {
        name: need(flags, 'name'),
        issuer: need(flags, 'issuer'),
        ...(webhook ? { walletWebhookUrl: webhook } : {}),
      });
      out.note('the project key and secret are shown once: store them now');
      out.record(created);
      return 0;
    },
  },
  'projects get': {
    usage: 'projects get PROJECT_ID',
    summary: 'show a project',
    async run({ args, out, client }) {
      out.record(await client().getProject(oneId(args, 'PROJECT_ID')));
      return 0;
    },
  },
  'projects update': {
    usage: 'projects update PROJECT_ID [--name NAME] [--issuer URL] [--wallet-webhook-url URL|none]',
    summary: 'change what is given of a project (`--wallet-webhook-url none` removes the wallet webhook)',
    options: { name: 'a new name', issuer: 'a new issuer', 'wallet-webhook-url': 'a new wallet webhook URL, or none' },
    async run({ args, flags, out, client }) {
      const projectId = oneId(args, 'PROJECT_ID');
      const name = str(flags, 'name');
      const issuer = str(flags, 'issuer');
      const webhook = str(flags, 'wallet-webhook-url');
      const body = {
        ...(name === undefined ? {} : { name }),
        ...(issuer === undefined ? {} : { issuer }),
        ...(webhook === undefined ? {} : { walletWebhookUrl: webhook === 'none' ? null : webhook }),
      };
      if (Object.keys(body).length === 0) throw new UsageError('give at least one of --name, --issuer, --wallet-webhook-url');
      out.record(await client().updateProject(projectId, body));
      return 0;
    },
  },
  'projects delete': {
    usage: 'projects delete PROJECT_ID',
    summary: 'delete a project (soft)',
    async run({ args, out, client }) {
      const projectId = oneId(args, 'PROJECT_ID');
      await client().deleteProject(projectId);
      out.record({ deleted: projectId });
      return 0;
    },
  },
  'projects rotate-key': rotateKey,
  'project rotate-key': { ...rotateKey, usage: 'project rotate-key --project ID [--grace-seconds N]', aliasOf: 'projects rotate-key' },

  'tokens create': {
    usage: 'tokens create --org ID --name NAME [--role admin|read|signer] [--project ID]',
    summary: 'create an API token (shown once)',
    options: {
      org: 'the organisation',
      name: "the token's name",
      role: 'admin (default), read, or signer (needs --project)',
      project: 'scope it to one project',
    },
    async run({ flags, out, client }) {
      const role = str(flags, 'role') ?? 'admin';
      if (role !== 'admin' && role !== 'read' && role !== 'signer') throw new UsageError('--role is admin, read or signer (signer needs --project)');
      const projectId = str(flags, 'project');
      const created = await client().createToken(id(str(flags, 'org'), '--org'), {
        name: need(flags, 'name'),
        role,
        ...(projectId ? { projectId: id(projectId, '--project') } : {}),
      });
      out.note('the token is shown once: store it now');
      out.record(created);
      return 0;
    },
  },
  'tokens list': {
    usage: 'tokens list --org ID [--show-revoked]',
    summary: "list an organisation's API tokens (never their secrets)",
    options: { org: 'the organisation', 'show-revoked': 'include revoked ones' },
    switches: ['show-revoked'],
    async run({ flags, out, client }) {
      const c = client();
      const org = id(str(flags, 'org'), '--org');
      const rows = await pages(c, 'tokens', (cursor) => c.listTokens(org, { showRevoked: flags['show-revoked'] === true, ...cursorOf(cursor) }));
      out.table(rows, TOKEN_COLUMNS);
      return 0;
    },
  },
  'tokens revoke': {
    usage: 'tokens revoke --org ID TOKEN_ID',
    summary: 'revoke an API token at once',
    options: { org: 'the organisation' },
    async run({ args, flags, out, client }) {
      const tokenId = oneId(args, 'TOKEN_ID');
      await client().revokeToken(id(str(flags, 'org'), '--org'), tokenId);
      out.record({ revoked: tokenId });
      return 0;
    },
  },

  'wallets list': {
    usage: 'wallets list --project ID [--email EMAIL | --address ADDRESS]',
    summary: "list a project's wallets, or those of one e-mail address or wallet address",
    options: { project: 'the project', email: "the user's e-mail address", address: 'the wallet address (any case)' },
    async run({ flags, out, client }) {
      out.table(await findWallets(client(), flags), WALLET_COLUMNS);
      return 0;
    },
  },
  'wallets get': {
    usage: 'wallets get --project ID (WALLET_ID | --email EMAIL | --address ADDRESS)',
    summary: 'show one wallet, by id, by e-mail address or by wallet address; exit 1 when there is none',
    options: { project: 'the project', email: "the user's e-mail address", address: 'the wallet address (any case)' },
    async run({ args, flags, out, client }) {
      const c = client();
      const byLookup = str(flags, 'email') !== undefined || str(flags, 'address') !== undefined;
      if (byLookup === args.length > 0) throw new UsageError('give a WALLET_ID, --email or --address (one of them)');
      if (!byLookup) {
        out.record(await c.getWallet(project(flags), oneId(args, 'WALLET_ID')));
        return 0;
      }
      const [wallet] = await findWallets(c, flags);
      if (wallet === undefined) {
        out.note(`no wallet with ${str(flags, 'email') !== undefined ? 'that e-mail address' : 'that address'} in project ${project(flags)}`);
        return 1;
      }
      out.record(wallet);
      return 0;
    },
  },

  'memberships issue': {
    usage: 'memberships issue (--type TYPE --address ADDRESS [--expiration UNIX] [--transferable] [--override] | --file PATH) [--project ID]',
    summary: 'issue memberships: one from the options, or up to 1,000 from a JSON file (all or nothing)',
    options: {
      type: 'the membership type, e.g. gym:gold',
      address: 'the holder wallet address',
      expiration: 'Unix seconds (0 or absent: never)',
      transferable: 'may be transferred',
      override: 'update an active membership of that type in place',
      file: 'a JSON array of { membershipType, walletAddress, expiration?, transferable?, override? }',
      project: 'the project (when the token is wider than one project)',
    },
    switches: ['transferable', 'override'],
    async run({ flags, out, client }) {
      const file = str(flags, 'file');
      let items: Parameters<CustodyClient['issueMemberships']>[0];
      if (file !== undefined) {
        if (str(flags, 'type') !== undefined || str(flags, 'address') !== undefined) throw new UsageError('give --file or --type and --address, not both');
        try {
          items = JSON.parse(readFileSync(file, 'utf8')) as typeof items;
        } catch {
          throw new UsageError('--file must hold a JSON array of memberships');
        }
      } else {
        const expiration = str(flags, 'expiration');
        if (expiration !== undefined && !/^(0|[1-9][0-9]{0,11})$/.test(expiration)) throw new UsageError('--expiration is Unix seconds');
        items = [
          {
            membershipType: need(flags, 'type'),
            walletAddress: need(flags, 'address'),
            ...(expiration === undefined ? {} : { expiration: Number(expiration) }),
            ...(flags['transferable'] === true ? { transferable: true } : {}),
            ...(flags['override'] === true ? { override: true } : {}),
          },
        ];
      }
      const issued = await client().issueMemberships(items, optionalProject(flags));
      out.table(issued.memberships, MEMBERSHIP_COLUMNS);
      return 0;
    },
  },
  'memberships view': {
    usage: 'memberships view [--address ADDRESS] [--type TYPE] [--include-revoked] [--include-expired] [--project ID]',
    summary: 'list memberships, by holder and type',
    options: {
      address: 'the holder wallet address',
      type: 'the membership type',
      'include-revoked': 'include revoked ones',
      'include-expired': 'include expired ones',
      project: 'the project (when the token is wider than one project)',
    },
    switches: ['include-revoked', 'include-expired'],
    async run({ flags, out, client }) {
      const c = client();
      const address = str(flags, 'address');
      const type = str(flags, 'type');
      const projectId = optionalProject(flags);
      const query = {
        ...(address === undefined ? {} : { walletAddress: address }),
        ...(type === undefined ? {} : { membershipType: type }),
        ...(projectId === undefined ? {} : { projectId }),
        includeRevoked: flags['include-revoked'] === true,
        includeExpired: flags['include-expired'] === true,
      };
      out.table(await pages(c, 'memberships', (cursor) => c.viewMemberships({ ...query, ...cursorOf(cursor) })), MEMBERSHIP_COLUMNS);
      return 0;
    },
  },
  'memberships revoke': {
    usage: 'memberships revoke TOKEN_ID [--hard] [--project ID]',
    summary: 'revoke a membership (--hard: delete it from every view)',
    options: { hard: 'delete it for good', project: 'the project (when the token is wider than one project)' },
    switches: ['hard'],
    async run({ args, flags, out, client }) {
      if (args.length !== 1 || !/^[0-9]{1,78}$/.test(args[0] ?? '')) throw new UsageError('give one TOKEN_ID (a decimal number)');
      const tokenId = args[0] ?? '';
      const revoked = await client().revokeMembership({ tokenId, ...(flags['hard'] === true ? { hardDelete: true } : {}) }, optionalProject(flags));
      out.record(revoked ?? { deleted: tokenId });
      return 0;
    },
  },
  'memberships transfer': {
    usage: 'memberships transfer TOKEN_ID --from ADDRESS --to ADDRESS [--project ID]',
    summary: 'move a transferable membership to another wallet',
    options: { from: 'its holder now', to: 'its new holder', project: 'the project (when the token is wider than one project)' },
    async run({ args, flags, out, client }) {
      if (args.length !== 1 || !/^[0-9]{1,78}$/.test(args[0] ?? '')) throw new UsageError('give one TOKEN_ID (a decimal number)');
      out.record(await client().transferMembership({ tokenId: args[0] ?? '', from: need(flags, 'from'), to: need(flags, 'to') }, optionalProject(flags)));
      return 0;
    },
  },

  'webhooks list': {
    usage: 'webhooks list --project ID [--show-deleted]',
    summary: "list a project's webhook subscriptions",
    options: { project: 'the project', 'show-deleted': 'include deleted ones' },
    switches: ['show-deleted'],
    async run({ flags, out, client }) {
      const c = client();
      const projectId = project(flags);
      const rows = await pages(c, 'webhooks', (cursor) => c.listWebhooks(projectId, { showDeleted: flags['show-deleted'] === true, ...cursorOf(cursor) }));
      out.table(rows, WEBHOOK_COLUMNS);
      return 0;
    },
  },
  'webhooks create': {
    usage: 'webhooks create --project ID --endpoint URL [--events NAME,NAME | --events "*"] [--secret SECRET]',
    summary: 'subscribe a URL to events (default every event); a generated secret is shown once',
    options: {
      project: 'the project',
      endpoint: 'the receiver (--url is the service)',
      events: 'event names, comma-separated (`webhooks events` lists them); * for all',
      secret: 'your own signing secret',
    },
    async run({ flags, out, client }) {
      const secret = str(flags, 'secret');
      const created = await client().createWebhook(project(flags), {
        url: need(flags, 'endpoint'),
        events: list(str(flags, 'events') ?? '*'),
        ...(secret === undefined ? {} : { secret }),
      });
      if (created.secret !== undefined) out.note('the signing secret is shown once: store it now');
      out.record(created);
      return 0;
    },
  },
  'webhooks get': {
    usage: 'webhooks get --project ID WEBHOOK_ID',
    summary: 'show a webhook subscription',
    options: { project: 'the project' },
    async run({ args, flags, out, client }) {
      out.record(await client().getWebhook(project(flags), oneId(args, 'WEBHOOK_ID')));
      return 0;
    },
  },
  'webhooks update': {
    usage: 'webhooks update --project ID WEBHOOK_ID [--endpoint URL] [--events NAME,NAME]',
    summary: 'change its URL or events (and re-enable it if it was disabled)',
    options: { project: 'the project', endpoint: 'a new receiver', events: 'new event names, comma-separated' },
    async run({ args, flags, out, client }) {
      const url = str(flags, 'endpoint');
      const events = str(flags, 'events');
      out.record(
        await client().updateWebhook(project(flags), oneId(args, 'WEBHOOK_ID'), {
          ...(url === undefined ? {} : { url }),
          ...(events === undefined ? {} : { events: list(events) }),
        }),
      );
      return 0;
    },
  },
  'webhooks delete': {
    usage: 'webhooks delete --project ID WEBHOOK_ID',
    summary: 'delete a subscription (its pending deliveries are dropped)',
    options: { project: 'the project' },
    async run({ args, flags, out, client }) {
      const webhookId = oneId(args, 'WEBHOOK_ID');
      await client().deleteWebhook(project(flags), webhookId);
      out.record({ deleted: webhookId });
      return 0;
    },
  },
  'webhooks rotate-secret': {
    usage: 'webhooks rotate-secret --project ID WEBHOOK_ID [--secret SECRET]',
    summary: 'a new signing secret (shown once); the old one still signs for 24 h',
    options: { project: 'the project', secret: 'your own new secret (default: generated)' },
    async run({ args, flags, out, client }) {
      const rotated = await client().rotateWebhookSecret(project(flags), oneId(args, 'WEBHOOK_ID'), str(flags, 'secret'));
      out.note('the secret is shown once: store it now');
      out.record(rotated);
      return 0;
    },
  },
  'webhooks test': {
    usage: 'webhooks test --project ID WEBHOOK_ID',
    summary: 'send a webhook.test event to this subscription only',
    options: { project: 'the project' },
    async run({ args, flags, out, client }) {
      out.record(await client().testWebhook(project(flags), oneId(args, 'WEBHOOK_ID')));
      return 0;
    },
  },
  'webhooks events': {
    usage: 'webhooks events',
    summary: 'the event catalogue: every event a subscription can name',
    async run({ out, client }) {
      out.table((await client().listEventTypes()).events, ['name', 'description']);
      return 0;
    },
  },
  'webhooks deliveries': deliveriesList,
  'webhooks retry': deliveriesRetry,
  'deliveries list': { ...deliveriesList, usage: 'deliveries list --project ID', aliasOf: 'webhooks deliveries' },
  'deliveries retry': { ...deliveriesRetry, usage: 'deliveries retry --project ID (DELIVERY_ID... | --all)', aliasOf: 'webhooks retry' },

  'issuer check': {
    usage: 'issuer check --project ID (--jwt TOKEN | --jwt-file PATH)',
    summary: "run every JWT check against the project's issuer with a sample token; exit 1 if one fails",
    options: { project: 'the project', jwt: 'a sample user token', 'jwt-file': 'a file holding one' },
    async run({ flags, out, client }) {
      const file = str(flags, 'jwt-file');
      const jwt = file ? readFileSync(file, 'utf8').trim() : need(flags, 'jwt');
      const result = await client().checkIssuer(project(flags), jwt);
      if (out.json) out.record(result);
      else {
        out.note(`issuer ${result.issuer}: ${result.ok ? 'every check passed' : 'some checks failed'}`);
        out.table(result.checks, ['name', 'outcome', 'detail']);
      }
      return result.ok ? 0 : 1;
    },
  },

  'dev token': {
    usage: 'dev token --project ID --email EMAIL [--unverified] [--ttl-seconds N]',
    summary:
      "testnet: a user's ID token from the development identity provider, for a project whose issuer is https://dev-idp.invalid (the token alone; --json: with its issuer, audience and expiry)",
    options: { project: 'the project', email: "the user's e-mail", unverified: 'email_verified: false', 'ttl-seconds': 'lifetime, 60 to 86400 (default 3600)' },
    switches: ['unverified'],
    async run({ flags, out, client }) {
      const ttl = str(flags, 'ttl-seconds');
      const answer = await client().createDevToken(project(flags), {
        email: need(flags, 'email'),
        ...(flags['unverified'] === true ? { emailVerified: false } : {}),
        ...(ttl === undefined ? {} : { ttlSeconds: id(ttl, '--ttl-seconds') }),
      });
      out.value(answer.token, answer);
      return 0;
    },
  },

  'policy put': {
    usage: 'policy put --project ID --file PATH [--if-version N]',
    summary: "write a new version of the project's signing policy (JSON file); --if-version: the version it replaces",
    options: {
      project: 'the project',
      file: 'the policy: { "rules": [...], "limits": [...] }',
      'if-version': 'the version it replaces (0: none); refused if not the newest',
    },
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
      out.record(await client().putPolicy(project(flags), policy, base === undefined ? undefined : Number(base)));
      return 0;
    },
  },
  'policy get': {
    usage: 'policy get --project ID',
    summary: "show the project's signing policy (its newest version)",
    options: { project: 'the project' },
    async run({ flags, out, client }) {
      out.record(await client().getPolicy(project(flags)));
      return 0;
    },
  },
  'policy versions': {
    usage: 'policy versions --project ID',
    summary: "every version of the project's signing policy, oldest first",
    options: { project: 'the project' },
    async run({ flags, out, client }) {
      const c = client();
      const projectId = project(flags);
      out.table(await pages(c, 'versions', (cursor) => c.listPolicyVersions(projectId, cursorOf(cursor))), ['version', 'author', 'createdAt', 'policy']);
      return 0;
    },
  },

  sign: {
    usage: 'sign --project ID --wallet ID --method METHOD (--message TEXT | --params JSON | --params-file PATH)   (a signer token)',
    summary: `sign with a wallet under the project's policy: ${SIGNING_METHODS.join(', ')}`,
    options: {
      project: 'the project',
      wallet: 'the wallet id',
      method: SIGNING_METHODS.join(', '),
      message: 'the text to sign (personal_sign)',
      params: "the method's parameters as JSON",
      'params-file': 'a file holding them',
    },
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
      const result = await client().signWithWallet(project(flags), id(str(flags, 'wallet'), '--wallet'), { method, params });
      out.record(result);
      return 0;
    },
  },

  'transactions send': {
    usage:
      'transactions send --project ID --wallet ID --chain CHAIN_ID [--to ADDRESS] [--value WEI] [--data HEX] [--gas N] [--max-fee-per-gas WEI --max-priority-fee-per-gas WEI] [--idempotency-key KEY] [--wait-seconds N]   (a signer token)',
    summary:
      "send a transaction from a wallet under the project's policy: the service chooses the nonce and fills gas and fees, then follows it to confirmed; exit 1 when it failed",
    options: {
      project: 'the project',
      wallet: 'the wallet id',
      chain: 'the chain id (one the deployment sends on)',
      to: 'the recipient (absent: a contract creation from --data)',
      value: 'wei to send (decimal or 0x hex; default 0)',
      data: 'calldata, 0x hex',
      gas: 'the gas limit (default: the estimate and a margin)',
      'max-fee-per-gas': 'the fee cap in wei (default: from the fee history)',
      'max-priority-fee-per-gas': 'the priority fee in wei (with --max-fee-per-gas)',
      'idempotency-key': 'the same key answers the same transaction: a command run again does not send twice',
      'wait-seconds': "how long to wait while the send waits its turn in its wallet's queue, so a refusal exits 1 (default 15; 0: answer at once)",
    },
    async run({ flags, out, client }) {
      const waitFor = str(flags, 'wait-seconds');
      if (waitFor !== undefined && !/^(0|[1-9][0-9]{0,3})$/.test(waitFor))
        throw new UsageError('--wait-seconds must be a whole number of seconds, at most 9999');
      const to = str(flags, 'to');
      const data = str(flags, 'data');
      if (to !== undefined && !/^0x[0-9a-fA-F]{40}$/.test(to)) throw new UsageError('--to must be 0x and 40 hex digits');
      if (data !== undefined && !/^0x([0-9a-fA-F]{2})*$/.test(data)) throw new UsageError('--data must be 0x and whole bytes of hex');
      if (to === undefined && data === undefined) throw new UsageError('give --to, or --data alone for a contract creation');
      const value = quantity(flags, 'value');
      const gas = quantity(flags, 'gas');
      const maxFee = quantity(flags, 'max-fee-per-gas');
      const tip = quantity(flags, 'max-priority-fee-per-gas');
      if ((maxFee === undefined) !== (tip === undefined)) throw new UsageError('give --max-fee-per-gas and --max-priority-fee-per-gas together, or neither');
      const key = str(flags, 'idempotency-key');
      const c = client();
      const projectId = project(flags);
      let tx = await c.transactions.send(
        projectId,
        id(str(flags, 'wallet'), '--wallet'),
        {
          chainId: id(str(flags, 'chain'), '--chain'),
          ...(to === undefined ? {} : { to }),
          ...(value === undefined ? {} : { value }),
          ...(data === undefined ? {} : { data }),
          ...(gas === undefined ? {} : { gas }),
          ...(maxFee === undefined || tip === undefined ? {} : { maxFeePerGas: maxFee, maxPriorityFeePerGas: tip }),
        },
        key === undefined ? {} : { idempotencyKey: key },
      );
      // Answered `queued` when another request or the worker held the wallet's queue: the policy's
      // decision comes when its turn does, and an operator's command should report it.
      const until = Date.now() + Number(waitFor ?? '15') * 1000;
      while (tx.status === 'queued' && tx.waiting === null && Date.now() < until) {
        await new Promise((r) => setTimeout(r, SEND_POLL_MS));
        try {
          tx = await c.transactions.get(projectId, tx.id);
        } catch (err) {
          // The send is accepted: it is reported as last seen, never as a failure to send (a script would send it again).
          out.note(`could not follow transaction ${tx.id}: ${err instanceof Error ? err.message : String(err)}`);
          break;
        }
      }
      if (tx.status === 'queued')
        out.note(`transaction ${tx.id} is still queued${tx.waiting ? ` (waiting: ${tx.waiting})` : ''}: follow it with transactions get`);
      return transactionResult(out, tx);
    },
  },
  'transactions get': {
    usage: 'transactions get --project ID TRANSACTION_ID',
    summary: 'show a transaction, with its signed attempts (re-pricings, a cancel)',
    options: { project: 'the project' },
    async run({ args, flags, out, client }) {
      out.record(await client().transactions.get(project(flags), oneId(args, 'TRANSACTION_ID')));
      return 0;
    },
  },
  'transactions list': {
    usage: `transactions list --project ID [--wallet ID] [--chain CHAIN_ID] [--status ${TRANSACTION_STATUSES.join('|')}]`,
    summary: "list a project's transactions, oldest first",
    options: { project: 'the project', wallet: 'of one wallet', chain: 'on one chain', status: 'in one status' },
    async run({ flags, out, client }) {
      const c = client();
      const projectId = project(flags);
      const wallet = str(flags, 'wallet');
      const chain = str(flags, 'chain');
      const status = str(flags, 'status');
      if (status !== undefined && !(TRANSACTION_STATUSES as readonly string[]).includes(status))
        throw new UsageError(`--status is one of ${TRANSACTION_STATUSES.join(', ')}`);
      const query = {
        ...(wallet === undefined ? {} : { walletId: id(wallet, '--wallet') }),
        ...(chain === undefined ? {} : { chainId: id(chain, '--chain') }),
        ...(status === undefined ? {} : { status }),
      };
      out.table(await pages(c, 'transactions', (cursor) => c.transactions.list(projectId, { ...query, ...cursorOf(cursor) })), TRANSACTION_COLUMNS);
      return 0;
    },
  },
  'transactions cancel': {
    usage: 'transactions cancel --project ID TRANSACTION_ID   (a signer token)',
    summary: 'cancel a transaction: at once while queued, else by a no-op at its nonce with higher fees (it may still be mined first)',
    options: { project: 'the project' },
    async run({ args, flags, out, client }) {
      out.record(await client().transactions.cancel(project(flags), oneId(args, 'TRANSACTION_ID')));
      return 0;
    },
  },
  'transactions speed-up': {
    usage: 'transactions speed-up --project ID TRANSACTION_ID   (a signer token)',
    summary: "re-price a signed transaction now, within the chain's fee caps",
    options: { project: 'the project' },
    async run({ args, flags, out, client }) {
      out.record(await client().transactions.speedUp(project(flags), oneId(args, 'TRANSACTION_ID')));
      return 0;
    },
  },
  ...AUDIT_COMMANDS,
  ...DATA_KEY_COMMANDS,

  'vault rewrap': {
    usage: "vault rewrap [--dry-run] [--pace-ms N]   (the signer's VAULT_* settings, the rewrap role's Vault identity)",
    summary:
      "move every key record's ciphertext to the transit key's newest version, each checked by decrypting to its address first; safe to run again or after a crash",
    options: { 'dry-run': 'count the records to move, write nothing', 'pace-ms': 'wait this long after each moved record (spares a shared Vault; default 0)' },
    switches: ['dry-run'],
    async run({ args, flags }) {
      if (args.length > 0) throw new UsageError(`no arguments (got ${args.join(' ')})`);
      const pace = str(flags, 'pace-ms');
      if (pace !== undefined && !/^\d{1,6}$/.test(pace)) throw new UsageError('--pace-ms must be an integer of milliseconds');
      const argv = [...(flags['dry-run'] === true ? ['--dry-run'] : []), ...(pace === undefined ? [] : ['--pace-ms', pace])];
      // The environment passes on as it is: the program reads its own settings (keyvault/config.ts).
      const child = spawn(process.execPath, [REWRAP_MAIN, ...argv], { stdio: 'inherit' });
      const forward = (signal: NodeJS.Signals) => child.kill(signal);
      process.on('SIGTERM', forward);
      process.on('SIGINT', forward);
      try {
        return await new Promise<number>((resolve, reject) => {
          child.once('error', reject);
          child.once('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
        });
      } finally {
        process.off('SIGTERM', forward);
        process.off('SIGINT', forward);
      }
    },
  },

  migrate: {
    usage: 'migrate   (uses DATABASE_URL)',
    summary: 'apply pending database migrations, one by one',
    async run({ out, env }) {
      const url = env.databaseUrl;
      if (!url) throw new UsageError('set DATABASE_URL to the PostgreSQL database to migrate');
      const { pendingMigrations, runNextMigration } = await import('../../platform/db/migrate.js');
      return withDatabase(url, async (db) => {
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
      });
    },
  },
};
