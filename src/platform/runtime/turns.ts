import { setImmediate as nextTurn } from 'node:timers/promises';

/** Items handled per turn of the event loop when a request carries many (a 1,000-item issue). */
export const ITEMS_PER_TURN = 100;

/**
 * `items.map(fn)`, in turns of the event loop of `perTurn` items: between them, other requests'
 * I/O is served. A 1,000-item request done in one turn held every other tenant's requests for
 * tens of milliseconds (bench:fairness). A list of `perTurn` or fewer is mapped at once.
 */
export async function mapInTurns<T, U>(items: readonly T[], fn: (item: T, index: number) => U, perTurn = ITEMS_PER_TURN): Promise<U[]> {
  const out = new Array<U>(items.length);
  for (let start = 0; start < items.length; start += perTurn) {
    if (start > 0) await nextTurn();
    const end = Math.min(items.length, start + perTurn);
    for (let i = start; i < end; i++) out[i] = fn(items[i] as T, i);
  }
  return out;
}
