import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { Knex } from 'knex';
import type { Logger } from '../logger.js';
import type { CallerProject } from './repository.js';

/** The longest wait between two attempts to listen. */
const MAX_RETRY_MS = 30_000;

/** The channel the migration's triggers notify on any committed change to organisations, projects or keys. */
export const PROJECTS_CHANNEL = 'custody_projects';

export interface ProjectKeyCacheOptions {
  /** How long an entry is used at most (a bound beside the notifications; 0 turns the cache off). */
  ttlMs: number;
  /** Entries kept at most (oldest out first). */
  maxEntries: number;
  /** For the LISTEN connection (a pooled connection cannot keep listening). */
  databaseUrl: string;
  log?: Logger;
  /** Injectable clock (ms) for the entries' lifetime and the keys' expiry. */
  now?: () => number;
  /** Wait before listening again after the connection was lost. */
  reconnectMs?: number;
  /**
   * Sends `NOTIFY custody_projects, <payload>` on another connection (the pool). Entries are used
   * only once such a probe has come back on the LISTEN connection: behind a pooler in transaction
   * mode, where a LISTEN does not hold, none ever does and the cache stays off.
   */
  probe: (payload: string) => Promise<void>;
  /** How long the probe may take to come back. */
  probeTimeoutMs?: number;
}

interface Entry {
  project: CallerProject;
  /** When the key itself ends (its rotation grace period), ms since the epoch; null: it does not. */
  keyExpiresAt: number | null;
  cachedAt: number;
}

/**
 * The project each project key belongs to, kept in the API process so that a known user's sign-in
 * reads only its wallet (the project, its organisation and the key's validity are one join more
 * per request otherwise: about a third of PostgreSQL's work for a sign-in; bench/README.md).
 *
 * Correctness rests on invalidation, not on the lifetime:
 * - every committed change to organisations, projects or project keys, by anyone, sends a NOTIFY
 *   (migration 20261123000000); each process listens and drops every entry;
 * - entries are used only while that LISTEN connection is up: before it is, and from the moment it
 *   fails until it is back, every look-up goes to the database;
 * - a change made through this process's API drops the entries once its request has committed
 *   (`changed()`), so its caller's next request already sees it;
 * - a look-up that began before a drop does not fill the cache (`generation`), so a row read
 *   before a change cannot outlive it;
 * - a key's own expiry is checked on every use; `ttlMs` bounds an entry's life in any case.
 * Only hits are kept: an unknown key always asks the database.
 */
export class ProjectKeyCache {
  readonly #entries = new Map<string, Entry>();
  readonly #now: () => number;
  #generation = 0;
  #listening = false;
  #stopped = false;
  #listener: pg.Client | undefined;
  #retry: NodeJS.Timeout | undefined;
  /** Failed attempts to listen since the last success: the wait before the next one doubles, and only the first is logged. */
  #failures = 0;

  constructor(private readonly options: ProjectKeyCacheOptions) {
    this.#now = options.now ?? Date.now;
  }

  /** Whether entries are used now (the LISTEN connection is up). */
  get active(): boolean {
    return this.#listening;
  }

  /** Take it before a look-up and give it to `set`: a drop in between keeps the answer out. */
  get generation(): number {
    return this.#generation;
  }

