import { createReadStream, createWriteStream, readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import type { JSONWebKeySet } from 'jose';
import type { ChainVerifier, Checkpoint, SealedEntry, VerifyReport } from '../../domains/audit/chain.js';
import { withDatabase } from './database.js';
import { UsageError, type Command, type Flags } from './commands.js';

const str = (flags: Flags, name: string): string | undefined => (typeof flags[name] === 'string' ? flags[name] : undefined);
function seqFlag(flags: Flags, name: string): number {
  const v = str(flags, name);
  if (v === undefined) return 0;
  if (!/^(0|[1-9][0-9]{0,14})$/.test(v)) throw new UsageError(`--${name} must be a sequence number`);
  return Number(v);
}

/** The JWKS checkpoints are verified against: a file, a URL, or the service's own. */
async function jwksFrom(source: string): Promise<JSONWebKeySet> {
  const text = /^https?:\/\//.test(source) ? await (await fetch(source, { signal: AbortSignal.timeout(15_000) })).text() : readFileSync(source, 'utf8');
  const jwks = JSON.parse(text) as JSONWebKeySet;
  if (!Array.isArray(jwks.keys)) throw new UsageError(`${source} is not a JWKS ({ "keys": [...] })`);
  return jwks;
}

/** Verifies an export file: its header says whether its rows are the whole chain or one organisation's. */
async function verifyFile(path: string, jwks: JSONWebKeySet): Promise<VerifyReport & { organisationId: number | null }> {
  // Loaded before the file is opened: lines read while an import is awaited would be lost.
  const { ChainVerifier: Verifier } = await import('../../domains/audit/chain.js');
  const lines = createInterface({ input: createReadStream(path, 'utf8'), crlfDelay: Infinity });
  let verifier: ChainVerifier | undefined;
  let organisationId: number | null = null;
  const entries: SealedEntry[] = [];
  const checkpoints: Checkpoint[] = [];
  let n = 0;
  for await (const line of lines) {
    n++;
    if (line.trim() === '') continue;
    let item: { type?: unknown } & Record<string, unknown>;
    try {
      item = JSON.parse(line) as typeof item;
    } catch {
      throw new UsageError(`${path}:${n} is not JSON`);
    }
    if (item.type === 'export') {
      // A file may hold several pages of one export, each with its header: the first one counts.
      if (!verifier) {
        organisationId = typeof item['organisationId'] === 'number' ? item['organisationId'] : null;
        verifier = new Verifier(organisationId === null, Number(item['after'] ?? 0));
      }
    } else if (item.type === 'entry') entries.push(item as unknown as SealedEntry);
    else if (item.type === 'checkpoint') checkpoints.push(item as unknown as Checkpoint);
  }
  if (!verifier) throw new UsageError(`${path} is not an audit export (no {"type":"export"} line)`);
  const unique = [...new Map(checkpoints.map((c) => [c.size, c])).values()];
  if (await verifier.checkpoints(unique, jwks)) for (const e of entries) if (!verifier.push(e)) break;
  return { ...verifier.finish(), organisationId };
}

export const AUDIT_COMMANDS: Record<string, Command> = {
  'audit export': {
    usage: 'audit export (--organisation ID | --database) [--after SEQ] [--limit N] [--out PATH]',
    summary: "the audit log with its chain fields as NDJSON: an organisation's through the API, or the whole chain from DATABASE_URL",
    options: {
      organisation: 'the organisation (through the API, with its admin or the operator token)',
      database: 'the whole chain, every organisation, read from DATABASE_URL',
      after: 'resume after this sequence number',
      limit: 'rows per request (the API answers at most 100000 and says when there are more)',
      out: 'write to this file instead of stdout',
    },
    switches: ['database'],
    async run({ flags, out, client, env }) {
      const after = seqFlag(flags, 'after');
      const org = str(flags, 'organisation');
      if ((org === undefined) === (flags['database'] !== true)) throw new UsageError('give --organisation ID or --database');
      const limit = str(flags, 'limit');
      if (limit !== undefined && !/^[1-9][0-9]{0,6}$/.test(limit)) throw new UsageError('--limit must be a positive integer');
      const path = str(flags, 'out');
      const sink = path ? createWriteStream(path) : process.stdout;
      const write = (text: string) => new Promise<void>((resolve, reject) => sink.write(text, (err) => (err ? reject(err) : resolve())));
      let rows = 0;
      try {
        if (org !== undefined) {
          if (!/^[1-9][0-9]{0,14}$/.test(org)) throw new UsageError('--organisation must be a positive integer');
          // Page after page until the service says there is no more.
          for (let from = after; ;) {
            const text = await client().exportAudit(Number(org), { after: from, ...(limit === undefined ? {} : { limit: Number(limit) }) });
            await write(text);
            rows += text.split('\n').filter((l) => l.startsWith('{"type":"entry"')).length;
            const end = JSON.parse(text.trimEnd().split('\n').pop() ?? '{}') as { lastSeq?: number; more?: boolean };
            if (!end.more || end.lastSeq === undefined) break;
            from = end.lastSeq;
          }
        } else {
          if (!env.databaseUrl) throw new UsageError('set DATABASE_URL to export the whole chain');
          const { exportLines } = await import('../../domains/audit/commands.js');
          await withDatabase(env.databaseUrl, async (db) => {
            for await (const text of exportLines(db, null, after, Number.MAX_SAFE_INTEGER)) {
              await write(text);
              rows += text.split('\n').filter((l) => l.startsWith('{"type":"entry"')).length;
            }
          });
        }
      } finally {
        if (path) await new Promise<void>((resolve) => (sink as ReturnType<typeof createWriteStream>).end(resolve));
      }
      out.note(`exported ${rows} rows`);
      return 0;
    },
  },
  'audit verify': {
    usage: 'audit verify [--file PATH] [--jwks URL|PATH]',
    summary: "recompute the audit chain (DATABASE_URL, or an export file) and check every checkpoint's signature; names the first row that does not match",
    options: {
      file: 'an export (custody audit export); without it, the database at DATABASE_URL',
      jwks: "the service's public keys: a URL or a file (default: <url>/.well-known/jwks.json)",
    },
    async run({ flags, out, env, baseUrl }) {
      const jwks = await jwksFrom(str(flags, 'jwks') ?? `${baseUrl.replace(/\/+$/, '')}/.well-known/jwks.json`);
      const file = str(flags, 'file');
      let report: VerifyReport & { organisationId?: number | null };
      if (file !== undefined) report = await verifyFile(file, jwks);
      else {
        if (!env.databaseUrl) throw new UsageError('set DATABASE_URL, or give --file');
        const { readChain } = await import('../../domains/audit/commands.js');
        report = await withDatabase(env.databaseUrl, (db) => readChain(db, jwks));
      }
      const { problem, ...counts } = report;
      out.record({ ...counts, ...(problem ? { firstMismatch: problem.seq, kind: problem.kind, problem: problem.message } : {}) });
      if (problem) out.note(`the chain does not verify: ${problem.message}`);
      return report.ok ? 0 : 1;
    },
  },
};
