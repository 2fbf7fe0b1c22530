import pg from 'pg';

export interface ListenOptions {
  /** A connection of its own (a pooled connection cannot keep listening). */
  databaseUrl: string;
  channel: string;
  onNotification: (payload: string | undefined) => void;
  /**
   * Runs once LISTEN is in place, before the connection counts as up; a throw counts as a failed
   * attempt (the cache's probe: a LISTEN that does not hold must not count).
   */
  check?: () => Promise<void>;
  /** Listening now (again). */
  onUp?: () => void;
  /** Not listening: `wasUp` when an established connection was lost, else an attempt failed. */
  onDown?: (err: unknown, wasUp: boolean) => void;
  /** Wait before the next attempt; it doubles after each failed attempt in a row, up to `maxRetryMs`. */
  retryMs: number;
  maxRetryMs?: number;
}

/**
 * One LISTEN connection kept up: connects, LISTENs, and when the connection fails or cannot be
 * had, tries again after `retryMs` (doubling while it keeps failing, up to `maxRetryMs`). What
 * listens decides what being down means (the relay keeps polling; the project-key cache turns off).
 */
export class ListenConnection {
  #client: pg.Client | undefined;
  #retry: NodeJS.Timeout | undefined;
  #failures = 0;
  #stopped = false;

  constructor(private readonly options: ListenOptions) {}

  /** The listening connection's backend process id, while it is up. */
  get pid(): number | undefined {
    return (this.#client as { processID?: number } | undefined)?.processID;
  }

  /** The first attempt, awaited; later ones run by themselves. */
  async start(): Promise<void> {
    await this.#attempt();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#retry);
    const client = this.#client;
    this.#client = undefined;
    await client?.end().catch(() => undefined);
  }

  #again(): void {
    if (this.#stopped) return;
    clearTimeout(this.#retry);
    const { retryMs, maxRetryMs = retryMs } = this.options;
    this.#retry = setTimeout(() => void this.#attempt(), Math.min(retryMs * 2 ** Math.min(this.#failures, 16), maxRetryMs));
    this.#retry.unref();
  }

  async #attempt(): Promise<void> {
    if (this.#stopped) return;
    const client = new pg.Client({ connectionString: this.options.databaseUrl });
    const lost = (err?: unknown): void => {
      if (this.#client !== client) return;
      this.#client = undefined;
      void client.end().catch(() => undefined);
      this.options.onDown?.(err, true);
      this.#again();
    };
    client.on('notification', (n: pg.Notification) => this.options.onNotification(n.payload));
    client.on('error', lost);
    client.on('end', lost);
    try {
      await client.connect();
      await client.query(`LISTEN ${this.options.channel}`);
      await this.options.check?.();
    } catch (err) {
      await client.end().catch(() => undefined);
      this.#failures++;
      this.options.onDown?.(err, false);
      this.#again();
      return;
    }
    if (this.#stopped) {
      await client.end().catch(() => undefined);
      return;
    }
    this.#client = client;
    this.#failures = 0;
    this.options.onUp?.();
  }
}
