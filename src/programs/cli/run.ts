/**
 * The operator CLI's dispatcher: parses a command line, answers help and usage errors, runs the
 * command, and maps what went wrong to the exit codes main.ts documents. main.ts runs it on the
 * process's arguments and streams; the tests also run it in-process with streams of their own.
 */
import { existsSync, readFileSync } from 'node:fs';
import { loadCliEnv, type CliEnv } from './config.js';
import { CustodyApiError, CustodyClient } from '../client/index.js';
import { COMMANDS, UsageError, type Command, type Flags } from './commands.js';
import { output } from './output.js';

/** Options every command takes; `true`: it takes no value. */
const GLOBAL_OPTIONS: Readonly<Record<string, boolean>> = { url: false, token: false, 'token-file': false, json: true, help: true, version: true };
const SWITCHES = new Set([...Object.keys(GLOBAL_OPTIONS).filter((k) => GLOBAL_OPTIONS[k]), ...Object.values(COMMANDS).flatMap((c) => c.switches ?? [])]);
const LOCAL_OPERATOR_TOKEN = '.data/operator-token';

/** The package's version: package.json sits four levels above this file in dist/ (and in the image). */
function version(): string {
  try {
    return (JSON.parse(readFileSync(new URL('../../../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

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
    if (SWITCHES.has(name)) {
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

/** The command the words name (two words, else one), and the words left as its arguments. */
function lookup(words: string[]): { name: string; command: Command; args: string[] } | undefined {
  for (const n of [2, 1]) {
    const name = words.slice(0, n).join(' ');
    const command = words.length >= n ? COMMANDS[name] : undefined;
    if (command) return { name, command, args: words.slice(n) };
  }
  return undefined;
}

const FOOTER = [
  'Global options: --url URL, --token TOKEN | --token-file PATH, --json (the raw answer instead of a table), --help, --version.',
  'URL: --url, else CUSTODY_URL, else http://127.0.0.1:8080.',
  `Token: --token, --token-file, else CUSTODY_TOKEN, else ./${LOCAL_OPERATOR_TOKEN} (what npm start writes).`,
  'Exit codes: 0 done, 1 refused by the service or a check failed, 2 usage error, 3 service unavailable.',
];

/** Every command, grouped by its first word; `group` narrows it to one group. */
function usage(group?: string): string {
  const entries = Object.entries(COMMANDS).filter(([name]) => group === undefined || name.split(' ')[0] === group);
  const lines = entries.map(([, c]) => `  custody ${c.usage}\n      ${c.summary}${c.aliasOf ? ` (same as ${c.aliasOf})` : ''}`);
  return [
    'usage: custody [--url URL] [--token TOKEN | --token-file PATH] [--json] <command> [--help]',
    '',
    group === undefined ? 'commands:' : `${group} commands:`,
    ...lines,
    '',
    ...FOOTER,
  ].join('\n');
}

/** One command's help: its usage, what it does, its options. */
function commandHelp(c: Command): string {
  const options = Object.entries(c.options ?? {});
  const width = Math.max(0, ...options.map(([o]) => o.length + 2));
  return [
    `usage: custody ${c.usage}`,
    '',
    `${c.summary}${c.aliasOf ? ` (same as custody ${c.aliasOf})` : ''}.`,
    ...(options.length > 0 ? ['', 'options:', ...options.map(([o, what]) => `  ${`--${o}`.padEnd(width)}  ${what}`)] : []),
    '',
    ...FOOTER,
  ].join('\n');
}

/** Options the command does not know are a usage error, not silently ignored. */
function checkOptions(c: Command, flags: Flags): void {
  for (const name of Object.keys(flags)) {
    if (name in GLOBAL_OPTIONS || (c.options !== undefined && name in c.options)) continue;
    throw new UsageError(`unknown option --${name}`);
  }
  for (const name of c.switches ?? []) {
    if (flags[name] !== undefined && flags[name] !== true) throw new UsageError(`--${name} takes no value`);
  }
}

function token(flags: Flags, env: CliEnv): string | undefined {
  if (typeof flags['token'] === 'string') return flags['token'];
  if (typeof flags['token-file'] === 'string') return readFileSync(flags['token-file'], 'utf8').trim();
  if (env.token) return env.token;
  return existsSync(LOCAL_OPERATOR_TOKEN) ? readFileSync(LOCAL_OPERATOR_TOKEN, 'utf8').trim() : undefined;
}

/** Where the CLI writes: the process's streams, or a test's. */
export interface CliIo {
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
}

/** Runs one command line; answers its exit code. */
export async function run(argv: string[], env: CliEnv = loadCliEnv(), io: CliIo = process): Promise<number> {
  let parsed: { words: string[]; flags: Flags };
  try {
    parsed = parse(argv);
  } catch (err) {
    io.stderr.write(`custody: ${(err as Error).message}\n${usage()}\n`);
    return 2;
  }
  const { words, flags } = parsed;
  if (flags['version'] === true) {
    io.stdout.write(`custody ${version()}\n`);
    return 0;
  }
  const asked = words[0] === 'help' ? words.slice(1) : words;
  const found = lookup(asked);
  const isGroup = asked.length === 1 && Object.keys(COMMANDS).some((name) => name.startsWith(`${asked[0]} `));
  if (words.length === 0 || words[0] === 'help' || flags['help'] === true || (isGroup && !found)) {
    const text = found ? commandHelp(found.command) : usage(isGroup ? asked[0] : undefined);
    const unknown = asked.length > 0 && !found && !isGroup;
    if (unknown) {
      io.stderr.write(`custody: unknown command "${asked.join(' ')}"\n${usage()}\n`);
      return 2;
    }
    // Asked for: exit 0. A bare `custody` or `custody <group>`: a usage error, exit 2.
    io.stdout.write(`${text}\n`);
    return flags['help'] === true || words[0] === 'help' ? 0 : 2;
  }
  if (!found) {
    io.stderr.write(`custody: unknown command "${words.join(' ')}"\n${usage()}\n`);
    return 2;
  }
  const { command, args } = found;
  const out = output(flags['json'] === true, io.stdout, io.stderr);
  const baseUrl = (typeof flags['url'] === 'string' ? flags['url'] : undefined) ?? env.url ?? 'http://127.0.0.1:8080';
  try {
    checkOptions(command, flags);
    return await command.run({
      args,
      flags,
      out,
      env,
      baseUrl,
      client: () => {
        const t = token(flags, env);
        if (t === undefined) throw new UsageError('no API token: give --token, --token-file or CUSTODY_TOKEN');
        return new CustodyClient({ baseUrl, token: t });
      },
    });
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr.write(`custody: ${err.message}\nusage: custody ${command.usage}\n`);
      return 2;
    }
    if (err instanceof CustodyApiError) {
      const p = err.problem;
      const fields = (p?.errors ?? []).map((e) => `\n  ${e.in ? `${e.in} ` : ''}${e.path}: ${e.message}`).join('');
      const retry = err.retryAfterS === undefined ? '' : ` (retry after ${err.retryAfterS} s)`;
      io.stderr.write(`custody: the service answered ${err.status}${p ? ` ${p.code}: ${p.detail}` : ''}${retry}${fields}\n`);
      return err.status >= 500 ? 3 : 1;
    }
    const e = err as Error & { cause?: { code?: string; message?: string } };
    if (e.name === 'TimeoutError' || e.name === 'AbortError' || (e instanceof TypeError && e.message === 'fetch failed')) {
      io.stderr.write(`custody: cannot reach the service at ${baseUrl}: ${e.cause?.code ?? e.cause?.message ?? e.message}\n`);
      return 3;
    }
    if (typeof (e as { code?: unknown }).code === 'string' && /^(ECONNREFUSED|ENOTFOUND|57P|08)/.test(String((e as { code?: unknown }).code))) {
      io.stderr.write(`custody: cannot reach the database: ${e.message}\n`);
      return 3;
    }
    io.stderr.write(`custody: ${e.message}\n`);
    return 1;
  }
}
