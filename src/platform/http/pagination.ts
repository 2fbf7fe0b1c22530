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
  readonly #key: Buffer;

  constructor(key: Buffer) {
    this.#key = key;
  }

  #mac(list: string, id: number): Buffer {
    return hmacSha256(this.#key, `${list}\n${id}`).subarray(0, 16);
  }

  encode(list: string, lastId: number): string {
    return `${lastId.toString(36)}.${this.#mac(list, lastId).toString('base64url')}`;
  }

  page(list: string, query: { limit?: string | undefined; cursor?: string | undefined }): Page {
    const limit = query.limit === undefined ? 100 : Number(query.limit);
    if (query.cursor === undefined) return { limit, afterId: 0 };
    const [idPart, macPart] = query.cursor.split('.');
    const id = idPart !== undefined && /^[0-9a-z]{1,11}$/.test(idPart) ? Number.parseInt(idPart, 36) : Number.NaN;
    if (!Number.isSafeInteger(id) || macPart === undefined || !constantTimeEqual(Buffer.from(macPart, 'base64url'), this.#mac(list, id))) {
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
