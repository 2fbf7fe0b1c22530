/**
 * A key range of a list ordered by its key: rows after `after` (from the start when absent), up
 * to and including `through` (to the end when absent).
 */
export interface KeyRange<K> {
  after?: K;
  through?: K;
}

/** A list of work in key order, as a background pass reads it. */
export interface RotatingList<R, K> {
  /** A range's rows in key order, at most `limit`. */
  read(range: KeyRange<K>, limit: number): Promise<R[]>;
  /** The greatest key in the list now; undefined when it is empty. */
  last(): Promise<K | undefined>;
  keyOf(row: R): K;
}

/**
 * Where a background pass over a bounded window of work resumes. A pass that took the first
 * `limit` rows every time left every row behind them waiting for as long as those stayed in the
 * list (a tenant's sends waiting for funds held back another tenant's receipts); one that only
 * went on after the last row it took could chase rows arriving at the end and never come back to
 * an old one. So passes go round in cycles: a cycle runs from the start to the greatest key there
 * was when it began, each pass after the last row the previous one took; when a cycle ends inside
 * a window the next one fills the rest of that window from the start. A row is looked at within
 * two cycles, each of at most ⌈rows / limit⌉ passes while the list holds at most `rows` rows at a
 * time and fewer than `limit` arrive ahead of the place in each pass. Each process keeps its own
 * place, moved on by the passes it runs: rows may be looked at more often, none is skipped.
 */
export class Rotation<K> {
  #cycle: { after?: K; end: K } | undefined;

  async next<R>(limit: number, list: RotatingList<R, K>): Promise<R[]> {
    if (!this.#cycle) {
      const end = await list.last();
      if (end === undefined) return [];
      this.#cycle = { end };
    }
    const { after, end } = this.#cycle;
    const rows = await list.read({ ...(after === undefined ? {} : { after }), through: end }, limit);
    const last = rows[rows.length - 1];
    if (rows.length === limit && last !== undefined) {
      this.#cycle = { after: list.keyOf(last), end };
      return rows;
    }
    // The cycle ends in this window, and the next one begins in it with the rows this one has not
    // taken: from the start up to where this window began, then those that came after its end.
    this.#cycle = undefined;
    const nextEnd = await list.last();
    if (nextEnd === undefined) return rows;
    const untaken: Array<KeyRange<K>> = [...(after === undefined ? [] : [{ through: after }]), { after: end, through: nextEnd }];
    for (const range of untaken) {
      if (rows.length === limit) break;
      rows.push(...(await list.read(range, limit - rows.length)));
    }
    const tail = rows[rows.length - 1];
    // A window that is not full has taken every row there is.
    if (rows.length === limit && tail !== undefined) this.#cycle = { after: list.keyOf(tail), end: nextEnd };
    return rows;
  }
}
