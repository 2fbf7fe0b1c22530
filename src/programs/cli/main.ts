#!/usr/bin/env node
/**
 * `custody`: the operator's command line. Talks to a running service through the typed client
 * (src/programs/client) with an API token; `migrate` talks to the database directly.
 * Exit codes: 0 done, 1 refused by the service (4xx) or a failed check, 2 usage, 3 service unavailable.
 */
import { existsSync, readFileSync } from 'node:fs';
import { loadCliEnv, type CliEnv } from './config.js';
import { CustodyApiError, CustodyClient } from '../client/index.js';
import { COMMANDS, UsageError, type Flags } from './commands.js';
import { output } from './output.js';

const BOOLEAN_FLAGS = new Set(['json', 'help', 'all', 'show-revoked', 'show-deleted']);
const LOCAL_OPERATOR_TOKEN = '.data/operator-token';

function parse(argv: string[]): { words: string[]; flags: Flags } {
  const words: string[] = [];
  const flags: Flags = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] ?? '';
    if (!a.startsWith('--')) {
      words.push(a);
      continue;
    }
    const [name = '', inline] = a.slice(2).split(/=(.*)/s, 2);
    if (BOOLEAN_FLAGS.has(name)) {
      if (inline !== undefined) throw new UsageError(`--${name} takes no value`);
      flags[name] = true;
    } else if (inline !== undefined) flags[name] = inline;
    else {
      const value = argv[++i];
      if (value === undefined) throw new UsageError(`--${name} needs a value`);
      flags[name] = value;
    }
  }
  return { words, flags };
}

function usage(): string {
  const lines = Object.values(COMMANDS).map((c) => `  custody ${c.usage}\n      ${c.summary}`);
  return [
    'usage: custody [--url URL] [--token TOKEN | --token-file PATH] [--json] <command>',
    '',
    'commands:',
    ...lines,
    '',
    'URL: --url, else CUSTODY_URL, else http://127.0.0.1:8080.',
    `Token: --token, --token-file, else CUSTODY_TOKEN, else ./${LOCAL_OPERATOR_TOKEN} (what npm start writes).`,
    'Exit codes: 0 done, 1 refused by the service or a check failed, 2 usage error, 3 service unavailable.',
  ].join('\n');
}

function token(flags: Flags, env: CliEnv): string | undefined {
  if (typeof flags['token'] === 'string') return flags['token'];
  if (typeof flags['token-file'] === 'string') return readFileSync(flags['token-file'], 'utf8').trim();
  if (env.token) return env.token;
  return existsSync(LOCAL_OPERATOR_TOKEN) ? readFileSync(LOCAL_OPERATOR_TOKEN, 'utf8').trim() : undefined;
}

export async function run(argv: string[], env: CliEnv = loadCliEnv()): Promise<number> {
  let parsed: { words: string[]; flags: Flags };
  try {
    parsed = parse(argv);
  } catch (err) {
    process.stderr.write(`custody: ${(err as Error).message}\n${usage()}\n`);
    return 2;
  }
  const { words, flags } = parsed;
  const out = output(flags['json'] === true);
  const two = words.slice(0, 2).join(' ');
  const [name, command] = COMMANDS[two] ? [two, COMMANDS[two]] : [words[0] ?? '', COMMANDS[words[0] ?? '']];
  if (flags['help'] === true || words.length === 0 || words[0] === 'help') {
    process.stdout.write(`${usage()}\n`);
    return words.length === 0 && flags['help'] !== true ? 2 : 0;
  }
  if (!command) {
    process.stderr.write(`custody: unknown command "${words.join(' ')}"\n${usage()}\n`);
    return 2;
  }
  const baseUrl = (typeof flags['url'] === 'string' ? flags['url'] : undefined) ?? env.url ?? 'http://127.0.0.1:8080';
  try {
    return await command.run({
      args: words.slice(name.split(' ').length),
      flags,
      out,
      env,
      client: () => {
        const t = token(flags, env);
        if (t === undefined) throw new UsageError('no API token: give --token, --token-file or CUSTODY_TOKEN');
        return new CustodyClient({ baseUrl, token: t });
      },
    });
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`custody: ${err.message}\nusage: custody ${command.usage}\n`);
      return 2;
    }
    if (err instanceof CustodyApiError) {
      const p = err.problem;
      const fields = (p?.errors ?? []).map((e) => `\n  ${e.in ? `${e.in} ` : ''}${e.path}: ${e.message}`).join('');
      const retry = err.retryAfterS === undefined ? '' : ` (retry after ${err.retryAfterS} s)`;
      process.stderr.write(`custody: the service answered ${err.status}${p ? ` ${p.code}: ${p.detail}` : ''}${retry}${fields}\n`);
      return err.status >= 500 ? 3 : 1;
    }
    const e = err as Error & { cause?: { code?: string; message?: string } };
    if (e.name === 'TimeoutError' || e.name === 'AbortError' || (e instanceof TypeError && e.message === 'fetch failed')) {
      process.stderr.write(`custody: cannot reach the service at ${baseUrl}: ${e.cause?.code ?? e.cause?.message ?? e.message}\n`);
      return 3;
    }
    if (typeof (e as { code?: unknown }).code === 'string' && /^(ECONNREFUSED|ENOTFOUND|57P|08)/.test(String((e as { code?: unknown }).code))) {
      process.stderr.write(`custody: cannot reach the database: ${e.message}\n`);
      return 3;
    }
    process.stderr.write(`custody: ${e.message}\n`);
    return 1;
  }
}

process.exitCode = await run(process.argv.slice(2));
