import { systemClock } from '../../platform/runtime/clock.js';
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { ListenConnection } from '../../platform/db/listen.js';
import type { Logger } from '../../platform/logging/logger.js';
import type { CallerProject } from './project-key.js';
import { setRecent } from '../../platform/runtime/recent.js';

/** The longest wait between two attempts to listen. */
const MAX_RETRY_MS = 30_000;

/** The channel the migration's triggers notify on any committed change to organisations, projects or keys. */
export const PROJECTS_CHANNEL = 'custody_projects';

export interface ProjectKeyCacheOptions {
  /** How long an entry is used at most (a bound beside the notifications). */
  ttlMs: number;
  /** Entries kept at most (oldest out first). */
  maxEntries: number;
  /** For the LISTEN connection (a pooled connection cannot keep listening). */
  databaseUrl: string;
  log?: Logger;
  /** Injectable clock (ms) for the entries' lifetime and the keys' expiry. */
  now?: () => number;
  /** Wait before listening again after the connection was lost (doubling while attempts fail, up to 30 s). */
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
  readonly #listener: ListenConnection;
  #generation = 0;
  #listening = false;
  /** An attempt to listen failed since the last success (logged once). */
  #failing = false;
  /** The probe notification the attempt in progress waits for. */
  #probe: { payload: string; cameBack: () => void } | undefined;

  constructor(private readonly options: ProjectKeyCacheOptions) {
    this.#now = options.now ?? systemClock;
    this.#listener = new ListenConnection({
      databaseUrl: options.databaseUrl,
      channel: PROJECTS_CHANNEL,
      retryMs: options.reconnectMs ?? 1_000,
      maxRetryMs: MAX_RETRY_MS,
      onNotification: (payload) => {
        this.changed();
        const probe = this.#probe;
        if (probe !== undefined && payload === probe.payload) probe.cameBack();
      },
      check: () => this.#proveListening(),
      onUp: () => {
        if (this.#failing) options.log?.info('project-key cache: listening for changes again');
        this.#failing = false;
        this.#setListening(true);
      },
      onDown: (err, wasUp) => {
        this.#setListening(false);
        if (wasUp) {
          options.log?.warn('project-key cache: lost its notification connection; looking projects up in the database until it is back');
        } else if (!this.#failing) {
          this.#failing = true;
          options.log?.warn(
            { err: err instanceof Error ? err.message : String(err) },
            'project-key cache: cannot listen for changes; looking projects up in the database meanwhile (retrying, logged once)',
          );
        }
      },
    });
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
    return this.#listening ? this.#listener.pid : undefined;
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
    setRecent(this.#entries, keyId, { project: Object.freeze(project), keyExpiresAt, cachedAt: this.#now() }, this.options.maxEntries);
  }

  /** Organisations, projects or keys changed: every entry goes, and look-ups in flight do not come back in. */
  changed(): void {
    this.#generation++;
    this.#entries.clear();
  }

  async start(): Promise<void> {
    await this.#listener.start();
  }

  async stop(): Promise<void> {
    this.#setListening(false);
    await this.#listener.stop();
  }

  #setListening(on: boolean): void {
    // Either way the entries go: nothing read while no notification could arrive is kept.
    this.changed();
    this.#listening = on;
  }

  /** A probe sent through the pool must come back on the LISTEN connection in time. */
  async #proveListening(): Promise<void> {
    const payload = `probe:${randomUUID()}`;
    let timer: NodeJS.Timeout | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        this.#probe = { payload, cameBack: resolve };
        timer = setTimeout(
          () => reject(new Error('a probe notification did not come back (a pooler in transaction mode?)')),
          this.options.probeTimeoutMs ?? 5_000,
        );
        this.options.probe(payload).catch(reject);
      });
    } finally {
      clearTimeout(timer);
      this.#probe = undefined;
    }
  }
}

/**
 * The API's project-key cache for this configuration, listening already, or undefined when
 * PROJECT_CACHE_TTL_MS is 0. `start()` does not wait for the LISTEN connection to be proven:
 * until it is, every look-up simply goes to the database.
 */
export function startProjectKeyCache(config: { projectCacheTtlMs: number }, db: Knex, databaseUrl: string, log: Logger): ProjectKeyCache | undefined {
  if (config.projectCacheTtlMs <= 0) return undefined;
  const cache = new ProjectKeyCache({
    ttlMs: config.projectCacheTtlMs,
    maxEntries: 10_000,
    databaseUrl,
    log,
    probe: async (payload) => {
      await db.raw('SELECT pg_notify(?, ?)', [PROJECTS_CHANNEL, payload]);
    },
  });
  void cache.start();
  return cache;
}