  /** The LISTEN connection's backend process id, while it is up (for operators and tests). */
  get listenerPid(): number | undefined {
    return this.#listening ? (this.#listener as { processID?: number } | undefined)?.processID : undefined;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The project of a key hash (its base64), if cached, fresh and the key not expired. */
  get(keyId: string): CallerProject | undefined {
    if (!this.#listening) return undefined;
    const entry = this.#entries.get(keyId);
    if (entry === undefined) return undefined;
    const now = this.#now();
    if (now - entry.cachedAt >= this.options.ttlMs || (entry.keyExpiresAt !== null && now >= entry.keyExpiresAt)) {
      this.#entries.delete(keyId);
      return undefined;
    }
    return entry.project;
  }

  set(keyId: string, project: CallerProject, keyExpiresAt: number | null, generation: number): void {
    if (!this.#listening || generation !== this.#generation) return;
    this.#entries.delete(keyId);
    this.#entries.set(keyId, { project: Object.freeze(project), keyExpiresAt, cachedAt: this.#now() });
    if (this.#entries.size > this.options.maxEntries) {
      const oldest = this.#entries.keys().next().value;
      if (oldest !== undefined) this.#entries.delete(oldest);
    }
  }

  /** Organisations, projects or keys changed: every entry goes, and look-ups in flight do not come back in. */
  changed(): void {
    this.#generation++;
    this.#entries.clear();
  }

  async start(): Promise<void> {
    await this.#listen();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#setListening(false);
    clearTimeout(this.#retry);
    const client = this.#listener;
    this.#listener = undefined;
    await client?.end().catch(() => undefined);
  }

  #setListening(on: boolean): void {
    // Either way the entries go: nothing read while no notification could arrive is kept.
    this.changed();
    this.#listening = on;
  }

  #again(): void {
    if (this.#stopped) return;
    clearTimeout(this.#retry);
    const wait = Math.min((this.options.reconnectMs ?? 1_000) * 2 ** Math.min(this.#failures, 16), MAX_RETRY_MS);
    this.#retry = setTimeout(() => void this.#listen(), wait);
    this.#retry.unref();
  }

  async #listen(): Promise<void> {
    if (this.#stopped) return;
    const client = new pg.Client({ connectionString: this.options.databaseUrl });
    const lost = (): void => {
      if (this.#listener !== client) return;
      this.#listener = undefined;
      this.#setListening(false);
      this.options.log?.warn('project-key cache: lost its notification connection; looking projects up in the database until it is back');
      void client.end().catch(() => undefined);
      this.#again();
    };
    const probe = `probe:${randomUUID()}`;
    let probed: () => void = () => undefined;
    const cameBack = new Promise<void>((resolve) => (probed = resolve));
    client.on('notification', (n: pg.Notification) => {
      this.changed();
      if (n.payload === probe) probed();
    });
    client.on('error', lost);
    client.on('end', lost);
    try {
      await client.connect();
      await client.query(`LISTEN ${PROJECTS_CHANNEL}`);
      await this.options.probe(probe);
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('a probe notification did not come back (a pooler in transaction mode?)')), this.options.probeTimeoutMs ?? 5_000);
      });
      await Promise.race([cameBack, late]).finally(() => clearTimeout(timer));
    } catch (err) {
      await client.end().catch(() => undefined);
      if (this.#failures++ === 0) {
        this.options.log?.warn({ err: err instanceof Error ? err.message : String(err) }, 'project-key cache: cannot listen for changes; looking projects up in the database meanwhile (retrying, logged once)');
      }
      this.#again();
      return;
    }
    if (this.#stopped) {
      await client.end().catch(() => undefined);
      return;
    }
    this.#listener = client;
    if (this.#failures > 0) this.options.log?.info('project-key cache: listening for changes again');
    this.#failures = 0;
    this.#setListening(true);
  }
}

/**
 * The API's project-key cache for this configuration, listening already, or undefined when
 * PROJECT_CACHE_TTL_MS is 0. `start()` does not wait for the LISTEN connection to be proven:
 * until it is, every look-up simply goes to the database.
 */
export function startProjectKeyCache(
  config: { projectCacheTtlMs: number },
  db: Knex,
  databaseUrl: string,
  log: Logger,
  options: Partial<Pick<ProjectKeyCacheOptions, 'now' | 'reconnectMs' | 'probeTimeoutMs'>> = {},
): ProjectKeyCache | undefined {
  if (config.projectCacheTtlMs <= 0) return undefined;
  const cache = new ProjectKeyCache({
    ttlMs: config.projectCacheTtlMs,
    maxEntries: 10_000,
    databaseUrl,
    log,
    probe: async (payload) => {
      await db.raw('SELECT pg_notify(?, ?)', [PROJECTS_CHANNEL, payload]);
    },
    ...options,
  });
  void cache.start();
  return cache;
}
