import { needsConnection, outsideRequests } from './held.js';

export interface GroupCommitOptions {
  /** How many statements may be in flight at once (each holds a pooled connection). */
  parallel?: number;
  maxRows?: number;
  /**
   * Whether a group's failure may be one row's fault (a constraint it breaks): then its halves are
   * written again, and theirs, so that only the callers whose own row fails get the error. Without
   * it (or for a failure it says no to, a lost database) every caller of the group gets it.
   */
  rowFault?: (err: unknown) => boolean;
}

interface Waiter<T, R> {
  row: T;
  settle: (result: { ok: R } | { err: Error }) => void;
}

const asError = (err: unknown): Error => (err instanceof Error ? err : new Error('group commit failed', { cause: err }));

/**
 * Rows that must be committed before their callers go on, written together: a row added while
 * earlier writes are in flight waits for the next statement, which takes every row waiting (up
 * to `maxRows`). Idle, a row is written at once; under load one statement and one commit carry
 * many. Each caller gets its row's result (`write` answers one per row, in their order); a
 * failure is every caller's, unless `rowFault` says it may be one row's.
 */
export class GroupCommit<T, R = void> {
  readonly #waiting: Array<Waiter<T, R>> = [];
  #inFlight = 0;
  readonly #parallel: number;
  readonly #maxRows: number;

  constructor(
    /** Writes the rows; answers one result per row, in their order (a result may be the row's own error, for its caller alone). */
    private readonly write: (rows: T[]) => Promise<Array<R | Error> | void>,
    private readonly options: GroupCommitOptions = {},
  ) {
    this.#parallel = options.parallel ?? 2;
    this.#maxRows = options.maxRows ?? 256;
  }

  /** Resolves with `row`'s result once it is committed; rejects with the statement's error, or the row's own. */
  add(row: T): Promise<R> {
    // The caller waits for a statement that takes a pooled connection: it may hold none meanwhile.
    needsConnection('a group commit waited for');
    return new Promise<R>((resolve, reject) => {
      this.#waiting.push({ row, settle: (r) => ('ok' in r ? resolve(r.ok) : reject(r.err)) });
      this.#next();
    });
  }

  #next(): void {
    while (this.#inFlight < this.#parallel && this.#waiting.length > 0) {
      const group = this.#waiting.splice(0, this.#maxRows);
      this.#inFlight++;
      // The statement is every waiting caller's: no one request's (platform/db/held.ts). #run settles every caller and never rejects.
      void outsideRequests(() => this.#run(group)).finally(() => {
        this.#inFlight--;
        this.#next();
      });
    }
  }

  async #run(group: Array<Waiter<T, R>>): Promise<void> {
    try {
      const results = await this.write(group.map((g) => g.row));
      group.forEach((g, i) => {
        const result = results ? results[i] : undefined;
        g.settle(result instanceof Error ? { err: result } : { ok: result as R });
      });
    } catch (err) {
      if (group.length === 1 || !this.options.rowFault?.(err)) {
        group.forEach((g) => g.settle({ err: asError(err) }));
        return;
      }
      // One row may have failed them all: each half goes again, in this statement's slot, down to
      // the rows at fault (one bad row of n costs about 2·log2(n) statements, not n).
      const half = Math.ceil(group.length / 2);
      await this.#run(group.slice(0, half));
      await this.#run(group.slice(half));
    }
  }
}
