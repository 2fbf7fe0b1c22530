import { needsConnection, outsideRequests } from './held.js';

/**
 * Rows that must be committed before their callers go on, written together: a row added while
 * earlier writes are in flight waits for the next statement, which takes every row waiting (up
 * to `maxRows`). Idle, a row is written at once; under load one statement and one commit carry
 * many. All or nothing: every caller of a statement gets its outcome, a failure included.
 */
export class GroupCommit<T> {
  readonly #waiting: Array<{ row: T; settle: (err?: Error) => void }> = [];
  #inFlight = 0;

  constructor(
    private readonly write: (rows: T[]) => Promise<void>,
    /** How many statements may be in flight at once (each holds a pooled connection). */
    private readonly parallel = 2,
    private readonly maxRows = 256,
  ) {}

  /** Resolves once `row` is committed; rejects with the statement's error. */
  add(row: T): Promise<void> {
    // The caller waits for a statement that takes a pooled connection: it may hold none meanwhile.
    needsConnection('a group commit waited for');
    return new Promise<void>((resolve, reject) => {
      this.#waiting.push({ row, settle: (err) => (err === undefined ? resolve() : reject(err)) });
      this.#next();
    });
  }

  #next(): void {
    while (this.#inFlight < this.parallel && this.#waiting.length > 0) {
      const group = this.#waiting.splice(0, this.maxRows);
      this.#inFlight++;
      // The statement is every waiting caller's: no one request's (platform/db/held.ts).
      outsideRequests(() => this.write(group.map((g) => g.row)))
        .then(
          () => group.forEach((g) => g.settle()),
          (err: unknown) => {
            const failure = err instanceof Error ? err : new Error('group commit failed', { cause: err });
            group.forEach((g) => g.settle(failure));
          },
        )
        .finally(() => {
          this.#inFlight--;
          this.#next();
        });
    }
  }
}
