import { ValidationError } from './errors.js';
import { constantTimeEqual, hmacSha256 } from '../crypto/secrets.js';

export interface Page {
  limit: number;
  /** Rows with an id above this one come next. */
  afterId: number;
}

export interface PageOf<T> {
  items: T[];
  nextCursor: string | null;
}

/**
 * Opaque cursors: the last id seen, bound to the list it came from and authenticated with an
 * HMAC, so a forged or transplanted cursor is a 400 instead of a silent wrong page.
 */
export class Cursors {
  readonly #keys: readonly Buffer[];

  /** `keys[0]` makes new cursors; any of them is accepted (a cursor handed out before a data-key rotation still pages). */
  constructor(keys: readonly Buffer[]) {
    if (keys.length === 0) throw new Error('Cursors needs a key');
    this.#keys = keys;
  }

  #mac(key: Buffer, list: string, id: number): Buffer {
    return hmacSha256(key, `${list}\n${id}`).subarray(0, 16);
  }

  encode(list: string, lastId: number): string {
    return `${lastId.toString(36)}.${this.#mac(this.#keys[0] as Buffer, list, lastId).toString('base64url')}`;
  }

  page(list: string, query: { limit?: string | undefined; cursor?: string | undefined }): Page {
    const limit = query.limit === undefined ? 100 : Number(query.limit);
    if (query.cursor === undefined) return { limit, afterId: 0 };
    const [idPart, macPart] = query.cursor.split('.');
    const id = idPart !== undefined && /^[0-9a-z]{1,11}$/.test(idPart) ? Number.parseInt(idPart, 36) : Number.NaN;
    const mac = macPart === undefined ? undefined : Buffer.from(macPart, 'base64url');
    if (!Number.isSafeInteger(id) || mac === undefined || !this.#keys.some((key) => constantTimeEqual(mac, this.#mac(key, list, id)))) {
      throw new ValidationError('The cursor is not one this list returned.', [{ in: 'query', path: '/cursor', message: 'is not a valid cursor' }]);
    }
    return { limit, afterId: id };
  }

  /** `rows` were fetched with `limit + 1`: the extra row only tells that a next page exists. */
  result<T extends { id: number }>(list: string, page: Page, rows: T[]): PageOf<T> {
    const items = rows.slice(0, page.limit);
    const last = items[items.length - 1];
    return { items, nextCursor: rows.length > page.limit && last ? this.encode(list, last.id) : null };
  }
}
